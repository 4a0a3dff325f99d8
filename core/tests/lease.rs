//! The TTL-lease protocol against a real MariaDB, one behaviour per test.

#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

mod common;

use std::time::{Duration, Instant};

use common::*;
use mysqllock_core::{Config, Error, Loss, NativeLocker, Session};

#[test]
fn acquire_then_release_leaves_no_row() {
    let name = unique("basic");
    let mut a = locker();
    let lease = a.acquire(&name, 0.0, 10.0).unwrap();
    assert_eq!(lease.ttl, 10);
    assert_eq!(rows(&name), vec![(name.clone(), a.connection_id().unwrap(), 1)]);
    a.release(&name).unwrap();
    assert!(rows(&name).is_empty());
}

#[test]
fn timeout_zero_is_exactly_one_try() {
    let name = unique("zero");
    let (mut a, mut b) = (locker(), locker());
    a.acquire(&name, 0.0, 30.0).unwrap();
    let start = Instant::now();
    let err = b.acquire(&name, 0.0, 30.0).unwrap_err();
    assert!(err.is_timeout(), "{err}");
    assert!(start.elapsed() < Duration::from_millis(500), "took {:?}", start.elapsed());
}

#[test]
fn fractional_timeout_is_honoured() {
    let name = unique("fraction");
    let (mut a, mut b) = (locker(), locker());
    a.acquire(&name, 0.0, 30.0).unwrap();
    let start = Instant::now();
    let err = b.acquire(&name, 0.4, 30.0).unwrap_err();
    let waited = start.elapsed();
    assert!(err.is_timeout(), "{err}");
    assert!(waited >= Duration::from_millis(390), "gave up early: {waited:?}");
    assert!(waited < Duration::from_millis(1500), "overshot: {waited:?}");
}

#[test]
fn a_fraction_of_a_second_is_not_rounded_up_to_a_whole_one() {
    // MySQL rounds GET_LOCK's timeout to whole seconds: asked for 0.6 s it would sleep 1 s.
    let name = unique("fraction-up");
    let (mut a, mut b) = (locker(), locker());
    a.acquire(&name, 0.0, 30.0).unwrap();
    a.lock_session(&format!("{name}-s"), 0.0).unwrap();
    for kind in ["lease", "session lock"] {
        let start = Instant::now();
        let err = match kind {
            "lease" => b.acquire(&name, 0.6, 30.0).unwrap_err(),
            _ => b.lock_session(&format!("{name}-s"), 0.6).unwrap_err(),
        };
        let waited = start.elapsed();
        assert!(err.is_timeout(), "{kind}: {err}");
        assert!(waited >= Duration::from_millis(590), "{kind}: gave up early: {waited:?}");
        // Generous, but short of the whole second a rounded timeout would take.
        assert!(waited < Duration::from_millis(950), "{kind}: overshot: {waited:?}");
    }
}

#[test]
fn waiter_gets_the_lock_within_milliseconds_of_release() {
    let name = unique("handoff");
    let mut a = locker();
    a.acquire(&name, 0.0, 30.0).unwrap();
    let n = name.clone();
    let (tx, rx) = std::sync::mpsc::channel();
    let waiter = std::thread::spawn(move || {
        let mut b = locker();
        tx.send(b.connection_id().unwrap()).unwrap();
        b.acquire(&n, 20.0, 30.0).map(|_| Instant::now())
    });
    wait_until_queued(rx.recv().unwrap());
    a.release(&name).unwrap();
    let released = Instant::now();
    let acquired = waiter.join().unwrap().unwrap();
    let handoff = acquired.saturating_duration_since(released);
    assert!(handoff < Duration::from_millis(250), "hand-off took {handoff:?}");
}

#[test]
fn second_acquire_in_the_same_session_fails_at_once() {
    let name = unique("twice");
    let mut a = locker();
    a.acquire(&name, 0.0, 30.0).unwrap();
    let start = Instant::now();
    let err = a.acquire(&name, 5.0, 30.0).unwrap_err();
    assert!(err.is_already_held(), "{err}");
    assert!(start.elapsed() < Duration::from_millis(200));
    // and it is still held, once
    a.release(&name).unwrap();
    assert!(rows(&name).is_empty());
}

#[test]
fn other_spelling_of_a_held_name_fails_at_once_in_the_same_session() {
    let name = unique("Spelling");
    let mut a = locker();
    a.acquire(&name, 0.0, 30.0).unwrap();
    let err = a.acquire(&name.to_lowercase(), 5.0, 30.0).unwrap_err();
    assert!(matches!(&err, Error::AlreadyHeld { held_as, .. } if *held_as == name), "{err}");
}

#[test]
fn names_differing_in_case_or_trailing_space_are_one_lock() {
    let name = unique("Case");
    let (mut a, mut b) = (locker(), locker());
    a.acquire(&name, 0.0, 30.0).unwrap();
    for variant in [name.to_lowercase(), name.to_uppercase(), format!("{name} "), format!("{}  ", name.to_lowercase())]
    {
        let err = b.acquire(&variant, 0.2, 30.0).unwrap_err();
        assert!(err.is_timeout(), "{variant:?} was not excluded: {err}");
    }
    assert_eq!(rows(&name).len(), 1, "the holder's row must be untouched");
    a.release(&name).unwrap();
    b.acquire(&name.to_lowercase(), 0.0, 30.0).unwrap();
    let err = a.acquire(&name, 0.2, 30.0).unwrap_err();
    assert!(err.is_timeout(), "{err}");
}

#[test]
fn release_of_a_lock_not_held_fails() {
    let mut a = locker();
    let err = a.release(&unique("never")).unwrap_err();
    assert!(matches!(err, Error::NotHeld { loss: Loss::NeverAcquired, .. }), "{err}");
}

#[test]
fn release_after_the_row_was_deleted_reports_the_loss() {
    let name = unique("deleted");
    let mut a = locker();
    a.acquire(&name, 0.0, 30.0).unwrap();
    query(&mut raw(), "DELETE FROM shared_locks WHERE name = ?", &[name.as_str().into()]);
    let err = a.assert_ttl(&name, 1.0).unwrap_err();
    assert!(matches!(err, Error::NotHeld { loss: Loss::RowGone, .. }), "{err}");
    let err = a.release(&name).unwrap_err();
    assert!(matches!(err, Error::NotHeld { loss: Loss::RowGone, .. }), "{err}");
}

#[test]
fn assert_ttl_passes_with_enough_left_and_fails_with_too_little() {
    let name = unique("assert");
    let mut a = locker();
    a.acquire(&name, 0.0, 20.0).unwrap();
    let remaining = a.assert_ttl(&name, 15.0).unwrap();
    assert!((15.0..=21.0).contains(&remaining), "remaining {remaining}");
    let err = a.assert_ttl(&name, 25.0).unwrap_err();
    assert!(matches!(err, Error::TtlTooShort { required, .. } if required == 25.0), "{err}");
}

#[test]
fn set_remaining_ttl_shortens_or_extends_the_lease_and_another_session_takes_it_once_it_ran_out() {
    let name = unique("set-remaining");
    let (mut holder, mut next) = (locker(), locker());
    holder.acquire(&name, 0.0, 300.0).unwrap();
    holder.set_remaining_ttl(&name, 60.0).unwrap();
    let left = holder.remaining_ttl(&name).unwrap();
    assert!((58.0..=60.0).contains(&left), "shortened to {left} s, not 60");
    holder.set_remaining_ttl(&name, 2.0).unwrap();
    let left = holder.remaining_ttl(&name).unwrap();
    assert!(left <= 2.0, "{left} s left after setting 2");
    let start = Instant::now();
    next.acquire(&name, 10.0, 30.0).unwrap();
    assert!(start.elapsed() < Duration::from_secs(6), "took {:?}", start.elapsed());
    assert!(matches!(holder.set_remaining_ttl(&name, 30.0), Err(Error::NotHeld { .. })));
}

#[test]
fn row_whose_owner_never_took_the_get_lock_is_reclaimed_only_after_its_ttl() {
    let name = unique("pending");
    let mut other = raw();
    let owner = other.connection_id();
    query(
        &mut other,
        "INSERT INTO shared_locks (name, connection_id, created, ttl, lock_acquired) VALUES (?, ?, UNIX_TIMESTAMP(), 2, 0)",
        &[name.as_str().into(), owner.into()],
    );
    let mut a = locker();
    assert!(a.acquire(&name, 0.0, 30.0).unwrap_err().is_timeout());
    let start = Instant::now();
    a.acquire(&name, 10.0, 30.0).unwrap();
    let waited = start.elapsed();
    assert!(waited >= Duration::from_millis(1500), "reclaimed before the TTL: {waited:?}");
    assert!(waited < Duration::from_secs(6), "waited far past the TTL: {waited:?}");
}

#[test]
fn row_of_a_dead_owner_is_reclaimed_at_once() {
    let name = unique("dead");
    let gone_id = {
        let mut gone = locker();
        gone.acquire(&name, 0.0, 300.0).unwrap();
        gone.connection_id().unwrap()
        // dropping the locker closes its session: the server releases its GET_LOCK
    };
    // The server ends a closed session on its own time (MySQL takes a few milliseconds).
    wait_until_gone(gone_id);
    let mut a = locker();
    let start = Instant::now();
    // One try, although the row names the dead owner for 300 s more.
    a.acquire(&name, 0.0, 30.0).unwrap();
    assert!(start.elapsed() < Duration::from_millis(500));
}

#[test]
fn killed_session_loses_its_locks_and_the_next_acquire_reconnects() {
    let name = unique("killed");
    let mut a = locker();
    a.acquire(&name, 0.0, 300.0).unwrap();
    let id = a.connection_id().unwrap();
    raw().kill(id).unwrap();
    let mut b = locker();
    b.acquire(&name, 2.0, 30.0).unwrap();
    let err = a.release(&name).unwrap_err();
    assert!(matches!(err, Error::NotHeld { .. }), "{err}");
    let other = unique("after-kill");
    a.acquire(&other, 0.0, 30.0).unwrap();
    assert_ne!(a.connection_id().unwrap(), id, "a new session was expected");
}

#[test]
fn stale_holder_keeping_the_get_lock_is_killed_by_the_next_owner() {
    let name = unique("stale");
    let mut a = locker();
    a.acquire(&name, 0.0, 1.0).unwrap();
    let a_id = a.connection_id().unwrap();
    // a "hangs" past its TTL; b takes over and must KILL a's session
    let mut b = locker();
    let start = Instant::now();
    b.acquire(&name, 10.0, 30.0).unwrap();
    assert!(start.elapsed() < Duration::from_secs(5), "{:?}", start.elapsed());
    wait_until_gone(a_id);
    let err = a.assert_ttl(&name, 0.0).unwrap_err();
    assert!(err.is_not_held(), "{err}");
}

#[test]
fn session_lock_excludes_and_releases() {
    let name = unique("plain");
    let (mut a, mut b) = (locker(), locker());
    a.lock_session(&name, 0.0).unwrap();
    assert!(b.lock_session(&name, 0.2).unwrap_err().is_timeout());
    assert!(a.lock_session(&name, 1.0).unwrap_err().is_already_held());
    a.unlock_session(&name).unwrap();
    b.lock_session(&name, 0.0).unwrap();
    assert!(a.unlock_session(&name).unwrap_err().is_not_held());
    assert!(rows(&name).is_empty(), "session locks never touch the table");
}

#[test]
fn bad_input_is_refused_and_changes_nothing() {
    let mut a = locker();
    let ok = unique("ok-name");
    let long = "x".repeat(65);
    let cases: Vec<(&str, f64, f64)> = vec![
        ("", 0.0, 10.0),
        (&long, 0.0, 10.0),
        ("日本語", 0.0, 10.0),
        ("emoji🙂", 0.0, 10.0),
        (&ok, -1.0, 10.0),
        (&ok, f64::NAN, 10.0),
        (&ok, f64::INFINITY, 10.0),
        (&ok, 0.0, 0.0),
        (&ok, 0.0, -5.0),
        (&ok, 0.0, f64::NAN),
    ];
    for (name, timeout, ttl) in cases {
        let err = a.acquire(name, timeout, ttl).unwrap_err();
        assert!(err.is_invalid_argument(), "{name:?} {timeout} {ttl}: {err}");
        assert!(err.to_string().starts_with("invalid "), "{err}");
    }
    assert!(a.lock_session("", 0.0).unwrap_err().is_invalid_argument());
    assert!(a.assert_ttl("x", f64::NAN).unwrap_err().is_invalid_argument());
    // latin1 would have stored the refused names as question marks
    for stored in [ok.as_str(), "???", "emoji?", &long[..64], ""] {
        assert!(rows(stored).is_empty(), "a row for {stored:?} appeared");
    }
}

#[test]
fn latin1_name_is_stored_exactly() {
    let base = unique("Größe-€");
    let mut a = locker();
    a.acquire(&base, 0.0, 30.0).unwrap();
    assert_eq!(rows(&base)[0].0, base);
    a.release(&base).unwrap();
}

#[test]
fn missing_table_error_names_the_fix() {
    let mut cfg = config();
    cfg.table = mysqllock_core::Table::new("no_such_table_here", Default::default()).unwrap();
    let mut a = NativeLocker::from_config(cfg);
    let err = a.acquire(&unique("nt"), 0.0, 10.0).unwrap_err();
    let msg = err.to_string();
    assert!(err.is_schema(), "{msg}");
    assert!(msg.contains("mysqllock init") && msg.contains("CREATE TABLE"), "{msg}");
}

#[test]
fn wrong_password_error_does_not_show_the_password() {
    let mut cfg: Config = config();
    cfg.password = Some("wrong-pw-4711".into());
    let mut a = NativeLocker::from_config(cfg);
    let err = a.acquire(&unique("pw"), 0.0, 10.0).unwrap_err();
    assert!(err.is_connection(), "{err}");
    let msg = format!("{err} {err:?}");
    assert!(!msg.contains("wrong-pw-4711"), "{msg}");
    assert!(msg.contains("password"), "expected a hint about the password: {msg}");
}

#[test]
fn unreachable_server_is_a_connection_error() {
    let mut cfg = config();
    cfg.port = 1;
    let mut a = NativeLocker::from_config(cfg);
    let err = a.acquire(&unique("unreach"), 0.0, 10.0).unwrap_err();
    assert!(err.is_connection(), "{err}");
    assert!(err.to_string().contains("127.0.0.1:1"), "{err}");
}

#[test]
fn status_shows_the_holder() {
    let name = unique("status");
    let mut a = locker();
    a.acquire(&name, 0.0, 30.0).unwrap();
    let st = locker().status(Some(&name)).unwrap();
    assert_eq!(st.len(), 1);
    assert_eq!(st[0].connection_id, a.connection_id().unwrap());
    assert!(st[0].holder_alive && st[0].acquired);
    assert!(st[0].remaining > 25.0 && st[0].remaining <= 31.0, "{:?}", st[0]);
    assert!(st[0].host.as_deref().is_some_and(|h| h.starts_with("127.0.0.1")), "{:?}", st[0]);
}

#[test]
fn locker_is_send() {
    fn assert_send<T: Send>() {}
    assert_send::<NativeLocker>();
}

#[test]
fn holder_session_is_not_ended_by_the_servers_idle_timeout_under_a_long_job() {
    let mut a = locker();
    let out = a.session().unwrap().execute("SELECT @@session.wait_timeout", &[]).unwrap();
    assert!(out.first(0).as_i64().unwrap() >= 7 * 24 * 3600, "{out:?}");
}

#[test]
fn stale_holder_under_another_spelling_is_killed_by_the_next_owner() {
    let name = unique("Spell-stale");
    let mut a = locker();
    a.acquire(&name, 0.0, 1.0).unwrap();
    let a_id = a.connection_id().unwrap();
    let mut b = locker();
    b.acquire(&name.to_lowercase(), 10.0, 30.0).unwrap();
    wait_until_gone(a_id);
}

#[test]
fn failed_claim_leaves_no_get_lock_behind() {
    let name = unique("no-leak");
    let mut s = raw();
    query(
        &mut s,
        "CREATE TABLE IF NOT EXISTS tiny_ttl_locks (name varchar(64) NOT NULL, connection_id bigint NOT NULL, \
         created bigint NOT NULL, ttl tinyint NOT NULL, lock_acquired tinyint(1) NOT NULL, UNIQUE KEY (name)) \
         ENGINE=MyISAM DEFAULT CHARSET=latin1",
        &[],
    );
    let mut cfg = config();
    cfg.table = mysqllock_core::Table::new("tiny_ttl_locks", Default::default()).unwrap();
    let mut a = NativeLocker::from_config(cfg);
    a.session().unwrap().execute("SET SESSION sql_mode = 'STRICT_ALL_TABLES'", &[]).unwrap();
    let err = a.acquire(&name, 0.0, 100_000.0).unwrap_err();
    assert!(matches!(err, Error::Database { .. }), "{err}");
    let holder = query(&mut s, "SELECT IS_USED_LOCK(?)", &[name.as_str().into()]);
    assert!(holder[0][0].is_null(), "GET_LOCK left held by {:?}", holder[0][0]);
}

#[test]
fn acquire_leaves_the_sessions_last_insert_id_alone() {
    let name = unique("lii");
    let mut a = locker();
    a.session().unwrap().execute("SELECT LAST_INSERT_ID(4242)", &[]).unwrap();
    a.acquire(&name, 0.0, 30.0).unwrap();
    a.release(&name).unwrap();
    let out = a.session().unwrap().execute("SELECT LAST_INSERT_ID()", &[]).unwrap();
    assert_eq!(out.first(0).as_i64(), Some(4242), "a shared session's LAST_INSERT_ID() changed");
}

#[test]
fn a_releaser_acquiring_again_at_once_queues_behind_the_waiter_it_woke() {
    let name = unique("fair");
    let mut a = locker();
    a.acquire(&name, 0.0, 30.0).unwrap();
    let n = name.clone();
    let (tx, rx) = std::sync::mpsc::channel();
    let waiter = std::thread::spawn(move || {
        let mut b = locker();
        tx.send(b.connection_id().unwrap()).unwrap();
        b.acquire(&n, 20.0, 30.0).unwrap();
        let got = Instant::now();
        // The behaviour under test: the woken waiter holds the lock, doing work, for 400 ms.
        std::thread::sleep(Duration::from_millis(400));
        b.release(&n).unwrap();
        got
    });
    wait_until_queued(rx.recv().unwrap());
    a.release(&name).unwrap();
    a.acquire(&name, 20.0, 30.0).unwrap();
    let again = Instant::now();
    let waiter_got = waiter.join().unwrap();
    assert!(waiter_got < again, "the releaser barged ahead of the waiter it had woken");
    assert!(again - waiter_got >= Duration::from_millis(350), "acquired while the waiter still held it");
}

#[test]
fn one_try_takes_over_from_a_live_holder_whose_ttl_passed() {
    let name = unique("try-stale");
    let (mut hung, mut next) = (locker(), locker());
    hung.acquire(&name, 0.0, 1.0).unwrap();
    wait_until_expired("shared_locks", &name);
    let start = Instant::now();
    assert!(next.try_acquire(&name, 30.0).unwrap().is_some(), "the hung holder kept the lock past its TTL");
    assert!(start.elapsed() < Duration::from_secs(4), "took {:?}", start.elapsed());
    assert!(matches!(hung.release(&name), Err(Error::NotHeld { .. })));
}

#[test]
fn one_try_takes_over_from_a_session_keeping_the_get_lock_without_a_row() {
    // Left by an earlier attempt (or another tool) that removed the stale holder's row
    // but did not get rid of the holder.
    let name = unique("try-rowless");
    let (mut hung, mut next) = (locker(), locker());
    hung.acquire(&name, 0.0, 60.0).unwrap();
    query(&mut raw(), "DELETE FROM shared_locks WHERE name = ?", &[name.as_str().into()]);
    let start = Instant::now();
    assert!(next.try_acquire(&name, 30.0).unwrap().is_some(), "the row-less GET_LOCK holder blocked the try");
    assert!(start.elapsed() < Duration::from_secs(4), "took {:?}", start.elapsed());
    assert!(matches!(hung.release(&name), Err(Error::NotHeld { .. })));
}

/// The original package, whose rows outlive the session that ends, reclaims a row at once
/// only while it is marked `lock_acquired = 1`. A holder that ends without releasing
/// (request or process end: `release_all`) must leave a row marked 0 until its TTL, as
/// the original does, not free it early.
#[test]
fn a_row_no_longer_marked_acquired_outlives_its_holders_end_until_its_ttl() {
    let name = unique("unmarked-end");
    let mut a = locker();
    a.acquire(&name, 0.0, 2.0).unwrap();
    let mut admin = raw();
    query(&mut admin, "UPDATE shared_locks SET lock_acquired = 0 WHERE name = ?", &[name.as_str().into()]);
    let before = query(&mut admin, "SELECT created + ttl FROM shared_locks WHERE name = ?", &[name.as_str().into()]);
    let ends = before[0][0].as_i64().unwrap();
    assert!(a.release_all().is_empty());
    drop(a);
    assert_eq!(rows(&name).len(), 1, "the holder's end deleted a row marked lock_acquired = 0");
    let mut b = locker();
    assert!(b.try_acquire(&name, 30.0).unwrap().is_none(), "taken over before its TTL");
    b.acquire(&name, 10.0, 30.0).unwrap();
    let created = query(&mut admin, "SELECT created FROM shared_locks WHERE name = ?", &[name.as_str().into()]);
    let created = created[0][0].as_i64().unwrap();
    assert!(created > ends, "reclaimed at {created}, before the lease ran out after {ends} (database clock)");
}

#[test]
fn a_marked_row_is_deleted_at_its_holders_end_and_free_at_once() {
    let name = unique("marked-end");
    let mut a = locker();
    a.acquire(&name, 0.0, 300.0).unwrap();
    assert!(a.release_all().is_empty());
    assert!(rows(&name).is_empty(), "the holder's end left its row");
    let holder = query(&mut raw(), "SELECT IS_USED_LOCK(?)", &[name.as_str().into()]);
    assert!(holder[0][0].is_null(), "the holder's end left its GET_LOCK");
    assert!(locker().try_acquire(&name, 30.0).unwrap().is_some());
}

#[test]
fn an_at_least_row_outlives_its_holders_end_until_its_time() {
    let name = unique("at-least-end");
    let mut a = locker();
    a.acquire_with(&name, 0.0, 60.0, &mysqllock_core::AcquireOptions { at_least: 30.0, ..Default::default() }).unwrap();
    assert!(a.release_all().is_empty());
    drop(a);
    assert_eq!(rows(&name).into_iter().map(|r| r.2).collect::<Vec<_>>(), vec![0], "the kept row");
    assert!(locker().try_acquire(&name, 30.0).unwrap().is_none(), "free before its at-least time");
}

/// The latin1 key folds `Fóo` and `foo` into one row; the owner's GET_LOCK must be found
/// under the name as it took it, not under the column's latin1 bytes (which would make
/// every live holder of a non-ASCII name look dead).
#[test]
fn a_live_holder_of_a_non_ascii_name_is_not_taken_for_dead() {
    let base = unique("accent");
    let (mut a, mut b) = (locker(), locker());
    a.acquire(&format!("{base}-Fóo"), 0.0, 30.0).unwrap();
    assert!(b.try_acquire(&format!("{base}-foo"), 30.0).unwrap().is_none(), "another spelling took a live lock");
    assert!(b.try_acquire(&format!("{base}-Fóo"), 30.0).unwrap().is_none(), "the same spelling took a live lock");
    a.release(&format!("{base}-Fóo")).unwrap();
    assert!(b.try_acquire(&format!("{base}-foo"), 30.0).unwrap().is_some());
}
