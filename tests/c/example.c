/*
 * Runs a job on one node only: the example in docs/c.md, compiled and run by the test suite
 * (linked statically there; tests/suites/40-c.sh checks that docs/c.md shows this file).
 *
 *   cc -I include example.c -L target/release -lmysqllock -Wl,-rpath,$PWD/target/release
 *   ./a.out mysql://app:secret@127.0.0.1:3306/app monthly-invoices
 */
#include <stdio.h>
#include <stdlib.h>

#include "mysqllock.h"

/* Prints the failed step, the status and the library's message for this thread. */
static int report(const char *step, mysqllock_status status)
{
    char message[1024];
    mysqllock_last_error(message, sizeof message, NULL);
    fprintf(stderr, "%s failed: %s: %s\n", step, mysqllock_status_name(status), message);
    return 1;
}

int main(int argc, char **argv)
{
    const char *url = argc > 1 ? argv[1] : getenv("MYSQLLOCK_DSN");
    const char *name = argc > 2 ? argv[2] : "monthly-invoices";
    mysqllock_client *client = NULL;
    mysqllock_status status;
    int exit_code = 0;

    /* NULL url: reported as MYSQLLOCK_INVALID_ARGUMENT, like any bad input. */
    status = mysqllock_client_open_url(url, &client);
    if (status != MYSQLLOCK_OK) {
        return report("connect", status);
    }

    /* Wait up to 5 s for the lock; hold it at most 10 minutes. */
    status = mysqllock_acquire(client, name, 5.0, 600.0);
    if (status == MYSQLLOCK_TIMEOUT) {
        printf("%s is running on another node\n", name);
    } else if (status != MYSQLLOCK_OK) {
        exit_code = report("acquire", status);
    } else {
        printf("running %s\n", name);
        /* ... the first part of the job ... */

        /* Before a step that must not outlive the lock: is a minute left? */
        status = mysqllock_assert_ttl(client, name, 60.0);
        if (status != MYSQLLOCK_OK) {
            exit_code = report("assert_ttl", status);
        }
        /* ... the rest of the job ... */

        status = mysqllock_release(client, name);
        if (status != MYSQLLOCK_OK) {
            exit_code = report("release", status); /* e.g. MYSQLLOCK_NOT_HELD */
        } else {
            printf("done\n");
        }
    }

    mysqllock_client_free(client); /* also releases whatever is still held */
    return exit_code;
}
