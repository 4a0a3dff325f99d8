//! Beyond the original package: acquisition with options, fencing tokens, renewal.

use std::ffi::c_char;

use crate::boundary::{call, call_or_refuse, non_null, text, write_if_wanted, Failure};
use crate::client::{self, mysqllock_client};
use crate::options::{acquire_options, mysqllock_options};
use crate::status::mysqllock_status;

/// `mysqllock_acquire()` with options (keep-alive, maximum hold, "at least"; see
/// `mysqllock_options`, NULL = none) that also hands out the fencing token.
///
/// On `MYSQLLOCK_OK`, `*token_out` (if `token_out` is not NULL) receives the lease's
/// fencing token: greater than every token issued before on the table, so the protected
/// resource can refuse the writes of an older holder
/// (`UPDATE ... SET fence = :token WHERE ... AND fence < :token`). It is 0 when the
/// table has no token column (upgrade it with `mysqllock init --upgrade` or
/// `mysqllock_upgrade_table()`). On any other status nothing is written.
///
/// Bad options are `MYSQLLOCK_INVALID_ARGUMENT`, before anything is locked. If the
/// keep-alive thread cannot be started, the lock is released again and the call
/// returns `MYSQLLOCK_INVALID_ARGUMENT` too.
/// `client` stays owned by the caller; any thread may call this (it blocks other calls
/// on the same client while it waits). The keep-alive thread belongs to the client: it
/// stops at `mysqllock_release()` and `mysqllock_client_free()`.
///
/// # Safety
/// `client` is NULL or a live client; `name` is NULL or a NUL-terminated string;
/// `options` is NULL or points to a readable `mysqllock_options`; `token_out` is NULL
/// or points to a writable `uint64_t`.
#[no_mangle]
pub unsafe extern "C" fn mysqllock_acquire_ex(
    client: *mut mysqllock_client,
    name: *const c_char,
    timeout: f64,
    ttl: f64,
    options: *const mysqllock_options,
    token_out: *mut u64,
) -> mysqllock_status {
    call(|| {
        // SAFETY: caller's contract for every pointer.
        let (client, name, options) =
            unsafe { (client::get(client)?, text(name, "lock name")?, acquire_options(options)?) };
        let lease = client.locker.lock().acquire_with(name, timeout, ttl, &options)?;
        // SAFETY: NULL or a writable uint64_t, by the caller's contract.
        unsafe { write_if_wanted(token_out, lease.token.unwrap_or(0)) };
        Ok(())
    })
}

/// One try at the TTL lease `name` with options (see `mysqllock_acquire_ex()`): on
/// `MYSQLLOCK_OK`, `*acquired_out` is true if this client now holds it and false if
/// another session does, and `*token_out` (if not NULL) receives its fencing token, or
/// 0 when it was not acquired or the table has no token column. Any other status
/// leaves both unwritten.
///
/// `client` stays owned by the caller; any thread may call this.
///
/// # Safety
/// `client` is NULL or a live client; `name` is NULL or a NUL-terminated string;
/// `options` is NULL or points to a readable `mysqllock_options`; `acquired_out` is
/// NULL or points to a writable `bool`; `token_out` is NULL or points to a writable
/// `uint64_t`.
#[no_mangle]
pub unsafe extern "C" fn mysqllock_try_acquire_ex(
    client: *mut mysqllock_client,
    name: *const c_char,
    ttl: f64,
    options: *const mysqllock_options,
    acquired_out: *mut bool,
    token_out: *mut u64,
) -> mysqllock_status {
    call(|| {
        // SAFETY: caller's contract for every pointer.
        let (client, name, options) =
            unsafe { (client::get(client)?, text(name, "lock name")?, acquire_options(options)?) };
        // Checked before trying, so that a lock is never taken without the caller learning of it.
        let acquired = non_null(acquired_out, "acquired_out pointer")?;
        let lease = client.locker.lock().try_acquire_with(name, ttl, &options)?;
        // SAFETY: non-NULL / NULL-or-writable, by the caller's contract.
        unsafe {
            acquired.as_ptr().write(lease.is_some());
            write_if_wanted(token_out, lease.and_then(|l| l.token).unwrap_or(0));
        }
        Ok(())
    })
}

/// Writes to `*out` the fencing token of the TTL lease `name` that this client holds
/// (the one `mysqllock_acquire_ex()` returned). Answered without a round trip, so it
/// does not tell whether the lease is still held: the protected resource's fence check
/// does (`mysqllock_assert_ttl()` asks the server).
///
/// Returns `MYSQLLOCK_NOT_HELD` if this client does not hold it, and `MYSQLLOCK_TABLE`
/// if the lease has no token because the table has no token column: the message says
/// to run `mysqllock init --upgrade` (or `mysqllock_upgrade_table()`). A client that
/// used the table before it was upgraded keeps taking leases without tokens; open a
/// new client after the upgrade. `client` stays owned by the caller; any thread may
/// call this.
///
/// # Safety
/// `client` is NULL or a live client; `name` is NULL or a NUL-terminated string;
/// `out` is NULL or points to a writable `uint64_t`.
#[no_mangle]
pub unsafe extern "C" fn mysqllock_token(
    client: *mut mysqllock_client,
    name: *const c_char,
    out: *mut u64,
) -> mysqllock_status {
    call_or_refuse(|| {
        // SAFETY: caller's contract for both pointers.
        let (client, name) = unsafe { (client::get(client)?, text(name, "lock name")?) };
        let out = non_null(out, "out pointer")?;
        let mut locker = client.locker.lock();
        let Some(token) = locker.token(name)? else {
            return Err(Failure::Refused {
                status: mysqllock_status::TABLE,
                message: format!(
                    "lock \"{name}\" has no fencing token: table {} has no token column \
                     (upgrade it with `mysqllock init --upgrade` or mysqllock_upgrade_table(), then open a new client)",
                    locker.table().display_name()
                ),
            });
        };
        // SAFETY: non-NULL; the caller guarantees it points to a writable uint64_t.
        unsafe { out.as_ptr().write(token) };
        Ok(())
    })
}

/// Extends the TTL lease `name` to `ttl` seconds from now (database clock; never
/// shortens it), while this client's session still owns its row and holds its
/// GET_LOCK. The acquisition time stays, so "at least" and keep-alive's maximum hold
/// still count from the acquisition.
///
/// Returns `MYSQLLOCK_NOT_HELD` when the lease is gone, with the loss in the message
/// (taken over after its TTL, its session killed or lost, its keep-alive failed); a lost
/// lease is not acquired again. `client` stays owned by the caller; any thread may call
/// this.
///
/// # Safety
/// `client` is NULL or a live client; `name` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn mysqllock_renew(
    client: *mut mysqllock_client,
    name: *const c_char,
    ttl: f64,
) -> mysqllock_status {
    call(|| {
        // SAFETY: caller's contract for both pointers.
        let (client, name) = unsafe { (client::get(client)?, text(name, "lock name")?) };
        client.locker.lock().renew(name, ttl)
    })
}
