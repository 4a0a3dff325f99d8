/*
 * The C API from C, against a real server: every function, its results, its error
 * paths with their messages, NULL arguments, the last-error convention and threads.
 *
 * Usage: MYSQLLOCK_TEST_DSN=mysql://user:pass@host:port/db test_api
 * Prints "ok - ..." / "not ok - ..." lines; exits 1 if any check failed.
 */
#define _POSIX_C_SOURCE 200809L

#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <unistd.h>

#include "tap.h"

/* The numbers are part of the ABI: a renumbering must not compile. */
_Static_assert(MYSQLLOCK_OK == 0, "stable status numbers");
_Static_assert(MYSQLLOCK_TIMEOUT == 1, "stable status numbers");
_Static_assert(MYSQLLOCK_NOT_HELD == 2, "stable status numbers");
_Static_assert(MYSQLLOCK_TTL_TOO_SHORT == 3, "stable status numbers");
_Static_assert(MYSQLLOCK_ALREADY_HELD == 4, "stable status numbers");
_Static_assert(MYSQLLOCK_INVALID_ARGUMENT == 5, "stable status numbers");
_Static_assert(MYSQLLOCK_CONNECTION == 6, "stable status numbers");
_Static_assert(MYSQLLOCK_TABLE == 7, "stable status numbers");
_Static_assert(MYSQLLOCK_DATABASE == 8, "stable status numbers");
_Static_assert(MYSQLLOCK_INTERNAL == 9, "stable status numbers");

static struct server srv;

static mysqllock_client *open_client(void)
{
    return open_url_or_exit(srv.dsn);
}

static void test_names_and_version(void)
{
    check(strcmp(mysqllock_status_name(MYSQLLOCK_TIMEOUT), "MYSQLLOCK_TIMEOUT") == 0,
          "status_name names a status");
    check(strcmp(mysqllock_status_name(42), "MYSQLLOCK_UNKNOWN_STATUS") == 0,
          "status_name of an unknown number is a string, not NULL");
    check(strlen(mysqllock_version()) > 0, "version is a non-empty string");
}

static void test_open(void)
{
    mysqllock_client *a = NULL, *b = NULL;
    expect(mysqllock_client_open_url(srv.dsn, &a), MYSQLLOCK_OK, NULL, "open_url connects");
    check(a != NULL, "open_url writes the client");
    expect(mysqllock_client_open(srv.host, (uint16_t)srv.port, srv.user, srv.password,
                                 srv.database, &b),
           MYSQLLOCK_OK, NULL, "open with parameters connects");
    uint64_t ida = 0, idb = 0;
    expect(mysqllock_connection_id(a, &ida), MYSQLLOCK_OK, NULL, "connection_id");
    mysqllock_connection_id(b, &idb);
    check(ida > 0 && idb > 0 && ida != idb, "each client has its own session (%llu, %llu)",
          (unsigned long long)ida, (unsigned long long)idb);
    check(strcmp(last_error(), "") == 0, "a success leaves an empty last error");
    mysqllock_client_free(a);
    mysqllock_client_free(b);
}

static void test_lease_lifecycle(void)
{
    mysqllock_client *a = open_client(), *b = open_client();
    const char *name = unique_name("lease");
    double remaining = -1;
    bool acquired = true;

    expect(mysqllock_acquire(a, name, 0, 30), MYSQLLOCK_OK, NULL, "acquire a free lease");
    expect(mysqllock_remaining_ttl(a, name, &remaining), MYSQLLOCK_OK, NULL, "remaining_ttl");
    /* The lease ends when `created + ttl < UNIX_TIMESTAMP()`: up to one second after the TTL. */
    check(remaining > 25 && remaining <= 31, "remaining TTL is about the TTL (%.3f)", remaining);
    expect(mysqllock_assert_ttl(a, name, 5), MYSQLLOCK_OK, NULL, "assert_ttl with enough TTL");
    expect(mysqllock_assert_ttl(a, name, 60), MYSQLLOCK_TTL_TOO_SHORT, "60 required",
           "assert_ttl with too little TTL is TTL_TOO_SHORT");
    expect(mysqllock_acquire(a, name, 0, 30), MYSQLLOCK_ALREADY_HELD, "already held",
           "second acquire by the holder is ALREADY_HELD");
    check(strstr(last_error(), name) != NULL, "the message names the lock");

    expect(mysqllock_try_acquire(b, name, 30, &acquired), MYSQLLOCK_OK, NULL,
           "try_acquire of a held lease succeeds as a call");
    check(!acquired, "try_acquire reports a held lease as not acquired");

    double start = now();
    mysqllock_status st = mysqllock_acquire(b, name, 0.3, 30);
    double waited = now() - start;
    expect(st, MYSQLLOCK_TIMEOUT, "held by another session", "acquire of a held lease times out");
    check(waited >= 0.28 && waited < 10, "the 0.3 s timeout is honoured (waited %.3f s)", waited);

    expect(mysqllock_release(a, name), MYSQLLOCK_OK, NULL, "release");
    expect(mysqllock_release(a, name), MYSQLLOCK_NOT_HELD, "is not held",
           "second release is NOT_HELD");
    expect(mysqllock_remaining_ttl(a, name, &remaining), MYSQLLOCK_NOT_HELD, NULL,
           "remaining_ttl of a released lease is NOT_HELD");
    expect(mysqllock_assert_ttl(a, name, 1), MYSQLLOCK_NOT_HELD, NULL,
           "assert_ttl of a released lease is NOT_HELD");

    acquired = false;
    expect(mysqllock_try_acquire(b, name, 30, &acquired), MYSQLLOCK_OK, NULL,
           "try_acquire after the release");
    check(acquired, "try_acquire gets the released lease");
    expect(mysqllock_release(b, name), MYSQLLOCK_OK, NULL, "the new holder releases it");

    expect(mysqllock_release(a, unique_name("never")), MYSQLLOCK_NOT_HELD, "does not hold it",
           "release of a lock never acquired is NOT_HELD");
    mysqllock_client_free(a);
    mysqllock_client_free(b);
}

static void test_session_locks(void)
{
    mysqllock_client *a = open_client(), *b = open_client();
    const char *name = unique_name("session");

    expect(mysqllock_session_lock(a, name, 0), MYSQLLOCK_OK, NULL, "session_lock");
    double start = now();
    expect(mysqllock_session_lock(b, name, 0.3), MYSQLLOCK_TIMEOUT, name,
           "session_lock held elsewhere times out");
    double waited = now() - start;
    check(waited >= 0.28 && waited < 10, "session_lock honours its timeout (%.3f s)", waited);
    expect(mysqllock_session_lock(a, name, 0), MYSQLLOCK_ALREADY_HELD, NULL,
           "session_lock twice is ALREADY_HELD");
    expect(mysqllock_session_unlock(a, name), MYSQLLOCK_OK, NULL, "session_unlock");
    expect(mysqllock_session_unlock(a, name), MYSQLLOCK_NOT_HELD, NULL,
           "session_unlock twice is NOT_HELD");
    expect(mysqllock_session_lock(b, name, 0), MYSQLLOCK_OK, NULL,
           "session_lock after the unlock");
    mysqllock_session_unlock(b, name);
    mysqllock_client_free(a);
    mysqllock_client_free(b);
}

static void test_free_releases(void)
{
    mysqllock_client *a = open_client(), *b = open_client();
    const char *lease = unique_name("free-lease"), *plain = unique_name("free-plain");
    bool acquired = false;
    mysqllock_acquire(a, lease, 0, 600);
    mysqllock_session_lock(a, plain, 0);
    mysqllock_client_free(a);
    expect(mysqllock_try_acquire(b, lease, 10, &acquired), MYSQLLOCK_OK, NULL,
           "try_acquire after the holder was freed");
    check(acquired, "free releases the client's leases");
    expect(mysqllock_session_lock(b, plain, 0), MYSQLLOCK_OK, NULL,
           "free releases the client's session locks");
    mysqllock_client_free(b);
}

/* Ends a session from outside, as a DBA or a lease takeover would. */
static int kill_session(uint64_t id)
{
    char cmd[512];
    setenv("MYSQL_PWD", srv.password, 1);
    snprintf(cmd, sizeof cmd, "mariadb --no-defaults -h %s -P %u -u %s -e 'KILL %llu' %s",
             srv.host, srv.port, srv.user, (unsigned long long)id, srv.database);
    return system(cmd) == 0;
}

static void test_connection_lost(void)
{
    mysqllock_client *a = open_client(), *b = open_client();
    const char *name = unique_name("killed");
    uint64_t id = 0, new_id = 0;
    bool acquired = false;

    mysqllock_acquire(a, name, 0, 600);
    mysqllock_connection_id(a, &id);
    check(kill_session(id), "KILL the holder's session");
    expect(mysqllock_assert_ttl(a, name, 1), MYSQLLOCK_NOT_HELD, "session holding it was lost",
           "a lease of a killed session is NOT_HELD, with the reason");
    expect(mysqllock_try_acquire(b, name, 10, &acquired), MYSQLLOCK_OK, NULL,
           "try_acquire of the killed holder's lease");
    check(acquired, "the killed holder's lease is free at once");
    mysqllock_release(b, name);

    expect(mysqllock_connection_id(a, &new_id), MYSQLLOCK_OK, NULL,
           "the client reconnects on its next call");
    check(new_id != id, "with a new session (%llu, was %llu)", (unsigned long long)new_id,
          (unsigned long long)id);
    check(kill_session(new_id), "KILL the new session");
    expect(mysqllock_acquire(a, name, 0, 10), MYSQLLOCK_OK, NULL,
           "an acquire on a killed session runs again on a new session");
    mysqllock_release(a, name);
    mysqllock_client_free(a);
    mysqllock_client_free(b);
}

static void test_connection_errors(void)
{
    char url[512];
    mysqllock_client *c = (mysqllock_client *)&srv; /* a sentinel: must stay untouched */

    expect(mysqllock_client_open_url("postgres://x", &c), MYSQLLOCK_INVALID_ARGUMENT,
           "connection URL", "a URL of another scheme is INVALID_ARGUMENT");
    expect(mysqllock_client_open_url("mysql://h/db?frobnicate=1", &c),
           MYSQLLOCK_INVALID_ARGUMENT, "frobnicate", "an unknown URL parameter is refused");
    /* The core's words, as the CLI and php.ini's settings give them. */
    expect(mysqllock_client_open_url("mysql://h/db?read_timeout=0", &c), MYSQLLOCK_INVALID_ARGUMENT,
           "invalid read_timeout: must be more than 0 seconds (every read and write has a bound)",
           "a read_timeout of 0 is refused, not taken for the default");
    expect(mysqllock_client_open_url("mysql://h/db?connect_timeout=soon", &c),
           MYSQLLOCK_INVALID_ARGUMENT, "invalid connect_timeout: \"soon\" is not a duration",
           "a timeout that is no duration is refused");
    check(c == (mysqllock_client *)&srv, "a failed open leaves *out unwritten");

    expect(mysqllock_client_open_url("mysql://u:p@127.0.0.1:1/db", &c), MYSQLLOCK_CONNECTION,
           "is the server running", "an unreachable server is CONNECTION with a hint");
    check(strstr(last_error(), "127.0.0.1:1") != NULL, "the message names the address");

    const char *wrong = "Wr0ng-Passw0rd-xyz";
    snprintf(url, sizeof url, "mysql://%s:%s@%s:%u/%s", srv.user, wrong, srv.host, srv.port,
             srv.database);
    expect(mysqllock_client_open_url(url, &c), MYSQLLOCK_CONNECTION, "Access denied",
           "a wrong password is CONNECTION with the server's message");
    check(strstr(last_error(), wrong) == NULL, "the message does not contain the password");
    check(strstr(last_error(), "check the user name and password") != NULL,
          "the message has a hint");
    expect(mysqllock_client_open(srv.host, (uint16_t)srv.port, srv.user, wrong, srv.database,
                                 &c),
           MYSQLLOCK_CONNECTION, "Access denied", "open with a wrong password is CONNECTION");
    check(strstr(last_error(), wrong) == NULL, "open's message does not contain the password");
    expect(mysqllock_client_open(srv.host, (uint16_t)srv.port, srv.user, NULL, NULL, &c),
           MYSQLLOCK_CONNECTION, "using password: NO",
           "open accepts a NULL password and database (and the server refuses)");
    check(c == (mysqllock_client *)&srv, "failed opens leave *out unwritten");
}

static void test_missing_table(void)
{
    char url[600];
    snprintf(url, sizeof url, "%s?table=no_such_table", srv.dsn);
    mysqllock_client *c = NULL;
    expect(mysqllock_client_open_url(url, &c), MYSQLLOCK_OK, NULL,
           "open with a missing table connects");
    expect(mysqllock_acquire(c, unique_name("notable"), 0, 10), MYSQLLOCK_TABLE, "no_such_table",
           "acquire on a missing table is TABLE");
    check(strstr(last_error(), "mysqllock init") && strstr(last_error(), "CREATE TABLE"),
          "the missing-table message has the fix");
    mysqllock_client_free(c);
}

static void test_bad_input(void)
{
    mysqllock_client *c = open_client();
    char long_name[80];
    bool acquired = false;

    expect(mysqllock_acquire(c, "", 0, 10), MYSQLLOCK_INVALID_ARGUMENT, "empty",
           "an empty name is INVALID_ARGUMENT");
    memset(long_name, 'x', 65);
    long_name[65] = '\0';
    expect(mysqllock_acquire(c, long_name, 0, 10), MYSQLLOCK_INVALID_ARGUMENT, "at most 64",
           "a 65-character name is INVALID_ARGUMENT");
    snprintf(long_name, sizeof long_name, "c-%ld-", (long)getpid());
    memset(long_name + strlen(long_name), 'y', 64 - strlen(long_name));
    long_name[64] = '\0';
    expect(mysqllock_acquire(c, long_name, 0, 10), MYSQLLOCK_OK, NULL,
           "a 64-character name is accepted");
    mysqllock_release(c, long_name);
    expect(mysqllock_acquire(c, "\xe6\x97\xa5\xe6\x9c\xac", 0, 10), MYSQLLOCK_INVALID_ARGUMENT,
           "cannot be stored exactly", "a name latin1 cannot store is INVALID_ARGUMENT");
    expect(mysqllock_acquire(c, "bad-\xff\xfe", 0, 10), MYSQLLOCK_INVALID_ARGUMENT,
           "not valid UTF-8", "a name that is not UTF-8 is INVALID_ARGUMENT");

    const char *name = unique_name("numbers");
    expect(mysqllock_acquire(c, name, NAN, 10), MYSQLLOCK_INVALID_ARGUMENT, "finite",
           "a NaN timeout is INVALID_ARGUMENT");
    expect(mysqllock_acquire(c, name, -1, 10), MYSQLLOCK_INVALID_ARGUMENT, "negative",
           "a negative timeout is INVALID_ARGUMENT");
    expect(mysqllock_acquire(c, name, 0, NAN), MYSQLLOCK_INVALID_ARGUMENT, "ttl",
           "a NaN TTL is INVALID_ARGUMENT");
    expect(mysqllock_acquire(c, name, 0, -5), MYSQLLOCK_INVALID_ARGUMENT, "negative",
           "a negative TTL is INVALID_ARGUMENT");
    expect(mysqllock_acquire(c, name, 0, INFINITY), MYSQLLOCK_INVALID_ARGUMENT, "finite",
           "an infinite TTL is INVALID_ARGUMENT");
    expect(mysqllock_acquire(c, name, 0, 0), MYSQLLOCK_INVALID_ARGUMENT, "positive",
           "a zero TTL is INVALID_ARGUMENT");
    expect(mysqllock_try_acquire(c, name, NAN, &acquired), MYSQLLOCK_INVALID_ARGUMENT, NULL,
           "try_acquire with a NaN TTL is INVALID_ARGUMENT");
    expect(mysqllock_session_lock(c, name, -0.5), MYSQLLOCK_INVALID_ARGUMENT, "negative",
           "session_lock with a negative timeout is INVALID_ARGUMENT");
    expect(mysqllock_session_lock(c, "", 0), MYSQLLOCK_INVALID_ARGUMENT, "empty",
           "session_lock with an empty name is INVALID_ARGUMENT");

    expect(mysqllock_acquire(c, name, 0, 10), MYSQLLOCK_OK, NULL,
           "bad input changed nothing: the lock is still free");
    expect(mysqllock_assert_ttl(c, name, NAN), MYSQLLOCK_INVALID_ARGUMENT, "finite",
           "assert_ttl with a NaN minimum is INVALID_ARGUMENT");
    expect(mysqllock_client_set_table(c, "other_table", 0), MYSQLLOCK_INVALID_ARGUMENT,
           "while leases", "set_table while holding a lease is refused");
    mysqllock_release(c, name);

    expect(mysqllock_client_set_table(c, "x; DROP TABLE y", 0), MYSQLLOCK_INVALID_ARGUMENT,
           "table name", "set_table refuses an unsafe table name");
    expect(mysqllock_client_set_table(c, "shared_locks", 2), MYSQLLOCK_INVALID_ARGUMENT,
           "quote style", "set_table refuses an unknown quote style");
    expect(mysqllock_client_set_table(c, "no_such_table", 0), MYSQLLOCK_OK, NULL,
           "set_table to another table");
    expect(mysqllock_acquire(c, name, 0, 10), MYSQLLOCK_TABLE, "no_such_table",
           "the client now uses that table");
    expect(mysqllock_client_set_table(c, "shared_locks", 0), MYSQLLOCK_OK, NULL,
           "set_table back");
    expect(mysqllock_acquire(c, name, 0, 10), MYSQLLOCK_OK, NULL, "locks work again");
    mysqllock_release(c, name);
    mysqllock_client_free(c);
}

static void test_null_arguments(void)
{
    mysqllock_client *c = open_client();
    mysqllock_client *out = (mysqllock_client *)&srv;
    const char *name = unique_name("null");
    const mysqllock_status invalid = MYSQLLOCK_INVALID_ARGUMENT;
    bool acquired = true;
    double remaining = -1;
    uint64_t id = 12345;

    expect(mysqllock_client_open_url(NULL, &out), invalid, "connection URL: it is NULL",
           "open_url(NULL url)");
    expect(mysqllock_client_open_url(srv.dsn, NULL), invalid, "out", "open_url(NULL out)");
    expect(mysqllock_client_open(NULL, 0, srv.user, NULL, NULL, &out), invalid, "host",
           "open(NULL host)");
    expect(mysqllock_client_open(srv.host, 0, NULL, NULL, NULL, &out), invalid, "user",
           "open(NULL user)");
    expect(mysqllock_client_open(srv.host, (uint16_t)srv.port, srv.user, srv.password,
                                 srv.database, NULL),
           invalid, "out", "open(NULL out)");
    check(out == (mysqllock_client *)&srv, "NULL arguments leave *out unwritten");

    expect(mysqllock_client_set_table(NULL, "t", 0), invalid, "client",
           "set_table(NULL client)");
    expect(mysqllock_client_set_table(c, NULL, 0), invalid, "table", "set_table(NULL table)");
    expect(mysqllock_acquire(NULL, name, 0, 10), invalid, "client", "acquire(NULL client)");
    expect(mysqllock_acquire(c, NULL, 0, 10), invalid, "lock name", "acquire(NULL name)");
    expect(mysqllock_try_acquire(NULL, name, 10, &acquired), invalid, "client",
           "try_acquire(NULL client)");
    expect(mysqllock_try_acquire(c, NULL, 10, &acquired), invalid, "lock name",
           "try_acquire(NULL name)");
    expect(mysqllock_try_acquire(c, name, 10, NULL), invalid, "acquired_out",
           "try_acquire(NULL acquired_out)");
    check(acquired, "failed calls leave acquired_out unwritten");
    expect(mysqllock_acquire(c, name, 0, 10), MYSQLLOCK_OK, NULL,
           "try_acquire(NULL acquired_out) did not take the lock");
    expect(mysqllock_release(NULL, name), invalid, "client", "release(NULL client)");
    expect(mysqllock_release(c, NULL), invalid, "lock name", "release(NULL name)");
    expect(mysqllock_assert_ttl(NULL, name, 1), invalid, "client", "assert_ttl(NULL client)");
    expect(mysqllock_assert_ttl(c, NULL, 1), invalid, "lock name", "assert_ttl(NULL name)");
    expect(mysqllock_remaining_ttl(NULL, name, &remaining), invalid, "client",
           "remaining_ttl(NULL client)");
    expect(mysqllock_remaining_ttl(c, NULL, &remaining), invalid, "lock name",
           "remaining_ttl(NULL name)");
    expect(mysqllock_remaining_ttl(c, name, NULL), invalid, "out", "remaining_ttl(NULL out)");
    check(remaining == -1, "failed calls leave the remaining TTL unwritten");
    mysqllock_release(c, name);
    expect(mysqllock_session_lock(NULL, name, 0), invalid, "client",
           "session_lock(NULL client)");
    expect(mysqllock_session_lock(c, NULL, 0), invalid, "lock name", "session_lock(NULL name)");
    expect(mysqllock_session_unlock(NULL, name), invalid, "client",
           "session_unlock(NULL client)");
    expect(mysqllock_session_unlock(c, NULL), invalid, "lock name",
           "session_unlock(NULL name)");
    expect(mysqllock_connection_id(NULL, &id), invalid, "client", "connection_id(NULL client)");
    expect(mysqllock_connection_id(c, NULL), invalid, "out", "connection_id(NULL out)");
    check(id == 12345, "failed calls leave the connection id unwritten");

    char before[256];
    snprintf(before, sizeof before, "%s", last_error());
    mysqllock_client_free(NULL);
    check(strcmp(before, last_error()) == 0 && strstr(before, "out") != NULL,
          "client_free(NULL) does nothing, not even to the last error (\"%s\")", last_error());
    check(mysqllock_last_error(NULL, 0, NULL) > 0,
          "last_error(NULL, 0, NULL) returns the message length");
    size_t n = 99;
    check(mysqllock_last_error(NULL, 100, &n) > 0 && n == 0,
          "last_error with a NULL buffer copies nothing");
    mysqllock_client_free(c);
}

static void test_last_error_buffer(void)
{
    mysqllock_client *c = open_client();
    char small[8];
    size_t n = 99;
    memset(small, 'z', sizeof small);

    mysqllock_release(c, unique_name("trunc"));
    size_t full = mysqllock_last_error(small, sizeof small, &n);
    check(full > sizeof small && n == sizeof small - 1 && small[7] == '\0',
          "a long message is truncated and NUL-terminated (full %zu, copied %zu)", full, n);
    check(strncmp(small, "lock \"c", 7) == 0, "the truncated text is the message's start");
    n = 99;
    check(mysqllock_last_error(small, 0, &n) == full && n == 0 && small[0] == 'l',
          "len 0 writes nothing");
    mysqllock_client_free(c);
}

/* Thread-safety: one client shared by threads, and a last error per thread. */
struct worker {
    mysqllock_client *client;
    const char *name;
    int failures;
    char error[256];
};

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    char name[128];
    for (int i = 0; i < 20; i++) {
        snprintf(name, sizeof name, "%s-%d", w->name, i);
        if (mysqllock_acquire(w->client, name, 1, 10) != MYSQLLOCK_OK
            || mysqllock_release(w->client, name) != MYSQLLOCK_OK) {
            w->failures++;
        }
    }
    mysqllock_session_unlock(w->client, w->name); /* fails: not held */
    mysqllock_last_error(w->error, sizeof w->error, NULL);
    return NULL;
}

static void *release_main(void *arg)
{
    struct worker *w = arg;
    w->failures = mysqllock_release(w->client, w->name) != MYSQLLOCK_OK;
    return NULL;
}

static void test_threads(void)
{
    mysqllock_client *c = open_client();
    const char *shared = unique_name("threads");
    struct worker a = {c, unique_name("thread-a"), 0, ""}, b = {c, unique_name("thread-b"), 0, ""};

    mysqllock_acquire(c, shared, 0, 30);
    mysqllock_release(c, unique_name("main-thread-error"));
    char mine[256];
    snprintf(mine, sizeof mine, "%s", last_error());

    pthread_t ta, tb;
    pthread_create(&ta, NULL, worker_main, &a);
    pthread_create(&tb, NULL, worker_main, &b);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);

    check(a.failures == 0 && b.failures == 0,
          "two threads lock and release through one client (%d, %d failures)", a.failures,
          b.failures);
    check(strstr(a.error, a.name) && strstr(b.error, b.name),
          "each thread reads its own last error");
    check(strcmp(last_error(), mine) == 0 && strstr(mine, "main-thread-error"),
          "other threads' failures do not change this thread's last error");

    /* Locks belong to the client's session, not to the thread that took them. */
    struct worker r = {c, shared, 0, ""};
    pthread_t tr;
    pthread_create(&tr, NULL, release_main, &r);
    pthread_join(tr, NULL);
    check(r.failures == 0, "another thread releases a lock taken through the same client");
    mysqllock_client_free(c);
}

int main(void)
{
    srv = server_from_env();
    test_names_and_version();
    test_open();
    test_lease_lifecycle();
    test_session_locks();
    test_free_releases();
    test_connection_lost();
    test_connection_errors();
    test_missing_table();
    test_bad_input();
    test_null_arguments();
    test_last_error_buffer();
    test_threads();
    printf("# test_api: %d failed\n", tap_failures);
    return tap_failures == 0 ? 0 : 1;
}
