//! Beyond the original package: fencing tokens, renewal, keep-alive, "at least" and
//! introspection, against a real MariaDB. One behaviour per test.

#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::sleep;
use std::time::{Duration, Instant};

use common::*;
use mysqllock_core::{
    AcquireOptions, Config, Connector, Error, Locker, Loss, MysqlSession, NativeLocker, OpenSession, Outcome, Session,
    SessionError, Value,
};

fn delete_row(table: &str, name: &str) {
    query(&mut raw(), &format!("DELETE FROM {table} WHERE name = ?"), &[name.into()]);
}

fn keep_alive(max_hold: Option<f64>) -> AcquireOptions {
    AcquireOptions { keep_alive: true, max_hold, ..AcquireOptions::default() }
}

fn at_least(seconds: f64) -> AcquireOptions {
    AcquireOptions { at_least: seconds, ..AcquireOptions::default() }
}

#[test]
fn upgrade_adds_the_columns_once_and_keeps_the_rows() {
    let table = format!("upgrade_{}", std::process::id());
    let config = mysqllock_core::Config::from_url(&format!("{}?table={table}", dsn())).unwrap();
    let mut a = NativeLocker::from_config(config.clone());
    a.init_table().unwrap();
    let name = unique("kept");
    a.acquire(&name, 0.0, 60.0).unwrap();
    assert!(a.upgrade_table().unwrap(), "the first upgrade changes the table");
    assert!(!a.upgrade_table().unwrap(), "the second finds nothing to do");
    let columns = query(
        &mut raw(),
        "SELECT COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ? \
         ORDER BY ORDINAL_POSITION",
        &[table.as_str().into()],
    );
    let columns: Vec<String> = columns.iter().map(|r| r[0].as_text().unwrap()).collect();
    assert_eq!(
        columns,
        ["name", "connection_id", "created", "ttl", "lock_acquired", "token", "holder_host", "holder_pid"]
    );
    a.release(&name).unwrap();
    query(&mut raw(), &format!("DROP TABLE {table}"), &[]);
}

#[test]
fn every_acquisition_gets_a_greater_token() {
    let name = unique("tokens");
    let (mut a, mut b) = (fenced_locker(), fenced_locker());
    let mut last = 0;
    for round in 0..6 {
        let holder = if round % 2 == 0 { &mut a } else { &mut b };
        let token = holder.acquire(&name, 5.0, 30.0).unwrap().token.expect("an upgraded table gives tokens");
        assert!(token > last, "token {token} after {last}");
        assert_eq!(holder.token(&name).unwrap(), Some(token));
        holder.release(&name).unwrap();
        last = token;
    }
}

/// The protected write a user makes (docs/protocol.md, "Fencing tokens"): the token comes
/// from the holder's own `token(name)`, and the resource's guard `fence < token` refuses an
/// older one.
/// Returns the rows it changed.
fn fenced_write(
    resource: &mut mysqllock_core::MysqlSession,
    fence: &str,
    holder: &mut NativeLocker,
    name: &str,
) -> u64 {
    let token = holder.token(name).unwrap().expect("an upgraded table gives tokens");
    let write = format!("UPDATE {fence} SET token = ? WHERE id = 1 AND token < ?");
    resource.execute(&write, &[token.into(), token.into()]).unwrap().affected_rows
}

#[test]
fn a_taken_over_lease_gets_a_greater_token_than_its_stale_holder() {
    let name = unique("takeover-token");
    let (mut stale, mut next) = (fenced_locker(), fenced_locker());
    let old = stale.acquire(&name, 0.0, 1.0).unwrap().token.unwrap();
    let mut resource = raw();
    let fence = format!("fence_{}", std::process::id());
    query(&mut resource, &format!("CREATE TABLE {fence} (id INT PRIMARY KEY, token BIGINT UNSIGNED)"), &[]);
    query(&mut resource, &format!("INSERT INTO {fence} VALUES (1, 0)"), &[]);
    assert_eq!(fenced_write(&mut resource, &fence, &mut stale, &name), 1, "the holder's write passes while it holds");
    wait_until_expired(FENCED_TABLE, &name);
    let new = next.acquire(&name, 5.0, 30.0).unwrap().token.unwrap();
    assert!(new > old);
    assert_eq!(fenced_write(&mut resource, &fence, &mut next, &name), 1, "the current holder's write passes");
    // The stale holder has not learned of the takeover: its token() still answers, with
    // the old token, and the fence turns its late write away.
    assert_eq!(fenced_write(&mut resource, &fence, &mut stale, &name), 0, "the stale holder's write is refused");
    let written = query(&mut resource, &format!("SELECT token FROM {fence} WHERE id = 1"), &[]);
    assert_eq!(written[0][0].as_u64(), Some(new), "the resource carries the new holder's token");
    query(&mut resource, &format!("DROP TABLE {fence}"), &[]);
    assert!(matches!(stale.release(&name), Err(Error::NotHeld { .. })));
}

#[test]
fn the_original_table_gives_no_token() {
    let name = unique("no-token");
    let mut a = locker();
    assert_eq!(a.acquire(&name, 0.0, 30.0).unwrap().token, None);
    assert_eq!(a.token(&name).unwrap(), None);
    a.release(&name).unwrap();
}

#[test]
fn token_of_a_lock_not_held_is_an_error() {
    let mut a = fenced_locker();
    assert!(matches!(a.token(&unique("never")), Err(Error::NotHeld { loss: Loss::NeverAcquired, .. })));
}

#[test]
fn renew_extends_the_lease_on_the_database_clock() {
    let name = unique("renew");
    let mut a = fenced_locker();
    a.acquire(&name, 0.0, 5.0).unwrap();
    a.renew(&name, 60.0).unwrap();
    let remaining = a.remaining_ttl(&name).unwrap();
    assert!((58.0..=60.0).contains(&remaining), "remaining {remaining}");
}

#[test]
fn renew_never_shortens_the_lease() {
    let name = unique("renew-short");
    let mut a = fenced_locker();
    a.acquire(&name, 0.0, 60.0).unwrap();
    a.renew(&name, 5.0).unwrap();
    assert!(a.remaining_ttl(&name).unwrap() > 50.0);
}

#[test]
fn renew_twice_within_a_second_succeeds() {
    // The second UPDATE changes nothing; that must not read as a loss.
    let name = unique("renew-same");
    let mut a = locker();
    a.acquire(&name, 0.0, 30.0).unwrap();
    a.renew(&name, 30.0).unwrap();
    a.renew(&name, 30.0).unwrap();
}

#[test]
fn renew_after_a_takeover_reports_the_loss_and_changes_nothing() {
    let name = unique("renew-lost");
    let (mut a, mut b) = (locker(), locker());
    a.acquire(&name, 0.0, 1.0).unwrap();
    wait_until_expired("shared_locks", &name);
    b.acquire(&name, 5.0, 30.0).unwrap();
    let err = a.renew(&name, 60.0).unwrap_err();
    assert!(matches!(err, Error::NotHeld { .. }), "{err}");
    assert!(b.remaining_ttl(&name).unwrap() < 31.0, "the new holder's lease was not touched");
}

#[test]
fn keep_alive_holds_a_short_lease_while_the_holder_is_busy() {
    let name = unique("keepalive");
    let (mut a, mut b) = (fenced_locker(), fenced_locker());
    a.acquire_with(&name, 0.0, 1.0, &keep_alive(None)).unwrap();
    let start = Instant::now();
    while start.elapsed() < Duration::from_millis(3500) {
        assert!(b.try_acquire(&name, 30.0).unwrap().is_none(), "taken over after {:?}", start.elapsed());
        // The behaviour under test: the holder stays busy (renews nothing itself) while
        // time passes; this paces the tries over 3.5 s.
        sleep(Duration::from_millis(250));
    }
    a.assert_ttl(&name, 0.0).unwrap();
    a.release(&name).unwrap();
    assert!(b.try_acquire(&name, 30.0).unwrap().is_some());
}

/// A session of the keep-alive's that counts its statements.
struct Counted {
    inner: Box<dyn Session + Send>,
    statements: Arc<AtomicUsize>,
}

impl Session for Counted {
    fn execute(&mut self, sql: &str, params: &[Value]) -> std::result::Result<Outcome, SessionError> {
        self.statements.fetch_add(1, Ordering::SeqCst);
        self.inner.execute(sql, params)
    }

    fn connection_id(&self) -> u64 {
        self.inner.connection_id()
    }
}

/// Native sessions for the holder; for its keep-alive, whatever `keep_alive` opens
/// (`None`: keep-alive is refused), wrapped to count their statements.
struct OwnKeepAlive {
    config: Config,
    opens: Option<Arc<AtomicUsize>>,
    statements: Arc<AtomicUsize>,
}

impl Connector for OwnKeepAlive {
    type Session = MysqlSession;
    fn connect(&mut self) -> mysqllock_core::Result<MysqlSession> {
        MysqlSession::connect(&self.config)
    }

    fn keep_alive(&self, io_timeout: Duration) -> Option<OpenSession> {
        let opens = Arc::clone(self.opens.as_ref()?);
        let statements = Arc::clone(&self.statements);
        let mut native = self.config.keep_alive(io_timeout)?;
        Some(Box::new(move || -> mysqllock_core::Result<Box<dyn Session + Send>> {
            opens.fetch_add(1, Ordering::SeqCst);
            Ok(Box::new(Counted { inner: native()?, statements: Arc::clone(&statements) }))
        }))
    }
}

#[test]
fn keep_alive_renews_on_the_sessions_its_connector_opens() {
    let (opens, statements) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let config = fenced_config();
    let table = config.table.clone();
    // The fenced table is upgraded by fenced_locker(), once per test process.
    drop(fenced_locker());
    let connector =
        OwnKeepAlive { config: config.clone(), opens: Some(Arc::clone(&opens)), statements: Arc::clone(&statements) };
    let mut a = Locker::new(connector, table.clone());
    let name = unique("keepalive-session");
    a.acquire_with(&name, 0.0, 1.0, &keep_alive(None)).unwrap();
    // Renewals every third of the 1 s TTL: well past it, every one through the session
    // the connector opened (one, kept), and the lease is still there.
    let start = Instant::now();
    wait_until("the keep-alive renews three times through its connector's session", || {
        statements.load(Ordering::SeqCst) >= 3
    });
    let mut b = fenced_locker();
    while start.elapsed() < Duration::from_millis(2500) {
        assert!(b.try_acquire(&name, 30.0).unwrap().is_none(), "taken over after {:?}", start.elapsed());
        // The spacing of the takeover attempts over the 2.5 s under test, not a wait for
        // another process: each attempt must find the lease renewed.
        sleep(Duration::from_millis(250));
    }
    assert_eq!(opens.load(Ordering::SeqCst), 1, "one session for the keep-alive, kept between renewals");
    a.release(&name).unwrap();
    // A connector that opens no sessions for a thread refuses keep-alive before locking.
    let refused = OwnKeepAlive { config, opens: None, statements: Arc::new(AtomicUsize::new(0)) };
    let err = Locker::new(refused, table).acquire_with(&name, 0.0, 1.0, &keep_alive(None)).unwrap_err();
    assert!(matches!(err, Error::InvalidArgument { what: "keep_alive", .. }), "{err}");
    assert!(b.try_acquire(&name, 30.0).unwrap().is_some(), "the refused acquire took nothing");
}

#[test]
fn keep_alive_stops_at_the_maximum_hold_time() {
    let name = unique("max-hold");
    let (mut a, mut b) = (fenced_locker(), fenced_locker());
    a.acquire_with(&name, 0.0, 1.0, &keep_alive(Some(2.0))).unwrap();
    let start = Instant::now();
    b.acquire(&name, 10.0, 30.0).unwrap();
    let waited = start.elapsed();
    assert!(waited >= Duration::from_millis(1500), "renewals ended early: {waited:?}");
    assert!(waited < Duration::from_secs(6), "renewed past the maximum: {waited:?}");
    assert!(matches!(a.release(&name), Err(Error::NotHeld { .. })));
}

#[test]
fn keep_alive_failure_is_reported_by_the_next_assert_and_release() {
    let name = unique("keepalive-lost");
    let mut a = fenced_locker();
    a.acquire_with(&name, 0.0, 1.0, &keep_alive(None)).unwrap();
    // Behind its back: the row goes, as after a takeover.
    delete_row(FENCED_TABLE, &name);
    wait_until("the keep-alive notices the lost row", || a.renewal_failed(&name));
    let err = a.assert_ttl(&name, 0.0).unwrap_err();
    assert!(matches!(err, Error::NotHeld { loss: Loss::RenewalFailed, .. }), "{err}");
    let err = a.release(&name).unwrap_err();
    assert!(matches!(err, Error::NotHeld { .. }), "{err}");
}

#[test]
fn keep_alive_ends_with_the_release() {
    let name = unique("keepalive-release");
    let (mut a, mut b) = (fenced_locker(), fenced_locker());
    a.acquire_with(&name, 0.0, 1.0, &keep_alive(None)).unwrap();
    a.release(&name).unwrap();
    // The same session takes the name again with a 1 s TTL and no keep-alive: a renewal
    // thread left running would find its row (same name, same session, GET_LOCK held)
    // and keep extending it, so it would never run out.
    a.acquire(&name, 0.0, 1.0).unwrap();
    wait_until_expired(FENCED_TABLE, &name);
    let ttl = query(&mut raw(), &format!("SELECT ttl FROM {FENCED_TABLE} WHERE name = ?"), &[name.as_str().into()]);
    assert_eq!(ttl[0][0].as_i64(), Some(1), "the lease was renewed after the keep-alive's release");
    assert!(b.try_acquire(&name, 30.0).unwrap().is_some(), "the unrenewed lease was not taken over");
}

#[test]
fn dropping_the_locker_stops_its_keep_alive_without_waiting() {
    let name = unique("keepalive-drop");
    let mut a = fenced_locker();
    a.acquire_with(&name, 0.0, 30.0, &keep_alive(None)).unwrap();
    let start = Instant::now();
    drop(a);
    assert!(start.elapsed() < Duration::from_secs(2), "drop took {:?}", start.elapsed());
    // The server ends the dropped session on its own time: a waiter gets the lock as
    // soon as it does (well before the 30 s TTL).
    fenced_locker().acquire(&name, 10.0, 30.0).expect("the dropped session's lock is free");
}

#[test]
fn keep_alive_needs_no_table_upgrade() {
    let name = unique("keepalive-original");
    let (mut a, mut b) = (locker(), locker());
    a.acquire_with(&name, 0.0, 1.0, &keep_alive(None)).unwrap();
    // The behaviour under test: the holder is busy past twice its TTL; only its
    // keep-alive renews the lease meanwhile.
    sleep(Duration::from_millis(2500));
    assert!(b.try_acquire(&name, 30.0).unwrap().is_none());
    a.release(&name).unwrap();
}

#[test]
fn bad_options_are_refused_before_anything_is_locked() {
    let name = unique("bad-options");
    let mut a = fenced_locker();
    for options in [
        AcquireOptions { max_hold: Some(10.0), ..AcquireOptions::default() },
        keep_alive(Some(0.0)),
        keep_alive(Some(f64::NAN)),
        at_least(-1.0),
        at_least(f64::INFINITY),
    ] {
        let err = a.acquire_with(&name, 0.0, 30.0, &options).unwrap_err();
        assert!(err.is_invalid_argument(), "{options:?}: {err}");
    }
    assert!(rows_in(FENCED_TABLE, &name).is_empty());
}

fn rows_in(table: &str, name: &str) -> Vec<Vec<Value>> {
    query(&mut raw(), &format!("SELECT name FROM {table} WHERE name = ?"), &[name.into()])
}

#[test]
fn at_least_keeps_the_lock_taken_after_release_until_its_time() {
    let name = unique("at-least");
    let (mut a, mut b) = (fenced_locker(), fenced_locker());
    a.acquire_with(&name, 0.0, 60.0, &at_least(3.0)).unwrap();
    a.release(&name).unwrap();
    assert!(b.try_acquire(&name, 30.0).unwrap().is_none(), "free right after the release");
    assert!(a.try_acquire(&name, 30.0).unwrap().is_none(), "its own holder took it again");
    let start = Instant::now();
    b.acquire(&name, 10.0, 30.0).unwrap();
    let waited = start.elapsed();
    assert!(waited >= Duration::from_millis(1500), "freed early: {waited:?}");
    assert!(waited < Duration::from_secs(5), "kept too long: {waited:?}");
}

#[test]
fn at_least_already_passed_releases_at_once() {
    let name = unique("at-least-passed");
    let (mut a, mut b) = (fenced_locker(), fenced_locker());
    a.acquire_with(&name, 0.0, 60.0, &at_least(1.0)).unwrap();
    let mut admin = raw();
    let passed = format!("SELECT COUNT(*) FROM {FENCED_TABLE} WHERE name = ? AND created + 1 < UNIX_TIMESTAMP()");
    wait_until("the at-least second has passed on the database clock", || {
        query(&mut admin, &passed, &[name.as_str().into()])[0][0].as_i64() == Some(1)
    });
    a.release(&name).unwrap();
    assert!(rows_in(FENCED_TABLE, &name).is_empty());
    assert!(b.try_acquire(&name, 30.0).unwrap().is_some());
}

#[test]
fn at_least_after_a_takeover_still_reports_the_loss() {
    let name = unique("at-least-lost");
    let (mut a, mut b) = (fenced_locker(), fenced_locker());
    a.acquire_with(&name, 0.0, 1.0, &at_least(30.0)).unwrap();
    wait_until_expired(FENCED_TABLE, &name);
    b.acquire(&name, 5.0, 60.0).unwrap();
    let err = a.release(&name).unwrap_err();
    assert!(matches!(err, Error::NotHeld { .. }), "{err}");
    assert_eq!(b.holder(&name).unwrap().unwrap().connection_id, b.connection_id().unwrap());
}

#[test]
fn holder_names_token_host_pid_and_times() {
    let name = unique("holder");
    let (mut a, mut observer) = (fenced_locker(), fenced_locker());
    let lease = a.acquire(&name, 0.0, 30.0).unwrap();
    let h = observer.holder(&name).unwrap().expect("a holder");
    assert_eq!(h.connection_id, lease.connection_id);
    assert_eq!(h.token, lease.token);
    assert_eq!(h.pid, Some(u64::from(std::process::id())));
    let hostname = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    assert_eq!(h.hostname.as_deref(), Some(hostname.trim()));
    assert_eq!(h.expires_at() - h.acquired_at(), 30);
    assert!(h.holder_alive);
    a.release(&name).unwrap();
    assert!(observer.holder(&name).unwrap().is_none());
}

#[test]
fn holder_on_the_original_table_has_no_recorded_details() {
    let name = unique("holder-original");
    let (mut a, mut observer) = (locker(), locker());
    a.acquire(&name, 0.0, 30.0).unwrap();
    let h = observer.holder(&name).unwrap().expect("a holder");
    assert_eq!((h.token, h.hostname, h.pid), (None, None, None));
    assert_eq!(h.connection_id, a.connection_id().unwrap());
}
