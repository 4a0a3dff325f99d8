/*
 * Session locks and what an acquisition recovers from by itself, through the C ABI:
 * case/accent variants are one session lock, who holds one, a GET_LOCK deadlock is
 * MYSQLLOCK_DEADLOCK, a session killed between two acquisitions is replaced, and a
 * crashed MyISAM lock table is repaired. Needs MYSQLLOCK_TEST_DSN, and for the crashed
 * table MYSQLLOCK_TEST_DIR (the test server's directory) and MYSQLLOCK_ROOT.
 */
#define _POSIX_C_SOURCE 200809L

#include <pthread.h>

#include "tap.h"

static struct server srv;

static mysqllock_client *open_client(void)
{
    return open_url_or_exit(srv.dsn);
}

/* Ends a session from outside, as a DBA or a lease takeover would. */
static int kill_session(uint64_t id)
{
    char sql[64];
    snprintf(sql, sizeof sql, "KILL %llu", (unsigned long long)id);
    return run_sql(&srv, sql);
}

static void test_case_and_accent_variants_are_one_session_lock(void)
{
    mysqllock_client *a = open_client(), *b = open_client();
    char name[96], upper[96], plain[96];
    snprintf(name, sizeof name, "%s-Müller", unique_name("variant"));
    snprintf(upper, sizeof upper, "%s-MÜLLER", unique_name("variant"));
    snprintf(plain, sizeof plain, "%s-muller", unique_name("variant"));

    expect(mysqllock_session_lock(a, name, 0), MYSQLLOCK_OK, NULL, "session_lock Müller");
    expect(mysqllock_session_lock(b, upper, 0), MYSQLLOCK_TIMEOUT, NULL,
           "its upper-case spelling is the same lock");
    expect(mysqllock_session_lock(b, plain, 0), MYSQLLOCK_TIMEOUT, NULL,
           "its spelling without accents is the same lock");
    expect(mysqllock_session_lock(a, upper, 5), MYSQLLOCK_ALREADY_HELD, NULL,
           "the holder taking another spelling is ALREADY_HELD, not a wait for itself");
    expect(mysqllock_session_unlock(a, plain), MYSQLLOCK_OK, NULL,
           "any spelling releases it");
    expect(mysqllock_session_lock(b, upper, 0), MYSQLLOCK_OK, NULL, "then it is free");
    mysqllock_client_free(a);
    mysqllock_client_free(b);
}

static void test_session_holder_and_held(void)
{
    mysqllock_client *a = open_client(), *b = open_client();
    const char *name = unique_name("holder");
    uint64_t holder = 99, a_id = 0;
    bool held = true;

    expect(mysqllock_session_holder(b, name, &holder), MYSQLLOCK_OK, NULL, "session_holder");
    check(holder == 0, "a free session lock has holder 0 (got %llu)", (unsigned long long)holder);
    mysqllock_session_lock(a, name, 0);
    mysqllock_connection_id(a, &a_id);
    expect(mysqllock_session_holder(b, name, &holder), MYSQLLOCK_OK, NULL, "session_holder");
    check(holder == a_id, "the holder is the locking client's session (%llu, want %llu)",
          (unsigned long long)holder, (unsigned long long)a_id);
    expect(mysqllock_session_held(a, name, &held), MYSQLLOCK_OK, NULL, "session_held");
    check(held, "the holder holds it");
    expect(mysqllock_session_held(b, name, &held), MYSQLLOCK_OK, NULL, "session_held");
    check(!held, "another client does not");
    mysqllock_session_unlock(a, name);
    expect(mysqllock_session_held(a, name, &held), MYSQLLOCK_OK, NULL, "session_held");
    check(!held, "after the unlock the former holder does not hold it");
    mysqllock_client_free(a);
    mysqllock_client_free(b);
}

struct waiter {
    const char *name;
    mysqllock_status got;
    mysqllock_client *client;
};

static void *wait_for_lock(void *arg)
{
    struct waiter *w = arg;
    w->got = mysqllock_session_lock(w->client, w->name, 20);
    return NULL;
}

/* Whether session `id` sleeps in a GET_LOCK, as the server's process list says. */
static int queued(uint64_t id)
{
    char sql[256];
    snprintf(sql, sizeof sql,
             "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = %llu "
             "AND STATE = 'User lock'",
             (unsigned long long)id);
    return query_number(&srv, sql) == 1;
}

static void test_a_get_lock_deadlock_is_deadlock(void)
{
    mysqllock_client *a = open_client(), *b = open_client();
    const char *first = unique_name("deadlock-1"), *second = unique_name("deadlock-2");
    uint64_t b_id = 0;
    pthread_t thread;

    mysqllock_session_lock(a, first, 0);
    mysqllock_session_lock(b, second, 0);
    mysqllock_connection_id(b, &b_id);
    struct waiter w = {first, MYSQLLOCK_INTERNAL, b};
    pthread_create(&thread, NULL, wait_for_lock, &w);
    double deadline = now() + 20;
    while (!queued(b_id) && now() < deadline) {
        /* polls the condition; the stock client's start-up is the interval */
    }
    check(queued(b_id), "the other client waits for the first lock");
    mysqllock_status mine = mysqllock_session_lock(a, second, 20);
    if (mine == MYSQLLOCK_DEADLOCK) {
        check(strstr(last_error(), "fixed order") != NULL, "the message says how to avoid it");
        check(mysqllock_session_unlock(a, first) == MYSQLLOCK_OK,
              "the refused client still held its other lock");
        pthread_join(thread, NULL);
        expect(w.got, MYSQLLOCK_OK, NULL, "and the other client got it once it was released");
    } else {
        pthread_join(thread, NULL);
        check(w.got == MYSQLLOCK_DEADLOCK, "one of the two waits is refused as a deadlock (%s, %s)",
              mysqllock_status_name((int)mine), mysqllock_status_name((int)w.got));
    }
    mysqllock_client_free(a);
    mysqllock_client_free(b);
}

static void test_a_session_killed_between_two_acquisitions_is_replaced(void)
{
    mysqllock_client *a = open_client();
    const char *lease = unique_name("killed-lease"), *plain = unique_name("killed-plain");
    const char *after = unique_name("killed-after");
    uint64_t old_id = 0, new_id = 0, holder = 0;

    mysqllock_acquire(a, lease, 0, 600);
    mysqllock_connection_id(a, &old_id);
    check(kill_session(old_id), "KILL the client's session");
    expect(mysqllock_acquire(a, after, 0, 600), MYSQLLOCK_OK, NULL,
           "the next lease acquisition succeeds");
    mysqllock_connection_id(a, &new_id);
    check(new_id != old_id, "on a fresh session (%llu, was %llu)", (unsigned long long)new_id,
          (unsigned long long)old_id);
    expect(mysqllock_release(a, lease), MYSQLLOCK_NOT_HELD, "session holding it was lost",
           "the lease of the killed session is NOT_HELD, with the reason");
    mysqllock_release(a, after);

    check(kill_session(new_id), "KILL the client's session again");
    expect(mysqllock_session_lock(a, plain, 0), MYSQLLOCK_OK, NULL,
           "the next session lock succeeds");
    mysqllock_connection_id(a, &new_id);
    mysqllock_session_holder(a, plain, &holder);
    check(holder == new_id && holder != 0, "on the fresh session (holder %llu, session %llu)",
          (unsigned long long)holder, (unsigned long long)new_id);
    mysqllock_client_free(a);
}

static void test_a_crashed_table_is_repaired(void)
{
    const char *dir = getenv("MYSQLLOCK_TEST_DIR"), *script = getenv("MYSQLLOCK_SERVER_SCRIPT");
    if (!check(dir != NULL && script != NULL,
               "MYSQLLOCK_TEST_DIR and MYSQLLOCK_SERVER_SCRIPT are set (the crashed-table test needs them)")) {
        return;
    }
    char table[64], url[768], cmd[1024], sql[512];
    snprintf(table, sizeof table, "crashed_c_%ld", (long)getpid());
    snprintf(url, sizeof url, "%s?table=%s", srv.dsn, table);
    snprintf(sql, sizeof sql,
             "CREATE TABLE %s (name varchar(64) NOT NULL, connection_id bigint(20) NOT NULL, "
             "created bigint(20) NOT NULL, ttl bigint(20) NOT NULL, lock_acquired tinyint(1) "
             "NOT NULL, UNIQUE KEY ix1 (name)) ENGINE=MyISAM DEFAULT CHARSET=latin1",
             table);
    check(run_sql(&srv, sql), "create a MyISAM lock table");
    mysqllock_client *a = open_url_or_exit(url);
    const char *name = unique_name("crashed");
    mysqllock_acquire(a, name, 0, 600);
    mysqllock_release(a, name);
    mysqllock_client_free(a);

    snprintf(cmd, sizeof cmd, "bash %s crash-table %s %s %s", script, dir,
             srv.database, table);
    check(system(cmd) == 0, "mark the table crashed");
    snprintf(sql, sizeof sql, "SELECT COUNT(*) FROM %s", table);
    check(query_number(&srv, sql) == -1, "the table is unusable until repaired");

    mysqllock_client *b = open_url_or_exit(url);
    uint64_t b_id = 0;
    expect(mysqllock_acquire(b, name, 0, 600), MYSQLLOCK_OK, NULL,
           "an acquisition on the crashed table repairs it and succeeds");
    mysqllock_connection_id(b, &b_id);
    snprintf(sql, sizeof sql, "SELECT connection_id FROM %s WHERE name = '%s'", table, name);
    check(query_number(&srv, sql) == (long long)b_id, "the repaired table holds the lease's row");
    mysqllock_client_free(b);
    snprintf(sql, sizeof sql, "DROP TABLE %s", table);
    run_sql(&srv, sql);
}

int main(void)
{
    srv = server_from_env();
    test_case_and_accent_variants_are_one_session_lock();
    test_session_holder_and_held();
    test_a_get_lock_deadlock_is_deadlock();
    test_a_session_killed_between_two_acquisitions_is_replaced();
    test_a_crashed_table_is_repaired();
    return tap_failures == 0 ? 0 : 1;
}
