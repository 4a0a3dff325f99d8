/*
 * The C side of bench/session.sh: uncontended session lock + release cycles through the
 * C ABI (mysqllock_session_lock / mysqllock_session_unlock), timed here on
 * CLOCK_MONOTONIC, driven over stdin/stdout by bench/php/session_cycles.php so that its
 * blocks of cycles interleave with the PHP implementations' blocks.
 *
 *   session_cycles URL NAME WARMUP
 *
 * Connects, runs WARMUP untimed cycles on NAME, prints "ready". Then, for every line "N"
 * on stdin, runs N cycles and prints one line: the N cycle times in nanoseconds,
 * space-separated. Ends at the end of its input (exit 0). Any status other than
 * MYSQLLOCK_OK is a failure: the message goes to stderr, exit 1.
 */
#define _POSIX_C_SOURCE 199309L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "mysqllock.h"

static mysqllock_client *client;
static const char *name;

static void fail(const char *step, mysqllock_status status)
{
    char message[1024];
    mysqllock_last_error(message, sizeof message, NULL);
    fprintf(stderr, "bench/c/session_cycles: %s(%s): %s: %s\n", step, name, mysqllock_status_name(status), message);
    exit(1);
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* One uncontended cycle: take the free lock with one try (timeout 0), release it. */
static uint64_t cycle(void)
{
    uint64_t start = now_ns();
    mysqllock_status status = mysqllock_session_lock(client, name, 0.0);
    if (status != MYSQLLOCK_OK) {
        fail("mysqllock_session_lock", status);
    }
    status = mysqllock_session_unlock(client, name);
    if (status != MYSQLLOCK_OK) {
        fail("mysqllock_session_unlock", status);
    }
    return now_ns() - start;
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: session_cycles URL NAME WARMUP\n");
        return 2;
    }
    name = argv[2];
    mysqllock_status status = mysqllock_client_open_url(argv[1], &client);
    if (status != MYSQLLOCK_OK) {
        fail("mysqllock_client_open_url", status);
    }
    for (long i = atol(argv[3]); i > 0; i--) {
        cycle();
    }
    printf("ready\n");
    fflush(stdout);

    char line[64];
    while (fgets(line, sizeof line, stdin) != NULL) {
        long n = atol(line);
        if (n <= 0) {
            fprintf(stderr, "bench/c/session_cycles: expected a positive count, got %s", line);
            return 1;
        }
        /* Time all cycles first, print afterwards: no output between them. */
        uint64_t *times = malloc((size_t)n * sizeof *times);
        if (times == NULL) {
            fprintf(stderr, "bench/c/session_cycles: out of memory\n");
            return 1;
        }
        for (long i = 0; i < n; i++) {
            times[i] = cycle();
        }
        for (long i = 0; i < n; i++) {
            printf(i == 0 ? "%llu" : " %llu", (unsigned long long)times[i]);
        }
        printf("\n");
        fflush(stdout);
        free(times);
    }
    mysqllock_client_free(client);
    return 0;
}
