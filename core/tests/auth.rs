//! Logging in with the own wire client, against the real server: MySQL's
//! caching_sha2_password (its fast path and its full authentication, over TCP and over
//! the Unix socket) and sha256_password, MariaDB's
//! mysql_native_password, wrong and empty passwords.
//!
//! `FLUSH PRIVILEGES` empties MySQL's caching_sha2_password cache, so the account's next
//! login is a full authentication. The tests of this file run one at a time (`SERIAL`),
//! so that one's flush does not turn another's fast login into a full one; other test
//! files run in other processes, one after the other.

#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

mod common;

use common::*;
use mysqllock_core::{Authentication, Config, Error, MysqlSession, Session};
use parking_lot::Mutex;

static SERIAL: Mutex<()> = Mutex::new(());

/// caching_sha2_password's AuthMoreData packets: the server's cache accepted the
/// scramble, or the client must send the password itself.
const FAST_AUTH_SUCCESS: &[u8] = &[0x01, 0x03];
const PERFORM_FULL_AUTH: &[u8] = &[0x01, 0x04];

/// The test account over the Unix socket (as `locker@localhost`).
fn socket_config() -> Config {
    let mut config = config();
    config.socket = Some(
        std::env::var("MYSQLLOCK_TEST_SOCKET")
            .expect("MYSQLLOCK_TEST_SOCKET is not set: export the variables of the server script's env file"),
    );
    config
}

/// Logs in through a relay over TCP: the session's own account of its login, and the
/// AuthMoreData packets the server sent during it.
fn login_over_tcp(config: Config) -> (MysqlSession, Vec<Vec<u8>>) {
    let relay = Relay::to(server_of(&config));
    let session = MysqlSession::connect(&relay.config(config)).unwrap();
    assert_eq!(*relay.connections.lock(), 1, "one connection: no second attempt");
    let steps = auth_steps(&relay.from_server.lock()[0]);
    (session, steps)
}

/// The AuthMoreData packets (0x01 ...) among what the server sent between its greeting
/// and its verdict on the login (OK or ERR).
fn auth_steps(from_server: &[u8]) -> Vec<Vec<u8>> {
    packets(from_server)
        .into_iter()
        .skip(1)
        .take_while(|p| !matches!(p.first(), Some(0x00 | 0xFF)))
        .filter(|p| p.first() == Some(&0x01))
        .map(<[u8]>::to_vec)
        .collect()
}

/// Steps as a failure message shows them: the first two bytes and the length (a public
/// key is long).
fn shown(steps: &[Vec<u8>]) -> Vec<String> {
    steps.iter().map(|s| format!("{:02x?} ({} bytes)", &s[..s.len().min(2)], s.len())).collect()
}

fn current_user(session: &mut MysqlSession) -> String {
    session.execute("SELECT CURRENT_USER()", &[]).unwrap().first(0).as_text().unwrap()
}

#[test]
fn over_tcp_the_first_login_after_a_flush_is_a_full_authentication_and_the_next_a_fast_one() {
    let _serial = SERIAL.lock();
    empty_the_cache();
    let (mut first, first_steps) = login_over_tcp(config());
    let (mut second, second_steps) = login_over_tcp(config());
    for session in [&mut first, &mut second] {
        assert_eq!(current_user(session), "locker@127.0.0.1");
    }
    match server() {
        Server::MySql => {
            // Full: asked for the password, which went RSA-encrypted with the server's key.
            let (first_shown, second_shown) = (shown(&first_steps), shown(&second_steps));
            assert_eq!(first_steps[0], PERFORM_FULL_AUTH, "the flush emptied the cache: {first_shown:?}");
            assert!(first_steps.iter().any(|p| p.starts_with(b"\x01-----BEGIN PUBLIC KEY")), "{first_shown:?}");
            assert_eq!(first.authentication(), Authentication::Sha2Full);
            assert_eq!(second_steps, [FAST_AUTH_SUCCESS], "the full login filled the cache: {second_shown:?}");
            assert_eq!(second.authentication(), Authentication::Sha2Fast);
        }
        Server::MariaDb => {
            assert!(
                first_steps.is_empty() && second_steps.is_empty(),
                "{:?} {:?}",
                shown(&first_steps),
                shown(&second_steps)
            );
            assert_eq!(first.authentication(), Authentication::NativePassword);
            assert_eq!(second.authentication(), Authentication::NativePassword);
        }
    }
}

#[test]
fn over_the_unix_socket_the_first_login_after_a_flush_is_a_full_authentication_and_the_next_a_fast_one() {
    let _serial = SERIAL.lock();
    empty_the_cache();
    let mut first = MysqlSession::connect(&socket_config()).unwrap();
    let mut second = MysqlSession::connect(&socket_config()).unwrap();
    for session in [&mut first, &mut second] {
        assert_eq!(current_user(session), "locker@localhost");
    }
    let expected = match server() {
        // The password went in clear: the server counts the socket as secure.
        Server::MySql => [Authentication::Sha2Full, Authentication::Sha2Fast],
        Server::MariaDb => [Authentication::NativePassword; 2],
    };
    assert_eq!([first.authentication(), second.authentication()], expected);
}

#[test]
fn a_wrong_password_is_refused_with_access_denied_on_every_path() {
    let _serial = SERIAL.lock();
    let wrong = |mut config: Config| {
        config.password = Some("certainly-not-the-password".into());
        config
    };
    let refused = |result: mysqllock_core::Result<MysqlSession>, path: &str| match result {
        Err(e @ Error::Connect { .. }) => {
            let Error::Connect { source, .. } = &e else { unreachable!() };
            assert_eq!(source.code, Some(1045), "{path}: {source:?}");
            assert!(source.message.starts_with("Access denied for user 'locker'@"), "{path}: {source:?}");
            // Whatever TLS adds to it, the likelier cause is said first.
            assert!(e.to_string().contains("(check the user name and password)"), "{path}: {e}");
        }
        other => panic!("{path}: expected access denied, got {:?}", other.err()),
    };
    for cached in [false, true] {
        if cached {
            // A login that fills the cache: the wrong scramble then misses it all the same.
            raw();
            MysqlSession::connect(&socket_config()).unwrap();
        } else {
            empty_the_cache();
        }
        let relay = Relay::to(server_of(&config()));
        refused(MysqlSession::connect(&relay.config(wrong(config()))), &format!("TCP, cached {cached}"));
        assert_eq!(*relay.connections.lock(), 1, "one connection: no second attempt");
        if server() == Server::MySql {
            // Refused after the RSA-encrypted password, not on the scramble alone.
            let steps = auth_steps(&relay.from_server.lock()[0]);
            assert_eq!(
                steps.first().map(Vec::as_slice),
                Some(PERFORM_FULL_AUTH),
                "cached {cached}: {:?}",
                shown(&steps)
            );
        }
        refused(MysqlSession::connect(&wrong(socket_config())), &format!("Unix socket, cached {cached}"));
        // Straight to the server: over TLS on MySQL (which offers it), in clear on MariaDB.
        refused(MysqlSession::connect(&wrong(config())), &format!("TCP with the default ssl-mode, cached {cached}"));
    }
}

#[test]
fn an_account_without_a_password_logs_in_with_an_empty_answer() {
    let _serial = SERIAL.lock();
    let dsn = std::env::var("MYSQLLOCK_TEST_NO_PASSWORD_DSN").expect(
        "MYSQLLOCK_TEST_NO_PASSWORD_DSN is not set: restart the server with scripts/mariadb.sh or scripts/mysql.sh",
    );
    empty_the_cache();
    let (mut session, steps) = login_over_tcp(Config::from_url(&dsn).unwrap());
    assert_eq!(current_user(&mut session), "locker_nopw@127.0.0.1");
    assert!(steps.is_empty(), "no password, nothing to ask for even with an empty cache: {:?}", shown(&steps));
    let expected = match server() {
        Server::MySql => Authentication::Sha2Fast,
        Server::MariaDb => Authentication::NativePassword,
    };
    assert_eq!(session.authentication(), expected);
}

/// The sha256_password account (MySQL only: mysql.sh creates it).
fn sha256_config(variable: &str) -> Config {
    let dsn = std::env::var(variable)
        .unwrap_or_else(|_| panic!("{variable} is not set: restart the server with scripts/mysql.sh"));
    Config::from_url(&dsn).unwrap()
}

/// MariaDB has no sha256_password to log in with: the assertion its runs of the
/// sha256_password tests make instead.
fn assert_mariadb_has_no_sha256_password() {
    let mut session = raw();
    let found = session
        .execute("SELECT COUNT(*) FROM information_schema.ALL_PLUGINS WHERE PLUGIN_NAME = 'sha256_password'", &[])
        .unwrap();
    assert_eq!(found.first(0).as_i64(), Some(0), "MariaDB offers sha256_password: test it there too");
}

/// The server's packets between its greeting and its verdict on the login, shown by what
/// they are: a switch to a plugin, a public key, or the first bytes of anything else.
fn login_steps(from_server: &[u8]) -> Vec<String> {
    packets(from_server)
        .into_iter()
        .skip(1)
        .take_while(|p| !matches!(p.first(), Some(0x00 | 0xFF)))
        .map(|p| match p {
            [0xFE, name @ ..] => {
                let end = name.iter().position(|&b| b == 0).unwrap_or(name.len());
                format!("switch to {}", String::from_utf8_lossy(&name[..end]))
            }
            [0x01, key @ ..] if key.starts_with(b"-----BEGIN PUBLIC KEY") => "public key".to_owned(),
            other => format!("{:02x?}", &other[..other.len().min(4)]),
        })
        .collect()
}

#[test]
fn a_sha256_password_account_logs_in_through_the_own_client_fetching_the_key_on_every_login() {
    if server() == Server::MariaDb {
        return assert_mariadb_has_no_sha256_password();
    }
    let config = sha256_config("MYSQLLOCK_TEST_SHA256_DSN");
    // No cache as with caching_sha2_password: a second login takes the same steps.
    for login in 1..=2 {
        let relay = Relay::to(server_of(&config));
        let mut session = MysqlSession::connect(&relay.config(config.clone())).unwrap();
        assert_eq!(*relay.connections.lock(), 1, "login {login}: one connection, no second attempt");
        assert_eq!(session.authentication(), Authentication::Sha256Password, "login {login}");
        // The greeting names caching_sha2_password (MySQL 9.7 always does), the account's
        // plugin is sha256_password: the server switches, the client asks for the key.
        let steps = login_steps(&relay.from_server.lock()[0]);
        assert_eq!(steps, ["switch to sha256_password", "public key"], "login {login}");
        // The handshake response, the key request, the encrypted password, the setup.
        assert_eq!(*relay.client_turns.lock(), 4, "login {login}: client turns before the session was ready");
        assert_eq!(current_user(&mut session), "locker_sha@127.0.0.1");
    }
}

#[test]
fn a_sha256_password_account_logs_in_over_the_unix_socket_with_the_password_encrypted_there_too() {
    if server() == Server::MariaDb {
        return assert_mariadb_has_no_sha256_password();
    }
    // The plugin takes the password in clear only over TLS: sent in clear over the
    // socket, as caching_sha2_password's full authentication sends it, it is refused as a
    // wrong one (error 1045).
    let mut config = sha256_config("MYSQLLOCK_TEST_SHA256_DSN");
    config.socket = socket_config().socket;
    let mut session = MysqlSession::connect(&config).unwrap();
    assert_eq!(session.authentication(), Authentication::Sha256Password);
    assert_eq!(current_user(&mut session), "locker_sha@localhost");
}

#[test]
fn a_sha256_password_account_with_a_wrong_or_no_password_is_refused_with_access_denied() {
    if server() == Server::MariaDb {
        return assert_mariadb_has_no_sha256_password();
    }
    let tcp = sha256_config("MYSQLLOCK_TEST_SHA256_DSN");
    let mut socket = tcp.clone();
    socket.socket = socket_config().socket;
    for (path, mut config) in [("TCP", tcp), ("Unix socket", socket)] {
        for password in [Some("certainly-not-the-password"), None] {
            config.password = password.map(str::to_owned);
            let relay = Relay::to(server_of(&config));
            let attempt = match config.socket {
                Some(_) => MysqlSession::connect(&config),
                None => MysqlSession::connect(&relay.config(config.clone())),
            };
            let what = format!("{path}, password {password:?}");
            match attempt {
                Err(Error::Connect { source, .. }) => {
                    assert_eq!(source.code, Some(1045), "{what}: {source:?}");
                    assert!(source.message.starts_with("Access denied for user 'locker_sha'@"), "{what}: {source:?}");
                    let using = if password.is_some() { "(using password: YES)" } else { "(using password: NO)" };
                    assert!(source.message.contains(using), "{what}: {source:?}");
                }
                other => panic!("{what}: expected access denied, got {:?}", other.err()),
            }
            if config.socket.is_none() {
                assert_eq!(*relay.connections.lock(), 1, "{what}: one connection, no second attempt");
            }
        }
    }
}

#[test]
fn a_sha256_password_account_without_a_password_logs_in_without_fetching_the_key() {
    if server() == Server::MariaDb {
        return assert_mariadb_has_no_sha256_password();
    }
    let config = sha256_config("MYSQLLOCK_TEST_SHA256_NO_PASSWORD_DSN");
    let relay = Relay::to(server_of(&config));
    let mut session = MysqlSession::connect(&relay.config(config)).unwrap();
    assert_eq!(*relay.connections.lock(), 1);
    assert_eq!(session.authentication(), Authentication::Sha256Password);
    // The answer to the switch says "no password" (a NUL byte): no key, no password.
    assert_eq!(login_steps(&relay.from_server.lock()[0]), ["switch to sha256_password"]);
    assert_eq!(current_user(&mut session), "locker_sha_nopw@127.0.0.1");
}
