/*
 * A C caller of the chaos test: mysqllock_acquire_ex() in a loop (libmysqllock),
 * journaling each section it holds (format: tests/src/bin/chaos/journal.rs).
 *
 *   chaos-worker-c JOURNAL NAME DSN
 *
 * Started by `chaos drive`, which also sets CHAOS_* (see driver.rs, spawn). Each round:
 * read the clocks, acquire (TTL CHAOS_TTL, MYSQLLOCK_KEEP_ALIVE if CHAOS_KEEP_ALIVE=1),
 * journal `acquired`, write to the guard (the protected resource) under the fencing
 * token, hold 50-400 ms (a keep-alive holder asks for its remaining TTL halfway:
 * `renewed` or `lost`), journal the instant, release, journal what mysqllock_release()
 * reported: ok (MYSQLLOCK_OK), lost (MYSQLLOCK_NOT_HELD) or error. Errors (server
 * restarting, session killed) are logged and the loop goes on.
 *
 * With CHAOS_TOKENS=0 (the original table, which has no tokens: `chaos drive --table
 * original`) TOKEN is the section's identity, the MONO_NS of its `acquired` line (see
 * journal.rs), and nothing is written to the guard, which needs tokens.
 *
 * With CHAOS_LEASE=1 (the cluster chaos, tests/suites/70-galera.sh) it uses the lease
 * mode instead: mysqllock_lease_acquire(NAME, OWNER, TTL, wait) on the node DSN names,
 * OWNER = "LABEL:PID:N" (unique per acquisition), DEADLINE_NS = the monotonic clock read
 * right after acquire returned plus remaining_out (the library's local deadline,
 * overstated by microseconds at most, far below its 0.5 s margin), token = token_out;
 * mysqllock_lease_release() released = ok, not released = lost, an error status = error.
 * On any error status the worker opens a new client after a short pause.
 *
 * MYSQLLOCK_BREAK breaks this worker on purpose, to show that the checker catches it
 * (in both modes):
 *   exclusion    never calls acquire: "acquires" at once under a made-up token
 *   ignore-loss  journals every release as ok and never journals `lost`
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <inttypes.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "mysqllock.h"

extern char **environ;

static const char *setting(const char *name)
{
    const char *value = getenv(name);
    if (value == NULL || value[0] == '\0') {
        fprintf(stderr, "worker.c: %s is not set (run me through chaos drive)\n", name);
        exit(2);
    }
    return value;
}

static void say(const char *step, mysqllock_status status)
{
    char message[1024];
    mysqllock_last_error(message, sizeof message, NULL);
    fprintf(stderr, "worker.c %s: %s: %s: %s\n", setting("CHAOS_WORKER"), step, mysqllock_status_name(status),
            message);
}

static void nap_ms(long ms)
{
    struct timespec left = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&left, &left) != 0 && errno == EINTR) {
    }
}

/* xorshift64*: the hold times replay from CHAOS_SEED. */
static uint64_t rng_state;

static long random_between(long low, long high)
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return low + (long)((rng_state * 2685821657736338717ULL) % (uint64_t)(high - low + 1));
}

static uint64_t clock_ns(clockid_t clock)
{
    struct timespec now;
    clock_gettime(clock, &now);
    return (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
}

static uint64_t mono_ns(void)
{
    return clock_ns(CLOCK_MONOTONIC);
}

/* DEADLINE_NS of a TTL lease whose acquire is called next: the monotonic clock now,
 * plus the wall clock's way to floor(now) + ceil(ttl) + 1 (see ttl_deadline_ns in
 * journal.rs), less a 5 ms margin. The wall clock is read after the monotonic one, so
 * its floor is never past the acquisition's. */
static uint64_t ttl_deadline(double ttl)
{
    uint64_t mono = mono_ns();
    uint64_t into_second = clock_ns(CLOCK_REALTIME) % 1000000000u;
    return mono + (uint64_t)ceil(ttl) * 1000000000u + (1000000000u - into_second) - 5000000u;
}

/* MYSQLLOCK_BREAK=exclusion's token: 1e18 plus the monotonic clock in microseconds, so it
 * increases and lies above every real token (GET_LOCK-mode tokens count up from 1, lease
 * tokens from the microseconds since 1970, about 1.8e15). */
static uint64_t made_up_token(void)
{
    return 1000000000000000000ULL + mono_ns() / 1000u;
}

static const char *journal_path;

/* Appends one journal line: a single write(2) on a descriptor opened with O_APPEND. */
static void journal(const char *format, ...) __attribute__((format(printf, 1, 2)));

static void journal(const char *format, ...)
{
    char line[512];
    va_list args;
    va_start(args, format);
    int n = vsnprintf(line, sizeof line - 1, format, args);
    va_end(args);
    if (n < 0 || (size_t)n >= sizeof line - 1) {
        fprintf(stderr, "worker.c: journal line too long\n");
        exit(2);
    }
    line[n++] = '\n';
    int fd = open(journal_path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0 || write(fd, line, (size_t)n) != n) {
        fprintf(stderr, "worker.c: cannot write to %s: %s\n", journal_path, strerror(errno));
        exit(2);
    }
    close(fd);
}

/* Runs `chaos guard begin|end NAME TOKEN PID`: true = accepted. */
static bool guard(const char *op, const char *name, uint64_t token)
{
    char token_text[24], pid_text[24];
    char *chaos = (char *)setting("CHAOS_BIN");
    snprintf(token_text, sizeof token_text, "%" PRIu64, token);
    snprintf(pid_text, sizeof pid_text, "%ld", (long)getpid());
    char *argv[] = {chaos, "guard", (char *)op, (char *)name, token_text, pid_text, NULL};
    pid_t child;
    int status;
    if (posix_spawn(&child, chaos, NULL, NULL, argv, environ) != 0) {
        fprintf(stderr, "worker.c: cannot start %s\n", chaos);
        return false;
    }
    while (waitpid(child, &status, 0) < 0) {
        if (errno != EINTR) {
            fprintf(stderr, "worker.c: waiting for the guard: %s\n", strerror(errno));
            return false;
        }
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) > 1) {
        fprintf(stderr, "worker.c: the guard failed (%s %s)\n", op, name);
    }
    return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

static mysqllock_client *connect_client(const char *dsn, const char *stop_file)
{
    mysqllock_client *client = NULL;
    mysqllock_status status;
    while ((status = mysqllock_client_open_url(dsn, &client)) != MYSQLLOCK_OK) {
        say("open", status);
        if (access(stop_file, F_OK) == 0) {
            exit(0);
        }
        nap_ms(200);
    }
    return client;
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: chaos-worker-c JOURNAL NAME DSN\n");
        return 2;
    }
    journal_path = argv[1];
    const char *name = argv[2];
    const char *dsn = argv[3];
    const char *stop_file = setting("CHAOS_STOP");
    const char *broken = getenv("MYSQLLOCK_BREAK") != NULL ? getenv("MYSQLLOCK_BREAK") : "";
    bool skip_lock = strcmp(broken, "exclusion") == 0;
    bool ignore_loss = strcmp(broken, "ignore-loss") == 0;
    if (broken[0] != '\0' && !skip_lock && !ignore_loss) {
        fprintf(stderr, "worker.c: MYSQLLOCK_BREAK=%s: expected exclusion or ignore-loss\n", broken);
        return 2;
    }
    double ttl = strtod(setting("CHAOS_TTL"), NULL);
    double timeout = strtod(setting("CHAOS_TIMEOUT"), NULL);
    bool keep_alive = strcmp(setting("CHAOS_KEEP_ALIVE"), "1") == 0;
    bool tokens = strcmp(setting("CHAOS_TOKENS"), "1") == 0;
    mysqllock_options options = {0};
    options.flags = keep_alive ? MYSQLLOCK_KEEP_ALIVE : 0;
    rng_state = strtoull(setting("CHAOS_SEED"), NULL, 10) | 1u;
    long pid = (long)getpid();
    mysqllock_client *client = connect_client(dsn, stop_file);

    if (strcmp(getenv("CHAOS_LEASE") != NULL ? getenv("CHAOS_LEASE") : "", "1") == 0) {
        const char *label = setting("CHAOS_WORKER");
        for (unsigned long round = 1; access(stop_file, F_OK) != 0; round++) {
            char owner[128];
            snprintf(owner, sizeof owner, "%s:%ld:%lu", label, pid, round);
            uint64_t token = 0, deadline = 0;
            if (skip_lock) {
                token = made_up_token(); /* never called acquire */
                deadline = mono_ns() + (uint64_t)(ttl * 1e9);
            } else {
                bool acquired = false;
                double remaining = 0;
                mysqllock_status status =
                    mysqllock_lease_acquire(client, name, owner, ttl, timeout, &acquired, &token, &remaining);
                deadline = mono_ns() + (uint64_t)(remaining * 1e9);
                if (status != MYSQLLOCK_OK) {
                    say("lease acquire", status);
                    mysqllock_client_free(client);
                    nap_ms(300); /* a pause before trying again, not a wait for anybody */
                    client = connect_client(dsn, stop_file);
                    continue;
                }
                if (!acquired) {
                    continue;
                }
                if (token == 0) {
                    fprintf(stderr, "worker.c: no token: is the lease table upgraded (init --lease --upgrade)?\n");
                    return 2;
                }
            }
            journal("acquired %" PRIu64 " %s %" PRIu64 " %" PRIu64 " %ld", mono_ns(), name, token, deadline, pid);
            guard("begin", name, token);
            nap_ms(random_between(50, 400)); /* the work done under the lock (the behaviour under test) */
            guard("end", name, token);
            uint64_t releasing = mono_ns();
            const char *result = "ok";
            if (!skip_lock) {
                bool released = false;
                mysqllock_status status = mysqllock_lease_release(client, name, owner, &released);
                if (status != MYSQLLOCK_OK) {
                    say("lease release", status);
                    result = "error";
                    mysqllock_client_free(client);
                    client = connect_client(dsn, stop_file);
                } else if (!released) {
                    result = "lost";
                }
            }
            journal("release %" PRIu64 " %s %" PRIu64 " %s %ld", releasing, name, token, ignore_loss ? "ok" : result,
                    pid);
        }
        mysqllock_client_free(client);
        return 0;
    }

    while (access(stop_file, F_OK) != 0) {
        uint64_t token = 0;
        mysqllock_status status = MYSQLLOCK_OK;
        uint64_t deadline = ttl_deadline(ttl);
        if (skip_lock) {
            token = made_up_token();
        } else {
            status = mysqllock_acquire_ex(client, name, timeout, ttl, &options, &token);
        }
        if (status == MYSQLLOCK_TIMEOUT) {
            continue;
        }
        if (status != MYSQLLOCK_OK) {
            say("acquire", status);
            if (status == MYSQLLOCK_INTERNAL) {
                mysqllock_client_free(client);
                client = connect_client(dsn, stop_file);
            }
            nap_ms(200); /* a pause before trying again, not a wait for anybody */
            continue;
        }
        if (tokens && token == 0) {
            fprintf(stderr, "worker.c: no fencing token: is the table upgraded (mysqllock init --upgrade)?\n");
            mysqllock_release(client, name);
            nap_ms(200);
            continue;
        }
        uint64_t acquired = mono_ns();
        if (!tokens) {
            token = acquired; /* the section's identity */
        }
        journal("acquired %" PRIu64 " %s %" PRIu64 " %" PRIu64 " %ld", acquired, name, token, deadline, pid);
        if (tokens) {
            guard("begin", name, token);
        }
        long hold = random_between(50, 400);
        nap_ms(hold / 2); /* the work done under the lock (the behaviour under test) */
        if (keep_alive && !skip_lock) {
            uint64_t before = mono_ns();
            double remaining = 0;
            status = mysqllock_remaining_ttl(client, name, &remaining);
            if (status == MYSQLLOCK_OK && remaining > 0) {
                uint64_t until = before + (uint64_t)((remaining + 1.0) * 1e9) - 5000000u;
                journal("renewed %" PRIu64 " %s %" PRIu64 " %" PRIu64 " %ld", mono_ns(), name, token, until, pid);
            } else if (status == MYSQLLOCK_NOT_HELD && !ignore_loss) {
                journal("lost %" PRIu64 " %s %" PRIu64 " %ld", mono_ns(), name, token, pid);
            } else if (status != MYSQLLOCK_OK && status != MYSQLLOCK_NOT_HELD) {
                say("remaining TTL", status);
            }
        }
        nap_ms(hold - hold / 2);
        if (tokens) {
            guard("end", name, token);
        }
        uint64_t releasing = mono_ns();
        const char *result = "ok";
        if (!skip_lock) {
            status = mysqllock_release(client, name);
            if (status != MYSQLLOCK_OK) {
                say("release", status);
                result = status == MYSQLLOCK_NOT_HELD ? "lost" : "error";
            }
        }
        journal("release %" PRIu64 " %s %" PRIu64 " %s %ld", releasing, name, token, ignore_loss ? "ok" : result, pid);
        if (strcmp(result, "error") == 0) {
            /* The lock may still be registered as held: start over on a new session. */
            mysqllock_client_free(client);
            client = connect_client(dsn, stop_file);
        }
    }
    mysqllock_client_free(client);
    return 0;
}
