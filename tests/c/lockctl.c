/*
 * A small driver for cross-process tests (tests/c/cross_php.sh):
 *
 *   lockctl hold NAME TTL       acquire NAME (one try), print "held", wait for a line
 *                               (or EOF) on stdin, release, print "released"
 *   lockctl try NAME TIMEOUT    acquire NAME within TIMEOUT seconds and release it;
 *                               print the status name; exit 0 if acquired,
 *                               3 on MYSQLLOCK_TIMEOUT, 1 on anything else
 *
 * The server comes from MYSQLLOCK_TEST_DSN.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mysqllock.h"

static int fail(const char *step, mysqllock_status status)
{
    char message[1024];
    mysqllock_last_error(message, sizeof message, NULL);
    printf("%s\n", mysqllock_status_name(status));
    fprintf(stderr, "lockctl: %s: %s\n", step, message);
    return status == MYSQLLOCK_TIMEOUT ? 3 : 1;
}

int main(int argc, char **argv)
{
    mysqllock_client *client = NULL;
    mysqllock_status status;
    int code = 0;

    if (argc != 4 || (strcmp(argv[1], "hold") != 0 && strcmp(argv[1], "try") != 0)) {
        fprintf(stderr, "usage: lockctl hold NAME TTL | lockctl try NAME TIMEOUT\n");
        return 2;
    }
    status = mysqllock_client_open_url(getenv("MYSQLLOCK_TEST_DSN"), &client);
    if (status != MYSQLLOCK_OK) {
        return fail("open", status);
    }
    if (strcmp(argv[1], "hold") == 0) {
        status = mysqllock_acquire(client, argv[2], 0, strtod(argv[3], NULL));
        if (status != MYSQLLOCK_OK) {
            code = fail("acquire", status);
        } else {
            char line[64];
            printf("held\n");
            fflush(stdout);
            if (fgets(line, sizeof line, stdin) == NULL) {
                /* EOF: release all the same */
            }
            status = mysqllock_release(client, argv[2]);
            code = status == MYSQLLOCK_OK ? (printf("released\n"), 0) : fail("release", status);
        }
    } else {
        status = mysqllock_acquire(client, argv[2], strtod(argv[3], NULL), 10);
        if (status != MYSQLLOCK_OK) {
            code = fail("acquire", status);
        } else {
            printf("%s\n", mysqllock_status_name(status));
            status = mysqllock_release(client, argv[2]);
            code = status == MYSQLLOCK_OK ? 0 : fail("release", status);
        }
    }
    mysqllock_client_free(client);
    return code;
}
