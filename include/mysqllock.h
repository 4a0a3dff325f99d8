/*
 * mysqllock: MySQL-backed named locks, C API.
 *
 * GENERATED FILE, DO NOT EDIT: produced by cbindgen from the Rust sources in ffi/
 * (configuration: ffi/cbindgen.toml). Regenerate with: bash scripts/gen-header.sh
 *
 * Link with -lmysqllock; see docs/c-api.md.
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
     * The lock table is missing (the message has the CREATE TABLE statement) or the
     * server refused access to it.
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
} mysqllock_status;

/**
 * A connection to the lock server: one MySQL session and the locks held on it.
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
 * Not fork-safe: after `fork()`, the child must neither use nor free a client created
 * before the fork (that would act on, or close, the parent's session and its locks);
 * it opens its own client instead.
 */
typedef struct mysqllock_client mysqllock_client;

/**
 * Opens a client from a URL and connects it:
 * `mysql://user:password@host:port/database?table=shared_locks&quote=ansi&socket=/path&charset=utf8mb4&connect_timeout=10`
 * (user and password may be percent-encoded; what is left out defaults to
 * `root@127.0.0.1:3306`, no password, no default database, table `shared_locks`).
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
 * Releases every lock the client still holds, closes its connection and frees it.
 * NULL is allowed and does nothing.
 *
 * Takes ownership: `client` must not be used afterwards, nor freed twice. Call it from
 * any thread, but only once no other thread is using the client. Failures while
 * releasing are ignored (the server frees a closed session's locks anyway), and the
 * last error is left untouched.
 *
 * # Safety
 * `client` is NULL or a live client that no other thread is using.
 */
void mysqllock_client_free(mysqllock_client *client);

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
 * `mysqllock_session_unlock()` or until the client's session ends.
 *
 * Returns `MYSQLLOCK_TIMEOUT` if another session holds it, `MYSQLLOCK_ALREADY_HELD` if
 * this client does. `client` stays owned by the caller; any thread may call this.
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
 * Writes the MySQL `CONNECTION_ID()` of the client's session to `*out`: the id that
 * the table's `connection_id` column and `SHOW PROCESSLIST` show for its locks.
 *
 * Reconnects first if the session was lost (a new session has a new id, and the old
 * session's locks are gone). `client` stays owned by the caller; any thread may call this.
 *
 * # Safety
 * `client` is NULL or a live client; `out` is NULL or points to a writable `uint64_t`.
 */
mysqllock_status mysqllock_connection_id(mysqllock_client *client, uint64_t *out);

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
 * The name of a status as a static, NUL-terminated string ("MYSQLLOCK_TIMEOUT"), or
 * "MYSQLLOCK_UNKNOWN_STATUS" for a number that is not a `mysqllock_status`.
 *
 * Takes an `int` so that any number is safe to pass. The string is owned by the
 * library and valid for the life of the process; do not free it. Any thread may call
 * this at any time; it does not touch the last error.
 */
const char *mysqllock_status_name(int status);

#endif  /* MYSQLLOCK_H */
