//! Clients: open one (from a URL or from parameters), point it at a table, allow a
//! cluster node, read its session's id, free it. Every other export reaches the client
//! through [`get`], which refuses a client that a forked child inherited (the rule is
//! core's `fork`).

use std::ffi::{c_char, c_int};

use mysqllock_core::fork::{self, Owner};
use mysqllock_core::{Config, DistributedLock, NativeLocker, QuoteStyle, Table};
use parking_lot::Mutex;

use crate::boundary::{call, non_null, optional_text, text, Result};
use crate::last_error;
use crate::status::mysqllock_status;

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
    pub(crate) locker: Mutex<NativeLocker>,
    /// The lease mode's lock, with a mutex of its own so lease calls never wait for a
    /// GET_LOCK wait on `locker`. Connects at its first call.
    pub(crate) lease: Mutex<DistributedLock<Config>>,
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
pub(crate) unsafe fn get<'a>(client: *mut mysqllock_client) -> Result<&'a mysqllock_client> {
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
/// Timeouts, in seconds (fractions allowed): `connect_timeout` (default 10) bounds the
/// whole connect (TCP, TLS, login and the session's setup); `read_timeout` (default 30)
/// is how long a call may go without an answer beyond the lock wait it asks for, and
/// `write_timeout` (default 30) how long sending may stay stuck. A server that stops
/// answering fails the call with `MYSQLLOCK_CONNECTION` ("the server at HOST:PORT
/// stopped answering for N s during ..."), and a lock it may have granted is given up
/// with the connection, never reported as held.
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
        let client = unsafe { get(client) }?;
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
        let client = unsafe { get(client) }?;
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
        let client = unsafe { get(client) }?;
        let out = non_null(out, "out pointer")?;
        let id = client.locker.lock().connection_id()?;
        // SAFETY: non-NULL; the caller guarantees it points to a writable uint64_t.
        unsafe { out.as_ptr().write(id) };
        Ok(())
    })
}
