//! What an acquisition recovers from by itself, once: a session that died since the
//! last call, and a crashed MyISAM table.

#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

mod common;

use common::*;
use mysqllock_core::{Config, Error, Loss, NativeLocker, Session};

fn kill(id: u64) {
    query(&mut raw(), &format!("KILL {id}"), &[]);
}

#[test]
fn a_lease_acquisition_on_a_session_killed_since_the_last_call_runs_on_a_fresh_one() {
    let (before, after) = (unique("killed-before"), unique("killed-after"));
    let mut a = locker();
    a.acquire(&before, 0.0, 30.0).unwrap();
    let old = a.connection_id().unwrap();
    kill(old);
    let lease = a.acquire(&after, 0.0, 30.0).unwrap();
    assert_ne!(lease.connection_id, old);
    assert_held_by(&after, lease.connection_id);
    match a.release(&before).unwrap_err() {
        Error::NotHeld { loss, .. } => assert_eq!(loss, Loss::SessionLost),
        other => panic!("expected NotHeld, got {other}"),
    }
}

#[test]
fn a_session_lock_on_a_session_killed_since_the_last_call_runs_on_a_fresh_one() {
    let (before, after) = (unique("sl-killed-before"), unique("sl-killed-after"));
    let mut a = NativeLocker::from_config(config());
    a.lock_session(&before, 0.0).unwrap();
    let old = a.connection_id().unwrap();
    kill(old);
    a.lock_session(&after, 0.0).unwrap();
    let new = a.connection_id().unwrap();
    assert_ne!(new, old);
    assert_eq!(NativeLocker::from_config(config()).session_lock_holder(&after).unwrap(), Some(new));
}

#[test]
fn an_acquisition_on_a_crashed_table_repairs_it_and_succeeds() {
    let table = format!("crashed_{}", std::process::id());
    let config = Config::from_url(&format!("{}?table={table}", dsn())).unwrap();
    let mut a = NativeLocker::from_config(config.clone());
    a.init_table().unwrap();
    let name = unique("crashed");
    a.acquire(&name, 0.0, 30.0).unwrap();
    a.release(&name).unwrap();
    crash_table(&table);
    let crashed = raw().execute(&format!("SELECT COUNT(*) FROM {table}"), &[]).unwrap_err();
    assert_eq!(crashed.code, Some(145), "the table is not marked as crashed: {crashed}");
    let mut b = NativeLocker::from_config(config);
    let lease = b.acquire(&name, 0.0, 30.0).unwrap();
    let rows = query(&mut raw(), &format!("SELECT connection_id FROM {table} WHERE name = ?"), &[name.as_str().into()]);
    assert_eq!(rows[0][0].as_u64(), Some(lease.connection_id));
    query(&mut raw(), &format!("DROP TABLE {table}"), &[]);
}

#[test]
fn unlocking_a_session_lock_whose_session_was_killed_says_the_session_was_lost() {
    let name = unique("sl-unlock-killed");
    let mut a = NativeLocker::from_config(config());
    a.lock_session(&name, 0.0).unwrap();
    kill(a.connection_id().unwrap());
    match a.unlock_session(&name).unwrap_err() {
        Error::NotHeld { loss, .. } => assert_eq!(loss, Loss::SessionLost),
        other => panic!("expected NotHeld, got {other}"),
    }
}

/// The timeout an acquisition failed with.
fn timed_out(outcome: Result<(), Error>) -> f64 {
    match outcome {
        Err(Error::Timeout { timeout, .. }) => timeout,
        other => panic!("expected a timeout, got {other:?}"),
    }
}

#[test]
fn a_lease_timeout_after_a_reconnect_names_the_callers_timeout_not_the_time_left() {
    let name = unique("timeout-after-reconnect");
    let mut holder = locker();
    holder.acquire(&name, 0.0, 30.0).unwrap();
    // Killed since its last call: the acquisition runs again on a fresh session, by the
    // same deadline, and says the 1 s the caller asked for.
    let mut waiter = locker();
    kill(waiter.connection_id().unwrap());
    assert_eq!(timed_out(waiter.acquire(&name, 1.0, 30.0).map(|_| ())), 1.0);
}

#[test]
fn a_session_lock_timeout_after_a_reconnect_names_the_callers_timeout() {
    let name = unique("sl-timeout-after-reconnect");
    let mut holder = NativeLocker::from_config(config());
    holder.lock_session(&name, 0.0).unwrap();
    let mut waiter = NativeLocker::from_config(config());
    kill(waiter.connection_id().unwrap());
    assert_eq!(timed_out(waiter.lock_session(&name, 1.0)), 1.0);
}
