//! How many round trips each path of the protocol costs, counted on a real session.
//! These are the counts the benchmark's server-side figures rest on; a change that adds
//! a statement to a hot path fails here before it shows up as a slower benchmark.

#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

mod common;

use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use common::*;
use mysqllock_core::{
    AcquireOptions, Authentication, Config, Connector, Deadline, Lease, Locker, MysqlSession, NativeLocker, Outcome,
    Result, Session, SessionError, Value,
};
use parking_lot::Mutex;

/// What a session sent, one entry per round trip.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Trip {
    Statement,
    Batch,
}

type Log = Arc<Mutex<Vec<Trip>>>;

/// A real native session that logs its round trips. `batches: false` makes it behave
/// like a session that cannot batch (a PDO).
struct Counted {
    inner: MysqlSession,
    log: Log,
    batches: bool,
}

impl Session for Counted {
    fn execute(&mut self, sql: &str, params: &[Value]) -> std::result::Result<Outcome, SessionError> {
        self.log.lock().push(Trip::Statement);
        self.inner.execute(sql, params)
    }

    fn execute_waiting(
        &mut self,
        sql: &str,
        params: &[Value],
        wait: Deadline,
    ) -> std::result::Result<Outcome, SessionError> {
        self.log.lock().push(Trip::Statement);
        self.inner.execute_waiting(sql, params, wait)
    }

    fn connection_id(&self) -> u64 {
        self.inner.connection_id()
    }

    fn pipelines(&self) -> bool {
        self.batches && self.inner.pipelines()
    }

    /// The native session learned it in its setup round trip: no statement to count.
    fn topology(&self) -> Option<mysqllock_core::Topology> {
        self.inner.topology()
    }

    fn execute_pipelined(
        &mut self,
        statements: &[(&str, &[Value])],
        wait: Deadline,
    ) -> std::result::Result<Vec<Outcome>, SessionError> {
        self.log.lock().push(Trip::Batch);
        self.inner.execute_pipelined(statements, wait)
    }

    fn lock_table_columns(&self) -> Option<usize> {
        self.inner.lock_table_columns()
    }
}

struct Counting {
    config: Config,
    log: Log,
    batches: bool,
}

impl Connector for Counting {
    type Session = Counted;
    fn connect(&mut self) -> Result<Counted> {
        Ok(Counted { inner: MysqlSession::connect(&self.config)?, log: self.log.clone(), batches: self.batches })
    }

    fn connect_learning(&mut self, table: &mysqllock_core::Table) -> Result<Counted> {
        let inner = MysqlSession::connect_learning(&self.config, table)?;
        Ok(Counted { inner, log: self.log.clone(), batches: self.batches })
    }
}

/// A locker on its own counted session, connected and past its one-time table lookup.
fn counted(batches: bool) -> (Locker<Counting>, Log) {
    let log = Log::default();
    let config = config();
    let table = config.table.clone();
    let mut l = Locker::new(Counting { config, log: log.clone(), batches }, table);
    l.init_table().unwrap();
    let warm = unique("warm-up");
    l.acquire(&warm, 0.0, 10.0).unwrap();
    l.release(&warm).unwrap();
    log.lock().clear();
    (l, log)
}

fn trips(log: &Log) -> Vec<Trip> {
    std::mem::take(&mut *log.lock())
}

/// `holder` takes `name` (with `options`); `waiter` acquires it while it is held, and
/// `holder` releases as soon as the waiter sleeps on the server.
fn contended_acquire_with(
    holder: &mut NativeLocker,
    options: &AcquireOptions,
    waiter: Locker<Counting>,
    log: &Log,
    name: &str,
) -> Contended {
    let lease = holder.acquire_with(name, 0.0, 30.0, options).unwrap();
    let taken = Instant::now();
    log.lock().clear();
    let (tx, rx) = mpsc::channel();
    let n = name.to_owned();
    let thread = std::thread::spawn(move || {
        let mut waiter = waiter;
        tx.send(waiter.connection_id().unwrap()).unwrap();
        waiter.acquire(&n, 20.0, 30.0).unwrap();
        (waiter, Instant::now())
    });
    wait_until_queued(rx.recv().unwrap());
    holder.release(name).unwrap();
    let (waiter, got) = thread.join().unwrap();
    Contended { waiter, holders_lease: lease, waited: got - taken }
}

/// What [`contended_acquire_with`] ended with: the waiter, holding the name (its log
/// holds the round trips of that acquisition), the holder's lease, and how long after
/// the holder's acquisition the waiter got it.
struct Contended {
    waiter: Locker<Counting>,
    holders_lease: Lease,
    waited: Duration,
}

fn contended_acquire(holder: &mut NativeLocker, waiter: Locker<Counting>, log: &Log, name: &str) -> Locker<Counting> {
    contended_acquire_with(holder, &AcquireOptions::default(), waiter, log, name).waiter
}

#[test]
fn uncontended_lock_and_release_take_one_round_trip_each() {
    let name = unique("rt-uncontended");
    let (mut a, log) = counted(true);
    a.acquire(&name, 5.0, 30.0).unwrap();
    assert_eq!(trips(&log), [Trip::Statement]);
    a.release(&name).unwrap();
    assert_eq!(trips(&log), [Trip::Statement]);
}

#[test]
fn a_waiter_claims_the_row_in_the_round_trip_that_wakes_it() {
    let name = unique("rt-wake");
    let mut holder = locker();
    let (waiter, log) = counted(true);
    let mut waiter = contended_acquire(&mut holder, waiter, &log, &name);
    // the first try (GET_LOCK busy), then one batch that slept and claimed
    assert_eq!(trips(&log), [Trip::Statement, Trip::Batch]);
    assert_held_by(&name, waiter.connection_id().unwrap());
    waiter.release(&name).unwrap();
    assert!(rows(&name).is_empty());
}

#[test]
fn a_name_found_contended_is_queued_for_at_once_next_time() {
    let name = unique("rt-queue-first");
    let mut holder = locker();
    let (waiter, log) = counted(true);
    let mut waiter = contended_acquire(&mut holder, waiter, &log, &name);
    waiter.release(&name).unwrap();
    let mut waiter = contended_acquire(&mut holder, waiter, &log, &name);
    assert_eq!(trips(&log), [Trip::Batch], "no first try that is bound to fail");
    assert_held_by(&name, waiter.connection_id().unwrap());
    waiter.release(&name).unwrap();
}

#[test]
fn a_name_no_longer_contended_goes_back_to_the_single_statement_try() {
    let name = unique("rt-calm");
    let mut holder = locker();
    let (waiter, log) = counted(true);
    let mut waiter = contended_acquire(&mut holder, waiter, &log, &name);
    waiter.release(&name).unwrap();
    trips(&log);
    // free now: the queued GET_LOCK is granted at once, and the batch says it was free
    waiter.acquire(&name, 5.0, 30.0).unwrap();
    assert_eq!(trips(&log), [Trip::Batch]);
    waiter.release(&name).unwrap();
    trips(&log);
    waiter.acquire(&name, 5.0, 30.0).unwrap();
    assert_eq!(trips(&log), [Trip::Statement]);
    waiter.release(&name).unwrap();
}

#[test]
fn a_single_try_never_skips_its_try() {
    let name = unique("rt-try");
    let mut holder = locker();
    let (waiter, log) = counted(true);
    let mut waiter = contended_acquire(&mut holder, waiter, &log, &name);
    waiter.release(&name).unwrap();
    trips(&log);
    assert!(waiter.try_acquire(&name, 30.0).unwrap().is_some());
    assert_eq!(trips(&log), [Trip::Statement]);
    waiter.release(&name).unwrap();
}

#[test]
fn a_session_that_cannot_batch_sleeps_then_claims() {
    let name = unique("rt-nobatch");
    let mut holder = locker();
    let (waiter, log) = counted(false);
    let mut waiter = contended_acquire(&mut holder, waiter, &log, &name);
    // first try, the sleep on the GET_LOCK, the claim while holding it
    assert_eq!(trips(&log), [Trip::Statement; 3]);
    waiter.release(&name).unwrap();
    let mut waiter = contended_acquire(&mut holder, waiter, &log, &name);
    assert_eq!(trips(&log), [Trip::Statement; 2], "queued at once the second time");
    assert_held_by(&name, waiter.connection_id().unwrap());
    waiter.release(&name).unwrap();
}

#[test]
fn a_waiter_woken_by_a_release_gets_a_greater_token_and_records_itself() {
    let name = unique("rt-token");
    let mut holder = fenced_locker();
    let (waiter, log) = fresh(fenced_config());
    let Contended { mut waiter, holders_lease, .. } =
        contended_acquire_with(&mut holder, &AcquireOptions::default(), waiter, &log, &name);
    assert_eq!(trips(&log), [Trip::Statement, Trip::Batch]);
    let held = holders_lease.token.unwrap();
    let token = waiter.token(&name).unwrap().unwrap();
    assert!(token > held, "token {token} after {held}");
    let who = waiter.holder(&name).unwrap().unwrap();
    assert_eq!(who.token, Some(token));
    assert_eq!(who.pid, Some(u64::from(std::process::id())));
    assert!(who.hostname.is_some_and(|h| !h.is_empty()));
    waiter.release(&name).unwrap();
}

/// A locker that has not run anything yet.
fn fresh(config: Config) -> (Locker<Counting>, Log) {
    let log = Log::default();
    let table = config.table.clone();
    (Locker::new(Counting { config, log: log.clone(), batches: true }, table), log)
}

#[test]
fn the_first_lock_on_the_original_table_is_one_claim_that_is_not_refused() {
    locker(); // the table exists
    let name = unique("rt-fresh");
    let (mut a, log) = fresh(config());
    let lease = a.acquire(&name, 5.0, 30.0).unwrap();
    // the setup learned the table's width: no claim naming the upgrade's columns to be
    // refused, and no look at information_schema
    assert_eq!(trips(&log), [Trip::Statement]);
    assert_eq!(lease.token, None);
    assert_held_by(&name, a.connection_id().unwrap());
    a.release(&name).unwrap();
    a.acquire(&name, 5.0, 30.0).unwrap();
    assert_eq!(trips(&log), [Trip::Statement; 2], "one release, then one claim");
    a.release(&name).unwrap();
}

#[test]
fn only_a_session_opened_for_a_lease_looks_at_the_lock_table() {
    locker(); // the table exists
    let (mut leases, _) = fresh(config());
    leases.acquire(&unique("rt-look-lease"), 5.0, 30.0).unwrap();
    assert_eq!(leases.session().unwrap().lock_table_columns(), Some(5), "the original table has five columns");
    // A process that takes session locks only never pays for the look.
    let (mut sessions, _) = fresh(config());
    sessions.lock_session(&unique("rt-look-session"), 0.0).unwrap();
    assert_eq!(sessions.session().unwrap().lock_table_columns(), None);
}

#[test]
fn the_first_lock_on_an_upgraded_table_is_one_claim_with_a_token() {
    fenced_locker(); // the table is upgraded
    let name = unique("rt-fresh-fenced");
    let (mut a, log) = fresh(fenced_config());
    let lease = a.acquire(&name, 5.0, 30.0).unwrap();
    assert_eq!(trips(&log), [Trip::Statement]);
    assert!(lease.token.is_some_and(|t| t > 0), "{lease:?}");
    let who = a.holder(&name).unwrap().unwrap();
    assert_eq!(who.pid, Some(u64::from(std::process::id())));
    a.release(&name).unwrap();
}

#[test]
fn a_missing_table_is_reported_by_the_first_claim() {
    let (mut a, log) = fresh(Config::from_url(&format!("{}?table=no_such_locks_table", dsn())).unwrap());
    let err = a.acquire(&unique("rt-missing"), 1.0, 30.0).unwrap_err();
    assert!(matches!(err, mysqllock_core::Error::MissingTable { .. }), "{err}");
    assert!(err.to_string().contains("mysqllock init"), "{err}");
    assert_eq!(trips(&log), [Trip::Statement], "nothing left to undo");
}

#[test]
fn a_waiter_woken_by_an_at_least_release_waits_out_the_at_least_time() {
    let name = unique("rt-at-least");
    let mut holder = locker();
    let (waiter, log) = counted(true);
    let at_least = AcquireOptions { at_least: 2.0, ..AcquireOptions::default() };
    // The release keeps the row (not acquired) until the at-least time and lets the
    // GET_LOCK go now, so the waiter's batch gets the GET_LOCK and finds the row there.
    let Contended { mut waiter, waited, .. } = contended_acquire_with(&mut holder, &at_least, waiter, &log, &name);
    // 2 s counted from `created`, a whole second on the database clock: at least 1 s here
    assert!(waited >= Duration::from_secs(1), "took it {waited:?} after the holder's acquisition");
    assert!(trips(&log).contains(&Trip::Batch));
    assert_held_by(&name, waiter.connection_id().unwrap());
    waiter.release(&name).unwrap();
}

#[test]
fn connecting_costs_the_handshake_and_no_round_trip_more() {
    // PDO's floor: the client speaks once after the greeting (its handshake response)
    // before it can send its first statement. The session setup rides along behind a
    // mysql_native_password response (MariaDB). Behind MySQL's caching_sha2_password it
    // never does (the server may ask for the password instead: see wire::Connection::open),
    // so there the setup is a turn of its own, and nothing more: no second connection,
    // no other step.
    raw(); // a login fills MySQL's authentication cache, so the one below is a fast one
    let setup_turns = match server() {
        Server::MariaDb => 0,
        Server::MySql => 1,
    };
    let relay = Relay::to(server_of(&config()));
    let mut session = MysqlSession::connect(&relay.config(config())).unwrap();
    assert_eq!(*relay.client_turns.lock(), 1 + setup_turns, "client turns before the session was ready");
    let expected = match server() {
        Server::MariaDb => Authentication::NativePassword,
        Server::MySql => Authentication::Sha2Fast,
    };
    assert_eq!(session.authentication(), expected);
    assert!(session.execute("SELECT @@session.wait_timeout", &[]).unwrap().first(0).as_f64().unwrap() > 28_800.0);
    assert_eq!(*relay.client_turns.lock(), 2 + setup_turns, "one statement, one turn");
    assert_eq!(*relay.connections.lock(), 1);
}

#[test]
fn an_account_on_the_servers_second_plugin_logs_in_with_one_connection() {
    // MariaDB: an ed25519 account (the greeting names mysql_native_password, the server
    // switches). MySQL 9.7: a sha256_password account. The own client speaks both: no
    // refused attempt, no second connection.
    let dsn = std::env::var("MYSQLLOCK_TEST_ED25519_DSN")
        .expect("MYSQLLOCK_TEST_ED25519_DSN is not set: start the server with scripts/mariadb.sh or scripts/mysql.sh");
    let other_plugin = Config::from_url(&dsn).unwrap();
    let relay = Relay::to(server_of(&other_plugin));
    let config = relay.config(other_plugin);
    let first = MysqlSession::connect(&config);
    let second = MysqlSession::connect(&config);
    let (expected_connections, expected_path, expected_user) = match server() {
        // MariaDB's greeting names mysql_native_password, so the setup travels behind the
        // first handshake response, and the switch to ed25519 refuses it: once per target,
        // then the setup goes apart.
        Server::MariaDb => (3, Authentication::Ed25519, "locker_ed@127.0.0.1"),
        Server::MySql => (2, Authentication::Sha256Password, "locker_sha@127.0.0.1"),
    };
    assert_eq!(*relay.connections.lock(), expected_connections);
    for session in [first, second] {
        let mut session = session.unwrap();
        assert_eq!(session.authentication(), expected_path);
        let who = session.execute("SELECT CURRENT_USER()", &[]).unwrap();
        assert_eq!(who.first(0).as_text().as_deref(), Some(expected_user));
    }
}
