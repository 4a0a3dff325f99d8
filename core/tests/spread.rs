//! A locker holding many leases spreads them over sessions of at most
//! `LEASES_PER_SESSION`, so that MariaDB's per-session lock list stays short; each lease
//! lives and dies with its own session.

#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

mod common;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use common::*;
use mysqllock_core::{
    Config, Connector, Error, Locker, Loss, MysqlSession, Result, Session, SessionError, LEASES_PER_SESSION,
};

/// Takes `n` leases named `{base}-{i}` and returns their holders' connection ids.
fn take(l: &mut mysqllock_core::NativeLocker, base: &str, n: usize) -> Vec<u64> {
    (0..n).map(|i| l.acquire(&format!("{base}-{i}"), 0.0, 60.0).unwrap().connection_id).collect()
}

/// How many rows of the table each connection id owns, for names starting with `base`.
fn rows_per_holder(base: &str) -> HashMap<u64, usize> {
    let rows = query(
        &mut raw(),
        "SELECT connection_id, COUNT(*) FROM shared_locks WHERE name LIKE ? GROUP BY connection_id",
        &[format!("{base}-%").as_str().into()],
    );
    rows.iter().map(|r| (r[0].as_u64().unwrap(), r[1].as_u64().unwrap() as usize)).collect()
}

#[test]
fn leases_beyond_one_sessions_share_go_to_another_session() {
    let base = unique("spread");
    let mut l = locker();
    let ids = take(&mut l, &base, LEASES_PER_SESSION + 20);
    let first = l.connection_id().unwrap();
    assert!(ids[..LEASES_PER_SESSION].iter().all(|&id| id == first));
    let second = ids[LEASES_PER_SESSION];
    assert_ne!(second, first);
    assert!(ids[LEASES_PER_SESSION..].iter().all(|&id| id == second));
    assert_eq!(rows_per_holder(&base), HashMap::from([(first, LEASES_PER_SESSION), (second, 20)]));
    assert_eq!(l.release_all().len(), 0);
    assert!(rows_per_holder(&base).is_empty());
}

#[test]
fn a_lease_on_an_extra_session_asserts_renews_and_releases_there() {
    let base = unique("spread-ops");
    let mut l = locker();
    take(&mut l, &base, LEASES_PER_SESSION);
    let name = format!("{base}-extra");
    let lease = l.acquire(&name, 0.0, 10.0).unwrap();
    assert_ne!(lease.connection_id, l.connection_id().unwrap());
    assert!(l.assert_ttl(&name, 5.0).unwrap() > 5.0);
    l.renew(&name, 100.0).unwrap();
    assert!(l.remaining_ttl(&name).unwrap() > 90.0);
    l.release(&name).unwrap();
    assert!(rows(&name).is_empty());
    assert_eq!(l.release_all().len(), 0);
}

#[test]
fn a_lost_extra_session_loses_its_leases_and_no_others() {
    let base = unique("spread-lost");
    let mut l = locker();
    let ids = take(&mut l, &base, LEASES_PER_SESSION + 3);
    let extra = ids[LEASES_PER_SESSION];
    query(&mut raw(), &format!("KILL {extra}"), &[]);
    // The server notices the kill at once; the locker when it next uses that session.
    let first_extra = format!("{base}-{LEASES_PER_SESSION}");
    wait_until("the killed session's GET_LOCK is free", || {
        query(&mut raw(), "SELECT IS_USED_LOCK(?)", &[first_extra.as_str().into()])[0][0].is_null()
    });
    for i in LEASES_PER_SESSION..LEASES_PER_SESSION + 3 {
        let err = l.release(&format!("{base}-{i}")).unwrap_err();
        assert!(
            matches!(err, Error::NotHeld { loss: Loss::SessionLost, .. }),
            "lease {i} on the killed session: {err}"
        );
    }
    // the first session's leases are whole
    l.assert_ttl(&format!("{base}-0"), 30.0).unwrap();
    l.release(&format!("{base}-0")).unwrap();
    assert_eq!(l.release_all().len(), 0);
    // and a new lease beyond the first session's share gets a new session
    let again = take(&mut l, &format!("{base}-again"), LEASES_PER_SESSION + 1);
    let first = l.connection_id().unwrap();
    assert_eq!(again.iter().filter(|&&id| id == first).count(), LEASES_PER_SESSION);
    assert!(![first, extra].contains(&again[LEASES_PER_SESSION]));
    assert_eq!(l.release_all().len(), 0);
}

#[test]
fn another_spelling_held_on_another_session_of_the_locker_is_already_held() {
    let base = unique("spread-spelling");
    let mut l = locker();
    let upper = format!("{base}-Case");
    l.acquire(&upper, 0.0, 60.0).unwrap();
    take(&mut l, &base, LEASES_PER_SESSION - 1);
    let start = Instant::now();
    let err = l.acquire(&format!("{base}-case"), 5.0, 60.0).unwrap_err();
    assert!(err.is_already_held(), "{err}");
    // Generous: it must not wait for its 5 s timeout; it looks after the waiters' grace
    // (half a second, a whole one on MySQL, whose GET_LOCK sleeps whole seconds only).
    assert!(start.elapsed() < Duration::from_secs(2), "waited {:?} for itself", start.elapsed());
    l.assert_ttl(&upper, 30.0).unwrap();
    assert_eq!(l.release_all().len(), 0);
}

#[test]
fn the_extra_sessions_close_when_few_leases_are_left() {
    let base = unique("spread-close");
    let mut l = locker();
    let ids = take(&mut l, &base, LEASES_PER_SESSION + 1);
    let extra = ids[LEASES_PER_SESSION];
    // newest first: the extra session empties while the first still holds 500
    for i in (0..=LEASES_PER_SESSION).rev() {
        l.release(&format!("{base}-{i}")).unwrap();
    }
    wait_until_gone(extra);
}

/// Native sessions from a config, but in one session only (as a PDO would be).
struct OneSession(Config);

impl Connector for OneSession {
    type Session = MysqlSession;
    fn connect(&mut self) -> Result<MysqlSession> {
        MysqlSession::connect(&self.0)
    }
}

#[test]
fn a_connector_that_does_not_spread_keeps_every_lease_in_its_session() {
    let base = unique("spread-one");
    let config = config();
    let table = config.table.clone();
    let mut l = Locker::new(OneSession(config), table);
    l.init_table().unwrap();
    let ids: Vec<u64> = (0..LEASES_PER_SESSION + 5)
        .map(|i| l.acquire(&format!("{base}-{i}"), 0.0, 60.0).unwrap().connection_id)
        .collect();
    let id = l.connection_id().unwrap();
    assert!(ids.iter().all(|&i| i == id));
    assert_eq!(rows_per_holder(&base), HashMap::from([(id, LEASES_PER_SESSION + 5)]));
    assert_eq!(l.release_all().len(), 0);
}

/// Native sessions that spread, until the server (here: the connector) refuses more.
struct Limited {
    config: Config,
    left: usize,
}

impl Connector for Limited {
    type Session = MysqlSession;
    fn connect(&mut self) -> Result<MysqlSession> {
        if self.left == 0 {
            let refused = SessionError::server(
                1203,
                "User locker already has more than 'max_user_connections' active connections",
            );
            return Err(Error::Connect { target: "test".into(), source: refused });
        }
        self.left -= 1;
        MysqlSession::connect(&self.config)
    }

    fn spreads(&self) -> bool {
        true
    }
}

#[test]
fn a_server_refusing_another_session_costs_the_spreading_not_the_lease() {
    let base = unique("spread-refused");
    let config = config();
    let table = config.table.clone();
    let mut l = Locker::new(Limited { config, left: 1 }, table);
    l.init_table().unwrap();
    let ids: Vec<u64> = (0..LEASES_PER_SESSION + 5)
        .map(|i| l.acquire(&format!("{base}-{i}"), 0.0, 60.0).unwrap().connection_id)
        .collect();
    let id = l.connection_id().unwrap();
    assert!(ids.iter().all(|&i| i == id));
    assert_eq!(l.release_all().len(), 0);
}

#[test]
fn a_session_of_the_locker_keeping_the_get_lock_is_never_killed_as_a_stale_holder() {
    let base = unique("spread-own-get-lock");
    let name = format!("{base}-contested");
    let mut l = locker();
    take(&mut l, &base, LEASES_PER_SESSION);
    // The first session keeps the GET_LOCK of a name it holds no lease on (as a leftover
    // would); the lease for that name goes to the second session.
    let got = l.session().unwrap().execute("SELECT GET_LOCK(?, 0)", &[name.as_str().into()]).unwrap();
    assert_eq!(got.first(0).as_i64(), Some(1));
    let err = l.acquire(&name, 5.0, 60.0).unwrap_err();
    assert!(err.is_already_held(), "{err}");
    // the first session and its leases are alive
    l.assert_ttl(&format!("{base}-0"), 30.0).unwrap();
    assert!(rows(&name).is_empty(), "the claimed row was left behind");
    assert_eq!(l.release_all().len(), 0);
}
