//! The `Nene\Kit\DistributedLock` objects of this thread, by the number in their private
//! `handle` property: each call takes its object out of the map while it runs.

use std::collections::HashMap;

use super::THREAD;
use crate::driver;
use crate::lease_object::LeaseObject;

/// The live `DistributedLock` objects, by the number in their private `handle` property.
pub(super) struct LeaseObjects {
    objects: HashMap<i64, LeaseObject>,
    /// The next object's handle: never reused, not even by a later request.
    next: i64,
}

impl Default for LeaseObjects {
    fn default() -> LeaseObjects {
        LeaseObjects { objects: HashMap::new(), next: 1 }
    }
}

/// Keeps `object` for a new `DistributedLock` object; returns its handle.
pub fn add_lease(object: LeaseObject) -> i64 {
    THREAD.with(|thread| {
        let mut leases = thread.leases.borrow_mut();
        let handle = leases.next;
        leases.next += 1;
        leases.objects.insert(handle, object);
        handle
    })
}

/// Runs `f` on the object of `handle`, taken out of the map meanwhile so that PHP code
/// running inside (a PDO subclass, an error handler) can use other objects, and
/// `SharedLock`. `None`: there is no such object, or it is the one whose call is
/// running.
pub fn with_lease<T>(handle: i64, f: impl FnOnce(&mut LeaseObject) -> T) -> Option<T> {
    let mut object = take_lease(handle)?;
    // Causes kept for an earlier call's exception are stale now.
    driver::clear_causes();
    object.follow_fork();
    let result = f(&mut object);
    let displaced = THREAD.with(|thread| thread.leases.borrow_mut().objects.insert(handle, object));
    drop(displaced);
    Some(result)
}

/// A copy of the object of `handle`, on a session of its own (`clone`).
pub fn copy_lease(handle: i64) -> Option<LeaseObject> {
    THREAD.with(|thread| thread.leases.borrow().objects.get(&handle).map(LeaseObject::duplicate))
}

/// Takes the object of `handle` out of the map (a destructor, a second constructor).
pub fn take_lease(handle: i64) -> Option<LeaseObject> {
    THREAD.with(|thread| thread.leases.try_borrow_mut().ok().and_then(|mut leases| leases.objects.remove(&handle)))
}

/// Every `DistributedLock` object's state; the handles go on counting.
pub(super) fn take_all() -> HashMap<i64, LeaseObject> {
    THREAD.with(|thread| {
        thread.leases.try_borrow_mut().map(|mut leases| std::mem::take(&mut leases.objects)).unwrap_or_default()
    })
}
