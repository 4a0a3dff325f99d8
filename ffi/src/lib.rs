//! The C ABI of mysqllock: `libmysqllock.so` / `libmysqllock.a`, declared in
//! `include/mysqllock.h` (generated from this crate by cbindgen).
//!
//! Glue only: each function checks its arguments, calls the core's
//! [`NativeLocker`], and turns the result into a [`mysqllock_status`] plus a
//! thread-local message. The lock protocol lives in `mysqllock-core`.
//!
//! Conventions, the same for every function:
//! - the return value is a `mysqllock_status`; `MYSQLLOCK_OK` (0) is success, and any
//!   other value leaves a message for `mysqllock_last_error()` on the calling thread;
//! - out-parameters come last and are written only on success;
//! - NULL pointers are reported as `MYSQLLOCK_INVALID_ARGUMENT`, never dereferenced;
//! - strings are NUL-terminated UTF-8, borrowed for the duration of the call only;
//! - no panic crosses the boundary: a bug returns `MYSQLLOCK_INTERNAL`;
//! - a client belongs to the process that opened it: in a forked child every call on it
//!   is refused, and freeing it touches nothing of the parent's (see `mysqllock_client`).

// C names (`mysqllock_client`) are the point of this crate.
#![allow(non_camel_case_types)]

mod boundary;
mod extended;
mod holder;
mod last_error;
mod lease;
mod options;
mod status;
mod table;

use std::ffi::{c_char, c_int};

use mysqllock_core::fork::{self, Owner};
use mysqllock_core::{Config, DistributedLock, NativeLocker, QuoteStyle, Table};
use parking_lot::Mutex;

pub use boundary::mysqllock_last_error;
use boundary::{call, non_null, optional_text, text, Result};
pub use extended::{mysqllock_acquire_ex, mysqllock_renew, mysqllock_token, mysqllock_try_acquire_ex};
pub use holder::{mysqllock_holder, mysqllock_holder_info};
pub use lease::{
    mysqllock_lease_acquire, mysqllock_lease_init_table, mysqllock_lease_is_held, mysqllock_lease_release,
    mysqllock_lease_renew, mysqllock_lease_set_table, mysqllock_lease_upgrade_table,
};
pub use options::{mysqllock_option_flag, mysqllock_options};
pub use status::{mysqllock_status, mysqllock_status_name};
pub use table::{mysqllock_init_table, mysqllock_upgrade_table};

/// A connection to the lock server: one MySQL session and the locks held on it, and
/// for the lease mode (`mysqllock_lease_*`) a second session, opened at the first lease
/// call.
///
/// Opaque: create with `mysqllock_client_open_url()` or `mysqllock_client_open()`,
/// destroy with `mysqllock_client_free()`.
///
/// Thread-safe: any thread may use a client. Calls on one client are serialized by
/// an internal mutex, so a call (for instance an `mysqllock_acquire()` that waits)
/// blocks other threads' calls on the same client until it returns; use one client
/// per thread for independent waits. Locks belong to the client's database session,
/// not to a thread: any thread may release a lock taken through the same client.
///
/// Keep-alive (`MYSQLLOCK_KEEP_ALIVE`) renews from a background thread with its own
/// connection; it never takes the client's mutex, so a long call on the client does not
/// delay a renewal. It stops when the lock is released and when the client is freed
/// (waiting at most about a second for the thread).
///
/// Fork: a client belongs to the process that opened it. In a forked child every call
/// on an inherited client returns `MYSQLLOCK_INVALID_ARGUMENT` (it would act on the
/// parent's session and locks), and `mysqllock_client_free()` of it releases and closes
/// nothing. The child has no keep-alive threads (threads are not forked) and never
/// stops, joins or renews the parent's; the parent keeps its session, locks and
/// keep-alive. A child that needs locks opens its own client.
///
/// Replicated clusters (a Galera node, a Group Replication member): the GET_LOCK-based
/// calls (`mysqllock_acquire*`, `mysqllock_session_lock`) return
/// `MYSQLLOCK_CLUSTER_NODE` there, because GET_LOCK and KILL act on one node only; the
/// lease mode works. Opening a client on such a node succeeds.
pub struct mysqllock_client {
    locker: Mutex<NativeLocker>,
    /// The lease mode's lock, with a mutex of its own so lease calls never wait for a
    /// GET_LOCK wait on `locker`. Connects at its first call.
    lease: Mutex<DistributedLock<Config>>,
    /// The process that opened the client, the only one that may use its session.
    owner: Owner,
}

/// The thread-safety promised above, checked by the compiler.
#[allow(dead_code)]
fn client_is_send_and_sync() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<mysqllock_client>();
}

/// The client behind a handle argument, refused in a forked child (see
/// [`mysqllock_client`]): checked before its mutex is touched, which a parent thread may
/// have held at the moment of the fork.
///
/// # Safety
/// `client` is NULL or a live handle from `mysqllock_client_open*`.
unsafe fn client<'a>(client: *mut mysqllock_client) -> Result<&'a mysqllock_client> {
    // SAFETY: non-NULL, and live by the caller's contract.
    let client = unsafe { non_null(client, "client")?.as_ref() };
    client.owner.check("client")?;
    Ok(client)
}

/// Connects now, so that a wrong address or password is reported by the open call
/// rather than by the first lock call.
///
/// # Safety
/// `out` is NULL or points to a writable `mysqllock_client *`.
unsafe fn connect(config: Config, out: *mut *mut mysqllock_client) -> Result<()> {
    let out = non_null(out, "out pointer")?;
    let lease = DistributedLock::native(config.clone());
    let mut locker = NativeLocker::from_config(config);
    match locker.connection_id() {
        // Connected, to a cluster node: the lease mode works there, and the GET_LOCK
        // calls report the refusal themselves.
        Err(e) if e.is_cluster_node() => {}
        other => {
            other?;
        }
    }
    let handle =
        Box::new(mysqllock_client { locker: Mutex::new(locker), lease: Mutex::new(lease), owner: Owner::current() });
    // SAFETY: non-NULL; the caller guarantees it points to a writable pointer.
    unsafe { out.as_ptr().write(Box::into_raw(handle)) };
    Ok(())
}

/// Opens a client from a URL and connects it:
/// `mysql://user:password@host:port/database?table=shared_locks&quote=ansi&socket=/path&charset=utf8mb4&connect_timeout=10`
/// (user and password may be percent-encoded; what is left out defaults to
/// `root@127.0.0.1:3306`, no password, no default database, table `shared_locks`).
/// Also `lease_table=distributed_locks` (the lease mode's table) and `allow_cluster=1`
/// (as `mysqllock_client_allow_cluster()`).
///
/// TLS, with the `mysql` client's option names (dashes or underscores): `ssl-mode` =
/// `DISABLED`, `PREFERRED` (the default: TLS when the server offers it over TCP),
/// `REQUIRED`, `VERIFY_CA` (the certificate must chain to `ssl-ca`, or to the system's CA
/// store) or `VERIFY_IDENTITY` (and be for the host connected to); `ssl-ca=/path/ca.pem`
/// alone means `VERIFY_CA`; `ssl-cert` and `ssl-key` for an account created
/// `REQUIRE X509`. A refused certificate or a server that wants TLS fails with
/// `MYSQLLOCK_CONNECTION` and a message naming the CA, the host or the setting.
/// `mysqllock_client_open()` connects with the default, `PREFERRED`.
///
/// On success, `*out` receives a new client that the caller owns and must release with
/// `mysqllock_client_free()`. On failure `*out` is not written. Any thread may call this.
///
/// # Safety
/// `url` is NULL or a NUL-terminated string; `out` is NULL or points to a writable
/// `mysqllock_client *`.
#[no_mangle]
pub unsafe extern "C" fn mysqllock_client_open_url(
    url: *const c_char,
    out: *mut *mut mysqllock_client,
) -> mysqllock_status {
    call(|| {
        // SAFETY: caller's contract: NULL or a NUL-terminated string.
        let url = unsafe { text(url, "connection URL") }?;
        // SAFETY: forwarded contract.
        unsafe { connect(Config::from_url(url)?, out) }
    })
}

/// Opens a client from connection parameters and connects it, using the table
/// `shared_locks` in `database` (change it with `mysqllock_client_set_table()`).
///
/// `host` and `user` are required; `password` and `database` may be NULL for none;
/// `port` 0 means 3306. On success, `*out` receives a new client that the caller owns
/// and must release with `mysqllock_client_free()`. On failure `*out` is not written.
/// The strings are only read during the call. Any thread may call this.
///
/// # Safety
/// Each string is NULL or NUL-terminated; `out` is NULL or points to a writable
/// `mysqllock_client *`.
#[no_mangle]
pub unsafe extern "C" fn mysqllock_client_open(
    host: *const c_char,
    port: u16,
    user: *const c_char,
    password: *const c_char,
    database: *const c_char,
    out: *mut *mut mysqllock_client,
) -> mysqllock_status {
    call(|| {
        // SAFETY (all four): caller's contract: NULL or NUL-terminated strings.
        let config = Config {
            host: unsafe { text(host, "host") }?.to_owned(),
            port: if port == 0 { Config::default().port } else { port },
            user: unsafe { text(user, "user") }?.to_owned(),
            password: unsafe { optional_text(password, "password") }?.map(str::to_owned),
            database: unsafe { optional_text(database, "database") }?.map(str::to_owned),
            ..Config::default()
        };
        // SAFETY: forwarded contract.
        unsafe { connect(config, out) }
    })
}

/// Switches the client to another lock table: `table` is `name` or `schema.name`
/// (letters, digits, `_`, `$`); `quote_style` is 0 for MySQL backticks or 1 for ANSI
/// double quotes (servers running with `sql_mode=ANSI_QUOTES`).
///
/// Refused with `MYSQLLOCK_INVALID_ARGUMENT` while the client holds TTL leases, whose
/// rows live in the current table. `client` stays owned by the caller; any thread may
/// call this.
///
/// # Safety
/// `client` is NULL or a live client; `table` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn mysqllock_client_set_table(
    client: *mut mysqllock_client,
    table: *const c_char,
    quote_style: c_int,
) -> mysqllock_status {
    call(|| {
        // SAFETY: caller's contract for both pointers.
        let client = unsafe { self::client(client) }?;
        let table = Table::new(unsafe { text(table, "table name") }?, QuoteStyle::from_code(quote_style.into())?)?;
        client.locker.lock().set_table(table)
    })
}

/// Allows (`allow` true) or refuses (false, the default) the GET_LOCK-based calls on a
/// replicated cluster node (Galera, Group Replication), where they would return
/// `MYSQLLOCK_CLUSTER_NODE`. Allow it only when every lock client of the deployment talks
/// to this one node (GET_LOCK and KILL act on one node only); otherwise use the lease
/// mode. The same as `allow_cluster=1` in the URL of `mysqllock_client_open_url()`.
///
/// Takes effect when the client next opens its session: call it right after opening the
/// client (on a cluster node the refused session is not kept, so the next call opens one).
/// `client` stays owned by the caller; any thread may call this.
///
/// # Safety
/// `client` is NULL or a live client.
#[no_mangle]
pub unsafe extern "C" fn mysqllock_client_allow_cluster(
    client: *mut mysqllock_client,
    allow: bool,
) -> mysqllock_status {
    call(|| {
        // SAFETY: caller's contract.
        let client = unsafe { self::client(client) }?;
        client.locker.lock().connector_mut().allow_cluster = allow;
        Ok(())
    })
}

/// Releases every lock the client still holds, stops their keep-alive threads, closes
/// its connection and frees it. NULL is allowed and does nothing.
///
/// Takes ownership: `client` must not be used afterwards, nor freed twice. Call it from
/// any thread, but only once no other thread is using the client. Failures while
/// releasing are ignored (the server frees a closed session's locks anyway), and the
/// last error is left untouched. Does not hang: each keep-alive thread is waited for at
/// most about a second (longer only while a renewal it already sent is in flight,
/// bounded by its 5 s I/O timeout).
///
/// Leases of the lease mode (`mysqllock_lease_*`) belong to their owner strings, not to
/// the client: they stay until released or until their TTL passes.
///
/// In a forked child, freeing a client the parent opened releases, stops and closes
/// nothing: the child only forgets it, and the parent keeps its session and locks.
///
/// # Safety
/// `client` is NULL or a live client that no other thread is using.
#[no_mangle]
pub unsafe extern "C" fn mysqllock_client_free(client: *mut mysqllock_client) {
    if client.is_null() {
        return;
    }
    last_error::guard((), || {
        // SAFETY: a live handle from `mysqllock_client_open*`, owned by us from now on.
        let client = unsafe { Box::from_raw(client) };
        if !client.owner.is_current() {
            // Inherited from the parent: its mutex, session and keep-alive stay untouched.
            fork::abandon(client);
            return;
        }
        // Deleting the rows now spares the next acquirer from reclaiming them.
        client.locker.lock().release_all();
    });
}

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
        let (client, name) = unsafe { (self::client(client)?, text(name, "lock name")?) };
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
        let (client, name) = unsafe { (self::client(client)?, text(name, "lock name")?) };
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
        let (client, name) = unsafe { (self::client(client)?, text(name, "lock name")?) };
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
        let (client, name) = unsafe { (self::client(client)?, text(name, "lock name")?) };
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
        let (client, name) = unsafe { (self::client(client)?, text(name, "lock name")?) };
        let out = non_null(out, "out pointer")?;
        let remaining = client.locker.lock().remaining_ttl(name)?;
        // SAFETY: non-NULL; the caller guarantees it points to a writable double.
        unsafe { out.as_ptr().write(remaining) };
        Ok(())
    })
}

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
        let (client, name) = unsafe { (self::client(client)?, text(name, "lock name")?) };
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
        let (client, name) = unsafe { (self::client(client)?, text(name, "lock name")?) };
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
        let (client, name) = unsafe { (self::client(client)?, text(name, "lock name")?) };
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
        let (client, name) = unsafe { (self::client(client)?, text(name, "lock name")?) };
        let out = non_null(out, "out pointer")?;
        let held = client.locker.lock().holds_session_lock(name)?;
        // SAFETY: non-NULL; the caller guarantees it points to a writable bool.
        unsafe { out.as_ptr().write(held) };
        Ok(())
    })
}

/// Writes the MySQL `CONNECTION_ID()` of the client's session to `*out`: the id that
/// the table's `connection_id` column and `SHOW PROCESSLIST` show for its locks. A
/// client holding more than 500 leases takes the further ones on extra sessions of its
/// own (so each acquisition stays as fast as the first); `mysqllock_holder()` names the
/// session of each.
///
/// Reconnects first if the session was lost (a new session has a new id, and the old
/// session's locks are gone). `client` stays owned by the caller; any thread may call this.
///
/// # Safety
/// `client` is NULL or a live client; `out` is NULL or points to a writable `uint64_t`.
#[no_mangle]
pub unsafe extern "C" fn mysqllock_connection_id(client: *mut mysqllock_client, out: *mut u64) -> mysqllock_status {
    call(|| {
        // SAFETY: caller's contract.
        let client = unsafe { self::client(client) }?;
        let out = non_null(out, "out pointer")?;
        let id = client.locker.lock().connection_id()?;
        // SAFETY: non-NULL; the caller guarantees it points to a writable uint64_t.
        unsafe { out.as_ptr().write(id) };
        Ok(())
    })
}

/// The library's version ("0.1.0"), as a static NUL-terminated string owned by the
/// library; do not free it. Any thread may call this.
#[no_mangle]
pub extern "C" fn mysqllock_version() -> *const c_char {
    concat!(env!("CARGO_PKG_VERSION"), "\0").as_ptr().cast()
}
