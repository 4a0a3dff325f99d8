//! Shared setup for tests against the real server named by `MYSQLLOCK_TEST_DSN` (MariaDB or
//! MySQL, as `MYSQLLOCK_TEST_SERVER` says).
#![allow(dead_code)]
#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use mysqllock_core::{Config, MysqlSession, NativeLocker, Session, SslMode, Tls, Value};
use parking_lot::Mutex;

pub fn dsn() -> String {
    std::env::var("MYSQLLOCK_TEST_DSN").expect(
        "MYSQLLOCK_TEST_DSN is not set: run the tests through scripts/test.sh, or start a server with \
         scripts/mariadb.sh start DIR and export the variables from DIR/env",
    )
}

/// Which server the tests run against, as the server script's env file says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Server {
    MariaDb,
    MySql,
}

pub fn server() -> Server {
    match std::env::var("MYSQLLOCK_TEST_SERVER").as_deref() {
        Ok("mariadb") => Server::MariaDb,
        Ok("mysql") => Server::MySql,
        other => panic!(
            "MYSQLLOCK_TEST_SERVER is {other:?}, not mariadb or mysql: export the variables of the env file \
             scripts/mariadb.sh or scripts/mysql.sh wrote"
        ),
    }
}

pub fn config() -> Config {
    Config::from_url(&dsn()).expect("MYSQLLOCK_TEST_DSN is not a valid mysql:// URL")
}

/// A locker on its own session, with the table created.
pub fn locker() -> NativeLocker {
    let mut l = NativeLocker::from_config(config());
    l.init_table().expect("creating the table");
    l
}

/// A lock name no other test (or test run) uses.
pub fn unique(label: &str) -> String {
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    format!("{label}-{}-{}", std::process::id(), COUNTER.fetch_add(1, Ordering::Relaxed))
}

/// Polls `done` until it holds; fails the test, saying `what`, after 20 s.
pub fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !done() {
        assert!(std::time::Instant::now() < deadline, "gave up waiting until {what}");
        // The poll interval of this wait helper, not a wait for anything in particular.
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
}

/// Waits until session `id` sleeps in a GET_LOCK (the server's process list says so).
pub fn wait_until_queued(id: u64) {
    let mut admin = raw();
    wait_until(&format!("session {id} queues for the GET_LOCK"), || {
        let rows = query(
            &mut admin,
            "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = ? AND STATE = 'User lock'",
            &[id.into()],
        );
        rows[0][0].as_i64() == Some(1)
    });
}

/// Waits until session `id` has left the server's process list. A KILLed session frees its
/// locks first and leaves the list a moment later (MariaDB 11.8 shows the gap under load), so
/// "the next owner got the lock" does not yet mean "the stale session is gone".
pub fn wait_until_gone(id: u64) {
    let mut admin = raw();
    wait_until(&format!("session {id} is gone"), || {
        let rows = query(&mut admin, "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = ?", &[id.into()]);
        rows[0][0].as_i64() == Some(0)
    });
}

/// Waits until the lease on `name` in `table` has run out on the database clock (the
/// condition under which another session may reclaim it).
pub fn wait_until_expired(table: &str, name: &str) {
    let mut admin = raw();
    let sql = format!("SELECT COUNT(*) FROM {table} WHERE name = ? AND created + ttl < UNIX_TIMESTAMP()");
    wait_until(&format!("the lease on {name} in {table} runs out"), || {
        query(&mut admin, &sql, &[name.into()])[0][0].as_i64() == Some(1)
    });
}

/// Asserts that `name` has exactly one row, acquired and owned by session `id`.
pub fn assert_held_by(name: &str, id: u64) {
    assert_eq!(rows(name), vec![(name.to_owned(), id, 1)], "the rows of {name}");
}

/// A plain session for looking at and tampering with the table behind the lockers' backs.
pub fn raw() -> MysqlSession {
    MysqlSession::connect(&config()).expect("connecting")
}

pub fn query(s: &mut MysqlSession, sql: &str, params: &[Value]) -> Vec<Vec<Value>> {
    s.execute(sql, params).unwrap_or_else(|e| panic!("{sql}: {e}")).rows
}

/// The rows of the table for `name` (any spelling the key folds together).
pub fn rows(name: &str) -> Vec<(String, u64, i64)> {
    let mut s = raw();
    query(&mut s, "SELECT name, connection_id, lock_acquired FROM shared_locks WHERE name = ?", &[name.into()])
        .into_iter()
        .map(|r| (r[0].as_text().unwrap_or_default(), r[1].as_u64().unwrap_or(0), r[2].as_i64().unwrap_or(-1)))
        .collect()
}

/// The upgraded table the fencing tests share (the original `shared_locks` stays as the
/// original package creates it).
pub const FENCED_TABLE: &str = "shared_locks_fenced";

pub fn fenced_config() -> Config {
    Config::from_url(&format!("{}?table={FENCED_TABLE}", dsn())).expect("the fenced table's URL")
}

/// A locker on its own session over the upgraded table. The table is upgraded once per
/// test process: tests run in parallel, and an upgrade racing another's ALTER on a fresh
/// table can see it missing on MySQL (what `mysqllock init` does once, not every locker).
pub fn fenced_locker() -> NativeLocker {
    static UPGRADED: std::sync::Mutex<bool> = std::sync::Mutex::new(false);
    let mut l = NativeLocker::from_config(fenced_config());
    let mut upgraded = UPGRADED.lock().unwrap_or_else(|e| e.into_inner());
    if !*upgraded {
        l.upgrade_table().expect("upgrading the table");
        *upgraded = true;
    }
    l
}

/// Whether the test server is MySQL rather than MariaDB (its env file says which).
pub fn on_mysql() -> bool {
    match std::env::var("MYSQLLOCK_TEST_SERVER").as_deref() {
        Ok("mysql") => true,
        Ok("mariadb") => false,
        other => {
            panic!("MYSQLLOCK_TEST_SERVER is {other:?}, neither mariadb nor mysql: export the test server's DIR/env")
        }
    }
}

/// The script that started the test server (scripts/mariadb.sh or scripts/mysql.sh, named
/// in the server's env file): tests that crash tables or start servers use the same kind.
pub fn server_script() -> String {
    std::env::var("MYSQLLOCK_SERVER_SCRIPT")
        .expect("MYSQLLOCK_SERVER_SCRIPT is not set: export the variables from the test server's DIR/env")
}

/// Empties MySQL's authentication cache (on MariaDB it only reloads the grant tables),
/// as root over the Unix socket through the server's script: not through the client
/// under test.
pub fn empty_the_cache() {
    let dir = std::env::var("MYSQLLOCK_TEST_DIR").expect("MYSQLLOCK_TEST_DIR is not set: export the server's env file");
    let status = std::process::Command::new("bash")
        .args([&server_script(), "sql", &dir, "-e", "FLUSH PRIVILEGES"])
        .status()
        .expect("running the server script");
    assert!(status.success(), "FLUSH PRIVILEGES through {} failed", server_script());
}

/// Marks the MyISAM table `table` of the test database as crashed, through the test
/// server's own script (it needs the server's datadir, which `MYSQLLOCK_TEST_DIR` names).
pub fn crash_table(table: &str) {
    let dir = std::env::var("MYSQLLOCK_TEST_DIR")
        .expect("MYSQLLOCK_TEST_DIR is not set: the crashed-table tests need the test server's datadir");
    let database = config().database.clone().expect("the test DSN names a database");
    let script = server_script();
    let status = std::process::Command::new("bash")
        .args([&script, "crash-table", &dir, &database, table])
        .status()
        .expect("running the server script");
    assert!(status.success(), "{script} crash-table {table} failed");
}

/// A TCP relay between a client and the test server that counts what a wire capture
/// would show: connections, and the client's turns to speak (a turn starts when the
/// client sends after the server has). A round trip the client waits for is one turn.
/// It also keeps what the server sent, per connection.
pub struct Relay {
    port: u16,
    pub connections: Arc<Mutex<u32>>,
    pub client_turns: Arc<Mutex<u32>>,
    /// The bytes the server sent, one entry per connection, in the order accepted.
    pub from_server: Arc<Mutex<Vec<Vec<u8>>>>,
}

impl Relay {
    pub fn to(server: (String, u16)) -> Relay {
        use std::io::{Read, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let connections = Arc::new(Mutex::new(0));
        let client_turns = Arc::new(Mutex::new(0));
        let from_server: Arc<Mutex<Vec<Vec<u8>>>> = Arc::default();
        let (count, turns, captured) = (connections.clone(), client_turns.clone(), from_server.clone());
        std::thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { return };
                *count.lock() += 1;
                let index = {
                    let mut captured = captured.lock();
                    captured.push(Vec::new());
                    captured.len() - 1
                };
                let server = std::net::TcpStream::connect((server.0.as_str(), server.1)).unwrap();
                // Who spoke last on this connection: the server greets first.
                let server_spoke_last = Arc::new(Mutex::new(true));
                for (mut from, mut to, from_client) in
                    [(client.try_clone().unwrap(), server.try_clone().unwrap(), true), (server, client, false)]
                {
                    let (last, turns, captured) = (server_spoke_last.clone(), turns.clone(), captured.clone());
                    std::thread::spawn(move || {
                        let mut buf = [0u8; 16384];
                        loop {
                            let n = match from.read(&mut buf) {
                                Ok(0) | Err(_) => break,
                                Ok(n) => n,
                            };
                            {
                                let mut last = last.lock();
                                if from_client && *last {
                                    *turns.lock() += 1;
                                }
                                *last = !from_client;
                                if !from_client {
                                    captured.lock()[index].extend_from_slice(&buf[..n]);
                                }
                            }
                            if to.write_all(&buf[..n]).is_err() {
                                break;
                            }
                        }
                        let _ = to.shutdown(std::net::Shutdown::Both);
                    });
                }
            }
        });
        Relay { port, connections, client_turns, from_server }
    }

    /// `config` pointed at the relay (over TCP).
    /// `config` pointed at the relay. Without TLS unless the test asks for a mode: the
    /// relay's readers look into the packets (TLS is tested in tls.rs).
    pub fn config(&self, mut config: Config) -> Config {
        if config.tls == Tls::default() {
            config.tls.mode = Some(SslMode::Disabled);
        }
        config.host = "127.0.0.1".into();
        config.port = self.port;
        config.socket = None;
        config
    }
}

/// The TCP address `config` names.
pub fn server_of(config: &Config) -> (String, u16) {
    (config.host.clone(), config.port)
}

/// The payloads of the packets in `bytes`, a capture of one direction of a connection.
pub fn packets(mut bytes: &[u8]) -> Vec<&[u8]> {
    let mut out = Vec::new();
    while bytes.len() >= 4 {
        let len = usize::from(bytes[0]) | usize::from(bytes[1]) << 8 | usize::from(bytes[2]) << 16;
        let end = (4 + len).min(bytes.len());
        out.push(&bytes[4..end]);
        bytes = &bytes[end..];
    }
    out
}
