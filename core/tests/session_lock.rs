//! Session locks (plain GET_LOCK on the locker's session) against a real MariaDB.

#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

mod common;

use std::sync::mpsc;
use std::thread;

use common::*;
use mysqllock_core::{Error, Loss, NativeLocker, Session};

fn session_locker() -> NativeLocker {
    NativeLocker::from_config(config())
}

#[test]
fn case_and_accent_variants_are_one_session_lock() {
    let base = unique("straße-müller");
    let (mut a, mut b) = (session_locker(), session_locker());
    a.lock_session(&base, 0.0).unwrap();
    for variant in [base.to_uppercase(), base.replace("ß", "ss").replace('ü', "u"), base.replace('ü', "u\u{308}")] {
        let err = b.lock_session(&variant, 0.0).unwrap_err();
        assert!(err.is_timeout(), "{variant}: {err}");
    }
    a.unlock_session(&base.to_uppercase()).unwrap();
    b.lock_session(&base.to_uppercase(), 0.0).unwrap();
}

#[test]
fn a_variant_of_a_held_session_lock_is_already_held_under_its_first_spelling() {
    let name = unique("Report");
    let mut a = session_locker();
    a.lock_session(&name, 0.0).unwrap();
    match a.lock_session(&name.to_lowercase(), 5.0).unwrap_err() {
        Error::AlreadyHeld { held_as, .. } => assert_eq!(held_as, name),
        other => panic!("expected AlreadyHeld, got {other}"),
    }
}

#[test]
fn a_lowercase_ascii_session_lock_is_the_lock_a_hand_written_get_lock_takes() {
    let name = unique("cron-job");
    let mut script = raw();
    assert_eq!(query(&mut script, "SELECT GET_LOCK(?, 0)", &[name.as_str().into()])[0][0].as_i64(), Some(1));
    let mut a = session_locker();
    assert!(a.lock_session(&name, 0.0).unwrap_err().is_timeout());
    query(&mut script, "SELECT RELEASE_LOCK(?)", &[name.as_str().into()]);
    a.lock_session(&name, 0.0).unwrap();
    assert_eq!(query(&mut script, "SELECT GET_LOCK(?, 0)", &[name.as_str().into()])[0][0].as_i64(), Some(0));
}

#[test]
fn holder_names_the_holding_session_and_only_it_holds_the_lock() {
    let name = unique("holder");
    let (mut a, mut b) = (session_locker(), session_locker());
    assert_eq!(b.session_lock_holder(&name).unwrap(), None);
    a.lock_session(&name, 0.0).unwrap();
    let a_id = a.connection_id().unwrap();
    assert_eq!(b.session_lock_holder(&name.to_uppercase()).unwrap(), Some(a_id));
    assert!(a.holds_session_lock(&name).unwrap());
    assert!(!b.holds_session_lock(&name).unwrap());
    a.unlock_session(&name).unwrap();
    assert!(!a.holds_session_lock(&name).unwrap());
    assert_eq!(b.session_lock_holder(&name).unwrap(), None);
}

#[test]
fn a_session_lock_released_behind_the_lockers_back_reads_as_not_held() {
    let name = unique("behind");
    let mut a = session_locker();
    a.lock_session(&name, 0.0).unwrap();
    a.session().unwrap().execute("SELECT RELEASE_LOCK(?)", &[name.as_str().into()]).unwrap();
    assert!(!a.holds_session_lock(&name).unwrap());
    match a.unlock_session(&name).unwrap_err() {
        Error::NotHeld { loss, .. } => assert_eq!(loss, Loss::GetLockGone),
        other => panic!("expected NotHeld, got {other}"),
    }
}

#[test]
fn a_session_lock_ends_with_its_session() {
    let name = unique("ends");
    let mut b = session_locker();
    {
        let mut a = session_locker();
        a.lock_session(&name, 0.0).unwrap();
        assert!(b.lock_session(&name, 0.0).unwrap_err().is_timeout());
    }
    // The server ends the session after the client hung up: wait for that (GET_LOCK
    // wakes the moment it happens).
    b.lock_session(&name, 10.0).unwrap();
}

#[test]
fn names_too_long_for_get_lock_are_refused_before_any_statement() {
    let mut a = session_locker();
    assert!(a.lock_session(&"x".repeat(65), 0.0).unwrap_err().is_invalid_argument());
    assert!(a.lock_session(&"\u{FB03}".repeat(30), 0.0).unwrap_err().is_invalid_argument());
    assert!(!a.is_connected(), "a statement ran for a refused name");
}

#[test]
fn a_get_lock_deadlock_is_its_own_error_and_the_victims_other_locks_stay() {
    let (first, second) = (unique("deadlock-1"), unique("deadlock-2"));
    let mut a = session_locker();
    a.lock_session(&first, 0.0).unwrap();
    let a_id = a.connection_id().unwrap();
    let (tx, rx) = mpsc::channel();
    let (f, s) = (first.clone(), second.clone());
    let other = thread::spawn(move || {
        let mut b = session_locker();
        b.lock_session(&s, 0.0).unwrap();
        tx.send(b.connection_id().unwrap()).unwrap();
        let waited = b.lock_session(&f, 20.0);
        (waited, b)
    });
    let b_id = rx.recv().unwrap();
    wait_until_queued(b_id);
    let mine = a.lock_session(&second, 20.0);
    if mine.is_ok() {
        // The server picked the other session as the victim: it must have been told so.
        let (theirs, _b) = other.join().unwrap();
        assert!(theirs.unwrap_err().is_deadlock(), "neither waiter saw a deadlock");
        return;
    }
    let err = mine.unwrap_err();
    assert!(err.is_deadlock(), "{err}");
    assert!(err.to_string().contains("fixed order"), "{err}");
    let mut admin = raw();
    let holder = query(&mut admin, "SELECT IS_USED_LOCK(?)", &[first.as_str().into()]);
    assert_eq!(holder[0][0].as_u64(), Some(a_id), "the victim lost its other lock");
    a.unlock_session(&first).unwrap();
    let (theirs, _b) = other.join().unwrap();
    theirs.unwrap();
}

#[test]
fn a_lease_wait_that_would_deadlock_is_error_deadlock_too() {
    let (first, second) = (unique("lease-deadlock-1"), unique("lease-deadlock-2"));
    let mut a = locker();
    a.acquire(&first, 0.0, 60.0).unwrap();
    let (tx, rx) = mpsc::channel();
    let (f, s) = (first.clone(), second.clone());
    let other = thread::spawn(move || {
        let mut b = locker();
        b.acquire(&s, 0.0, 60.0).unwrap();
        tx.send(b.connection_id().unwrap()).unwrap();
        let waited = b.acquire(&f, 20.0, 60.0).map(|_| ());
        // Whoever is refused lets go, so the other can finish.
        b.release_all();
        waited
    });
    wait_until_queued(rx.recv().unwrap());
    let mine = a.acquire(&second, 20.0, 60.0).map(|_| ());
    if mine.is_err() {
        a.release_all();
    }
    let theirs = other.join().unwrap();
    let refused: Vec<_> = [&mine, &theirs].into_iter().filter_map(|r| r.as_ref().err()).collect();
    assert_eq!(refused.len(), 1, "exactly one wait is refused: {mine:?} / {theirs:?}");
    assert!(refused[0].is_deadlock(), "{}", refused[0]);
}

#[test]
fn session_locks_prepare_each_statement_once_however_many_names() {
    let mut a = session_locker();
    // The client's prepares: MySQL counts its own re-preparation of a statement (when a
    // parameter's type differs from the one assumed at prepare) as a prepare too.
    let prepares = |a: &mut NativeLocker| {
        let sql = "SHOW SESSION STATUS WHERE Variable_name IN ('Com_stmt_prepare', 'Com_stmt_reprepare')";
        let out = a.session().unwrap().execute(sql, &[]).unwrap();
        let count = |name: &str| {
            let row = out.rows.iter().find(|r| r[0].as_text().as_deref() == Some(name)).unwrap();
            row[1].as_i64().unwrap()
        };
        count("Com_stmt_prepare") - count("Com_stmt_reprepare")
    };
    // A statement's first run travels as text, its second prepares it.
    let start = prepares(&mut a);
    for _ in 0..2 {
        let warm = unique("warm");
        a.lock_session(&warm, 0.0).unwrap();
        assert!(a.holds_session_lock(&warm).unwrap());
        a.unlock_session(&warm).unwrap();
    }
    let before = prepares(&mut a);
    assert_eq!(before - start, 3, "lock, holder check and unlock, each prepared once");
    for i in 0..20 {
        let name = unique(&format!("many-{i}"));
        a.lock_session(&name, 0.0).unwrap();
        assert!(a.holds_session_lock(&name).unwrap());
        a.unlock_session(&name).unwrap();
    }
    assert_eq!(prepares(&mut a), before, "session-lock statements were prepared again for new names");
}
