/*
 * Two processes contending for one lock through the C API (linked statically in the
 * suite). Each child opens its own client after fork(); a client inherited from the
 * parent refuses every call in the child, and freeing it there touches nothing of the
 * parent's (also while the parent's keep-alive renews its lease).
 *
 * Usage: MYSQLLOCK_TEST_DSN=mysql://user:pass@host:port/db test_fork
 */
#define _POSIX_C_SOURCE 200809L

#include <dirent.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tap.h"

static const char *dsn;

static mysqllock_client *open_client(void)
{
    return open_url_or_exit(dsn);
}

/* Forks; the child runs `body` with its own client and exits with its failure count. */
static pid_t spawn(void (*body)(mysqllock_client *, const char *, int), const char *name,
                   int fd)
{
    fflush(stdout); /* or the child would print the parent's buffered lines again */
    pid_t pid = fork();
    if (pid == 0) {
        tap_failures = 0; /* the exit status reports the child's own checks */
        mysqllock_client *mine = open_client();
        body(mine, name, fd);
        mysqllock_client_free(mine);
        fflush(stdout);
        _exit(tap_failures == 0 ? 0 : 1);
    }
    return pid;
}

static int child_succeeded(pid_t pid)
{
    int status = 0;
    return waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

static void contend(mysqllock_client *c, const char *name, int fd)
{
    (void)fd;
    bool acquired = true;
    expect(mysqllock_try_acquire(c, name, 10, &acquired), MYSQLLOCK_OK, NULL,
           "child: try_acquire while the parent holds the lease");
    check(!acquired, "child: the parent's lease is not acquired");
    double start = now();
    expect(mysqllock_acquire(c, name, 0.3, 10), MYSQLLOCK_TIMEOUT, name,
           "child: acquire times out while the parent holds the lease");
    double waited = now() - start;
    check(waited >= 0.28 && waited < 10, "child: waited the timeout (%.3f s)", waited);
}

static void wait_for_release(mysqllock_client *c, const char *name, int fd)
{
    /* Tell the parent we are waiting, then wait up to 30 s for its release. */
    if (write(fd, "w", 1) != 1) {
        check(0, "child: pipe write");
    }
    double start = now();
    expect(mysqllock_acquire(c, name, 30, 10), MYSQLLOCK_OK, NULL,
           "child: a waiting acquire gets the lease once the parent releases it");
    check(now() - start < 10, "child: woken promptly by the release (%.3f s)", now() - start);
    mysqllock_release(c, name);
}

static void hold_and_die(mysqllock_client *c, const char *name, int fd)
{
    expect(mysqllock_acquire(c, name, 0, 600), MYSQLLOCK_OK, NULL, "child: acquire a lease");
    if (write(fd, "h", 1) != 1) {
        check(0, "child: pipe write");
    }
    /* Exits without releasing: the server ends the session when the process dies. */
    fflush(stdout);
    _exit(tap_failures == 0 ? 0 : 1);
}

/*
 * The child of a keep-alive holder: the inherited client refuses every call and its free
 * closes nothing; the child stays alive past the lease's TTL, then exits normally (exit,
 * not _exit: nothing at exit may touch the parent's session either).
 */
static void child_of_keep_alive_holder(mysqllock_client *inherited, const char *name)
{
    uint64_t token = 0;
    check(thread_count() == 1, "child: no keep-alive thread runs here (%d threads)",
          thread_count());
    expect(mysqllock_renew(inherited, name, 60), MYSQLLOCK_INVALID_ARGUMENT, "forked child",
           "child: renew on the inherited client is refused");
    expect(mysqllock_release(inherited, name), MYSQLLOCK_INVALID_ARGUMENT, "open a new client",
           "child: release on the inherited client is refused");
    expect(mysqllock_token(inherited, name, &token), MYSQLLOCK_INVALID_ARGUMENT, "forked child",
           "child: any call on the inherited client is refused");
    mysqllock_client_free(inherited);
    mysqllock_client *mine = open_client();
    mysqllock_holder_info info;
    bool found = false;
    check(mysqllock_holder(mine, name, &info, &found) == MYSQLLOCK_OK && found && info.alive,
          "child: freeing the inherited client left the parent's session holding the lease");
    bool acquired = true;
    expect(mysqllock_try_acquire(mine, name, 10, &acquired), MYSQLLOCK_OK, NULL,
           "child: try_acquire on its own client");
    check(!acquired, "child: the parent's kept-alive lease is held");
    /* The child lives on until the lease it saw has run out, so that only the parent's
     * keep-alive (not the child's inherited copy of it) can have held it since. Expiries
     * are whole seconds: one more than the 2 s TTL past the seen one was set after the
     * seen one had passed. */
    check(wait_for_expiry_after(mine, name, info.expires_at + 2),
          "child: the parent's keep-alive renewed the lease after the TTL it had at the fork");
    mysqllock_client_free(mine);
    fflush(stdout);
    exit(tap_failures == 0 ? 0 : 1);
}

static void test_fork_of_a_keep_alive_holder(mysqllock_client *parent)
{
    const mysqllock_options keep_alive = {MYSQLLOCK_KEEP_ALIVE, 0, 0};
    char name[96];
    snprintf(name, sizeof name, "c-%ld-fork-keep-alive", (long)getpid());
    expect(mysqllock_acquire_ex(parent, name, 0, 2, &keep_alive, NULL), MYSQLLOCK_OK, NULL,
           "parent: acquire with keep-alive and a 2 s TTL");
    mysqllock_client *observer = open_client();
    /* Once it has renewed, the keep-alive thread has its own socket: inherited too. */
    check(wait_for_renewal(observer, name), "parent: the keep-alive has renewed the lease");
    mysqllock_client_free(observer);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        tap_failures = 0;
        child_of_keep_alive_holder(parent, name);
    }
    check(child_succeeded(pid), "the child of a keep-alive holder touched nothing of the parent's");
    mysqllock_client *other = open_client();
    bool acquired = true;
    mysqllock_try_acquire(other, name, 10, &acquired);
    check(!acquired, "after the child exited, the parent's lease is still held");
    expect(mysqllock_assert_ttl(parent, name, 0.1), MYSQLLOCK_OK, NULL,
           "parent: its session and keep-alive survived the child");
    expect(mysqllock_release(parent, name), MYSQLLOCK_OK, NULL,
           "parent: releases the lease it never lost");
    mysqllock_client_free(other);
}

int main(void)
{
    char name[96], buf[1];
    int fds[2];
    dsn = getenv("MYSQLLOCK_TEST_DSN");
    if (dsn == NULL || pipe(fds) != 0) {
        fprintf(stderr, "MYSQLLOCK_TEST_DSN is not set\n");
        return 2;
    }
    mysqllock_client *parent = open_client();

    snprintf(name, sizeof name, "c-%ld-fork", (long)getpid());
    expect(mysqllock_acquire(parent, name, 0, 30), MYSQLLOCK_OK, NULL, "parent: acquire");
    check(child_succeeded(spawn(contend, name, fds[1])),
          "a child process cannot take the parent's lease");

    pid_t waiter = spawn(wait_for_release, name, fds[1]);
    check(read(fds[0], buf, 1) == 1, "parent: the child is waiting");
    expect(mysqllock_release(parent, name), MYSQLLOCK_OK, NULL, "parent: release");
    check(child_succeeded(waiter), "the waiting child got the lease after the release");

    snprintf(name, sizeof name, "c-%ld-dies", (long)getpid());
    pid_t holder = spawn(hold_and_die, name, fds[1]);
    check(read(fds[0], buf, 1) == 1, "parent: the child holds the lease");
    check(child_succeeded(holder), "the holding child exited");
    double start = now();
    expect(mysqllock_acquire(parent, name, 10, 30), MYSQLLOCK_OK, NULL,
           "a lease whose holder died is acquired");
    check(now() - start < 5, "without waiting for its 600 s TTL (%.3f s)", now() - start);
    mysqllock_release(parent, name);

    test_fork_of_a_keep_alive_holder(parent);

    mysqllock_client_free(parent);
    printf("# test_fork: %d failed in the parent\n", tap_failures);
    return tap_failures == 0 ? 0 : 1;
}
