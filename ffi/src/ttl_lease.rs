//! TTL leases in the original package's `shared_locks` table: acquire (waiting or one
//! try), release, and the TTL left. Options, fencing tokens and renewal are in `extended`.

use std::ffi::c_char;

use crate::boundary::{call, non_null, text};
use crate::client::{self, mysqllock_client};
use crate::status::mysqllock_status;

/// Acquires the TTL lease `name`, waiting up to `timeout` seconds (0 = one try,
/// fractions allowed) while another session holds it. The lease lasts `ttl` seconds
/// (rounded up to whole seconds on the database clock) unless released earlier; after
/// that another session may take it over.
///
/// Returns `MYSQLLOCK_TIMEOUT` if it stayed held, `MYSQLLOCK_ALREADY_HELD` at once if
/// this client holds it. Interoperates with the PHP package its-mieger/mysql-shared-locks
/// and the mysqllock PHP extension on the same table. `client` stays owned by the
/// caller; any thread may call this (it blocks other calls on the same client while it waits).
///
/// # Safety
/// `client` is NULL or a live client; `name` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn mysqllock_acquire(
    client: *mut mysqllock_client,
    name: *const c_char,
    timeout: f64,
    ttl: f64,
) -> mysqllock_status {
    call(|| {
        // SAFETY: caller's contract for both pointers.
        let (client, name) = unsafe { (client::get(client)?, text(name, "lock name")?) };
        client.locker.lock().acquire(name, timeout, ttl).map(drop)
    })
}

/// One try at the TTL lease `name` (see `mysqllock_acquire()`): on `MYSQLLOCK_OK`,
/// `*acquired_out` is true if this client now holds it and false if another session
/// does. Any other status leaves `*acquired_out` unwritten.
///
/// `client` stays owned by the caller; any thread may call this.
///
/// # Safety
/// `client` is NULL or a live client; `name` is NULL or a NUL-terminated string;
/// `acquired_out` is NULL or points to a writable `bool`.
#[no_mangle]
pub unsafe extern "C" fn mysqllock_try_acquire(
    client: *mut mysqllock_client,
    name: *const c_char,
    ttl: f64,
    acquired_out: *mut bool,
) -> mysqllock_status {
    call(|| {
        // SAFETY: caller's contract for both pointers.
        let (client, name) = unsafe { (client::get(client)?, text(name, "lock name")?) };
        // Checked before trying, so that a lock is never taken without the caller learning of it.
        let out = non_null(acquired_out, "acquired_out pointer")?;
        let acquired = client.locker.lock().try_acquire(name, ttl)?.is_some();
        // SAFETY: non-NULL; the caller guarantees it points to a writable bool.
        unsafe { out.as_ptr().write(acquired) };
        Ok(())
    })
}

/// Releases the TTL lease `name`.
///
/// Returns `MYSQLLOCK_NOT_HELD` if this client does not hold it (any more): never
/// acquired, already released, taken over after its TTL passed, or lost with the
/// session. `client` stays owned by the caller; any thread may call this.
///
/// # Safety
/// `client` is NULL or a live client; `name` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn mysqllock_release(client: *mut mysqllock_client, name: *const c_char) -> mysqllock_status {
    call(|| {
        // SAFETY: caller's contract for both pointers.
        let (client, name) = unsafe { (client::get(client)?, text(name, "lock name")?) };
        client.locker.lock().release(name)
    })
}

/// Checks that the TTL lease `name` is still held with at least `min_remaining`
/// seconds of its TTL left: call it before work that must not outlive the lease.
///
/// Returns `MYSQLLOCK_TTL_TOO_SHORT` if less is left, `MYSQLLOCK_NOT_HELD` if the lease
/// is gone. `client` stays owned by the caller; any thread may call this.
///
/// # Safety
/// `client` is NULL or a live client; `name` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn mysqllock_assert_ttl(
    client: *mut mysqllock_client,
    name: *const c_char,
    min_remaining: f64,
) -> mysqllock_status {
    call(|| {
        // SAFETY: caller's contract for both pointers.
        let (client, name) = unsafe { (client::get(client)?, text(name, "lock name")?) };
        client.locker.lock().assert_ttl(name, min_remaining).map(drop)
    })
}

/// Writes to `*out` the seconds left until another session may take the TTL lease
/// `name` over (database clock; 0 or less once expired).
///
/// Returns `MYSQLLOCK_NOT_HELD` if this client does not hold it. `client` stays owned
/// by the caller; any thread may call this.
///
/// # Safety
/// `client` is NULL or a live client; `name` is NULL or a NUL-terminated string;
/// `out` is NULL or points to a writable `double`.
#[no_mangle]
pub unsafe extern "C" fn mysqllock_remaining_ttl(
    client: *mut mysqllock_client,
    name: *const c_char,
    out: *mut f64,
) -> mysqllock_status {
    call(|| {
        // SAFETY: caller's contract for both pointers.
        let (client, name) = unsafe { (client::get(client)?, text(name, "lock name")?) };
        let out = non_null(out, "out pointer")?;
        let remaining = client.locker.lock().remaining_ttl(name)?;
        // SAFETY: non-NULL; the caller guarantees it points to a writable double.
        unsafe { out.as_ptr().write(remaining) };
        Ok(())
    })
}
