/*
 * The C ABI on a silent network, and against a server that falls silent after the login.
 * A proxy between the client and the server
 * ($MYSQLLOCK_BIN/freezeproxy, frozen with SIGUSR1) stops passing bytes, as a dropped
 * route or a frozen VM would, with no RST and no FIN. Every call ends within its bound
 * (connect_timeout for a connect, the wait plus read_timeout for mysqllock_acquire,
 * read_timeout for the rest) with MYSQLLOCK_CONNECTION and a message saying the server
 * stopped answering. Needs MYSQLLOCK_TEST_DSN and MYSQLLOCK_BIN.
 */
#define _POSIX_C_SOURCE 200809L

#include <signal.h>
#include <sys/types.h>

#include "tap.h"

/* connect_timeout and read_timeout of the clients under test, and the scheduling slack
   every bound gets on top. */
#define CONNECT 2.0
#define READ 2.0
#define SLACK 3.0

static struct server srv;

struct proxy {
    FILE *out;
    pid_t pid;
    unsigned int port;
};

/* Starts $MYSQLLOCK_BIN/freezeproxy with `args`; exits with status 2 if it cannot. */
static struct proxy freezeproxy_start(const char *args)
{
    struct proxy p = {NULL, 0, 0};
    const char *bin = getenv("MYSQLLOCK_BIN");
    char cmd[1024];
    if (bin == NULL) {
        fprintf(stderr, "MYSQLLOCK_BIN is not set (the target/release directory)\n");
        exit(2);
    }
    /* `exec`: the proxy becomes the shell's process, whose pid the shell said first. */
    snprintf(cmd, sizeof cmd, "echo pid $$; exec %s/freezeproxy %s", bin, args);
    p.out = popen(cmd, "r");
    long pid = 0;
    char first[64] = "", second[64] = "";
    /* Line by line: a scanf format ending in whitespace would wait for the next line. */
    if (p.out == NULL || fgets(first, sizeof first, p.out) == NULL
        || fgets(second, sizeof second, p.out) == NULL || sscanf(first, "pid %ld", &pid) != 1
        || sscanf(second, "port %u", &p.port) != 1) {
        fprintf(stderr, "cannot start %s/freezeproxy\n", bin);
        exit(2);
    }
    p.pid = (pid_t)pid;
    return p;
}

/* The freeze proxy in front of the test server. */
static struct proxy proxy_start(void)
{
    char args[512];
    snprintf(args, sizeof args, "%s:%u", srv.host, srv.port);
    return freezeproxy_start(args);
}

static void proxy_signal(const struct proxy *p, int sig, const char *said)
{
    char line[64] = "";
    kill(p->pid, sig);
    /* The proxy says it once it has done it. */
    if (fgets(line, sizeof line, p->out) == NULL || strncmp(line, said, strlen(said)) != 0) {
        fprintf(stderr, "the proxy did not say %s\n", said);
        exit(2);
    }
}

static void proxy_stop(struct proxy *p)
{
    kill(p->pid, SIGTERM);
    pclose(p->out);
}

/* The test server's URL through the proxy, with the timeouts under test. */
static const char *through(const struct proxy *p)
{
    static char url[512];
    snprintf(url, sizeof url,
             "mysql://%s:%s@127.0.0.1:%u/%s?connect_timeout=%g&read_timeout=%g&write_timeout=%g",
             srv.user, srv.password, p->port, srv.database, CONNECT, READ, READ);
    return url;
}

static void test_a_connect_through_a_frozen_network_ends_within_connect_timeout(void)
{
    struct proxy p = proxy_start();
    mysqllock_client *c = NULL;
    proxy_signal(&p, SIGUSR1, "frozen");
    double start = now();
    mysqllock_status got = mysqllock_client_open_url(through(&p), &c);
    double took = now() - start;
    expect(got, MYSQLLOCK_CONNECTION, "stopped answering for 2 s during the connect",
           "opening a client through a frozen network is MYSQLLOCK_CONNECTION");
    check(took < CONNECT + SLACK, "within connect_timeout (took %.1f s)", took);
    check(c == NULL, "and *out is not written");
    proxy_stop(&p);
}

/* The junk server of issue 35: a greeting with an unknown plugin and an auth data length
   of 0xEE, any login accepted, then silence. The mysql crate, the core's fallback then,
   read it and waited on the silent setup; the core's own client refuses it at once. */
static void test_a_server_whose_greeting_the_client_cannot_read_ends_the_open_at_once(void)
{
    struct proxy p = freezeproxy_start("--stall unknown-plugin");
    char url[256];
    /* Bounds far above the slack: only a refusal at once ends within it. */
    snprintf(url, sizeof url,
             "mysql://u:p@127.0.0.1:%u/db?connect_timeout=30&read_timeout=30&write_timeout=30", p.port);
    mysqllock_client *c = NULL;
    double start = now();
    mysqllock_status got = mysqllock_client_open_url(url, &c);
    double took = now() - start;
    expect(got, MYSQLLOCK_CONNECTION, "a greeting this client cannot read",
           "opening a client on a server whose greeting it cannot read");
    check(took < SLACK, "at once, not after a bound (took %.1f s)", took);
    check(c == NULL, "and *out is not written");
    proxy_stop(&p);
}

static void test_a_lock_wait_on_a_frozen_network_ends_within_the_wait_plus_read_timeout(void)
{
    const char *name = unique_name("silent-wait");
    mysqllock_client *holder = open_url_or_exit(srv.dsn);
    expect(mysqllock_acquire(holder, name, 0, 60), MYSQLLOCK_OK, NULL, "the holder takes the lock");
    struct proxy p = proxy_start();
    mysqllock_client *waiter = open_url_or_exit(through(&p));
    proxy_signal(&p, SIGUSR1, "frozen");
    double start = now();
    mysqllock_status got = mysqllock_acquire(waiter, name, 3.0, 60.0);
    double took = now() - start;
    expect(got, MYSQLLOCK_CONNECTION, "stopped answering for",
           "mysqllock_acquire on a frozen network is MYSQLLOCK_CONNECTION, not a hang");
    check(took < 3.0 + READ + SLACK, "within the wait plus read_timeout (took %.1f s)", took);
    expect(mysqllock_release(waiter, name), MYSQLLOCK_NOT_HELD, NULL,
           "and the waiter holds nothing afterwards");
    mysqllock_client_free(waiter);
    proxy_stop(&p);
    mysqllock_release(holder, name);
    mysqllock_client_free(holder);
}

static void test_release_and_the_ttl_on_a_frozen_network_end_within_read_timeout(void)
{
    const char *name = unique_name("silent-release");
    struct proxy p = proxy_start();
    mysqllock_client *c = open_url_or_exit(through(&p));
    double remaining = 0;
    expect(mysqllock_acquire(c, name, 0, 60), MYSQLLOCK_OK, NULL, "acquired through the proxy");
    proxy_signal(&p, SIGUSR1, "frozen");
    double start = now();
    expect(mysqllock_remaining_ttl(c, name, &remaining), MYSQLLOCK_CONNECTION,
           "during a statement", "mysqllock_remaining_ttl on a frozen network");
    check(now() - start < READ + SLACK, "within read_timeout (took %.1f s)", now() - start);
    start = now();
    mysqllock_status got = mysqllock_release(c, name);
    check(got != MYSQLLOCK_OK, "mysqllock_release after the session went silent does not report success (%s)",
          mysqllock_status_name((int)got));
    check(now() - start < READ + SLACK, "and ends within read_timeout (took %.1f s)", now() - start);
    mysqllock_client_free(c);
    proxy_stop(&p);
}

int main(void)
{
    srv = server_from_env();
    mysqllock_client *setup = open_url_or_exit(srv.dsn);
    bool created = false;
    expect(mysqllock_init_table(setup, &created), MYSQLLOCK_OK, NULL, "the lock table exists");
    mysqllock_client_free(setup);
    test_a_connect_through_a_frozen_network_ends_within_connect_timeout();
    test_a_server_whose_greeting_the_client_cannot_read_ends_the_open_at_once();
    test_a_lock_wait_on_a_frozen_network_ends_within_the_wait_plus_read_timeout();
    test_release_and_the_ttl_on_a_frozen_network_end_within_read_timeout();
    return tap_failures == 0 ? 0 : 1;
}
