/*
 * Beyond the original package, from C against a real server: the table upgrade, fencing
 * tokens, renewal, keep-alive, "at least", holder introspection, and their bad input.
 *
 * Usage: MYSQLLOCK_TEST_DSN=mysql://user:pass@host:port/db test_fencing
 * Prints "ok - ..." / "not ok - ..." lines; exits 1 if any check failed. Creates two
 * tables of its own (c_<pid>_fenced, upgraded, and c_<pid>_plain, the original shape)
 * and drops them at the end.
 */
#define _POSIX_C_SOURCE 200809L

#include <math.h>
#include <stdint.h>
#include <unistd.h>

#include "tap.h"

static struct server srv;
static char fenced_table[64], plain_table[64];

/* A client on `table` (NULL: the DSN's default table). */
static mysqllock_client *open_on(const char *table)
{
    char url[600];
    if (table) {
        snprintf(url, sizeof url, "%s?table=%s", srv.dsn, table);
    } else {
        snprintf(url, sizeof url, "%s", srv.dsn);
    }
    return open_url_or_exit(url);
}

static int kill_session(uint64_t id)
{
    char sql[64];
    snprintf(sql, sizeof sql, "KILL %llu", (unsigned long long)id);
    return run_sql(&srv, sql);
}

static void sleep_seconds(double seconds)
{
    struct timespec ts = {(time_t)seconds, (long)((seconds - (double)(time_t)seconds) * 1e9)};
    nanosleep(&ts, NULL);
}

/* Whether another session could take `name` right now (and then gives it back). */
static int is_free(mysqllock_client *other, const char *name)
{
    bool acquired = false;
    if (mysqllock_try_acquire(other, name, 10, &acquired) != MYSQLLOCK_OK) {
        printf("# try_acquire failed: %s\n", last_error());
        return -1;
    }
    if (acquired) {
        mysqllock_release(other, name);
    }
    return acquired;
}

static const mysqllock_options keep_alive = {MYSQLLOCK_KEEP_ALIVE, 0, 0};

static void test_upgrade_and_init(void)
{
    mysqllock_client *fenced = open_on(fenced_table), *plain = open_on(plain_table);
    bool changed = false, created = false;

    expect(mysqllock_upgrade_table(fenced, &changed), MYSQLLOCK_OK, NULL,
           "upgrade_table of a missing table");
    check(changed, "upgrade_table creates and upgrades a missing table");
    changed = true;
    expect(mysqllock_upgrade_table(fenced, &changed), MYSQLLOCK_OK, NULL,
           "upgrade_table a second time");
    check(!changed, "a second upgrade changes nothing");
    expect(mysqllock_upgrade_table(fenced, NULL), MYSQLLOCK_OK, NULL,
           "upgrade_table accepts a NULL changed");
    created = true;
    expect(mysqllock_init_table(fenced, &created), MYSQLLOCK_OK, NULL,
           "init_table of an existing table");
    check(!created, "init_table leaves an existing table alone");

    expect(mysqllock_init_table(plain, &created), MYSQLLOCK_OK, NULL,
           "init_table of a missing table");
    check(created, "init_table creates a missing table (the original shape)");
    mysqllock_client_free(fenced);
    mysqllock_client_free(plain);
}

static void test_tokens_increase(void)
{
    mysqllock_client *c[2] = {open_on(fenced_table), open_on(fenced_table)};
    const char *name = unique_name("tokens");
    uint64_t last = 0, token = 0, held = 0;
    int increasing = 1, matching = 1;

    for (int round = 0; round < 6; round++) {
        mysqllock_client *holder = c[round % 2];
        token = 0;
        if (mysqllock_acquire_ex(holder, name, 5, 30, NULL, &token) != MYSQLLOCK_OK) {
            check(0, "acquire_ex round %d: %s", round, last_error());
            break;
        }
        increasing &= token > last;
        matching &= mysqllock_token(holder, name, &held) == MYSQLLOCK_OK && held == token;
        mysqllock_release(holder, name);
        last = token;
    }
    check(increasing && last > 0,
          "every acquisition by either client gets a greater token (last %llu)",
          (unsigned long long)last);
    check(matching, "mysqllock_token returns the token acquire_ex handed out");

    bool acquired = false;
    uint64_t try_token = 0;
    expect(mysqllock_try_acquire_ex(c[0], name, 30, NULL, &acquired, &try_token), MYSQLLOCK_OK,
           NULL, "try_acquire_ex of a free lock");
    check(acquired && try_token > last, "try_acquire_ex hands out a greater token (%llu)",
          (unsigned long long)try_token);
    acquired = true;
    try_token = 99;
    expect(mysqllock_try_acquire_ex(c[1], name, 30, NULL, &acquired, &try_token), MYSQLLOCK_OK,
           NULL, "try_acquire_ex of a held lock");
    check(!acquired && try_token == 0, "a lock not acquired comes with token 0");
    mysqllock_release(c[0], name);

    expect(mysqllock_token(c[0], name, &held), MYSQLLOCK_NOT_HELD, "not held",
           "token of a released lock is NOT_HELD");
    expect(mysqllock_acquire_ex(c[0], name, 0, 30, NULL, NULL), MYSQLLOCK_OK, NULL,
           "acquire_ex accepts a NULL token_out");
    mysqllock_release(c[0], name);
    mysqllock_client_free(c[0]);
    mysqllock_client_free(c[1]);
}

static void test_token_needs_the_upgrade(void)
{
    mysqllock_client *c = open_on(plain_table);
    const char *name = unique_name("no-token");
    uint64_t token = 99, held = 99;

    expect(mysqllock_acquire_ex(c, name, 0, 30, NULL, &token), MYSQLLOCK_OK, NULL,
           "acquire_ex on a table without the token column");
    check(token == 0, "writes token 0 there (%llu)", (unsigned long long)token);
    expect(mysqllock_token(c, name, &held), MYSQLLOCK_TABLE, "mysqllock init --upgrade",
           "token there is TABLE, naming the upgrade");
    check(strstr(last_error(), name) && strstr(last_error(), plain_table),
          "the message names the lock and the table");
    check(held == 99, "and leaves *out unwritten");
    mysqllock_release(c, name);
    mysqllock_client_free(c);
}

static void test_renew(void)
{
    mysqllock_client *a = open_on(NULL), *b = open_on(NULL);
    const char *name = unique_name("renew");
    double remaining = 0;
    uint64_t id = 0;

    mysqllock_acquire(a, name, 0, 5);
    expect(mysqllock_renew(a, name, 60), MYSQLLOCK_OK, NULL, "renew a held lease");
    mysqllock_remaining_ttl(a, name, &remaining);
    check(remaining > 55 && remaining <= 61, "renew extends the remaining TTL (%.3f)", remaining);
    expect(mysqllock_renew(a, name, 10), MYSQLLOCK_OK, NULL, "renew with a shorter TTL");
    mysqllock_remaining_ttl(a, name, &remaining);
    check(remaining > 55, "renew never shortens a lease (%.3f)", remaining);
    expect(mysqllock_renew(a, name, NAN), MYSQLLOCK_INVALID_ARGUMENT, "ttl",
           "renew with a NaN TTL is INVALID_ARGUMENT");
    expect(mysqllock_renew(b, name, 60), MYSQLLOCK_NOT_HELD, "not held",
           "renew by another client is NOT_HELD");

    mysqllock_connection_id(a, &id);
    check(kill_session(id), "KILL the holder's session");
    expect(mysqllock_renew(a, name, 60), MYSQLLOCK_NOT_HELD, "session holding it was lost",
           "renew after the session was killed is NOT_HELD, with the loss");
    check(is_free(b, name) == 1, "and the lease is free for others at once");
    expect(mysqllock_renew(a, name, 60), MYSQLLOCK_NOT_HELD, NULL,
           "renew does not acquire a lost lease again");
    mysqllock_client_free(a);
    mysqllock_client_free(b);
}

static void test_bad_options(void)
{
    mysqllock_client *c = open_on(NULL);
    const char *name = unique_name("bad-options");
    const mysqllock_status invalid = MYSQLLOCK_INVALID_ARGUMENT;
    mysqllock_options unknown = {MYSQLLOCK_KEEP_ALIVE | 4u, 0, 0};
    mysqllock_options negative_at_least = {0, 0, -1};
    mysqllock_options nan_at_least = {0, 0, NAN};
    mysqllock_options max_hold_alone = {0, 60, 0};
    mysqllock_options nan_max_hold = {MYSQLLOCK_KEEP_ALIVE, NAN, 0};
    mysqllock_options infinite_max_hold = {MYSQLLOCK_KEEP_ALIVE, INFINITY, 0};
    uint64_t token = 99;
    bool acquired = true;

    expect(mysqllock_acquire_ex(c, name, 0, 10, &unknown, &token), invalid, "unknown flags 0x4",
           "unknown flag bits are INVALID_ARGUMENT");
    expect(mysqllock_acquire_ex(c, name, 0, 10, &negative_at_least, &token), invalid,
           "at_least", "a negative at_least is INVALID_ARGUMENT");
    expect(mysqllock_acquire_ex(c, name, 0, 10, &nan_at_least, &token), invalid, "at_least",
           "a NaN at_least is INVALID_ARGUMENT");
    expect(mysqllock_acquire_ex(c, name, 0, 10, &max_hold_alone, &token), invalid,
           "max_hold", "max_hold without keep-alive is INVALID_ARGUMENT");
    expect(mysqllock_acquire_ex(c, name, 0, 10, &nan_max_hold, &token), invalid, "max_hold",
           "a NaN max_hold is INVALID_ARGUMENT");
    expect(mysqllock_acquire_ex(c, name, 0, 10, &infinite_max_hold, &token), invalid,
           "max_hold", "an infinite max_hold is INVALID_ARGUMENT");
    expect(mysqllock_try_acquire_ex(c, name, 10, &unknown, &acquired, &token), invalid,
           "unknown flags", "try_acquire_ex checks the options too");
    check(token == 99 && acquired, "failed calls leave the out-parameters unwritten");
    expect(mysqllock_acquire_ex(c, name, 0, 10, &keep_alive, NULL), MYSQLLOCK_OK, NULL,
           "bad options locked nothing: the lock is still free");
    mysqllock_release(c, name);
    mysqllock_client_free(c);
}

static void test_null_arguments(void)
{
    mysqllock_client *c = open_on(NULL);
    const char *name = unique_name("null-ex");
    const mysqllock_status invalid = MYSQLLOCK_INVALID_ARGUMENT;
    mysqllock_holder_info info;
    bool flag = true;
    uint64_t token = 99;

    expect(mysqllock_acquire_ex(NULL, name, 0, 10, NULL, &token), invalid, "client",
           "acquire_ex(NULL client)");
    expect(mysqllock_acquire_ex(c, NULL, 0, 10, NULL, &token), invalid, "lock name",
           "acquire_ex(NULL name)");
    expect(mysqllock_try_acquire_ex(c, name, 10, NULL, NULL, &token), invalid, "acquired_out",
           "try_acquire_ex(NULL acquired_out)");
    expect(mysqllock_acquire(c, name, 0, 10), MYSQLLOCK_OK, NULL,
           "try_acquire_ex(NULL acquired_out) did not take the lock");
    expect(mysqllock_token(c, name, NULL), invalid, "out", "token(NULL out)");
    expect(mysqllock_token(NULL, name, &token), invalid, "client", "token(NULL client)");
    expect(mysqllock_renew(c, NULL, 10), invalid, "lock name", "renew(NULL name)");
    expect(mysqllock_renew(NULL, name, 10), invalid, "client", "renew(NULL client)");
    expect(mysqllock_holder(c, name, NULL, &flag), invalid, "out", "holder(NULL out)");
    expect(mysqllock_holder(c, name, &info, NULL), invalid, "found", "holder(NULL found)");
    expect(mysqllock_holder(c, NULL, &info, &flag), invalid, "lock name", "holder(NULL name)");
    expect(mysqllock_upgrade_table(NULL, &flag), invalid, "client", "upgrade_table(NULL client)");
    expect(mysqllock_init_table(NULL, &flag), invalid, "client", "init_table(NULL client)");
    check(token == 99 && flag, "failed calls leave the out-parameters unwritten");
    mysqllock_release(c, name);
    mysqllock_client_free(c);
}

static void test_keep_alive_outlives_the_ttl(void)
{
    mysqllock_client *a = open_on(NULL), *b = open_on(NULL);
    const char *name = unique_name("keep-alive");
    double remaining = 0;

    expect(mysqllock_acquire_ex(a, name, 0, 2, &keep_alive, NULL), MYSQLLOCK_OK, NULL,
           "acquire_ex with keep-alive and a 2 s TTL");
    sleep_seconds(4.5); /* the behaviour under test: the holder is busy, renewing nothing itself */
    check(is_free(b, name) == 0, "4.5 s later another client still cannot take it");
    expect(mysqllock_remaining_ttl(a, name, &remaining), MYSQLLOCK_OK, NULL,
           "the holder still holds it");
    check(remaining > 0 && remaining <= 3, "with its short TTL renewed (%.3f s left)", remaining);
    expect(mysqllock_release(a, name), MYSQLLOCK_OK, NULL, "release stops the keep-alive");
    check(is_free(b, name) == 1, "and frees the lock at once");
    mysqllock_client_free(a);
    mysqllock_client_free(b);
}

static void test_keep_alive_stops_at_free(void)
{
    mysqllock_client *a = open_on(NULL), *b = open_on(NULL);
    const char *name = unique_name("keep-alive-free");
    mysqllock_holder_info info;
    bool found = true;

    const int threads = thread_count();
    mysqllock_acquire_ex(a, name, 0, 2, &keep_alive, NULL);
    check(thread_count() == threads + 1, "keep-alive runs one thread (%d, was %d)", thread_count(),
          threads);
    check(wait_for_renewal(b, name), "the keep-alive thread renews the lease");
    double start = now();
    mysqllock_client_free(a);
    double took = now() - start;
    check(took < 2.5, "free of a keep-alive holder does not hang (%.3f s)", took);
    const int after = wait_for_thread_count(threads);
    check(after == threads, "free ended the keep-alive thread (%d threads, was %d)", after, threads);
    expect(mysqllock_holder(b, name, &info, &found), MYSQLLOCK_OK, NULL, "holder after free");
    check(!found, "free deleted the lock's row");
    check(is_free(b, name) == 1, "another client takes the lock at once");
    mysqllock_client_free(b);
}

static void test_keep_alive_stops_at_max_hold(void)
{
    mysqllock_client *a = open_on(NULL), *b = open_on(NULL);
    const char *name = unique_name("max-hold");
    const mysqllock_options capped = {MYSQLLOCK_KEEP_ALIVE, 2, 0};

    double start = now();
    mysqllock_acquire_ex(a, name, 0, 1, &capped, NULL);
    expect(mysqllock_acquire(b, name, 10, 30), MYSQLLOCK_OK, NULL,
           "a waiter gets a keep-alive lock once its max_hold has passed");
    double waited = now() - start;
    check(waited > 1.9 && waited < 6, "after max_hold plus the TTL (%.3f s)", waited);
    expect(mysqllock_release(a, name), MYSQLLOCK_NOT_HELD, NULL,
           "the holder learns it lost the lock");
    mysqllock_release(b, name);
    mysqllock_client_free(a);
    mysqllock_client_free(b);
}

static void test_at_least(void)
{
    mysqllock_client *a = open_on(NULL), *b = open_on(NULL);
    const char *name = unique_name("at-least");
    const mysqllock_options three_seconds = {0, 0, 3};
    mysqllock_holder_info info;
    bool found = false, acquired = true;

    double start = now();
    expect(mysqllock_acquire_ex(a, name, 0, 30, &three_seconds, NULL), MYSQLLOCK_OK, NULL,
           "acquire_ex with at_least 3");
    expect(mysqllock_release(a, name), MYSQLLOCK_OK, NULL, "release at once");
    sleep_seconds(1); /* the behaviour under test: time passes, the kept row must stay */
    expect(mysqllock_try_acquire(b, name, 30, &acquired), MYSQLLOCK_OK, NULL,
           "try_acquire 1 s after the acquisition");
    check(!acquired, "the lock stays taken for at least 3 s");
    acquired = true;
    mysqllock_try_acquire(a, name, 30, &acquired);
    check(!acquired, "for its former holder too");
    expect(mysqllock_holder(b, name, &info, &found), MYSQLLOCK_OK, NULL, "holder meanwhile");
    check(found && !info.alive && !info.acquired, "the kept row has no live holder");

    expect(mysqllock_acquire(b, name, 10, 30), MYSQLLOCK_OK, NULL,
           "a waiter gets it once at_least has passed");
    double waited = now() - start;
    check(waited >= 2.9 && waited < 6, "3 to 4 s after the acquisition (%.3f s)", waited);
    mysqllock_release(b, name);
    mysqllock_client_free(a);
    mysqllock_client_free(b);
}

static void test_holder(void)
{
    mysqllock_client *a = open_on(fenced_table), *b = open_on(fenced_table);
    const char *name = unique_name("holder");
    mysqllock_holder_info info, untouched;
    char hostname[256] = "";
    uint64_t id = 0, token = 0;
    bool found = false;

    gethostname(hostname, sizeof hostname - 1);
    mysqllock_connection_id(a, &id);
    mysqllock_acquire_ex(a, name, 0, 30, NULL, &token);
    memset(&info, 0, sizeof info);
    expect(mysqllock_holder(b, name, &info, &found), MYSQLLOCK_OK, NULL,
           "holder of a lock another client holds");
    check(found, "finds it");
    check(info.connection_id == id, "names the holder's connection id (%llu)",
          (unsigned long long)info.connection_id);
    check(info.has_token && info.token == token, "and its token (%llu)",
          (unsigned long long)info.token);
    check(info.has_pid && info.pid == (uint64_t)getpid(), "and its pid (%llu)",
          (unsigned long long)info.pid);
    check(strcmp(info.hostname, hostname) == 0, "and its host name (\"%s\")", info.hostname);
    check(strcmp(info.name, name) == 0, "and the name as stored");
    check(strlen(info.client_address) > 0, "and its client address (\"%s\")",
          info.client_address);
    check(info.alive && info.acquired, "alive and acquired");
    check(info.expires_at - info.acquired_at == 30 && info.remaining > 28
              && info.remaining <= 30,
          "acquired_at, expires_at and remaining agree with the TTL (%.3f s left)",
          info.remaining);

    check(kill_session(id), "KILL the holder's session");
    expect(mysqllock_holder(b, name, &info, &found), MYSQLLOCK_OK, NULL,
           "holder after the holder died");
    check(found && !info.alive, "shows the row of a dead holder as not alive");

    memset(&untouched, 0x5a, sizeof untouched);
    memcpy(&info, &untouched, sizeof info);
    found = true;
    expect(mysqllock_holder(b, unique_name("nobody"), &info, &found), MYSQLLOCK_OK, NULL,
           "holder of a free lock");
    check(!found && memcmp(&info, &untouched, sizeof info) == 0,
          "reports not found and leaves *out unwritten");
    mysqllock_client_free(a);
    mysqllock_client_free(b);
}

static void test_holder_on_the_original_table(void)
{
    mysqllock_client *a = open_on(plain_table), *b = open_on(plain_table);
    const char *name = unique_name("holder-plain");
    mysqllock_holder_info info;
    bool found = false;

    mysqllock_acquire(a, name, 0, 30);
    expect(mysqllock_holder(b, name, &info, &found), MYSQLLOCK_OK, NULL,
           "holder on a table that is not upgraded");
    check(found && !info.has_token && info.token == 0 && !info.has_pid && info.pid == 0
              && info.hostname[0] == '\0',
          "has no token, pid or host name there");
    mysqllock_release(a, name);
    mysqllock_client_free(a);
    mysqllock_client_free(b);
}

int main(void)
{
    srv = server_from_env();
    snprintf(fenced_table, sizeof fenced_table, "c_%ld_fenced", (long)getpid());
    snprintf(plain_table, sizeof plain_table, "c_%ld_plain", (long)getpid());

    test_upgrade_and_init();
    test_tokens_increase();
    test_token_needs_the_upgrade();
    test_renew();
    test_bad_options();
    test_null_arguments();
    test_keep_alive_outlives_the_ttl();
    test_keep_alive_stops_at_free();
    test_keep_alive_stops_at_max_hold();
    test_at_least();
    test_holder();
    test_holder_on_the_original_table();

    char drop[160];
    snprintf(drop, sizeof drop, "DROP TABLE %s, %s", fenced_table, plain_table);
    check(run_sql(&srv, drop), "drop this test's tables");
    printf("# test_fencing: %d failed\n", tap_failures);
    return tap_failures == 0 ? 0 : 1;
}
