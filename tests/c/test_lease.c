/*
 * The lease mode from C against a real server: table-only leases with owner strings
 * (mysqllock_lease_*), their semantics, fencing tokens on an upgraded table, bad input,
 * a missing or MyISAM table, and the status codes added with them.
 *
 * Usage: MYSQLLOCK_TEST_DSN=mysql://user:pass@host:port/db test_lease
 * Prints "ok - ..." / "not ok - ..." lines; exits 1 if any check failed. Creates tables of
 * its own (lease_c_<pid>, lease_c_<pid>_fenced, lease_c_<pid>_myisam) and drops them at
 * the end. Rows are looked at with the stock `mariadb` client, not through the library.
 */
#define _POSIX_C_SOURCE 200809L

#include <math.h>
#include <stdint.h>
#include <unistd.h>

#include "tap.h"

static struct server srv;
static char plain_table[64], fenced_table[64], myisam_table[64], missing_table[64];

/* A client whose lease calls use `table`. */
static mysqllock_client *open_on(const char *table)
{
    char url[600];
    snprintf(url, sizeof url, "%s?lease_table=%s", srv.dsn, table);
    return open_url_or_exit(url);
}

/* How many rows `table` has for `resource` (whatever their state), seen by the stock client. */
static long long rows_of(const char *table, const char *resource)
{
    char sql[400];
    snprintf(sql, sizeof sql, "SELECT COUNT(*) FROM %s WHERE resource = '%s'", table, resource);
    return query_number(&srv, sql);
}

/* The owner column of `resource`'s row is `owner` (exact comparison), per the stock client. */
static int row_owned_by(const char *table, const char *resource, const char *owner)
{
    char sql[500];
    snprintf(sql, sizeof sql,
             "SELECT COUNT(*) FROM %s WHERE resource = '%s' AND BINARY owner = '%s'", table,
             resource, owner);
    return query_number(&srv, sql) == 1;
}

static void test_init_table(void)
{
    mysqllock_client *c = open_on(plain_table);
    bool created = false;
    expect(mysqllock_lease_init_table(c, &created), MYSQLLOCK_OK, NULL,
           "lease_init_table of a missing table");
    check(created, "creates it");
    char sql[300];
    snprintf(sql, sizeof sql,
             "SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() "
             "AND TABLE_NAME = '%s' AND ENGINE = 'InnoDB'",
             plain_table);
    check(query_number(&srv, sql) == 1, "the table exists as InnoDB");
    created = true;
    expect(mysqllock_lease_init_table(c, &created), MYSQLLOCK_OK, NULL,
           "lease_init_table of an existing table");
    check(!created, "leaves an existing table alone");
    mysqllock_client_free(c);
}

static void test_acquire_contend_release(void)
{
    mysqllock_client *a = open_on(plain_table), *b = open_on(plain_table);
    const char *res = unique_name("basic"), *alice = unique_name("alice"), *bob = unique_name("bob");
    bool acquired = false, held = false, released = true;
    uint64_t token = 99;
    double remaining = -1;

    expect(mysqllock_lease_acquire(a, res, alice, 30, 0, &acquired, &token, &remaining),
           MYSQLLOCK_OK, NULL, "acquire a free resource");
    check(acquired, "the owner gets it");
    check(row_owned_by(plain_table, res, alice), "its row names the owner");
    check(token == 0, "no token on a table without the upgrade (%llu)", (unsigned long long)token);
    check(remaining > 28.5 && remaining <= 30, "the local deadline is the TTL minus the margin (%.3f)",
          remaining);

    token = 99;
    remaining = 99;
    expect(mysqllock_lease_acquire(b, res, bob, 30, 0, &acquired, &token, &remaining),
           MYSQLLOCK_OK, NULL, "acquire a resource another owner holds");
    check(!acquired && token == 0 && remaining == 0, "is refused, with token and remaining 0");
    check(row_owned_by(plain_table, res, alice), "and leaves the row with its owner");

    expect(mysqllock_lease_is_held(b, res, &held), MYSQLLOCK_OK, NULL, "is_held");
    check(held, "reports the lease held, from any client");

    expect(mysqllock_lease_acquire(b, res, alice, 30, 0, &acquired, NULL, NULL), MYSQLLOCK_OK,
           NULL, "the same owner acquires again through another client");
    check(acquired, "owners, not clients, hold leases");

    char upper[96];
    snprintf(upper, sizeof upper, "C-%ld-ALICE", (long)getpid());
    expect(mysqllock_lease_acquire(b, res, upper, 30, 0, &acquired, NULL, NULL), MYSQLLOCK_OK,
           NULL, "acquire by the owner's name in other case");
    check(!acquired, "owners compare exactly (case-sensitive)");

    expect(mysqllock_lease_release(b, res, bob, &released), MYSQLLOCK_OK, NULL,
           "release by another owner");
    check(!released, "is refused");
    check(rows_of(plain_table, res) == 1, "and the row stays");
    expect(mysqllock_lease_release(a, res, alice, &released), MYSQLLOCK_OK, NULL,
           "release by the owner");
    check(released, "ends the lease");
    check(rows_of(plain_table, res) == 0, "and deletes the row (table without the upgrade)");
    held = true;
    expect(mysqllock_lease_is_held(a, res, &held), MYSQLLOCK_OK, NULL, "is_held after release");
    check(!held, "reports it free");
    released = true;
    expect(mysqllock_lease_release(a, res, alice, &released), MYSQLLOCK_OK, NULL,
           "a second release");
    check(!released, "reports nothing released");

    expect(mysqllock_lease_acquire(b, res, bob, 30, 0, &acquired, NULL, NULL), MYSQLLOCK_OK, NULL,
           "acquire after the release");
    check(acquired, "another owner gets it at once");
    mysqllock_lease_release(b, res, bob, &released);
    mysqllock_client_free(a);
    mysqllock_client_free(b);
}

static void test_renew(void)
{
    mysqllock_client *a = open_on(plain_table);
    const char *res = unique_name("renew"), *alice = unique_name("alice"), *bob = unique_name("bob");
    bool acquired = false, renewed = false, released = false;
    double remaining = 0;

    mysqllock_lease_acquire(a, res, alice, 5, 0, &acquired, NULL, NULL);
    check(acquired, "acquire a 5 s lease to renew");
    expect(mysqllock_lease_renew(a, res, alice, 60, &renewed, NULL, &remaining), MYSQLLOCK_OK,
           NULL, "renew by the owner");
    check(renewed && remaining > 58 && remaining <= 60,
          "restarts the lease with the new TTL (%.3f s to the local deadline)", remaining);
    char sql[400];
    snprintf(sql, sizeof sql,
             "SELECT TIMESTAMPDIFF(SECOND, UTC_TIMESTAMP(), expires_at) FROM %s WHERE resource = '%s'",
             plain_table, res);
    long long left = query_number(&srv, sql);
    check(left >= 58 && left <= 60, "the row's expires_at moved (UTC, %lld s ahead)", left);

    renewed = true;
    expect(mysqllock_lease_renew(a, res, bob, 60, &renewed, NULL, NULL), MYSQLLOCK_OK, NULL,
           "renew by another owner");
    check(!renewed && row_owned_by(plain_table, res, alice), "is refused and changes nothing");

    mysqllock_lease_release(a, res, alice, &released);
    renewed = true;
    expect(mysqllock_lease_renew(a, res, alice, 60, &renewed, NULL, NULL), MYSQLLOCK_OK, NULL,
           "renew after release");
    check(!renewed && rows_of(plain_table, res) == 0, "is refused: a lost lease is not taken again");
    mysqllock_client_free(a);
}

static void test_expired_lease_is_taken_over(void)
{
    mysqllock_client *a = open_on(plain_table), *b = open_on(plain_table);
    const char *res = unique_name("expiry"), *alice = unique_name("alice"), *bob = unique_name("bob");
    bool acquired = false, renewed = true, released = true;

    mysqllock_lease_acquire(a, res, alice, 1, 0, &acquired, NULL, NULL);
    check(acquired, "acquire a 1 s lease");
    double start = now();
    expect(mysqllock_lease_acquire(b, res, bob, 30, 10, &acquired, NULL, NULL), MYSQLLOCK_OK,
           NULL, "another owner waits up to 10 s for it");
    double waited = now() - start;
    check(acquired && waited > 0.5 && waited < 8,
          "and gets it once the TTL passed, not before (%.3f s)", waited);
    check(row_owned_by(plain_table, res, bob), "the row names the new owner");
    expect(mysqllock_lease_renew(a, res, alice, 30, &renewed, NULL, NULL), MYSQLLOCK_OK, NULL,
           "renew by the expired owner");
    check(!renewed, "is refused");
    expect(mysqllock_lease_release(a, res, alice, &released), MYSQLLOCK_OK, NULL,
           "release by the expired owner");
    check(!released && row_owned_by(plain_table, res, bob), "is refused and the new owner keeps it");

    start = now();
    expect(mysqllock_lease_acquire(a, res, alice, 30, 0.3, &acquired, NULL, NULL), MYSQLLOCK_OK,
           NULL, "a waiting acquire of a held resource");
    waited = now() - start;
    check(!acquired && waited >= 0.3 && waited < 5, "gives up after its wait (%.3f s)", waited);
    mysqllock_lease_release(b, res, bob, &released);
    mysqllock_client_free(a);
    mysqllock_client_free(b);
}

static void test_tokens_on_an_upgraded_table(void)
{
    mysqllock_client *a = open_on(fenced_table), *b = open_on(fenced_table);
    const char *res = unique_name("tokens"), *alice = unique_name("alice"), *bob = unique_name("bob");
    bool changed = false, acquired = false, released = false, renewed = false;
    uint64_t first = 0, again = 0, renew_token = 0, last = 0, token = 0;

    expect(mysqllock_lease_upgrade_table(a, &changed), MYSQLLOCK_OK, NULL,
           "lease_upgrade_table of a missing table");
    check(changed, "creates and upgrades it");
    changed = true;
    expect(mysqllock_lease_upgrade_table(a, &changed), MYSQLLOCK_OK, NULL, "a second upgrade");
    check(!changed, "changes nothing");

    mysqllock_lease_acquire(a, res, alice, 30, 0, &acquired, &first, NULL);
    check(acquired && first > 0, "acquire hands out a token (%llu)", (unsigned long long)first);
    mysqllock_lease_acquire(a, res, alice, 30, 0, &acquired, &again, NULL);
    check(acquired && again == first, "the same owner acquiring again keeps its token");
    mysqllock_lease_renew(a, res, alice, 30, &renewed, &renew_token, NULL);
    check(renewed && renew_token == first, "renew reports the same token");
    mysqllock_lease_release(a, res, alice, &released);
    check(released && rows_of(fenced_table, res) == 1,
          "release keeps the row (ended) on an upgraded table");

    int increasing = 1;
    last = first;
    for (int round = 0; round < 6; round++) {
        mysqllock_client *c = round % 2 ? a : b;
        const char *owner = round % 2 ? alice : bob;
        token = 0;
        if (mysqllock_lease_acquire(c, res, owner, 30, 0, &acquired, &token, NULL) != MYSQLLOCK_OK
            || !acquired) {
            check(0, "takeover round %d: %s", round, last_error());
            break;
        }
        increasing &= token > last;
        last = token;
        mysqllock_lease_release(c, res, owner, &released);
    }
    check(increasing && last > first, "every takeover gets a greater token (last %llu)",
          (unsigned long long)last);

    /* A takeover after expiry, the one fencing is for. */
    mysqllock_lease_acquire(a, res, alice, 0.3, 0, &acquired, &first, NULL);
    token = 0;
    mysqllock_lease_acquire(b, res, bob, 30, 10, &acquired, &token, NULL);
    check(acquired && token > first, "taking over an expired lease gets a greater token");
    mysqllock_lease_release(b, res, bob, &released);
    mysqllock_client_free(a);
    mysqllock_client_free(b);
}

static void test_bad_input_writes_nothing(void)
{
    mysqllock_client *c = open_on(plain_table);
    const char *res = unique_name("bad"), *alice = unique_name("alice");
    char long_name[300];
    memset(long_name, 'x', 256);
    long_name[256] = '\0';
    bool acquired = true, sentinel_ok = true;
    uint64_t token = 77;
    double remaining = 77;

    struct {
        const char *label, *resource, *owner;
        double ttl, wait;
        const char *needle;
    } cases[] = {
        {"an empty resource", "", alice, 30, 0, "resource"},
        {"an empty owner", res, "", 30, 0, "owner"},
        {"a 256-character resource", long_name, alice, 30, 0, "resource"},
        {"a 256-character owner", res, long_name, 30, 0, "owner"},
        {"a 0 TTL", res, alice, 0, 0, "ttl"},
        {"a negative TTL", res, alice, -1, 0, "ttl"},
        {"a NaN TTL", res, alice, NAN, 0, "ttl"},
        {"an infinite TTL", res, alice, INFINITY, 0, "ttl"},
        /* past 9999-12-31 23:59:59 UTC counted from 1970: no DATETIME can end it */
        {"a TTL past the end of the DATETIME range", res, alice, 3e11, 0, "ttl"},
        {"a negative wait", res, alice, 30, -1, "wait"},
        {"a NaN wait", res, alice, 30, NAN, "wait"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char label[128];
        snprintf(label, sizeof label, "acquire with %s is INVALID_ARGUMENT", cases[i].label);
        expect(mysqllock_lease_acquire(c, cases[i].resource, cases[i].owner, cases[i].ttl,
                                       cases[i].wait, &acquired, &token, &remaining),
               MYSQLLOCK_INVALID_ARGUMENT, cases[i].needle, label);
        sentinel_ok &= acquired == true && token == 77 && remaining == 77;
    }
    check(sentinel_ok, "and leaves every out-parameter unwritten");
    check(rows_of(plain_table, res) == 0 && rows_of(plain_table, "") == 0,
          "no row was written for any of them");

    expect(mysqllock_lease_acquire(c, res, alice, 30, 0, NULL, NULL, NULL),
           MYSQLLOCK_INVALID_ARGUMENT, "acquired_out", "acquire with a NULL acquired_out");
    check(rows_of(plain_table, res) == 0, "takes nothing without a way to say so");
    expect(mysqllock_lease_acquire(NULL, res, alice, 30, 0, &acquired, NULL, NULL),
           MYSQLLOCK_INVALID_ARGUMENT, "client", "acquire with a NULL client");
    expect(mysqllock_lease_acquire(c, NULL, alice, 30, 0, &acquired, NULL, NULL),
           MYSQLLOCK_INVALID_ARGUMENT, "resource", "acquire with a NULL resource");
    expect(mysqllock_lease_release(c, res, NULL, &acquired), MYSQLLOCK_INVALID_ARGUMENT, "owner",
           "release with a NULL owner");
    expect(mysqllock_lease_release(c, res, alice, NULL), MYSQLLOCK_INVALID_ARGUMENT,
           "released_out", "release with a NULL released_out");
    expect(mysqllock_lease_renew(c, res, alice, NAN, &acquired, NULL, NULL),
           MYSQLLOCK_INVALID_ARGUMENT, "ttl", "renew with a NaN TTL");
    expect(mysqllock_lease_is_held(c, "", &acquired), MYSQLLOCK_INVALID_ARGUMENT, "resource",
           "is_held of an empty resource");
    expect(mysqllock_lease_is_held(c, res, NULL), MYSQLLOCK_INVALID_ARGUMENT, "held_out",
           "is_held with a NULL held_out");
    expect(mysqllock_lease_set_table(c, "no such; table", 0), MYSQLLOCK_INVALID_ARGUMENT,
           "table", "set_table with a malformed name");
    check(acquired == true, "none of them wrote *acquired");
    expect(mysqllock_client_allow_cluster(NULL, true), MYSQLLOCK_INVALID_ARGUMENT, "client",
           "allow_cluster with a NULL client");
    mysqllock_client_free(c);
}

static void test_missing_and_myisam_tables(void)
{
    mysqllock_client *c = open_on(missing_table);
    const char *res = unique_name("table"), *alice = unique_name("alice");
    bool acquired = true;

    expect(mysqllock_lease_acquire(c, res, alice, 30, 0, &acquired, NULL, NULL), MYSQLLOCK_TABLE,
           "CREATE TABLE", "acquire on a missing table is TABLE, with the DDL");
    check(strstr(last_error(), missing_table) && strstr(last_error(), "ENGINE=InnoDB")
              && strstr(last_error(), "mysqllock init --lease"),
          "the message names the table, the InnoDB DDL and `mysqllock init --lease`");
    check(acquired == true, "and *acquired is unwritten");

    char sql[400];
    /* latin1: a MyISAM key holds 1000 bytes, less than VARCHAR(255) in utf8mb4 (MySQL's
     * default character set; the test server's MariaDB database is latin1). */
    snprintf(sql, sizeof sql,
             "CREATE TABLE %s (resource VARCHAR(255) PRIMARY KEY, owner VARCHAR(255) NOT NULL, "
             "expires_at DATETIME NOT NULL, acquired_at DATETIME NOT NULL DEFAULT "
             "CURRENT_TIMESTAMP) ENGINE=MyISAM DEFAULT CHARSET=latin1",
             myisam_table);
    check(run_sql(&srv, sql), "create a MyISAM lease table with the stock client");
    expect(mysqllock_lease_set_table(c, myisam_table, 0), MYSQLLOCK_OK, NULL,
           "lease_set_table switches the table");
    expect(mysqllock_lease_acquire(c, res, alice, 30, 0, &acquired, NULL, NULL), MYSQLLOCK_TABLE,
           "MyISAM", "acquire on a MyISAM table is TABLE, naming the engine");
    check(rows_of(myisam_table, res) == 0, "and writes nothing there");
    mysqllock_client_free(c);
}

static void test_status_codes_and_allow_cluster(void)
{
    check(MYSQLLOCK_CLUSTER_NODE == 10 && MYSQLLOCK_NODE_NOT_READY == 11,
          "CLUSTER_NODE is 10, NODE_NOT_READY 11");
    check(strcmp(mysqllock_status_name(MYSQLLOCK_CLUSTER_NODE), "MYSQLLOCK_CLUSTER_NODE") == 0
              && strcmp(mysqllock_status_name(MYSQLLOCK_NODE_NOT_READY), "MYSQLLOCK_NODE_NOT_READY")
                     == 0,
          "their names");

    /* On a standalone server, allowing the cluster changes nothing for GET_LOCK calls. */
    mysqllock_client *c = open_on(plain_table);
    const char *name = unique_name("allow");
    expect(mysqllock_client_allow_cluster(c, true), MYSQLLOCK_OK, NULL, "allow_cluster");
    expect(mysqllock_session_lock(c, name, 0), MYSQLLOCK_OK, NULL,
           "a session lock after allow_cluster on a standalone server");
    expect(mysqllock_session_unlock(c, name), MYSQLLOCK_OK, NULL, "and its unlock");
    mysqllock_client_free(c);
}

int main(void)
{
    srv = server_from_env();
    long pid = (long)getpid();
    snprintf(plain_table, sizeof plain_table, "lease_c_%ld", pid);
    snprintf(fenced_table, sizeof fenced_table, "lease_c_%ld_fenced", pid);
    snprintf(myisam_table, sizeof myisam_table, "lease_c_%ld_myisam", pid);
    snprintf(missing_table, sizeof missing_table, "lease_c_%ld_missing", pid);

    test_init_table();
    test_acquire_contend_release();
    test_renew();
    test_expired_lease_is_taken_over();
    test_tokens_on_an_upgraded_table();
    test_bad_input_writes_nothing();
    test_missing_and_myisam_tables();
    test_status_codes_and_allow_cluster();

    char drop[300];
    snprintf(drop, sizeof drop, "DROP TABLE IF EXISTS %s, %s, %s", plain_table, fenced_table,
             myisam_table);
    check(run_sql(&srv, drop), "drop this test's tables");
    printf("# test_lease: %d failed\n", tap_failures);
    return tap_failures == 0 ? 0 : 1;
}
