//! Shared setup for tests against the real MariaDB named by `MYSQLLOCK_TEST_DSN`.
#![allow(dead_code)]
#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

use std::sync::atomic::{AtomicU32, Ordering};

use mysqllock_core::{Config, MysqlSession, NativeLocker, Session, Value};

pub fn dsn() -> String {
    std::env::var("MYSQLLOCK_TEST_DSN").expect(
        "MYSQLLOCK_TEST_DSN is not set: run the tests through scripts/test.sh, or start a server with \
         scripts/mariadb.sh start DIR and export the variables from DIR/env",
    )
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

/// A locker on its own session over the upgraded table.
pub fn fenced_locker() -> NativeLocker {
    let mut l = NativeLocker::from_config(fenced_config());
    l.upgrade_table().expect("upgrading the table");
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
