/*
 * The C side of bench/cold.sh: one cold start through the C ABI. Opens a client on URL,
 * takes the session lock NAME with one try, releases it, frees the client, exits 0.
 * Any status other than MYSQLLOCK_OK: the message on stderr, exit 1.
 *
 *   cold_open URL NAME
 */
#include <stdio.h>

#include "mysqllock.h"

static int fail(const char *step, mysqllock_status status)
{
    char message[1024];
    mysqllock_last_error(message, sizeof message, NULL);
    fprintf(stderr, "bench/c/cold_open: %s: %s: %s\n", step, mysqllock_status_name(status), message);
    return 1;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: cold_open URL NAME\n");
        return 2;
    }
    mysqllock_client *client = NULL;
    mysqllock_status status = mysqllock_client_open_url(argv[1], &client);
    if (status != MYSQLLOCK_OK) {
        return fail("mysqllock_client_open_url", status);
    }
    status = mysqllock_session_lock(client, argv[2], 0.0);
    if (status != MYSQLLOCK_OK) {
        return fail("mysqllock_session_lock", status);
    }
    status = mysqllock_session_unlock(client, argv[2]);
    if (status != MYSQLLOCK_OK) {
        return fail("mysqllock_session_unlock", status);
    }
    mysqllock_client_free(client);
    return 0;
}
