/*
 * A few helpers shared by the C tests: TAP-like "ok - NAME" / "not ok - NAME" lines, a
 * failure count for the exit status, and the server's address taken apart.
 *
 * Every function is `static inline` so that a test which does not use one still
 * compiles under -Wall -Wextra -Werror.
 */
#ifndef MYSQLLOCK_TEST_TAP_H
#define MYSQLLOCK_TEST_TAP_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <dirent.h>
#include <stdbool.h>
#include <stdint.h>
#include <unistd.h>

#include "mysqllock.h"

static int tap_failures;

/* Prints one result line; `name` is printf-style. Returns `passed`. */
static inline int check(int passed, const char *name, ...)
{
    va_list ap;
    va_start(ap, name);
    printf("%s - ", passed ? "ok" : "not ok");
    vprintf(name, ap);
    printf("\n");
    va_end(ap);
    if (!passed) {
        tap_failures++;
    }
    fflush(stdout);
    return passed;
}

/* This thread's last error message, in a buffer owned by the test. */
static inline const char *last_error(void)
{
    static _Thread_local char buf[4096];
    mysqllock_last_error(buf, sizeof buf, NULL);
    return buf;
}

/*
 * Checks a call's status and, when `needle` is not NULL, that the last error contains
 * it. On a mismatch, prints what came back so the log explains the failure.
 */
static inline int expect(mysqllock_status got, mysqllock_status want, const char *needle,
                         const char *name)
{
    const char *msg = last_error();
    int passed = got == want && (needle == NULL || strstr(msg, needle) != NULL);
    if (!passed) {
        printf("# %s: got %s \"%s\", want %s containing \"%s\"\n", name,
               mysqllock_status_name((int)got), msg, mysqllock_status_name((int)want),
               needle ? needle : "");
    }
    return check(passed, "%s", name);
}

/* Seconds on a monotonic clock, for timing waits. */
static inline double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/*
 * Waits until the lease `name`'s expiry, as `observer` sees it, is later than `after`
 * (Unix seconds); 0 if that did not happen within 20 s.
 */
static inline int wait_for_expiry_after(mysqllock_client *observer, const char *name,
                                        int64_t after)
{
    mysqllock_holder_info info;
    bool found = false;
    for (double end = now() + 20; now() < end;) {
        if (mysqllock_holder(observer, name, &info, &found) == MYSQLLOCK_OK && found
            && info.expires_at > after) {
            return 1;
        }
        struct timespec poll = {0, 20 * 1000 * 1000};
        nanosleep(&poll, NULL); /* the poll interval of this wait helper */
    }
    return 0;
}

/*
 * Waits until the lease `name` has been renewed (its expiry moved later), as `observer`
 * sees it; 0 if that did not happen within 20 s.
 */
static inline int wait_for_renewal(mysqllock_client *observer, const char *name)
{
    mysqllock_holder_info info;
    bool found = false;
    if (mysqllock_holder(observer, name, &info, &found) != MYSQLLOCK_OK || !found) {
        return 0;
    }
    return wait_for_expiry_after(observer, name, info.expires_at);
}

/* Threads of this process (Linux: one entry per thread in /proc/self/task). */
static inline int thread_count(void)
{
    int n = 0;
    DIR *tasks = opendir("/proc/self/task");
    if (tasks == NULL) {
        return -1;
    }
    for (struct dirent *e; (e = readdir(tasks)) != NULL;) {
        n += e->d_name[0] != '.';
    }
    closedir(tasks);
    return n;
}

/*
 * Polls until this process runs `want` threads, for up to a second: a joined thread has
 * ended its code, but the kernel may list it in /proc/self/task a moment longer. A thread
 * that was not stopped keeps running (renewing every third of its TTL) and fails this.
 * Returns the last count seen.
 */
static inline int wait_for_thread_count(int want)
{
    const double until = now() + 1.0;
    int n = thread_count();
    while (n != want && now() < until) {
        struct timespec nap = {0, 2 * 1000 * 1000}; /* the poll interval */
        nanosleep(&nap, NULL);
        n = thread_count();
    }
    return n;
}

/* The test server, from MYSQLLOCK_TEST_DSN = mysql://user:password@host:port/database. */
struct server {
    const char *dsn;
    char user[64];
    char password[128];
    char host[128];
    unsigned int port;
    char database[64];
};

static inline struct server server_from_env(void)
{
    struct server s;
    memset(&s, 0, sizeof s);
    s.dsn = getenv("MYSQLLOCK_TEST_DSN");
    if (s.dsn == NULL
        || sscanf(s.dsn, "mysql://%63[^:]:%127[^@]@%127[^:]:%u/%63[^?]", s.user, s.password,
                  s.host, &s.port, s.database)
               != 5) {
        fprintf(stderr, "MYSQLLOCK_TEST_DSN must be mysql://user:password@host:port/database\n");
        exit(2);
    }
    return s;
}

/* A lock name, resource or owner unique to this process and `what`, so runs never collide. */
static inline const char *unique_name(const char *what)
{
    static char names[32][96];
    static int next;
    char *name = names[next++ % 32];
    snprintf(name, sizeof names[0], "c-%ld-%s", (long)getpid(), what);
    return name;
}

/* A client on `url`; the test cannot go on without one, so it exits with status 2. */
static inline mysqllock_client *open_url_or_exit(const char *url)
{
    mysqllock_client *c = NULL;
    if (mysqllock_client_open_url(url, &c) != MYSQLLOCK_OK) {
        fprintf(stderr, "cannot open a client: %s\n", last_error());
        exit(2);
    }
    return c;
}

/*
 * The stock client's command line for `sql` on `srv`'s database, as a DBA would run it
 * (`flags`: extra options such as "-N -B"). The statement goes in single quotes, each
 * quote in it escaped for the shell, so SQL with either kind of quote passes unchanged.
 */
static inline void stock_client_command(char *cmd, size_t size, const struct server *srv,
                                        const char *flags, const char *sql)
{
    char quoted[2048];
    size_t n = 0;
    quoted[n++] = '\'';
    for (const char *p = sql; *p && n + 5 < sizeof quoted; p++) {
        if (*p == '\'') {
            memcpy(quoted + n, "'\\''", 4);
            n += 4;
        } else {
            quoted[n++] = *p;
        }
    }
    quoted[n++] = '\'';
    quoted[n] = '\0';
    setenv("MYSQL_PWD", srv->password, 1);
    snprintf(cmd, size, "mariadb --no-defaults %s -h %s -P %u -u %s -e %s %s", flags, srv->host,
             srv->port, srv->user, quoted, srv->database);
}

/* Runs one statement with the stock client; 1 when it succeeded. */
static inline int run_sql(const struct server *srv, const char *sql)
{
    char cmd[4096];
    stock_client_command(cmd, sizeof cmd, srv, "", sql);
    return system(cmd) == 0;
}

/* The first column of the first row of a query with the stock client; -1 on failure. */
static inline long long query_number(const struct server *srv, const char *sql)
{
    char cmd[4096], line[64] = "";
    stock_client_command(cmd, sizeof cmd, srv, "-N -B", sql);
    FILE *out = popen(cmd, "r");
    if (out == NULL) {
        return -1;
    }
    char *got = fgets(line, sizeof line, out);
    int rc = pclose(out);
    return got != NULL && rc == 0 ? atoll(line) : -1;
}

#endif
