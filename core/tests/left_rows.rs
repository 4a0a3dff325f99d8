//! Rows left free at release and taken over in place (issue 34): a name a locker takes
//! again is released by letting go of its GET_LOCK only, leaving the row marked
//! `lock_acquired = 1`, which every reader (the original package, `inspect`, `status`)
//! reads as free; the next acquisition takes the row over in place. One behaviour per
//! test, against the real server.

#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

mod common;

use common::*;
use mysqllock_core::{NativeLocker, Session, Value};

/// `name` acquired and released twice by `l`: the second release leaves the row.
fn left_by(l: &mut NativeLocker, name: &str) {
    for _ in 0..2 {
        l.acquire(name, 0.0, 30.0).unwrap();
        l.release(name).unwrap();
    }
}

/// `GET_LOCK(name)` is free on the server.
fn get_lock_free(name: &str) -> bool {
    query(&mut raw(), "SELECT IS_FREE_LOCK(?)", &[name.into()])[0][0].as_i64() == Some(1)
}

/// `created` and `ttl` of the row of `name`.
fn lease_of(name: &str) -> (i64, i64) {
    let row = &query(&mut raw(), "SELECT created, ttl FROM shared_locks WHERE name = ?", &[name.into()])[0];
    (row[0].as_i64().unwrap(), row[1].as_i64().unwrap())
}

#[test]
fn a_name_taken_once_has_its_row_deleted_at_release() {
    let name = unique("left-once");
    let mut a = locker();
    a.acquire(&name, 0.0, 30.0).unwrap();
    a.release(&name).unwrap();
    assert!(rows(&name).is_empty());
}

#[test]
fn a_name_taken_again_is_released_by_its_get_lock_alone_and_its_row_stays() {
    let name = unique("left-again");
    let mut a = locker();
    left_by(&mut a, &name);
    assert_eq!(rows(&name), vec![(name.clone(), a.connection_id().unwrap(), 1)]);
    assert!(get_lock_free(&name), "the GET_LOCK must be let go");
    assert!(!a.holds(&name));
}

#[test]
fn a_left_row_reads_as_free_to_status_and_holder() {
    let name = unique("left-status");
    let mut a = locker();
    left_by(&mut a, &name);
    let row = locker().holder(&name).unwrap().expect("the left row");
    assert!(row.acquired && !row.holder_alive, "{row:?}");
}

#[test]
fn another_session_takes_a_left_row_over_at_once() {
    let name = unique("left-other");
    let (mut a, mut b) = (locker(), locker());
    left_by(&mut a, &name);
    b.acquire(&name, 0.0, 45.0).unwrap();
    assert_held_by(&name, b.connection_id().unwrap());
    assert_eq!(lease_of(&name).1, 45, "the row carries the new lease's TTL");
    // and it is really held: a third session finds it taken
    assert!(locker().acquire(&name, 0.0, 30.0).unwrap_err().is_timeout());
}

#[test]
fn the_holder_takes_its_own_left_row_again_even_when_nothing_in_it_changes() {
    let name = unique("left-own");
    let mut a = locker();
    left_by(&mut a, &name);
    // Same TTL, most likely the same second: the takeover then changes no column.
    a.acquire(&name, 0.0, 30.0).unwrap();
    assert_held_by(&name, a.connection_id().unwrap());
    let holder = query(&mut raw(), "SELECT IS_USED_LOCK(?)", &[name.as_str().into()])[0][0].as_u64();
    assert_eq!(holder, Some(a.connection_id().unwrap()));
    assert!(locker().acquire(&name, 0.0, 30.0).unwrap_err().is_timeout());
    a.release(&name).unwrap();
    assert!(get_lock_free(&name));
}

#[test]
fn a_takeover_restarts_the_lease_clock() {
    let name = unique("left-clock");
    let mut a = locker();
    left_by(&mut a, &name);
    let mut s = raw();
    // Age the left row by an hour behind the locker's back.
    query(&mut s, "UPDATE shared_locks SET created = created - 3600 WHERE name = ?", &[name.as_str().into()]);
    a.acquire(&name, 0.0, 20.0).unwrap();
    let (created, ttl) = lease_of(&name);
    let now = query(&mut s, "SELECT UNIX_TIMESTAMP()", &[])[0][0].as_i64().unwrap();
    assert!(now - created <= 2, "created {created}, now {now}");
    assert_eq!(ttl, 20);
    assert!(a.remaining_ttl(&name).unwrap() > 15.0);
}

#[test]
fn the_end_of_a_holder_deletes_the_rows_it_left() {
    let name = unique("left-end");
    let mut a = locker();
    left_by(&mut a, &name);
    assert!(a.release_all().is_empty());
    assert!(rows(&name).is_empty());
}

#[test]
fn the_end_of_a_holder_leaves_a_row_it_left_that_someone_took_over() {
    let name = unique("left-end-taken");
    let (mut a, mut b) = (locker(), locker());
    left_by(&mut a, &name);
    b.acquire(&name, 0.0, 30.0).unwrap();
    assert!(a.release_all().is_empty());
    assert_held_by(&name, b.connection_id().unwrap());
}

#[test]
fn a_pending_row_is_never_taken_over() {
    // A row claimed without the GET_LOCK (the original package between its INSERT and
    // its GET_LOCK, or an "at least" row): it blocks until its TTL.
    let name = unique("left-pending");
    let mut s = raw();
    query(
        &mut s,
        "INSERT INTO shared_locks (name, connection_id, created, ttl, lock_acquired) VALUES (?, 424242, UNIX_TIMESTAMP(), 60, 0)",
        &[name.as_str().into()],
    );
    let mut a = locker();
    assert!(a.acquire(&name, 0.0, 30.0).unwrap_err().is_timeout());
    assert_eq!(rows(&name), vec![(name.clone(), 424_242, 0)]);
    assert!(get_lock_free(&name), "the failed claim must not keep the GET_LOCK");
}

#[test]
fn a_left_row_of_another_spelling_is_taken_over_under_ours() {
    // The key folds case; the liveness check reads the GET_LOCK of the stored spelling,
    // so the row must carry the new holder's.
    let name = unique("Left-Spelling");
    let lower = name.to_lowercase();
    let (mut a, mut b) = (locker(), locker());
    left_by(&mut a, &name);
    b.acquire(&lower, 0.0, 30.0).unwrap();
    assert_eq!(rows(&name), vec![(lower.clone(), b.connection_id().unwrap(), 1)]);
    // The other spelling is not free while b holds it.
    assert!(locker().acquire(&name, 0.0, 30.0).unwrap_err().is_timeout());
}

#[test]
fn a_live_holder_of_another_spelling_keeps_its_row() {
    let name = unique("Live-Spelling");
    let lower = name.to_lowercase();
    let (mut a, mut b) = (locker(), locker());
    a.acquire(&name, 0.0, 30.0).unwrap();
    assert!(b.acquire(&lower, 0.0, 30.0).unwrap_err().is_timeout());
    assert_held_by(&name, a.connection_id().unwrap());
}

#[test]
fn a_row_left_by_a_dead_session_is_taken_over() {
    // What the original package leaves when its process ends without unlock.
    let name = unique("left-dead");
    let mut s = raw();
    query(
        &mut s,
        "INSERT INTO shared_locks (name, connection_id, created, ttl, lock_acquired) VALUES (?, 424243, UNIX_TIMESTAMP(), 600, 1)",
        &[name.as_str().into()],
    );
    let mut a = locker();
    a.acquire(&name, 0.0, 30.0).unwrap();
    assert_held_by(&name, a.connection_id().unwrap());
}

#[test]
fn an_upgraded_table_deletes_rows_at_release_so_every_lease_gets_a_new_token() {
    let name = unique("left-fenced");
    let mut a = fenced_locker();
    let first = a.acquire(&name, 0.0, 30.0).unwrap().token.unwrap();
    a.release(&name).unwrap();
    let second = a.acquire(&name, 0.0, 30.0).unwrap().token.unwrap();
    a.release(&name).unwrap();
    let third = a.acquire(&name, 0.0, 30.0).unwrap().token.unwrap();
    a.release(&name).unwrap();
    assert!(first < second && second < third, "{first} {second} {third}");
    let left = query(&mut raw(), &format!("SELECT COUNT(*) FROM {FENCED_TABLE} WHERE name = ?"), &[name.into()]);
    assert_eq!(left[0][0].as_i64(), Some(0));
}

#[test]
fn a_session_that_does_not_own_its_insert_id_still_takes_a_left_row() {
    // An application's PDO: the takeover statement would report itself through its
    // LAST_INSERT_ID(), which the application owns; it takes the long way instead and
    // leaves that value alone.
    let name = unique("left-pdo-like");
    left_by(&mut locker(), &name);
    let mut b = mysqllock_core::Locker::new(Borrowed(config()), config().table.clone());
    b.init_table().unwrap();
    b.session().unwrap().execute("SELECT LAST_INSERT_ID(4242)", &[]).unwrap();
    b.acquire(&name, 0.0, 30.0).unwrap();
    assert_held_by(&name, b.connection_id().unwrap());
    let id = b.session().unwrap().execute("SELECT LAST_INSERT_ID()", &[]).unwrap();
    assert_eq!(id.first(0).as_i64(), Some(4242));
    b.release(&name).unwrap();
    b.acquire(&name, 0.0, 30.0).unwrap();
    b.release(&name).unwrap();
    assert!(rows(&name).is_empty(), "such a session deletes at release: its next claim could not take a row over");
}

/// A native session that says its `LAST_INSERT_ID()` is not its own, as an
/// application's PDO would.
struct NotOwned(mysqllock_core::MysqlSession);

impl Session for NotOwned {
    fn execute(
        &mut self,
        sql: &str,
        params: &[Value],
    ) -> Result<mysqllock_core::Outcome, mysqllock_core::SessionError> {
        self.0.execute(sql, params)
    }
    fn connection_id(&self) -> u64 {
        self.0.connection_id()
    }
    fn batches(&self) -> bool {
        self.0.batches()
    }
    fn execute_batch(&mut self, sql: &str) -> Result<Vec<mysqllock_core::Outcome>, mysqllock_core::SessionError> {
        self.0.execute_batch(sql)
    }
    fn topology(&self) -> Option<mysqllock_core::Topology> {
        self.0.topology()
    }
}

struct Borrowed(mysqllock_core::Config);

impl mysqllock_core::Connector for Borrowed {
    type Session = NotOwned;
    fn connect(&mut self) -> mysqllock_core::Result<NotOwned> {
        Ok(NotOwned(mysqllock_core::MysqlSession::connect(&self.0)?))
    }
}
