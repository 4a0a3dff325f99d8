//! Plain session locks (`GET_LOCK`, no table, no TTL): take, release, who holds one,
//! whether this client's session does.

use std::ffi::c_char;

use crate::boundary::{call, non_null, text};
use crate::client::{self, mysqllock_client};
use crate::status::mysqllock_status;

/// Takes the plain session lock `name` (MySQL `GET_LOCK`, no table, no TTL), waiting
/// up to `timeout` seconds (0 = one try). It lives until
/// `mysqllock_session_unlock()` or until the client's session ends, and is free again
/// at once then: a job that must not run twice within a period, even when it finishes
/// faster than the clocks of the nodes that start it differ, needs a lease with "at
/// least" (`mysqllock_acquire_ex()`) instead.
///
/// Spellings that differ only in case or accents are one lock (the GET_LOCK name is
/// the name lowercased, NFKD-decomposed and without combining marks; a lowercase ASCII
/// name is used as it is, so it is the lock a hand-written `GET_LOCK('name', ...)`
/// takes). Names over 64 characters are refused.
///
/// A session that turned out to be dead (killed, server restarted) is replaced once,
/// and the lock taken on the new one.
///
/// Returns `MYSQLLOCK_TIMEOUT` if another session holds it, `MYSQLLOCK_ALREADY_HELD` if
/// this client does, `MYSQLLOCK_DEADLOCK` if the server refuses the wait as a deadlock.
/// `client` stays owned by the caller; any thread may call this.
///
/// # Safety
/// `client` is NULL or a live client; `name` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn mysqllock_session_lock(
    client: *mut mysqllock_client,
    name: *const c_char,
    timeout: f64,
) -> mysqllock_status {
    call(|| {
        // SAFETY: caller's contract for both pointers.
        let (client, name) = unsafe { (client::get(client)?, text(name, "lock name")?) };
        client.locker.lock().lock_session(name, timeout)
    })
}

/// Releases the plain session lock `name`.
///
/// Returns `MYSQLLOCK_NOT_HELD` if this client does not hold it. `client` stays owned
/// by the caller; any thread may call this.
///
/// # Safety
/// `client` is NULL or a live client; `name` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn mysqllock_session_unlock(
    client: *mut mysqllock_client,
    name: *const c_char,
) -> mysqllock_status {
    call(|| {
        // SAFETY: caller's contract for both pointers.
        let (client, name) = unsafe { (client::get(client)?, text(name, "lock name")?) };
        client.locker.lock().unlock_session(name)
    })
}

/// Writes to `*out` the `CONNECTION_ID()` of the session that holds the session lock
/// `name` on the server now (this client or any other), or 0 when it is free. Names
/// fold as in `mysqllock_session_lock()`.
///
/// `client` stays owned by the caller; any thread may call this.
///
/// # Safety
/// `client` is NULL or a live client; `name` is NULL or a NUL-terminated string;
/// `out` is NULL or points to a writable `uint64_t`.
#[no_mangle]
pub unsafe extern "C" fn mysqllock_session_holder(
    client: *mut mysqllock_client,
    name: *const c_char,
    out: *mut u64,
) -> mysqllock_status {
    call(|| {
        // SAFETY: caller's contract for both pointers.
        let (client, name) = unsafe { (client::get(client)?, text(name, "lock name")?) };
        let out = non_null(out, "out pointer")?;
        let holder = client.locker.lock().session_lock_holder(name)?.unwrap_or(0);
        // SAFETY: non-NULL; the caller guarantees it points to a writable uint64_t.
        unsafe { out.as_ptr().write(holder) };
        Ok(())
    })
}

/// Writes to `*out` whether this client's session holds the session lock `name`, as
/// the server sees it now: false after the lock was lost with the session or released
/// behind the client's back (one statement).
///
/// `client` stays owned by the caller; any thread may call this.
///
/// # Safety
/// `client` is NULL or a live client; `name` is NULL or a NUL-terminated string;
/// `out` is NULL or points to a writable `bool`.
#[no_mangle]
pub unsafe extern "C" fn mysqllock_session_held(
    client: *mut mysqllock_client,
    name: *const c_char,
    out: *mut bool,
) -> mysqllock_status {
    call(|| {
        // SAFETY: caller's contract for both pointers.
        let (client, name) = unsafe { (client::get(client)?, text(name, "lock name")?) };
        let out = non_null(out, "out pointer")?;
        let held = client.locker.lock().holds_session_lock(name)?;
        // SAFETY: non-NULL; the caller guarantees it points to a writable bool.
        unsafe { out.as_ptr().write(held) };
        Ok(())
    })
}
