//! What the thread (one PHP request at a time) holds, in one place with one lifecycle: the
//! connection settings, table and core `Locker`s of `SharedLock` and `SessionLock`
//! ([`State`]), and the state of every `Nene\Kit\DistributedLock` object
//! ([`LeaseObject`](crate::lease_object::LeaseObject), by the object's handle). Every lock
//! decision (retrying on a fresh session, repairing a crashed table) is the core's; this
//! module only knows which locker or object a call goes to, and what request end and fork
//! do to them.
//!
//! The two live in separate cells of one thread-local, each borrowed only by calls of
//! its own kind: PHP code running inside a call (a PDO subclass, an error handler) may
//! use the other kind. A `SharedLock`/`SessionLock` call holds its cell throughout, so
//! such code calling them again is refused ([`with`]); a `DistributedLock` call takes its
//! object out of the map for as long as it runs ([`with_lease`]), so only that object
//! refuses. `State` is made from php.ini at the first `SharedLock`/`SessionLock` call,
//! not before (`ini_set()` up to then counts); a `DistributedLock` never makes it and
//! reads `mysqllock.dsn` in its constructor.
//!
//! One `Locker` is current: new `SharedLock` locks go there. Switching connections
//! (`setConnection()`, `getConnection()`) retires the current one if it still holds
//! locks, so they stay on the session they were taken on until released. A
//! `SessionLock` on a PDO or mysqli of the user's runs on the locker of that object's
//! session: the current or a retired one if `SharedLock` uses it too, else one attached
//! for session locks. A locker on one session must never be given a second session, and
//! one session must never have two lockers (GET_LOCK is re-entrant, so two lockers on one
//! session could both take the same lock).
//!
//! Lifecycle:
//! - request end: every `SharedLock` and `SessionLock` lock still held is released and
//!   every connection closed (the original's PDO closed at process end too; under
//!   PHP-FPM the worker outlives the request, so it must happen here). That includes
//!   session locks on the user's own PDOs and mysqlis, which may be persistent and
//!   outlive the request. What `DistributedLock` destructors left (after a fatal error
//!   they do not run) is dropped, its sessions closed but its leases kept: they are owner
//!   strings with a TTL, which may outlive the request on purpose, as with the original
//!   class. PHP objects are released while the engine still runs, never from a
//!   thread-local destructor at process exit.
//! - fork: the child inherits the parent's sockets. It must neither use nor close them
//!   (COM_QUIT would end the parent's session and with it the parent's locks), nor free
//!   what was prepared on them. The first `SharedLock`/`SessionLock` call in a child
//!   abandons every inherited locker and connects anew; the user's objects whose sessions
//!   held the parent's locks are refused from then on. Each `DistributedLock` object
//!   does the same at its own first call in the child (`LeaseObject::follow_fork`), and
//!   one the child never calls is abandoned, not closed, at its end.
//!
//! Its parts, by kind of state: `lockers.rs` (`State`: the settings, table and lockers of
//! `SharedLock`, current and retired), `session_locks.rs` (the lockers `SessionLock`s
//! attach to, on the user's PDOs and mysqlis or the native connection) and
//! `lease_objects.rs` (the `DistributedLock` objects by handle); this file holds the
//! thread-local and the lifecycle.

mod lease_objects;
mod lockers;
mod session_locks;

use std::cell::RefCell;

use mysqllock_core::Error;

use crate::driver;
use lease_objects::LeaseObjects;
pub use lease_objects::{add_lease, copy_lease, take_lease, with_lease};
pub use lockers::State;
pub use session_locks::Conn;

thread_local! {
    static THREAD: Thread = Thread::default();
}

/// What this thread holds (see the module documentation).
#[derive(Default)]
struct Thread {
    /// `SharedLock`'s and `SessionLock`'s, made at their first call.
    state: RefCell<Option<State>>,
    leases: RefCell<LeaseObjects>,
}

/// Runs `f` on this thread's state, created from php.ini on first use.
///
/// Fails instead of panicking when called re-entrantly: a PDO subclass or an error
/// handler running inside one of our calls may call `SharedLock` again.
pub fn with<T>(f: impl FnOnce(&mut State) -> Result<T, Error>) -> Result<T, Error> {
    THREAD.with(|thread| {
        let Ok(mut slot) = thread.state.try_borrow_mut() else {
            return Err(reentered());
        };
        // The causes kept for the previous operation's exception are stale now.
        driver::clear_causes();
        let state = slot.get_or_insert_with(State::from_ini);
        state.follow_fork();
        f(state)
    })
}

/// The refusal of a call made from code the extension is running itself.
fn reentered() -> Error {
    Error::InvalidArgument {
        what: "call",
        reason: "the extension was called from code that it is running itself (a PDO or mysqli subclass, \
                 an error handler); call it again afterwards"
            .to_owned(),
    }
}

/// `MySqlLock\end_request()`: what request end does to `SharedLock` and `SessionLock`,
/// for a worker that serves many requests in one PHP request (FrankenPHP's worker mode,
/// RoadRunner, Swoole, Octane), where request end never comes between them. Returns how
/// many locks were still held (all of them released now). See [`State::end_request`].
pub fn end_request() -> Result<usize, Error> {
    THREAD.with(|thread| {
        let Ok(mut slot) = thread.state.try_borrow_mut() else {
            return Err(reentered());
        };
        driver::clear_causes();
        let Some(state) = slot.as_mut() else {
            return Ok(0);
        };
        state.follow_fork();
        let held = state.end_request();
        // What the releases' failures left as causes belongs to no exception.
        driver::clear_causes();
        Ok(held)
    })
}

/// Runs `f` on this thread's state if there is one, never creating it: for destructors,
/// which may also run after request shutdown took the state.
pub fn with_existing(f: impl FnOnce(&mut State)) {
    THREAD.with(|thread| {
        if let Some(state) = thread.state.try_borrow_mut().ok().as_deref_mut().and_then(Option::as_mut) {
            state.follow_fork();
            f(state);
        }
    });
}

/// Request shutdown: releases what `SharedLock` and `SessionLock` hold (session locks on
/// the user's connections too), closes connections, drops references to PHP objects;
/// then drops what `DistributedLock` destructors left (their leases stay).
pub fn request_shutdown() {
    let state = THREAD.with(|thread| thread.state.try_borrow_mut().ok().and_then(|mut slot| slot.take()));
    crate::php::clear_bailout();
    if let Some(mut state) = state {
        state.follow_fork();
        driver::set_shutting_down(true);
        state.close_everything();
        driver::set_shutting_down(false);
    }
    driver::clear_causes();
    for object in lease_objects::take_all().into_values() {
        object.close();
    }
}

/// Module shutdown: the engine is going away, so nothing may touch PHP values any
/// more. Anything left (only if request shutdown never ran) is leaked, not dropped.
pub fn module_shutdown() {
    let state = THREAD.with(|thread| thread.state.try_borrow_mut().ok().and_then(|mut slot| slot.take()));
    std::mem::forget(state);
    std::mem::forget(lease_objects::take_all());
}
