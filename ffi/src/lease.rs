//! The lease mode: table-only leases with owner strings (the `distributed_locks` table of
//! `Nene\Kit\DistributedLock`), safe on replicated clusters. No GET_LOCK, no KILL, no
//! connection ids: a lease lives in its row only, and belongs to an owner string, not to
//! a session.
//!
//! Each client has one lease lock of the core, on a session of its own (opened at the
//! first lease call, from the client's connection settings), so the lease calls never
//! wait for the client's GET_LOCK-based calls and the reverse.

use std::ffi::{c_char, c_int};
use std::ptr::NonNull;

use mysqllock_core::{Config, Dialect, DistributedLock, Grant, QuoteStyle, Table};
use parking_lot::MutexGuard;

use crate::boundary::{call, non_null, text, write_if_wanted, Result};
use crate::client::{self, mysqllock_client};
use crate::status::mysqllock_status;

/// Writes whether the try won to `*won_out`, and a won grant's token (0 without the token
/// column) and the seconds left until its local deadline to the optional out-parameters;
/// a lost try writes 0 to both.
///
/// # Safety
/// `won_out` points to a writable `bool`; each other pointer is NULL or writable.
unsafe fn write_grant(grant: Option<&Grant>, won_out: NonNull<bool>, token_out: *mut u64, remaining_out: *mut f64) {
    let token = grant.and_then(|g| g.token).unwrap_or(0);
    let remaining = grant.map_or(0.0, |g| g.remaining().as_secs_f64());
    // SAFETY: forwarded contract.
    unsafe {
        won_out.as_ptr().write(grant.is_some());
        write_if_wanted(token_out, token);
        write_if_wanted(remaining_out, remaining);
    }
}

/// The arguments every call of an owner starts with, checked in the order their errors
/// are reported (client, resource, owner, the answer's out-pointer: checked before
/// anything is tried, so that a lease is never taken or ended without the caller
/// learning of it), and then the client's lease lock, held for the call.
///
/// # Safety
/// `client` is NULL or a live client; `resource` and `owner` are NULL or NUL-terminated
/// strings that outlive the call.
unsafe fn owner_call<'a>(
    client: *mut mysqllock_client,
    resource: *const c_char,
    owner: *const c_char,
    answer_out: *mut bool,
    answer_name: &'static str,
) -> Result<OwnerCall<'a>> {
    // SAFETY: forwarded contract.
    let (client, resource, owner) =
        unsafe { (client::get(client)?, text(resource, "resource")?, text(owner, "owner")?) };
    let answer = non_null(answer_out, answer_name)?;
    Ok(OwnerCall { lease: client.lease.lock(), resource, owner, answer })
}

/// What [`owner_call`] checked, with the lease lock it took.
struct OwnerCall<'a> {
    lease: MutexGuard<'a, DistributedLock<Config>>,
    resource: &'a str,
    owner: &'a str,
    answer: NonNull<bool>,
}

/// Acquires the lease on `resource` for `owner` for `ttl_seconds`: won when the row is
/// absent, expired, or already `owner`'s (then the lease restarts with the new TTL); lost
/// when another owner holds an unexpired row. `wait_seconds` 0 is one try; more keeps
/// trying (capped exponential backoff with jitter) for up to that long.
///
/// On `MYSQLLOCK_OK`, `*acquired_out` tells whether `owner` now holds the lease, and, if
/// not NULL, `*token_out` receives its fencing token (strictly increasing per resource
/// across takeovers, the same when the owner acquires again; 0 when not acquired or when
/// the table has no token column: `mysqllock init --lease --upgrade` or
/// `mysqllock_lease_upgrade_table()` adds it) and `*remaining_out` the seconds until the
/// local deadline (0 when not acquired): counted on the monotonic clock from before the
/// statement was sent, minus a margin for clock skew between nodes (0.5 s, or half a
/// shorter TTL). Past that deadline the holder must not trust the lease any more; renew
/// well before it. Any other status writes nothing.
///
/// Expiry is judged by the database clock (UTC); a table without the upgrade stores whole
/// seconds (the TTL is rounded up). Owners compare exactly (case-sensitive). Bad input
/// (empty, too long or unstorable resource or owner, a TTL ≤ 0 or ending the lease after
/// 9999-12-31 23:59:59 UTC, where the `DATETIME` range ends, negative or NaN wait) is
/// `MYSQLLOCK_INVALID_ARGUMENT`, before anything is written. A missing table is
/// `MYSQLLOCK_TABLE` with its `CREATE TABLE` in the message, as is a MyISAM table (not
/// transactional, not replicated). A Galera node outside the primary component, a Group
/// Replication member outside its group's majority, and a read-only secondary are
/// `MYSQLLOCK_NODE_NOT_READY`.
///
/// `client` stays owned by the caller; any thread may call this (it blocks other lease
/// calls on the same client while it waits, not the GET_LOCK-based ones). Freeing the
/// client does not release its leases: they end at their TTL or at
/// `mysqllock_lease_release()`.
///
/// # Safety
/// `client` is NULL or a live client; `resource` and `owner` are NULL or NUL-terminated
/// strings; `acquired_out` is NULL or points to a writable `bool`; `token_out` is NULL or
/// points to a writable `uint64_t`; `remaining_out` is NULL or points to a writable
/// `double`.
#[no_mangle]
pub unsafe extern "C" fn mysqllock_lease_acquire(
    client: *mut mysqllock_client,
    resource: *const c_char,
    owner: *const c_char,
    ttl_seconds: f64,
    wait_seconds: f64,
    acquired_out: *mut bool,
    token_out: *mut u64,
    remaining_out: *mut f64,
) -> mysqllock_status {
    call(|| {
        // SAFETY: caller's contract for every pointer.
        let OwnerCall { mut lease, resource, owner, answer: acquired } =
            unsafe { owner_call(client, resource, owner, acquired_out, "acquired_out pointer") }?;
        let grant = lease.acquire_waiting(resource, owner, ttl_seconds, wait_seconds)?;
        // SAFETY: non-NULL / NULL-or-writable, by the caller's contract.
        unsafe { write_grant(grant.as_ref(), acquired, token_out, remaining_out) };
        Ok(())
    })
}

/// Ends `owner`'s lease on `resource`. On `MYSQLLOCK_OK`, `*released_out` is true when
/// it ended now, false when the lease was not `owner`'s, had expired, or did not exist.
/// Any other status writes nothing.
///
/// On a table with the token column the row stays, ended, so the next token counts on.
/// `client` stays owned by the caller; any thread may call this.
///
/// # Safety
/// `client` is NULL or a live client; `resource` and `owner` are NULL or NUL-terminated
/// strings; `released_out` is NULL or points to a writable `bool`.
#[no_mangle]
pub unsafe extern "C" fn mysqllock_lease_release(
    client: *mut mysqllock_client,
    resource: *const c_char,
    owner: *const c_char,
    released_out: *mut bool,
) -> mysqllock_status {
    call(|| {
        // SAFETY: caller's contract for every pointer.
        let OwnerCall { mut lease, resource, owner, answer: released } =
            unsafe { owner_call(client, resource, owner, released_out, "released_out pointer") }?;
        let ended = lease.release(resource, owner)?;
        // SAFETY: non-NULL; the caller guarantees it points to a writable bool.
        unsafe { released.as_ptr().write(ended) };
        Ok(())
    })
}

/// Restarts `owner`'s unexpired lease on `resource` with `ttl_seconds` from now. On
/// `MYSQLLOCK_OK`, `*renewed_out` is true when it was renewed, false when the lease was
/// not `owner`'s, had expired, or did not exist (it is lost: stop the work it guards);
/// `*token_out` and `*remaining_out` (if not NULL) are as for `mysqllock_lease_acquire()`,
/// the remaining time counted from this renewal. Any other status writes nothing; a
/// connection or node error does not mean the lease is lost until its local deadline
/// passes.
///
/// `client` stays owned by the caller; any thread may call this.
///
/// # Safety
/// `client` is NULL or a live client; `resource` and `owner` are NULL or NUL-terminated
/// strings; `renewed_out` is NULL or points to a writable `bool`; `token_out` is NULL or
/// points to a writable `uint64_t`; `remaining_out` is NULL or points to a writable `double`.
#[no_mangle]
pub unsafe extern "C" fn mysqllock_lease_renew(
    client: *mut mysqllock_client,
    resource: *const c_char,
    owner: *const c_char,
    ttl_seconds: f64,
    renewed_out: *mut bool,
    token_out: *mut u64,
    remaining_out: *mut f64,
) -> mysqllock_status {
    call(|| {
        // SAFETY: caller's contract for every pointer.
        let OwnerCall { mut lease, resource, owner, answer: renewed } =
            unsafe { owner_call(client, resource, owner, renewed_out, "renewed_out pointer") }?;
        let grant = lease.renew(resource, owner, ttl_seconds)?;
        // SAFETY: non-NULL / NULL-or-writable, by the caller's contract.
        unsafe { write_grant(grant.as_ref(), renewed, token_out, remaining_out) };
        Ok(())
    })
}

/// Whether anyone holds an unexpired lease on `resource`: on `MYSQLLOCK_OK`, `*held_out`
/// receives the answer, read after every commit the cluster made before it on a Galera
/// node. Any other status writes nothing. Use it to show or log: the answer may be out of
/// date by the time it is read.
///
/// `client` stays owned by the caller; any thread may call this.
///
/// # Safety
/// `client` is NULL or a live client; `resource` is NULL or a NUL-terminated string;
/// `held_out` is NULL or points to a writable `bool`.
#[no_mangle]
pub unsafe extern "C" fn mysqllock_lease_is_held(
    client: *mut mysqllock_client,
    resource: *const c_char,
    held_out: *mut bool,
) -> mysqllock_status {
    call(|| {
        // SAFETY: caller's contract for every pointer.
        let (client, resource) = unsafe { (client::get(client)?, text(resource, "resource")?) };
        let held = non_null(held_out, "held_out pointer")?;
        let answer = client.lease.lock().is_held(resource)?;
        // SAFETY: non-NULL; the caller guarantees it points to a writable bool.
        unsafe { held.as_ptr().write(answer) };
        Ok(())
    })
}

/// Switches the client's lease calls to another lease table (default
/// `distributed_locks`, or the URL's `lease_table=`): `table` is `name` or `schema.name`
/// (letters, digits, `_`, `$`); `quote_style` is 0 for MySQL backticks or 1 for ANSI
/// double quotes. The leases taken on the old table stay there (they belong to owners,
/// not to the client). `client` stays owned by the caller; any thread may call this.
///
/// # Safety
/// `client` is NULL or a live client; `table` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn mysqllock_lease_set_table(
    client: *mut mysqllock_client,
    table: *const c_char,
    quote_style: c_int,
) -> mysqllock_status {
    call(|| {
        // SAFETY: caller's contract for both pointers.
        let client = unsafe { client::get(client) }?;
        let table = Table::new(unsafe { text(table, "table name") }?, QuoteStyle::from_code(quote_style.into())?)?;
        let mut lease = client.lease.lock();
        let config = lease.connector().clone();
        *lease = DistributedLock::new(config, table, Dialect::MySql);
        Ok(())
    })
}

/// Creates the client's lease table as `Nene\Kit\DistributedLock` documents it
/// (`resource`, `owner`, `expires_at`, `acquired_at`; InnoDB) unless it exists, as
/// `mysqllock init --lease` does. On `MYSQLLOCK_OK`, `*created` (if not NULL) tells
/// whether it was created now. Needs the CREATE privilege. `client` stays owned by the
/// caller; any thread may call this.
///
/// # Safety
/// `client` is NULL or a live client; `created` is NULL or points to a writable `bool`.
#[no_mangle]
pub unsafe extern "C" fn mysqllock_lease_init_table(
    client: *mut mysqllock_client,
    created: *mut bool,
) -> mysqllock_status {
    call(|| {
        // SAFETY: caller's contract.
        let client = unsafe { client::get(client) }?;
        let was_created = client.lease.lock().create_table()?;
        // SAFETY: NULL or a writable bool, by the caller's contract.
        unsafe { write_if_wanted(created, was_created) };
        Ok(())
    })
}

/// Creates the client's lease table if it is missing and upgrades it, as
/// `mysqllock init --lease --upgrade` does: a fencing `token` column and microsecond
/// times. On `MYSQLLOCK_OK`, `*changed` (if not NULL) tells whether anything was created
/// or upgraded. Everything works without the upgrade; with it, acquisitions hand out
/// tokens and a release keeps the row (ended). Safe to run on several nodes at once.
/// Needs the ALTER (and CREATE) privilege. `client` stays owned by the caller; any thread
/// may call this.
///
/// # Safety
/// `client` is NULL or a live client; `changed` is NULL or points to a writable `bool`.
#[no_mangle]
pub unsafe extern "C" fn mysqllock_lease_upgrade_table(
    client: *mut mysqllock_client,
    changed: *mut bool,
) -> mysqllock_status {
    call(|| {
        // SAFETY: caller's contract.
        let client = unsafe { client::get(client) }?;
        let mut lease = client.lease.lock();
        let created = lease.create_table()?;
        let upgraded = lease.upgrade_table()?;
        // SAFETY: NULL or a writable bool, by the caller's contract.
        unsafe { write_if_wanted(changed, created || upgraded) };
        Ok(())
    })
}
