/*
 * TLS through the C ABI (issue 22), against a server that takes TCP clients over TLS
 * only (MYSQLLOCK_SERVER_TLS=require, see tests/suites/45-tls.sh): a URL with
 * ssl-mode=VERIFY_IDENTITY and the test CA opens a client to localhost that takes and
 * releases locks, and one naming a CA that did not sign the server's certificate, or a
 * host the certificate is not for, fails with MYSQLLOCK_CONNECTION and says why. On such
 * a server every session that works is an encrypted one.
 *
 * Usage: MYSQLLOCK_TEST_DSN=mysql://user:pass@127.0.0.1:port/db
 *        MYSQLLOCK_TEST_TLS_DIR=DIR (scripts/tls.sh's files) test_tls
 * Prints "ok - ..." / "not ok - ..." lines; exits 1 if any check failed.
 */
#define _POSIX_C_SOURCE 200809L

#include "tap.h"

static struct server srv;
static const char *tls_dir;

/* The test account's URL on `host` with ssl-mode `mode` and the CA file `ca` of tls_dir. */
static const char *tls_url(const char *host, const char *mode, const char *ca)
{
    static char url[1024];
    snprintf(url, sizeof url, "mysql://%s:%s@%s:%u/%s?ssl-mode=%s&ssl-ca=%s/%s", srv.user,
             srv.password, host, srv.port, srv.database, mode, tls_dir, ca);
    return url;
}

static void test_verify_identity_to_localhost_takes_and_releases_locks(void)
{
    const char *url = tls_url("localhost", "VERIFY_IDENTITY", "ca.pem");
    mysqllock_client *a = NULL, *b = NULL;
    if (!expect(mysqllock_client_open_url(url, &a), MYSQLLOCK_OK, NULL,
                "open_url with ssl-mode=VERIFY_IDENTITY and the test CA to localhost")) {
        return;
    }
    b = open_url_or_exit(url);
    const char *session = unique_name("tls-session"), *lease = unique_name("tls-lease");
    bool created = false, acquired = true;

    expect(mysqllock_session_lock(a, session, 0), MYSQLLOCK_OK, NULL, "session_lock over TLS");
    expect(mysqllock_session_lock(b, session, 0.2), MYSQLLOCK_TIMEOUT, NULL,
           "a second TLS client waits for it in vain");
    expect(mysqllock_session_unlock(a, session), MYSQLLOCK_OK, NULL, "session_unlock over TLS");
    expect(mysqllock_session_lock(b, session, 0), MYSQLLOCK_OK, NULL,
           "the second TLS client takes it after the unlock");
    mysqllock_session_unlock(b, session);

    expect(mysqllock_init_table(a, &created), MYSQLLOCK_OK, NULL, "init_table over TLS");
    expect(mysqllock_acquire(a, lease, 0, 30), MYSQLLOCK_OK, NULL, "acquire a lease over TLS");
    expect(mysqllock_try_acquire(b, lease, 30, &acquired), MYSQLLOCK_OK, NULL,
           "try_acquire of the held lease");
    check(!acquired, "the second TLS client does not get the held lease");
    expect(mysqllock_release(a, lease), MYSQLLOCK_OK, NULL, "release the lease over TLS");
    expect(mysqllock_try_acquire(b, lease, 30, &acquired), MYSQLLOCK_OK, NULL,
           "try_acquire after the release");
    check(acquired, "the second TLS client gets the released lease");
    mysqllock_release(b, lease);
    mysqllock_client_free(a);
    mysqllock_client_free(b);
}

static void test_a_ca_that_did_not_sign_the_servers_certificate_is_refused(void)
{
    mysqllock_client *c = NULL;
    expect(mysqllock_client_open_url(tls_url("localhost", "VERIFY_IDENTITY", "wrong-ca.pem"), &c),
           MYSQLLOCK_CONNECTION, "CA", "open_url with wrong-ca.pem is a connection error naming the CA");
    check(strstr(last_error(), "wrong-ca.pem") != NULL, "the message names the CA file (%s)",
          last_error());
    check(c == NULL, "a failed open_url does not write the client");
    mysqllock_client_free(c);
}

static void test_a_host_the_certificate_is_not_for_is_refused(void)
{
    mysqllock_client *c = NULL;
    expect(mysqllock_client_open_url(tls_url("127.0.0.1", "VERIFY_IDENTITY", "ca.pem"), &c),
           MYSQLLOCK_CONNECTION, "not for",
           "open_url with VERIFY_IDENTITY to 127.0.0.1 (the certificate names localhost) fails");
    /* After "not for": the target at the start of the message names the host anyway. */
    const char *why = strstr(last_error(), "not for");
    check(why != NULL && strstr(why, "127.0.0.1") != NULL, "the message names the host (%s)",
          last_error());
    check(c == NULL, "a failed open_url does not write the client");
    mysqllock_client_free(c);
}

int main(void)
{
    srv = server_from_env();
    tls_dir = getenv("MYSQLLOCK_TEST_TLS_DIR");
    if (tls_dir == NULL || *tls_dir == '\0') {
        fprintf(stderr, "MYSQLLOCK_TEST_TLS_DIR is not set: start the server with "
                        "MYSQLLOCK_SERVER_TLS=require and export its DIR/env\n");
        return 2;
    }
    test_verify_identity_to_localhost_takes_and_releases_locks();
    test_a_ca_that_did_not_sign_the_servers_certificate_is_refused();
    test_a_host_the_certificate_is_not_for_is_refused();
    return tap_failures ? 1 : 0;
}
