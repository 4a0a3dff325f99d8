//! TLS (issue 22) against a server that takes TCP clients over TLS only, started with
//! `MYSQLLOCK_SERVER_TLS=require bash scripts/mariadb.sh|mysql.sh start DIR` (as
//! tests/suites/45-tls.sh does): the `ssl-mode` values, the CA and host name checks,
//! client certificates, locks and each login plugin over TLS. Where it can, a test asks
//! the server how it sees the session (`Ssl_version`, `Ssl_cipher`, `CURRENT_USER()`).
//!
//! The server's certificate is the test CA's for `localhost` only (scripts/tls.sh): to a
//! client that connects to `127.0.0.1` it is a certificate for another host.
//!
//! `FLUSH PRIVILEGES` empties MySQL's caching_sha2_password cache: the test that needs a
//! full authentication holds `LOGINS` for writing, every other test for reading, so no
//! login of theirs fills the cache between its flush and its login.

#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

mod common;

use std::time::{Duration, Instant};

use common::*;
use mysqllock_core::{AcquireOptions, Authentication, Config, Error, MysqlSession, NativeLocker};
use parking_lot::{RwLock, RwLockReadGuard, RwLockWriteGuard};

static LOGINS: RwLock<()> = RwLock::new(());

/// Every test starts here: for a test that does not empty the authentication cache.
fn logins() -> RwLockReadGuard<'static, ()> {
    tls_dir();
    LOGINS.read()
}

/// For the test that empties the authentication cache.
fn alone() -> RwLockWriteGuard<'static, ()> {
    tls_dir();
    LOGINS.write()
}

/// Where scripts/tls.sh put the certificates: no test here runs against a server that
/// was not started for them, not even one that needs no certificate.
fn tls_dir() -> String {
    let dir = std::env::var("MYSQLLOCK_TEST_TLS_DIR").expect(
        "MYSQLLOCK_TEST_TLS_DIR is not set: these tests need a TLS-only server, started with \
         MYSQLLOCK_SERVER_TLS=require bash scripts/mariadb.sh (or mysql.sh) start DIR, and the variables of DIR/env \
         exported (tests/suites/45-tls.sh does both)",
    );
    assert_eq!(
        std::env::var("MYSQLLOCK_TEST_TLS").as_deref(),
        Ok("require"),
        "MYSQLLOCK_TEST_TLS_DIR is set but the server was not started with MYSQLLOCK_SERVER_TLS=require"
    );
    dir
}

/// One of scripts/tls.sh's files.
fn pem(file: &str) -> String {
    let dir = tls_dir();
    let path = format!("{dir}/{file}");
    assert!(std::path::Path::new(&path).is_file(), "{path} is missing: run scripts/tls.sh {dir}");
    path
}

/// The account of `variable` (a `mysql://` URL on 127.0.0.1 without TLS keys) on `host`,
/// with the URL query `settings` (`ssl-mode=...&ssl-ca=...`): the product's own spelling.
fn account_on(variable: &str, host: &str, settings: &str) -> Config {
    let dsn = std::env::var(variable)
        .unwrap_or_else(|_| panic!("{variable} is not set: export the variables of the TLS server's DIR/env"));
    assert!(
        dsn.contains("@127.0.0.1:") && !dsn.contains('?'),
        "{variable}={dsn}: expected a URL on 127.0.0.1 without a query"
    );
    let url = dsn.replacen("@127.0.0.1:", &format!("@{host}:"), 1);
    let url = if settings.is_empty() { url } else { format!("{url}?{settings}") };
    Config::from_url(&url).unwrap_or_else(|e| panic!("{url}: {e}"))
}

/// The test account (`locker`) on `host` with `settings`.
fn on(host: &str, settings: &str) -> Config {
    account_on("MYSQLLOCK_TEST_DSN", host, settings)
}

fn connect(config: &Config) -> MysqlSession {
    MysqlSession::connect(config).unwrap_or_else(|e| panic!("{config:?}: {e}"))
}

/// A session variable of the server's `SHOW SESSION STATUS` (empty when it has none).
fn status(session: &mut MysqlSession, variable: &str) -> String {
    let rows = query(session, &format!("SHOW SESSION STATUS LIKE '{variable}'"), &[]);
    rows.first().and_then(|row| row[1].as_text()).unwrap_or_default()
}

fn current_user(session: &mut MysqlSession) -> String {
    query(session, "SELECT CURRENT_USER()", &[])[0][0].as_text().unwrap()
}

/// The session says it is encrypted, and the server agrees: a TLS version and a cipher.
fn assert_encrypted(session: &mut MysqlSession) {
    assert!(session.encrypted(), "the session says it is not encrypted");
    let (version, cipher) = (status(session, "Ssl_version"), status(session, "Ssl_cipher"));
    assert!(version.starts_with("TLSv1."), "the server sees Ssl_version {version:?}");
    assert!(!cipher.is_empty(), "the server sees no Ssl_cipher");
}

/// The message of a connection the client or the server refused, without the target
/// (`user@host:port/db`, which names the host in any case), and the server's error code.
fn refused(config: &Config) -> (String, Option<u16>) {
    match MysqlSession::connect(config) {
        Err(e) => match &e {
            Error::Connect { source, .. } => (e.to_string().replace(&config.target(), "<target>"), source.code),
            other => panic!("{config:?}: expected a refused connection, got another error: {other}"),
        },
        Ok(mut session) => panic!(
            "{config:?}: connected (as {}, Ssl_version {:?}), expected a refusal",
            current_user(&mut session),
            status(&mut session, "Ssl_version")
        ),
    }
}

fn settings_verify_ca(ca: &str) -> String {
    format!("ssl-mode=VERIFY_CA&ssl-ca={}", pem(ca))
}

fn settings_verify_identity(ca: &str) -> String {
    format!("ssl-mode=VERIFY_IDENTITY&ssl-ca={}", pem(ca))
}

#[test]
fn the_default_mode_reaches_a_tls_only_server_encrypted() {
    let _logins = logins();
    let config = on("127.0.0.1", "");
    assert_eq!(config.tls.mode(), mysqllock_core::SslMode::Preferred);
    let mut session = connect(&config);
    assert_encrypted(&mut session);
    assert_eq!(current_user(&mut session), "locker@127.0.0.1");
}

#[test]
fn disabled_is_refused_by_a_tls_only_server_with_a_message_naming_tls_and_ssl_mode() {
    let _logins = logins();
    let (message, code) = refused(&on("127.0.0.1", "ssl-mode=DISABLED"));
    assert!(message.contains("TLS") && message.contains("ssl-mode"), "{message}");
    // Measured: MySQL says 3159 "Connections using insecure transport are prohibited
    // while --require_secure_transport=ON."; MariaDB 10.11 says 1045 "Access denied",
    // as for a wrong password.
    let expected = match server() {
        Server::MySql => 3159,
        Server::MariaDb => 1045,
    };
    assert_eq!(code, Some(expected), "{message}");
}

#[test]
fn required_without_a_ca_connects_encrypted_without_checking_the_certificate() {
    let _logins = logins();
    // On 127.0.0.1 the certificate is for another host, by a CA the system does not
    // know: REQUIRED looks at neither.
    let mut session = connect(&on("127.0.0.1", "ssl-mode=REQUIRED"));
    assert_encrypted(&mut session);
}

#[test]
fn verify_ca_with_the_ca_that_signed_the_servers_certificate_connects_encrypted() {
    let _logins = logins();
    let mut session = connect(&on("localhost", &settings_verify_ca("ca.pem")));
    assert_encrypted(&mut session);
    assert_eq!(current_user(&mut session), "locker@127.0.0.1");
}

#[test]
fn verify_ca_with_a_ca_that_did_not_sign_the_servers_certificate_is_refused_naming_the_ca() {
    let _logins = logins();
    let (message, code) = refused(&on("localhost", &settings_verify_ca("wrong-ca.pem")));
    assert!(message.contains("CA") && message.contains("wrong-ca.pem"), "{message}");
    assert_eq!(code, None, "refused by the client, before the server could answer: {message}");
}

#[test]
fn a_ca_named_without_a_mode_is_checked_so_a_wrong_one_is_refused() {
    let _logins = logins();
    let config = on("localhost", &format!("ssl-ca={}", pem("wrong-ca.pem")));
    assert_eq!(config.tls.mode(), mysqllock_core::SslMode::VerifyCa);
    let (message, _) = refused(&config);
    assert!(message.contains("CA") && message.contains("wrong-ca.pem"), "{message}");
    let mut session = connect(&on("localhost", &format!("ssl-ca={}", pem("ca.pem"))));
    assert_encrypted(&mut session);
}

#[test]
fn verify_identity_to_localhost_the_name_in_the_certificate_connects_encrypted() {
    let _logins = logins();
    let mut session = connect(&on("localhost", &settings_verify_identity("ca.pem")));
    assert_encrypted(&mut session);
    assert_eq!(current_user(&mut session), "locker@127.0.0.1");
}

#[test]
fn verify_identity_to_127_0_0_1_is_refused_naming_the_host_the_certificate_is_not_for() {
    let _logins = logins();
    let (message, code) = refused(&on("127.0.0.1", &settings_verify_identity("ca.pem")));
    assert!(message.contains("not for") && message.contains("127.0.0.1"), "{message}");
    assert_eq!(code, None, "refused by the client: {message}");
}

#[test]
fn verify_ca_to_127_0_0_1_accepts_the_certificate_made_for_another_host() {
    let _logins = logins();
    let mut session = connect(&on("127.0.0.1", &settings_verify_ca("ca.pem")));
    assert_encrypted(&mut session);
}

#[test]
fn verify_identity_without_ssl_ca_trusts_the_systems_store_which_lacks_the_test_ca() {
    let _logins = logins();
    let (message, _) = refused(&on("localhost", "ssl-mode=VERIFY_IDENTITY"));
    assert!(message.contains("CA"), "{message}");
}

#[test]
fn the_keys_spelled_with_underscores_work_as_well() {
    let _logins = logins();
    let settings = format!("ssl_mode=VERIFY_IDENTITY&ssl_ca={}", pem("ca.pem"));
    let mut session = connect(&on("localhost", &settings));
    assert_encrypted(&mut session);
    let (message, _) = refused(&on("127.0.0.1", &settings));
    assert!(message.contains("not for"), "ssl_mode was not read as VERIFY_IDENTITY: {message}");
}

/// The REQUIRE X509 account with `extra` settings beside the test CA.
fn x509(extra: &str) -> Config {
    let settings = format!("ssl-ca={}{extra}", pem("ca.pem"));
    account_on("MYSQLLOCK_TEST_X509_DSN", "127.0.0.1", &settings)
}

fn client_certificate() -> String {
    format!("&ssl-cert={}&ssl-key={}", pem("client-cert.pem"), pem("client-key.pem"))
}

#[test]
fn the_x509_account_logs_in_with_ssl_cert_and_ssl_key() {
    let _logins = logins();
    let mut session = connect(&x509(&client_certificate()));
    assert_encrypted(&mut session);
    assert_eq!(current_user(&mut session), "locker_x509@127.0.0.1");
}

#[test]
fn the_x509_account_without_a_client_certificate_is_refused_naming_ssl_cert() {
    let _logins = logins();
    let (message, code) = refused(&x509(""));
    assert!(message.contains("ssl-cert"), "{message}");
    // Measured on both servers: 1045 "Access denied for user 'locker_x509'@'127.0.0.1'
    // (using password: YES)", after a TLS handshake that asked for no certificate.
    assert_eq!(code, Some(1045), "{message}");
}

#[test]
fn a_session_lock_held_over_tls_excludes_a_second_tls_session() {
    let _logins = logins();
    let config = on("localhost", &settings_verify_identity("ca.pem"));
    let name = unique("tls-session-lock");
    let (mut a, mut b) = (NativeLocker::from_config(config.clone()), NativeLocker::from_config(config));
    a.lock_session(&name, 0.0).unwrap();
    let err = b.lock_session(&name, 0.2).unwrap_err();
    assert!(err.is_timeout(), "{err}");
    for locker in [&mut a, &mut b] {
        assert_encrypted(locker.session().unwrap());
    }
    a.unlock_session(&name).unwrap();
    b.lock_session(&name, 0.0).unwrap();
}

#[test]
fn a_lease_held_over_tls_excludes_a_second_tls_session() {
    let _logins = logins();
    let config = on("localhost", &settings_verify_identity("ca.pem"));
    let name = unique("tls-lease");
    let (mut a, mut b) = (NativeLocker::from_config(config.clone()), NativeLocker::from_config(config));
    a.init_table().unwrap();
    a.acquire(&name, 0.0, 30.0).unwrap();
    assert!(b.try_acquire(&name, 30.0).unwrap().is_none(), "a second session took a held lease");
    assert_held_by(&name, a.connection_id().unwrap());
    assert_encrypted(a.session().unwrap());
    a.release(&name).unwrap();
    assert!(b.try_acquire(&name, 30.0).unwrap().is_some());
    assert_encrypted(b.session().unwrap());
}

#[test]
fn keep_alive_renews_over_its_own_connection_with_the_client_certificate() {
    let _logins = logins();
    // The X509 account: a keep-alive connection that dropped ssl-cert/ssl-key would be
    // refused, and the one-second lease taken over.
    let config = x509(&format!("{}&table={FENCED_TABLE}", client_certificate()));
    let name = unique("tls-keep-alive");
    let mut a = NativeLocker::from_config(config.clone());
    a.upgrade_table().unwrap();
    let mut b = NativeLocker::from_config(config);
    let options = AcquireOptions { keep_alive: true, ..AcquireOptions::default() };
    a.acquire_with(&name, 0.0, 1.0, &options).unwrap();
    let start = Instant::now();
    while start.elapsed() < Duration::from_millis(3500) {
        assert!(b.try_acquire(&name, 30.0).unwrap().is_none(), "taken over after {:?}", start.elapsed());
        assert!(!a.renewal_failed(&name), "the keep-alive gave up after {:?}", start.elapsed());
        // The holder stays busy while the one-second TTL passes three times over; this
        // paces the tries.
        std::thread::sleep(Duration::from_millis(250));
    }
    a.release(&name).unwrap();
}

/// Whether the server offers the authentication plugin `plugin`: MariaDB lists every
/// plugin it could load in `ALL_PLUGINS`, MySQL only has the loaded ones in `PLUGINS`.
fn has_plugin(plugin: &str) -> bool {
    let table = match server() {
        Server::MariaDb => "ALL_PLUGINS",
        Server::MySql => "PLUGINS",
    };
    let mut session = connect(&on("127.0.0.1", ""));
    let sql = format!("SELECT COUNT(*) FROM information_schema.{table} WHERE PLUGIN_NAME = ?");
    query(&mut session, &sql, &[plugin.into()])[0][0].as_i64() != Some(0)
}

#[test]
fn on_mysql_a_full_caching_sha2_authentication_over_tls_sends_the_password_encrypted() {
    let _alone = alone();
    if server() == Server::MariaDb {
        assert!(!has_plugin("caching_sha2_password"), "MariaDB offers caching_sha2_password: test it there too");
        return;
    }
    empty_the_cache();
    let mut session = connect(&on("localhost", &settings_verify_identity("ca.pem")));
    assert_eq!(session.authentication(), Authentication::Sha2Full, "the flush emptied the cache");
    assert_encrypted(&mut session);
    assert_eq!(current_user(&mut session), "locker@127.0.0.1");
}

#[test]
fn on_mariadb_the_ed25519_account_logs_in_over_tls_through_the_own_client() {
    let _logins = logins();
    if server() == Server::MySql {
        assert!(!has_plugin("ed25519"), "MySQL offers ed25519: test it there too");
        return;
    }
    let mut session =
        connect(&account_on("MYSQLLOCK_TEST_ED25519_DSN", "localhost", &settings_verify_identity("ca.pem")));
    assert_eq!(session.authentication(), Authentication::Ed25519);
    assert_encrypted(&mut session);
    assert_eq!(current_user(&mut session), "locker_ed@127.0.0.1");
}

#[test]
fn on_mysql_the_sha256_password_account_logs_in_over_tls() {
    let _logins = logins();
    if server() == Server::MariaDb {
        assert!(!has_plugin("sha256_password"), "MariaDB offers sha256_password: test it there too");
        return;
    }
    let mut session =
        connect(&account_on("MYSQLLOCK_TEST_SHA256_DSN", "localhost", &settings_verify_identity("ca.pem")));
    assert_eq!(session.authentication(), Authentication::Sha256Password);
    assert_encrypted(&mut session);
    assert_eq!(current_user(&mut session), "locker_sha@127.0.0.1");
}
