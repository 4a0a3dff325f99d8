/*
 * A C caller of the chaos test: mysqllock_acquire_ex() in a loop (libmysqllock),
 * writing to the guard (the protected resource) under the fencing token it returns.
 *
 * Started by `chaos drive`, which sets CHAOS_* and MYSQLLOCK_DSN. Each round: acquire
 * (TTL CHAOS_TTL, MYSQLLOCK_KEEP_ALIVE if CHAOS_KEEP_ALIVE=1), begin, hold 50-400 ms,
 * end, release, then record what mysqllock_release() reported: ok (MYSQLLOCK_OK), lost
 * (MYSQLLOCK_NOT_HELD) or error. Errors (server restarting, session killed) are logged
 * and the loop goes on.
 *
 * CHAOS_BREAK breaks this worker on purpose, to show that the checker catches it:
 *   skip-lock    takes no lock at all and writes under a made-up token
 *   ignore-loss  records every release as ok, whatever mysqllock_release() said
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <inttypes.h>
#include <spawn.h>
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

/* Runs `chaos guard OP NAME TOKEN PID [RESULT]`: 0 = accepted or recorded, 1 = rejected.
 * A guard that cannot run ends this worker (the driver starts a new one). */
static int guard(const char *op, const char *name, uint64_t token, const char *result)
{
    char token_text[24], pid_text[24];
    char *guard_path = (char *)setting("CHAOS_GUARD");
    snprintf(token_text, sizeof token_text, "%" PRIu64, token);
    snprintf(pid_text, sizeof pid_text, "%ld", (long)getpid());
    char *argv[] = {guard_path, "guard", (char *)op, (char *)name, token_text, pid_text, (char *)result, NULL};
    pid_t child;
    int status;
    if (posix_spawn(&child, guard_path, NULL, NULL, argv, environ) != 0) {
        fprintf(stderr, "worker.c: cannot start %s\n", guard_path);
        exit(2);
    }
    while (waitpid(child, &status, 0) < 0) {
        if (errno != EINTR) {
            fprintf(stderr, "worker.c: waiting for the guard: %s\n", strerror(errno));
            exit(2);
        }
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) > 1) {
        fprintf(stderr, "worker.c: the guard failed (%s %s)\n", op, name);
        exit(2);
    }
    return WEXITSTATUS(status);
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

/* A token above every real one (the table's counter is far below the clock in µs). */
static uint64_t made_up_token(void)
{
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    return (uint64_t)now.tv_sec * 1000000u + (uint64_t)now.tv_nsec / 1000u;
}

int main(void)
{
    const char *name = setting("CHAOS_NAME");
    const char *stop_file = setting("CHAOS_STOP");
    const char *broken = getenv("CHAOS_BREAK") != NULL ? getenv("CHAOS_BREAK") : "";
    bool skip_lock = strcmp(broken, "skip-lock") == 0;
    bool ignore_loss = strcmp(broken, "ignore-loss") == 0;
    double ttl = strtod(setting("CHAOS_TTL"), NULL);
    double timeout = strtod(setting("CHAOS_TIMEOUT"), NULL);
    mysqllock_options options = {0};
    options.flags = strcmp(setting("CHAOS_KEEP_ALIVE"), "1") == 0 ? MYSQLLOCK_KEEP_ALIVE : 0;
    rng_state = strtoull(setting("CHAOS_SEED"), NULL, 10) | 1u;
    mysqllock_client *client = connect_client(setting("MYSQLLOCK_DSN"), stop_file);

    while (access(stop_file, F_OK) != 0) {
        uint64_t token = 0;
        mysqllock_status status = MYSQLLOCK_OK;
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
                client = connect_client(setting("MYSQLLOCK_DSN"), stop_file);
            }
            nap_ms(200);
            continue;
        }
        if (token == 0) {
            fprintf(stderr, "worker.c: no fencing token: is the table upgraded (mysqllock init --upgrade)?\n");
            mysqllock_release(client, name);
            nap_ms(200);
            continue;
        }
        if (guard("begin", name, token, NULL) == 0) {
            nap_ms(random_between(50, 400));
            guard("end", name, token, NULL);
        }
        const char *result = "ok";
        if (!skip_lock) {
            status = mysqllock_release(client, name);
            if (status != MYSQLLOCK_OK) {
                say("release", status);
                result = status == MYSQLLOCK_NOT_HELD ? "lost" : "error";
            }
        }
        guard("release", name, token, ignore_loss ? "ok" : result);
        if (strcmp(result, "error") == 0) {
            /* The lock may still be registered as held: start over on a new session. */
            mysqllock_client_free(client);
            client = connect_client(setting("MYSQLLOCK_DSN"), stop_file);
        }
    }
    mysqllock_client_free(client);
    return 0;
}
