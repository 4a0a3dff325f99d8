/*
 * mysqllock: MySQL-backed named locks, C API.
 *
 * GENERATED FILE, DO NOT EDIT: produced by cbindgen from the Rust sources in ffi/
 * (configuration: ffi/cbindgen.toml). Regenerate with: bash scripts/gen-header.sh
 *
 * Link with -lmysqllock; see docs/c.md.
 */

#ifndef MYSQLLOCK_H
#define MYSQLLOCK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/**
 * The outcome of a call. `MYSQLLOCK_OK` (0) is success; every other value has a
 * message in `mysqllock_last_error()` on the calling thread.
 *
 * The numbers are stable: they are never reused or renumbered, so they may be
 * stored, logged or hard-coded in other languages. New codes are only ever appended.
 */
typedef enum {
    /**
     * Success.
     */
    MYSQLLOCK_OK = 0,
    /**
     * Another session holds the lock and it did not become free in time.
     */
    MYSQLLOCK_TIMEOUT = 1,
    /**
     * The lock is not held by this client (never acquired, already released, taken
     * over after its TTL passed, or lost with the database session).
     */
    MYSQLLOCK_NOT_HELD = 2,
    /**
     * The lock is held, but with less TTL left than required.
     */
    MYSQLLOCK_TTL_TOO_SHORT = 3,
    /**
     * This client already holds the lock; acquiring it again would wait for itself.
     */
    MYSQLLOCK_ALREADY_HELD = 4,
    /**
     * Bad input, rejected before anything happened: NULL pointer, invalid UTF-8,
     * empty or over-long name, name the table cannot store, NaN/negative/infinite
     * seconds, malformed URL or table name.
     */
    MYSQLLOCK_INVALID_ARGUMENT = 5,
    /**
     * Connecting failed (unreachable server, wrong password, unknown database) or the
     * connection was lost; every lock of the lost session is gone.
     */
    MYSQLLOCK_CONNECTION = 6,
    /**
     * The lock table is missing (the message has the CREATE TABLE statement), the
     * server refused access to it, it is a crashed MyISAM table that `REPAIR TABLE`
     * could not fix (acquisitions repair a crashed table once by themselves), or it lacks the token column that
     * `mysqllock_token()` needs (the message says to run `mysqllock init --upgrade`).
     */
    MYSQLLOCK_TABLE = 7,
    /**
     * Any other error the database server reported.
     */
    MYSQLLOCK_DATABASE = 8,
    /**
     * A bug in mysqllock (a caught panic). The client's state is unknown: free it.
     */
    MYSQLLOCK_INTERNAL = 9,
    /**
     * A GET_LOCK-based call on a replicated cluster node (Galera `wsrep_on=ON`, a Group
     * Replication member), where GET_LOCK and KILL act on that node only and another
     * node would grant the same lock: use the lease mode (`mysqllock_lease_*`), or, only
     * if every lock client talks to this one node, `mysqllock_client_allow_cluster()`
     * (`allow_cluster=1` in the URL).
     */
    MYSQLLOCK_CLUSTER_NODE = 10,
    /**
     * The server cannot take the statement now: a Galera node outside the primary
     * component (MySQL error 1047), a Group Replication member that lost its group's
     * majority or is not ONLINE in it (3100, 3796, 3797), or a read-only server (1290:
     * a single-primary group's secondary, which takes no writes). Retry, or connect to
     * another node (for writes in a single-primary group: the primary).
     */
    MYSQLLOCK_NODE_NOT_READY = 11,
    /**
     * The server refused to wait for the lock because the wait would never end: a
     * session that holds it waits for a lock this client holds (MariaDB error 1213,
     * MySQL 3058). This client's other locks are still held; release them and retry,
     * or take locks in one fixed order everywhere.
     */
    MYSQLLOCK_DEADLOCK = 12,
} mysqllock_status;

/**
 * Flags for `mysqllock_options.flags`, combined with `|`. An enum rather than
 * `#define`s so that PHP's `FFI::cdef` sees them too.
 */
typedef enum {
    /**
     * Renew the lease from a background thread with its own connection, every third of
     * its TTL, while it is held, up to `max_hold` seconds after acquisition. If a
     * renewal fails, the lock counts as lost: the next `mysqllock_renew()`,
     * `mysqllock_assert_ttl()`, `mysqllock_remaining_ttl()` or `mysqllock_release()`
     * returns `MYSQLLOCK_NOT_HELD`. The thread stops at release and at
     * `mysqllock_client_free()`; a forked child never has it.
     */
    MYSQLLOCK_KEEP_ALIVE = 1,
} mysqllock_option_flag;

/**
 * A connection to the lock server: one MySQL session and the locks held on it, and
 * for the lease mode (`mysqllock_lease_*`) a second session, opened at the first lease
 * call.
 *
 * Opaque: create with `mysqllock_client_open_url()` or `mysqllock_client_open()`,
 * destroy with `mysqllock_client_free()`.
 *
 * Thread-safe: any thread may use a client. Calls on one client are serialized by
 * an internal mutex, so a call (for instance an `mysqllock_acquire()` that waits)
 * blocks other threads' calls on the same client until it returns; use one client
 * per thread for independent waits. Locks belong to the client's database session,
 * not to a thread: any thread may release a lock taken through the same client.
 *
 * Keep-alive (`MYSQLLOCK_KEEP_ALIVE`) renews from a background thread with its own
 * connection; it never takes the client's mutex, so a long call on the client does not
 * delay a renewal. It stops when the lock is released and when the client is freed
 * (waiting at most about a second for the thread).
 *
 * Fork: a client belongs to the process that opened it. In a forked child every call
 * on an inherited client returns `MYSQLLOCK_INVALID_ARGUMENT` (it would act on the
 * parent's session and locks), and `mysqllock_client_free()` of it releases and closes
 * nothing. The child has no keep-alive threads (threads are not forked) and never
 * stops, joins or renews the parent's; the parent keeps its session, locks and
 * keep-alive. A child that needs locks opens its own client.
 *
 * Replicated clusters (a Galera node, a Group Replication member): the GET_LOCK-based
 * calls (`mysqllock_acquire*`, `mysqllock_session_lock`) return
 * `MYSQLLOCK_CLUSTER_NODE` there, because GET_LOCK and KILL act on one node only; the
 * lease mode works. Opening a client on such a node succeeds.
 */
typedef struct mysqllock_client mysqllock_client;

/**
 * Extras for `mysqllock_acquire_ex()` and `mysqllock_try_acquire_ex()`. All fields zero
 * (`mysqllock_options opts = {0};`), like a NULL pointer, mean a plain lease, the
 * same as `mysqllock_acquire()`. Read during the call only.
 */
typedef struct {
    /**
     * `MYSQLLOCK_KEEP_ALIVE` or 0. Unknown bits are `MYSQLLOCK_INVALID_ARGUMENT`.
     */
    uint32_t flags;
    /**
     * With `MYSQLLOCK_KEEP_ALIVE`: seconds after acquisition when the renewals stop, so
     * a process stuck in an endless loop loses the lock then (rounded up to whole
     * seconds, database clock). 0 or less means the default, 3600. A positive value
     * without `MYSQLLOCK_KEEP_ALIVE`, NaN or infinity is `MYSQLLOCK_INVALID_ARGUMENT`.
     */
    double max_hold;
    /**
     * Seconds from acquisition the lock stays taken even when released sooner, so a
     * node whose cron fires a little later does not run the same job again ("at least";
     * rounded up to whole seconds, database clock). 0 = off. Negative, NaN or infinite
     * is `MYSQLLOCK_INVALID_ARGUMENT`.
     */
    double at_least;
} mysqllock_options;

/**
 * Who holds a lock, as `mysqllock_holder()` reads it from the lock's row. A plain
 * struct owned by the caller (stack or heap): its strings are fixed arrays, always
 * NUL-terminated and valid UTF-8 (cut at a character boundary if too long), so
 * nothing needs freeing. Times are Unix seconds on the database clock.
 */
typedef struct {
    /**
     * The `CONNECTION_ID()` of the holder's session.
     */
    uint64_t connection_id;
    /**
     * The fencing token of the acquisition; 0 when unknown (`has_token` false: the table
     * has no token column).
     */
    uint64_t token;
    bool has_token;
    /**
     * The holder's process id on its machine; 0 when not recorded (`has_pid` false: the
     * table is not upgraded, or the holder is not mysqllock, e.g. the original package).
     */
    uint64_t pid;
    bool has_pid;
    /**
     * When the lock was acquired (renewals keep it).
     */
    int64_t acquired_at;
    /**
     * When the lease ends unless renewed or released.
     */
    int64_t expires_at;
    /**
     * Seconds until then; negative once expired.
     */
    double remaining;
    /**
     * The holder's session still holds the lock's GET_LOCK. False for a dead holder
     * (the next acquirer reclaims the row at once) and for a row kept by "at least"
     * after its release.
     */
    bool alive;
    /**
     * The holder had taken the GET_LOCK when it last wrote the row; false while an
     * acquisition is in progress and for a row kept by "at least" after its release.
     */
    bool acquired;
    /**
     * The name as its holder spelled it (the table treats names that differ only in
     * case or trailing spaces as one lock).
     */
    char name[257];
    /**
     * The host name of the holder's machine; "" when not recorded (as `pid`).
     */
    char hostname[256];
    /**
     * The client address of the holder's session from the server's process list
     * ("10.0.0.12:50480", "localhost"); "" when not visible (the holder's session is gone,
     * or this user lacks the PROCESS privilege to see other users' sessions).
     */
    char client_address[256];
} mysqllock_holder_info;

/**
 * Opens a client from a URL and connects it:
 * `mysql://user:password@host:port/database?table=shared_locks&quote=ansi&socket=/path&charset=utf8mb4&connect_timeout=10`
 * (user and password may be percent-encoded; what is left out defaults to
 * `root@127.0.0.1:3306`, no password, no default database, table `shared_locks`).
 * Also `lease_table=distributed_locks` (the lease mode's table) and `allow_cluster=1`
 * (as `mysqllock_client_allow_cluster()`).
 *
 * Timeouts, in seconds (fractions allowed): `connect_timeout` (default 10) bounds the
 * whole connect (TCP, TLS, login and the session's setup); `read_timeout` (default 30)
 * is how long a call may go without an answer beyond the lock wait it asks for, and
 * `write_timeout` (default 30) how long sending may stay stuck. A server that stops
 * answering fails the call with `MYSQLLOCK_CONNECTION` ("the server at HOST:PORT
 * stopped answering for N s during ..."), and a lock it may have granted is given up
 * with the connection, never reported as held.
 *
 * TLS, with the `mysql` client's option names (dashes or underscores): `ssl-mode` =
 * `DISABLED`, `PREFERRED` (the default: TLS when the server offers it over TCP),
 * `REQUIRED`, `VERIFY_CA` (the certificate must chain to `ssl-ca`, or to the system's CA
 * store) or `VERIFY_IDENTITY` (and be for the host connected to); `ssl-ca=/path/ca.pem`
 * alone means `VERIFY_CA`; `ssl-cert` and `ssl-key` for an account created
 * `REQUIRE X509`. A refused certificate or a server that wants TLS fails with
 * `MYSQLLOCK_CONNECTION` and a message naming the CA, the host or the setting.
 * `mysqllock_client_open()` connects with the default, `PREFERRED`.
 *
 * On success, `*out` receives a new client that the caller owns and must release with
 * `mysqllock_client_free()`. On failure `*out` is not written. Any thread may call this.
 *
 * # Safety
 * `url` is NULL or a NUL-terminated string; `out` is NULL or points to a writable
 * `mysqllock_client *`.
 */
mysqllock_status mysqllock_client_open_url(const char *url,
                                           mysqllock_client **out);

/**
 * Opens a client from connection parameters and connects it, using the table
 * `shared_locks` in `database` (change it with `mysqllock_client_set_table()`).
 *
 * `host` and `user` are required; `password` and `database` may be NULL for none;
 * `port` 0 means 3306. On success, `*out` receives a new client that the caller owns
 * and must release with `mysqllock_client_free()`. On failure `*out` is not written.
 * The strings are only read during the call. Any thread may call this.
 *
 * # Safety
 * Each string is NULL or NUL-terminated; `out` is NULL or points to a writable
 * `mysqllock_client *`.
 */
mysqllock_status mysqllock_client_open(const char *host,
                                       uint16_t port,
                                       const char *user,
                                       const char *password,
                                       const char *database,
                                       mysqllock_client **out);

/**
 * Switches the client to another lock table: `table` is `name` or `schema.name`
 * (letters, digits, `_`, `$`); `quote_style` is 0 for MySQL backticks or 1 for ANSI
 * double quotes (servers running with `sql_mode=ANSI_QUOTES`).
 *
 * Refused with `MYSQLLOCK_INVALID_ARGUMENT` while the client holds TTL leases, whose
 * rows live in the current table. `client` stays owned by the caller; any thread may
 * call this.
 *
 * # Safety
 * `client` is NULL or a live client; `table` is NULL or a NUL-terminated string.
 */
mysqllock_status mysqllock_client_set_table(mysqllock_client *client,
                                            const char *table,
                                            int quote_style);

/**
 * Allows (`allow` true) or refuses (false, the default) the GET_LOCK-based calls on a
 * replicated cluster node (Galera, Group Replication), where they would return
 * `MYSQLLOCK_CLUSTER_NODE`. Allow it only when every lock client of the deployment talks
 * to this one node (GET_LOCK and KILL act on one node only); otherwise use the lease
 * mode. The same as `allow_cluster=1` in the URL of `mysqllock_client_open_url()`.
 *
 * Takes effect when the client next opens its session: call it right after opening the
 * client (on a cluster node the refused session is not kept, so the next call opens one).
 * `client` stays owned by the caller; any thread may call this.
 *
 * # Safety
 * `client` is NULL or a live client.
 */
mysqllock_status mysqllock_client_allow_cluster(mysqllock_client *client, bool allow);

/**
 * Releases every lock the client still holds, stops their keep-alive threads, closes
 * its connection and frees it. NULL is allowed and does nothing.
 *
 * Takes ownership: `client` must not be used afterwards, nor freed twice. Call it from
 * any thread, but only once no other thread is using the client. Failures while
 * releasing are ignored (the server frees a closed session's locks anyway), and the
 * last error is left untouched. Does not hang: each keep-alive thread is waited for at
 * most about a second (longer only while a renewal it already sent is in flight,
 * bounded by its 5 s I/O timeout).
 *
 * Leases of the lease mode (`mysqllock_lease_*`) belong to their owner strings, not to
 * the client: they stay until released or until their TTL passes.
 *
 * In a forked child, freeing a client the parent opened releases, stops and closes
 * nothing: the child only forgets it, and the parent keeps its session and locks.
 *
 * # Safety
 * `client` is NULL or a live client that no other thread is using.
 */
void mysqllock_client_free(mysqllock_client *client);

/**
 * Writes the MySQL `CONNECTION_ID()` of the client's session to `*out`: the id that
 * the table's `connection_id` column and `SHOW PROCESSLIST` show for its locks. A
 * client holding more than 500 leases takes the further ones on extra sessions of its
 * own (so each acquisition stays as fast as the first); `mysqllock_holder()` names the
 * session of each.
 *
 * Reconnects first if the session was lost (a new session has a new id, and the old
 * session's locks are gone). `client` stays owned by the caller; any thread may call this.
 *
 * # Safety
 * `client` is NULL or a live client; `out` is NULL or points to a writable `uint64_t`.
 */
mysqllock_status mysqllock_connection_id(mysqllock_client *client, uint64_t *out);

/**
 * Acquires the TTL lease `name`, waiting up to `timeout` seconds (0 = one try,
 * fractions allowed) while another session holds it. The lease lasts `ttl` seconds
 * (rounded up to whole seconds on the database clock) unless released earlier; after
 * that another session may take it over.
 *
 * Returns `MYSQLLOCK_TIMEOUT` if it stayed held, `MYSQLLOCK_ALREADY_HELD` at once if
 * this client holds it. Interoperates with the PHP package its-mieger/mysql-shared-locks
 * and the mysqllock PHP extension on the same table. `client` stays owned by the
 * caller; any thread may call this (it blocks other calls on the same client while it waits).
 *
 * # Safety
 * `client` is NULL or a live client; `name` is NULL or a NUL-terminated string.
 */
mysqllock_status mysqllock_acquire(mysqllock_client *client,
                                   const char *name,
                                   double timeout,
                                   double ttl);

/**
 * One try at the TTL lease `name` (see `mysqllock_acquire()`): on `MYSQLLOCK_OK`,
 * `*acquired_out` is true if this client now holds it and false if another session
 * does. Any other status leaves `*acquired_out` unwritten.
 *
 * `client` stays owned by the caller; any thread may call this.
 *
 * # Safety
 * `client` is NULL or a live client; `name` is NULL or a NUL-terminated string;
 * `acquired_out` is NULL or points to a writable `bool`.
 */
mysqllock_status mysqllock_try_acquire(mysqllock_client *client,
                                       const char *name,
                                       double ttl,
                                       bool *acquired_out);

/**
 * Releases the TTL lease `name`.
 *
 * Returns `MYSQLLOCK_NOT_HELD` if this client does not hold it (any more): never
 * acquired, already released, taken over after its TTL passed, or lost with the
 * session. `client` stays owned by the caller; any thread may call this.
 *
 * # Safety
 * `client` is NULL or a live client; `name` is NULL or a NUL-terminated string.
 */
mysqllock_status mysqllock_release(mysqllock_client *client, const char *name);

/**
 * Checks that the TTL lease `name` is still held with at least `min_remaining`
 * seconds of its TTL left: call it before work that must not outlive the lease.
 *
 * Returns `MYSQLLOCK_TTL_TOO_SHORT` if less is left, `MYSQLLOCK_NOT_HELD` if the lease
 * is gone. `client` stays owned by the caller; any thread may call this.
 *
 * # Safety
 * `client` is NULL or a live client; `name` is NULL or a NUL-terminated string.
 */
mysqllock_status mysqllock_assert_ttl(mysqllock_client *client,
                                      const char *name,
                                      double min_remaining);

/**
 * Writes to `*out` the seconds left until another session may take the TTL lease
 * `name` over (database clock; 0 or less once expired).
 *
 * Returns `MYSQLLOCK_NOT_HELD` if this client does not hold it. `client` stays owned
 * by the caller; any thread may call this.
 *
 * # Safety
 * `client` is NULL or a live client; `name` is NULL or a NUL-terminated string;
 * `out` is NULL or points to a writable `double`.
 */
mysqllock_status mysqllock_remaining_ttl(mysqllock_client *client, const char *name, double *out);

/**
 * Takes the plain session lock `name` (MySQL `GET_LOCK`, no table, no TTL), waiting
 * up to `timeout` seconds (0 = one try). It lives until
 * `mysqllock_session_unlock()` or until the client's session ends, and is free again
 * at once then: a job that must not run twice within a period, even when it finishes
 * faster than the clocks of the nodes that start it differ, needs a lease with "at
 * least" (`mysqllock_acquire_ex()`) instead.
 *
 * Spellings that differ only in case or accents are one lock (the GET_LOCK name is
 * the name lowercased, NFKD-decomposed and without combining marks; a lowercase ASCII
 * name is used as it is, so it is the lock a hand-written `GET_LOCK('name', ...)`
 * takes). Names over 64 characters are refused.
 *
 * A session that turned out to be dead (killed, server restarted) is replaced once,
 * and the lock taken on the new one.
 *
 * Returns `MYSQLLOCK_TIMEOUT` if another session holds it, `MYSQLLOCK_ALREADY_HELD` if
 * this client does, `MYSQLLOCK_DEADLOCK` if the server refuses the wait as a deadlock.
 * `client` stays owned by the caller; any thread may call this.
 *
 * # Safety
 * `client` is NULL or a live client; `name` is NULL or a NUL-terminated string.
 */
mysqllock_status mysqllock_session_lock(mysqllock_client *client, const char *name, double timeout);

/**
 * Releases the plain session lock `name`.
 *
 * Returns `MYSQLLOCK_NOT_HELD` if this client does not hold it. `client` stays owned
 * by the caller; any thread may call this.
 *
 * # Safety
 * `client` is NULL or a live client; `name` is NULL or a NUL-terminated string.
 */
mysqllock_status mysqllock_session_unlock(mysqllock_client *client, const char *name);

/**
 * Writes to `*out` the `CONNECTION_ID()` of the session that holds the session lock
 * `name` on the server now (this client or any other), or 0 when it is free. Names
 * fold as in `mysqllock_session_lock()`.
 *
 * `client` stays owned by the caller; any thread may call this.
 *
 * # Safety
 * `client` is NULL or a live client; `name` is NULL or a NUL-terminated string;
 * `out` is NULL or points to a writable `uint64_t`.
 */
mysqllock_status mysqllock_session_holder(mysqllock_client *client,
                                          const char *name,
                                          uint64_t *out);

/**
 * Writes to `*out` whether this client's session holds the session lock `name`, as
 * the server sees it now: false after the lock was lost with the session or released
 * behind the client's back (one statement).
 *
 * `client` stays owned by the caller; any thread may call this.
 *
 * # Safety
 * `client` is NULL or a live client; `name` is NULL or a NUL-terminated string;
 * `out` is NULL or points to a writable `bool`.
 */
mysqllock_status mysqllock_session_held(mysqllock_client *client, const char *name, bool *out);

/**
 * The library's version ("0.1.0"), as a static NUL-terminated string owned by the
 * library; do not free it. Any thread may call this.
 */
const char *mysqllock_version(void);

/**
 * Copies the last error message of the calling thread into `buf`, in the manner of
 * `snprintf`: at most `len - 1` bytes followed by a NUL (nothing when `len` is 0 or
 * `buf` is NULL). A truncated message is cut at a UTF-8 character boundary, so `buf`
 * always holds valid UTF-8.
 *
 * Writes the number of bytes copied, without the NUL, to `*out_n` unless `out_n` is
 * NULL. Returns the full length of the message without the NUL, so a return value
 * `>= len` means the message was truncated; call with `(NULL, 0, NULL)` to learn the
 * size to allocate (return value + 1).
 *
 * The message is the one of the last call on this thread that returned a status:
 * empty ("") after a success. It names the lock and the cause and includes the
 * server's own message; it never contains a password. `buf` is owned by the caller.
 * Any thread may call this; each thread sees only its own last error.
 *
 * # Safety
 * `buf` is NULL or points to `len` writable bytes; `out_n` is NULL or points to a
 * writable `size_t`.
 */
size_t mysqllock_last_error(char *buf, size_t len, size_t *out_n);

/**
 * `mysqllock_acquire()` with options (keep-alive, maximum hold, "at least"; see
 * `mysqllock_options`, NULL = none) that also hands out the fencing token.
 *
 * On `MYSQLLOCK_OK`, `*token_out` (if `token_out` is not NULL) receives the lease's
 * fencing token: greater than every token issued before on the table, so the protected
 * resource can refuse the writes of an older holder
 * (`UPDATE ... SET fence = :token WHERE ... AND fence < :token`). It is 0 when the
 * table has no token column (upgrade it with `mysqllock init --upgrade` or
 * `mysqllock_upgrade_table()`). On any other status nothing is written.
 *
 * Bad options are `MYSQLLOCK_INVALID_ARGUMENT`, before anything is locked. If the
 * keep-alive thread cannot be started, the lock is released again and the call
 * returns `MYSQLLOCK_INVALID_ARGUMENT` too.
 * `client` stays owned by the caller; any thread may call this (it blocks other calls
 * on the same client while it waits). The keep-alive thread belongs to the client: it
 * stops at `mysqllock_release()` and `mysqllock_client_free()`.
 *
 * # Safety
 * `client` is NULL or a live client; `name` is NULL or a NUL-terminated string;
 * `options` is NULL or points to a readable `mysqllock_options`; `token_out` is NULL
 * or points to a writable `uint64_t`.
 */
mysqllock_status mysqllock_acquire_ex(mysqllock_client *client,
                                      const char *name,
                                      double timeout,
                                      double ttl,
                                      const mysqllock_options *options,
                                      uint64_t *token_out);

/**
 * One try at the TTL lease `name` with options (see `mysqllock_acquire_ex()`): on
 * `MYSQLLOCK_OK`, `*acquired_out` is true if this client now holds it and false if
 * another session does, and `*token_out` (if not NULL) receives its fencing token, or
 * 0 when it was not acquired or the table has no token column. Any other status
 * leaves both unwritten.
 *
 * `client` stays owned by the caller; any thread may call this.
 *
 * # Safety
 * `client` is NULL or a live client; `name` is NULL or a NUL-terminated string;
 * `options` is NULL or points to a readable `mysqllock_options`; `acquired_out` is
 * NULL or points to a writable `bool`; `token_out` is NULL or points to a writable
 * `uint64_t`.
 */
mysqllock_status mysqllock_try_acquire_ex(mysqllock_client *client,
                                          const char *name,
                                          double ttl,
                                          const mysqllock_options *options,
                                          bool *acquired_out,
                                          uint64_t *token_out);

/**
 * Writes to `*out` the fencing token of the TTL lease `name` that this client holds
 * (the one `mysqllock_acquire_ex()` returned). Answered without a round trip, so it
 * does not tell whether the lease is still held: the protected resource's fence check
 * does (`mysqllock_assert_ttl()` asks the server).
 *
 * Returns `MYSQLLOCK_NOT_HELD` if this client does not hold it, and `MYSQLLOCK_TABLE`
 * if the lease has no token because the table has no token column: the message says
 * to run `mysqllock init --upgrade` (or `mysqllock_upgrade_table()`). A client that
 * used the table before it was upgraded keeps taking leases without tokens; open a
 * new client after the upgrade. `client` stays owned by the caller; any thread may
 * call this.
 *
 * # Safety
 * `client` is NULL or a live client; `name` is NULL or a NUL-terminated string;
 * `out` is NULL or points to a writable `uint64_t`.
 */
mysqllock_status mysqllock_token(mysqllock_client *client, const char *name, uint64_t *out);

/**
 * Extends the TTL lease `name` to `ttl` seconds from now (database clock; never
 * shortens it), while this client's session still owns its row and holds its
 * GET_LOCK. The acquisition time stays, so "at least" and keep-alive's maximum hold
 * still count from the acquisition.
 *
 * Returns `MYSQLLOCK_NOT_HELD` when the lease is gone, with the loss in the message
 * (taken over after its TTL, its session killed or lost, its keep-alive failed); a lost
 * lease is not acquired again. `client` stays owned by the caller; any thread may call
 * this.
 *
 * # Safety
 * `client` is NULL or a live client; `name` is NULL or a NUL-terminated string.
 */
mysqllock_status mysqllock_renew(mysqllock_client *client, const char *name, double ttl);

/**
 * Looks up who holds the lock `name` (under any spelling the table folds together),
 * whichever session or process that is: on `MYSQLLOCK_OK`, `*found` is true and `*out`
 * is filled in when the lock has a row, and `*found` is false (with `*out` left
 * unwritten) when nobody holds it. Any other status writes neither.
 *
 * One query; the answer may be out of date by the time it is read, so use it to show
 * or log, not to decide who may write (fencing tokens are for that). `client` stays
 * owned by the caller; any thread may call this.
 *
 * # Safety
 * `client` is NULL or a live client; `name` is NULL or a NUL-terminated string; `out`
 * is NULL or points to a writable `mysqllock_holder_info`; `found` is NULL or points
 * to a writable `bool`.
 */
mysqllock_status mysqllock_holder(mysqllock_client *client,
                                  const char *name,
                                  mysqllock_holder_info *out,
                                  bool *found);

/**
 * Acquires the lease on `resource` for `owner` for `ttl_seconds`: won when the row is
 * absent, expired, or already `owner`'s (then the lease restarts with the new TTL); lost
 * when another owner holds an unexpired row. `wait_seconds` 0 is one try; more keeps
 * trying (capped exponential backoff with jitter) for up to that long.
 *
 * On `MYSQLLOCK_OK`, `*acquired_out` tells whether `owner` now holds the lease, and, if
 * not NULL, `*token_out` receives its fencing token (strictly increasing per resource
 * across takeovers, the same when the owner acquires again; 0 when not acquired or when
 * the table has no token column: `mysqllock init --lease --upgrade` or
 * `mysqllock_lease_upgrade_table()` adds it) and `*remaining_out` the seconds until the
 * local deadline (0 when not acquired): counted on the monotonic clock from before the
 * statement was sent, minus a margin for clock skew between nodes (0.5 s, or half a
 * shorter TTL). Past that deadline the holder must not trust the lease any more; renew
 * well before it. Any other status writes nothing.
 *
 * Expiry is judged by the database clock (UTC); a table without the upgrade stores whole
 * seconds (the TTL is rounded up). Owners compare exactly (case-sensitive). Bad input
 * (empty, too long or unstorable resource or owner, a TTL ≤ 0 or ending the lease after
 * 9999-12-31 23:59:59 UTC, where the `DATETIME` range ends, negative or NaN wait) is
 * `MYSQLLOCK_INVALID_ARGUMENT`, before anything is written. A missing table is
 * `MYSQLLOCK_TABLE` with its `CREATE TABLE` in the message, as is a MyISAM table (not
 * transactional, not replicated). A Galera node outside the primary component, a Group
 * Replication member outside its group's majority, and a read-only secondary are
 * `MYSQLLOCK_NODE_NOT_READY`.
 *
 * `client` stays owned by the caller; any thread may call this (it blocks other lease
 * calls on the same client while it waits, not the GET_LOCK-based ones). Freeing the
 * client does not release its leases: they end at their TTL or at
 * `mysqllock_lease_release()`.
 *
 * # Safety
 * `client` is NULL or a live client; `resource` and `owner` are NULL or NUL-terminated
 * strings; `acquired_out` is NULL or points to a writable `bool`; `token_out` is NULL or
 * points to a writable `uint64_t`; `remaining_out` is NULL or points to a writable
 * `double`.
 */
mysqllock_status mysqllock_lease_acquire(mysqllock_client *client,
                                         const char *resource,
                                         const char *owner,
                                         double ttl_seconds,
                                         double wait_seconds,
                                         bool *acquired_out,
                                         uint64_t *token_out,
                                         double *remaining_out);

/**
 * Ends `owner`'s lease on `resource`. On `MYSQLLOCK_OK`, `*released_out` is true when
 * it ended now, false when the lease was not `owner`'s, had expired, or did not exist.
 * Any other status writes nothing.
 *
 * On a table with the token column the row stays, ended, so the next token counts on.
 * `client` stays owned by the caller; any thread may call this.
 *
 * # Safety
 * `client` is NULL or a live client; `resource` and `owner` are NULL or NUL-terminated
 * strings; `released_out` is NULL or points to a writable `bool`.
 */
mysqllock_status mysqllock_lease_release(mysqllock_client *client,
                                         const char *resource,
                                         const char *owner,
                                         bool *released_out);

/**
 * Restarts `owner`'s unexpired lease on `resource` with `ttl_seconds` from now. On
 * `MYSQLLOCK_OK`, `*renewed_out` is true when it was renewed, false when the lease was
 * not `owner`'s, had expired, or did not exist (it is lost: stop the work it guards);
 * `*token_out` and `*remaining_out` (if not NULL) are as for `mysqllock_lease_acquire()`,
 * the remaining time counted from this renewal. Any other status writes nothing; a
 * connection or node error does not mean the lease is lost until its local deadline
 * passes.
 *
 * `client` stays owned by the caller; any thread may call this.
 *
 * # Safety
 * `client` is NULL or a live client; `resource` and `owner` are NULL or NUL-terminated
 * strings; `renewed_out` is NULL or points to a writable `bool`; `token_out` is NULL or
 * points to a writable `uint64_t`; `remaining_out` is NULL or points to a writable `double`.
 */
mysqllock_status mysqllock_lease_renew(mysqllock_client *client,
                                       const char *resource,
                                       const char *owner,
                                       double ttl_seconds,
                                       bool *renewed_out,
                                       uint64_t *token_out,
                                       double *remaining_out);

/**
 * Whether anyone holds an unexpired lease on `resource`: on `MYSQLLOCK_OK`, `*held_out`
 * receives the answer, read after every commit the cluster made before it on a Galera
 * node. Any other status writes nothing. Use it to show or log: the answer may be out of
 * date by the time it is read.
 *
 * `client` stays owned by the caller; any thread may call this.
 *
 * # Safety
 * `client` is NULL or a live client; `resource` is NULL or a NUL-terminated string;
 * `held_out` is NULL or points to a writable `bool`.
 */
mysqllock_status mysqllock_lease_is_held(mysqllock_client *client,
                                         const char *resource,
                                         bool *held_out);

/**
 * Switches the client's lease calls to another lease table (default
 * `distributed_locks`, or the URL's `lease_table=`): `table` is `name` or `schema.name`
 * (letters, digits, `_`, `$`); `quote_style` is 0 for MySQL backticks or 1 for ANSI
 * double quotes. The leases taken on the old table stay there (they belong to owners,
 * not to the client). `client` stays owned by the caller; any thread may call this.
 *
 * # Safety
 * `client` is NULL or a live client; `table` is NULL or a NUL-terminated string.
 */
mysqllock_status mysqllock_lease_set_table(mysqllock_client *client,
                                           const char *table,
                                           int quote_style);

/**
 * Creates the client's lease table as `Nene\Kit\DistributedLock` documents it
 * (`resource`, `owner`, `expires_at`, `acquired_at`; InnoDB) unless it exists, as
 * `mysqllock init --lease` does. On `MYSQLLOCK_OK`, `*created` (if not NULL) tells
 * whether it was created now. Needs the CREATE privilege. `client` stays owned by the
 * caller; any thread may call this.
 *
 * # Safety
 * `client` is NULL or a live client; `created` is NULL or points to a writable `bool`.
 */
mysqllock_status mysqllock_lease_init_table(mysqllock_client *client, bool *created);

/**
 * Creates the client's lease table if it is missing and upgrades it, as
 * `mysqllock init --lease --upgrade` does: a fencing `token` column and microsecond
 * times. On `MYSQLLOCK_OK`, `*changed` (if not NULL) tells whether anything was created
 * or upgraded. Everything works without the upgrade; with it, acquisitions hand out
 * tokens and a release keeps the row (ended). Safe to run on several nodes at once.
 * Needs the ALTER (and CREATE) privilege. `client` stays owned by the caller; any thread
 * may call this.
 *
 * # Safety
 * `client` is NULL or a live client; `changed` is NULL or points to a writable `bool`.
 */
mysqllock_status mysqllock_lease_upgrade_table(mysqllock_client *client, bool *changed);

/**
 * The name of a status as a static, NUL-terminated string ("MYSQLLOCK_TIMEOUT"), or
 * "MYSQLLOCK_UNKNOWN_STATUS" for a number that is not a `mysqllock_status`.
 *
 * Takes an `int` so that any number is safe to pass. The string is owned by the
 * library and valid for the life of the process; do not free it. Any thread may call
 * this at any time; it does not touch the last error.
 */
const char *mysqllock_status_name(int status);

/**
 * Creates the client's lock table with the original PHP package's exact
 * `CREATE TABLE` (MyISAM, latin1) unless it exists, as `mysqllock init` does. On
 * `MYSQLLOCK_OK`, `*created` (if not NULL) tells whether it was created now.
 *
 * Needs the CREATE privilege (`MYSQLLOCK_TABLE` without it). Safe to run on several
 * nodes at once. `client` stays owned by the caller; any thread may call this.
 *
 * # Safety
 * `client` is NULL or a live client; `created` is NULL or points to a writable `bool`.
 */
mysqllock_status mysqllock_init_table(mysqllock_client *client, bool *created);

/**
 * Creates the client's lock table if it is missing and adds the columns for fencing
 * tokens and introspection (`token`, `holder_host`, `holder_pid`), as
 * `mysqllock init --upgrade` does. On `MYSQLLOCK_OK`, `*changed` (if not NULL) tells
 * whether anything was created or added.
 *
 * Processes running the original PHP package keep working on the upgraded table. This
 * client uses the new columns from its next lock on; other clients that used the table
 * before the upgrade keep taking leases without tokens until they are opened again.
 * Safe to run on several nodes at once. Needs the ALTER (and CREATE) privilege. A table
 * with only some of the columns is `MYSQLLOCK_INVALID_ARGUMENT` (fix it by hand).
 * `client` stays owned by the caller; any thread may call this.
 *
 * # Safety
 * `client` is NULL or a live client; `changed` is NULL or points to a writable `bool`.
 */
mysqllock_status mysqllock_upgrade_table(mysqllock_client *client, bool *changed);

#endif  /* MYSQLLOCK_H */
