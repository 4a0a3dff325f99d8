//! The lease mode (`DistributedLock`) against a real MariaDB, one behaviour per test.
//!
//! Two tables: `distributed_locks` exactly as users of the original class created it,
//! and `distributed_locks_fenced`, upgraded (tokens, microseconds). Every test uses
//! resources of its own, so they run in parallel.

#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

mod common;

use std::time::{Duration, Instant};

use common::*;
use mysqllock_core::{Config, Connector, Dialect, DistributedLock, Error, MysqlSession, Session, Table, Value};

const PLAIN: &str = "distributed_locks";
const FENCED: &str = "distributed_locks_fenced";

/// The DDL users already ran, verbatim (no engine clause: InnoDB is the default).
const USERS_DDL: &str = "CREATE TABLE IF NOT EXISTS distributed_locks (
resource VARCHAR(255) PRIMARY KEY,
owner VARCHAR(255) NOT NULL,
expires_at DATETIME NOT NULL,
acquired_at DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP
)";

fn lease_config(table: &str) -> Config {
    Config::from_url(&format!("{}?lease_table={table}", dsn())).unwrap()
}

/// A lease lock over the users' table.
fn plain() -> DistributedLock<Config> {
    query(&mut raw(), USERS_DDL, &[]);
    DistributedLock::native(lease_config(PLAIN))
}

/// A lease lock over the upgraded table.
fn fenced() -> DistributedLock<Config> {
    let mut lock = DistributedLock::native(lease_config(FENCED));
    lock.create_table().unwrap();
    lock.upgrade_table().unwrap();
    lock
}

/// `(owner, seconds until expires_at by the database's UTC clock)` of a resource's row.
fn row_of(table: &str, resource: &str) -> Option<(String, f64)> {
    let rows = query(
        &mut raw(),
        &format!(
            "SELECT owner, TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), expires_at) / 1e6 FROM {table} WHERE resource = ?"
        ),
        &[resource.into()],
    );
    rows.first().map(|r| (r[0].as_text().unwrap(), r[1].as_f64().unwrap()))
}

fn craft(table: &str, resource: &str, owner: &str, expires_at: &str) {
    query(
        &mut raw(),
        &format!("REPLACE INTO {table} (resource, owner, expires_at, acquired_at) VALUES (?, ?, ?, ?)"),
        &[resource.into(), owner.into(), expires_at.into(), expires_at.into()],
    );
}

#[test]
fn a_free_resource_is_acquired_and_its_row_names_the_owner() {
    let r = unique("free");
    let mut lock = plain();
    assert!(lock.acquire(&r, "owner-a", 30.0).unwrap().is_some());
    let (owner, left) = row_of(PLAIN, &r).unwrap();
    assert_eq!(owner, "owner-a");
    assert!((28.0..=31.0).contains(&left), "expires in {left} s, by UTC");
}

#[test]
fn another_owner_is_refused_while_the_lease_is_live() {
    let r = unique("busy");
    let (mut a, mut b) = (plain(), plain());
    assert!(a.acquire(&r, "owner-a", 30.0).unwrap().is_some());
    assert!(b.acquire(&r, "owner-b", 30.0).unwrap().is_none());
    assert_eq!(row_of(PLAIN, &r).unwrap().0, "owner-a");
}

#[test]
fn the_owner_acquiring_again_restarts_the_ttl() {
    let r = unique("again");
    let mut lock = plain();
    assert!(lock.acquire(&r, "owner-a", 5.0).unwrap().is_some());
    // Within the same second too: the statement's verdict, not its row count, decides.
    assert!(lock.acquire(&r, "owner-a", 5.0).unwrap().is_some());
    assert!(lock.acquire(&r, "owner-a", 300.0).unwrap().is_some());
    let left = row_of(PLAIN, &r).unwrap().1;
    assert!(left > 250.0, "the lease was not restarted: {left} s left");
}

#[test]
fn an_expired_lease_is_taken_over() {
    let r = unique("stale");
    craft(PLAIN, &r, "worker-A", "2000-01-01 00:00:00");
    let mut lock = plain();
    assert!(lock.acquire(&r, "worker-B", 30.0).unwrap().is_some());
    assert_eq!(row_of(PLAIN, &r).unwrap().0, "worker-B");
}

#[test]
fn owners_differing_only_in_case_or_trailing_space_are_different_owners() {
    let r = unique("case");
    let mut lock = plain();
    assert!(lock.acquire(&r, "Worker", 30.0).unwrap().is_some());
    assert!(lock.acquire(&r, "worker", 30.0).unwrap().is_none());
    assert!(lock.acquire(&r, "Worker ", 30.0).unwrap().is_none());
    assert!(!lock.release(&r, "worker").unwrap());
    assert!(lock.renew(&r, "WORKER", 30.0).unwrap().is_none());
    assert!(lock.release(&r, "Worker").unwrap());
}

#[test]
fn release_is_true_only_for_the_current_unexpired_owner() {
    let (live, expired, missing) = (unique("rel-live"), unique("rel-expired"), unique("rel-missing"));
    let mut lock = plain();
    assert!(lock.acquire(&live, "owner-a", 30.0).unwrap().is_some());
    assert!(!lock.release(&live, "owner-b").unwrap(), "wrong owner");
    assert!(lock.release(&live, "owner-a").unwrap(), "correct owner");
    assert!(row_of(PLAIN, &live).is_none(), "the row is deleted");
    assert!(!lock.release(&live, "owner-a").unwrap(), "released twice");
    craft(PLAIN, &expired, "owner-a", "2000-01-01 00:00:00");
    assert!(!lock.release(&expired, "owner-a").unwrap(), "expired");
    assert!(!lock.release(&missing, "owner-a").unwrap(), "not found");
}

#[test]
fn renew_is_true_only_for_the_current_unexpired_owner_and_extends_the_lease() {
    let (live, expired, missing) = (unique("ren-live"), unique("ren-expired"), unique("ren-missing"));
    let mut lock = plain();
    assert!(lock.acquire(&live, "owner-a", 5.0).unwrap().is_some());
    assert!(lock.renew(&live, "owner-b", 60.0).unwrap().is_none(), "wrong owner");
    assert!(lock.renew(&live, "owner-a", 5.0).unwrap().is_some(), "same second, same expiry");
    assert!(lock.renew(&live, "owner-a", 600.0).unwrap().is_some());
    assert!(row_of(PLAIN, &live).unwrap().1 > 500.0, "the lease was extended");
    craft(PLAIN, &expired, "owner-a", "2000-01-01 00:00:00");
    assert!(lock.renew(&expired, "owner-a", 60.0).unwrap().is_none(), "expired");
    assert!(lock.renew(&missing, "owner-a", 60.0).unwrap().is_none(), "not found");
    assert!(row_of(PLAIN, &missing).is_none(), "renew creates nothing");
}

#[test]
fn is_held_is_true_exactly_while_an_unexpired_row_exists() {
    let r = unique("held");
    let mut lock = plain();
    assert!(!lock.is_held(&r).unwrap());
    lock.acquire(&r, "owner-a", 30.0).unwrap();
    assert!(lock.is_held(&r).unwrap());
    craft(PLAIN, &r, "owner-a", "2000-01-01 00:00:00");
    assert!(!lock.is_held(&r).unwrap(), "an expired row is not a holder");
}

#[test]
fn owner_names_the_live_holder_only() {
    let (free, live, expired) = (unique("owner-free"), unique("owner-live"), unique("owner-expired"));
    let mut lock = plain();
    assert_eq!(lock.owner(&free).unwrap(), None);
    lock.acquire(&live, "Owner-A ", 30.0).unwrap();
    assert_eq!(lock.owner(&live).unwrap().as_deref(), Some("Owner-A "), "the owner exactly as stored");
    craft(PLAIN, &expired, "owner-a", "2000-01-01 00:00:00");
    assert_eq!(lock.owner(&expired).unwrap(), None, "an expired row has no owner");
}

#[test]
fn is_held_by_compares_owners_exactly_and_only_for_a_live_lease() {
    let (r, expired) = (unique("held-by"), unique("held-by-expired"));
    let mut lock = plain();
    lock.acquire(&r, "Worker", 30.0).unwrap();
    assert!(lock.is_held_by(&r, "Worker").unwrap());
    for other in ["worker", "Worker ", "WORKER", "Worke"] {
        assert!(!lock.is_held_by(&r, other).unwrap(), "{other:?} taken for \"Worker\"");
    }
    craft(PLAIN, &expired, "Worker", "2000-01-01 00:00:00");
    assert!(!lock.is_held_by(&expired, "Worker").unwrap(), "an expired lease is nobody's");
}

/// On the whole-second table a lease lives through the second `expires_at` names: every
/// verdict says so alike, the reads as the writes (the Symfony bridge's own read once
/// took such a lease for ended).
#[test]
fn reads_and_writes_agree_on_a_lease_in_its_last_second() {
    let r = unique("last-second");
    let mut lock = plain();
    let mut admin = raw();
    for _ in 0..5 {
        let now = query(&mut admin, "SELECT UTC_TIMESTAMP(), MICROSECOND(UTC_TIMESTAMP(6))", &[]);
        if now[0][1].as_i64().unwrap() > 600_000 {
            std::thread::sleep(Duration::from_millis(450)); // start early in a second
            continue;
        }
        let second = now[0][0].as_text().unwrap();
        craft(PLAIN, &r, "owner-a", &second);
        let verdicts = (
            lock.owner(&r).unwrap(),
            lock.is_held_by(&r, "owner-a").unwrap(),
            lock.is_held(&r).unwrap(),
            lock.acquire(&r, "owner-b", 30.0).unwrap().is_none(),
        );
        let after = query(&mut admin, "SELECT UTC_TIMESTAMP()", &[]);
        if after[0][0].as_text().unwrap() != second {
            continue; // the second ended meanwhile: the verdicts may differ rightly
        }
        assert_eq!(verdicts, (Some("owner-a".to_owned()), true, true, true));
        return;
    }
    panic!("five tries never ran within one second");
}

#[test]
fn force_release_ends_any_owners_live_lease_and_nothing_else() {
    let (r, expired, free) = (unique("force"), unique("force-expired"), unique("force-free"));
    let mut lock = plain();
    lock.acquire(&r, "owner-a", 30.0).unwrap();
    assert!(lock.force_release(&r).unwrap());
    assert!(row_of(PLAIN, &r).is_none(), "the row is gone, as after the owner's release");
    assert!(!lock.release(&r, "owner-a").unwrap(), "the owner's lease was still there");
    assert!(lock.acquire(&r, "owner-b", 30.0).unwrap().is_some());
    assert!(!lock.force_release(&free).unwrap(), "nothing to end");
    craft(PLAIN, &expired, "owner-a", "2000-01-01 00:00:00");
    assert!(!lock.force_release(&expired).unwrap(), "an expired lease is not live");
}

#[test]
fn force_release_on_the_upgraded_table_keeps_the_row_and_tokens_count_on() {
    let r = unique("force-fenced");
    let mut lock = fenced();
    let first = lock.acquire(&r, "owner-a", 30.0).unwrap().unwrap().token.unwrap();
    assert!(lock.force_release(&r).unwrap());
    let (owner, left) = row_of(FENCED, &r).unwrap();
    assert_eq!(owner, "owner-a");
    assert!(left <= 0.0, "the lease still has {left} s");
    assert_eq!(lock.owner(&r).unwrap(), None);
    let next = lock.acquire(&r, "owner-b", 30.0).unwrap().unwrap().token.unwrap();
    assert!(next > first, "token {next} after {first}");
}

#[test]
fn leases_are_listed_and_ended_by_an_exact_prefix_and_nothing_else() {
    for (table, mut lock) in [(PLAIN, plain()), (FENCED, fenced())] {
        let base = unique("prefix");
        let prefix = format!("{base}_%:");
        // LIKE's wildcards in the prefix match themselves only; the collation's case
        // folding does not widen it; an expired lease is not live; another prefix stays.
        let under = [format!("{prefix}a"), format!("{prefix}b")];
        let (upper, wild, other) =
            (prefix.to_uppercase() + "c", format!("{base}xy:d"), format!("{}:e", unique("other")));
        for (i, resource) in under.iter().chain([&upper, &wild, &other]).enumerate() {
            lock.acquire(resource, &format!("owner-{i}"), 30.0).unwrap().unwrap();
        }
        craft(table, &format!("{prefix}expired"), "owner-x", "2000-01-01 00:00:00");
        assert_eq!(lock.held_with_prefix(&prefix).unwrap(), under.to_vec(), "{table}");
        assert_eq!(lock.force_release_with_prefix(&prefix).unwrap(), 2, "{table}");
        assert_eq!(lock.held_with_prefix(&prefix).unwrap(), Vec::<String>::new(), "{table}");
        for kept in [&upper, &wild, &other] {
            assert!(lock.is_held(kept).unwrap(), "{table}: {kept} was ended");
        }
        assert!(matches!(lock.held_with_prefix(""), Err(Error::InvalidArgument { .. })), "an empty prefix");
        assert!(matches!(lock.force_release_with_prefix(""), Err(Error::InvalidArgument { .. })));
    }
}

#[test]
fn expiry_is_judged_in_utc_whatever_the_session_time_zone() {
    let r = unique("utc");
    let mut far_east = raw();
    query(&mut far_east, "SET time_zone = '+13:00'", &[]);
    let mut lock = plain();
    lock.acquire(&r, "owner-a", 30.0).unwrap();
    // Read by a session 13 hours ahead: the stored value is UTC all the same.
    let rows = query(
        &mut far_east,
        &format!("SELECT TIMESTAMPDIFF(SECOND, UTC_TIMESTAMP(), expires_at) FROM {PLAIN} WHERE resource = ?"),
        &[r.as_str().into()],
    );
    let left = rows[0][0].as_i64().unwrap();
    assert!((28..=31).contains(&left), "expires_at is {left} s from UTC now");
}

#[test]
fn the_local_deadline_ends_before_the_database_lease_by_the_margin() {
    let r = unique("deadline");
    let mut lock = plain();
    let before = Instant::now();
    let grant = lock.acquire(&r, "owner-a", 10.0).unwrap().unwrap();
    let after = Instant::now();
    assert!(grant.deadline <= after + Duration::from_millis(9_500), "deadline past ttl - margin");
    assert!(grant.deadline >= before + Duration::from_millis(9_500), "deadline is not ttl - margin from the send");
    assert!(grant.token.is_none(), "no token without the upgrade");
}

#[test]
fn bad_input_is_refused_and_writes_nothing() {
    let r = unique("bad");
    let mut lock = plain();
    let long = "x".repeat(256);
    let cases: [(&str, &str, f64); 8] = [
        ("", "owner", 30.0),
        (&r, "", 30.0),
        (&long, "owner", 30.0),
        (&r, &long, 30.0),
        (&r, "owner", 0.0),
        (&r, "owner", -1.0),
        (&r, "owner", f64::NAN),
        (&r, "owner", 1.0e12),
    ];
    for (resource, owner, ttl) in cases {
        let err = lock.acquire(resource, owner, ttl).unwrap_err();
        assert!(err.is_invalid_argument(), "({resource:.10}, {owner:.10}, {ttl}): {err}");
    }
    assert!(row_of(PLAIN, &r).is_none());
    assert!(lock.acquire(&"x".repeat(255), "owner", 1.0).unwrap().is_some(), "255 characters fit the column");
}

/// `expires_at` of a resource's row, as the database writes it.
fn expires_at(table: &str, resource: &str) -> String {
    let rows = query(
        &mut raw(),
        &format!("SELECT CAST(expires_at AS CHAR) FROM {table} WHERE resource = ?"),
        &[resource.into()],
    );
    rows[0][0].as_text().unwrap()
}

/// Whole seconds from the database's UTC clock to the end of the DATETIME range.
fn seconds_to_datetime_end() -> f64 {
    let rows = query(&mut raw(), "SELECT TIMESTAMPDIFF(SECOND, UTC_TIMESTAMP(), '9999-12-31 23:59:59')", &[]);
    rows[0][0].as_f64().unwrap()
}

#[test]
fn a_ttl_may_run_to_the_end_of_the_datetime_range_and_not_past_it() {
    for (table, mut lock) in [(PLAIN, plain()), (FENCED, fenced())] {
        let r = unique("datetime-end");
        // Years, which the lease mode once refused (over 366 days).
        assert!(lock.acquire(&r, "owner-a", 10.0 * 366.0 * 86400.0).unwrap().is_some(), "{table}");
        // A few seconds short of the end, so the clock ticking meanwhile cannot pass it.
        let grant = lock.acquire(&r, "owner-a", seconds_to_datetime_end() - 3.0).unwrap();
        assert!(grant.is_some(), "{table}: at the end of the range");
        assert!(lock.renew(&r, "owner-a", seconds_to_datetime_end() - 3.0).unwrap().is_some(), "{table}");
        let end = expires_at(table, &r);
        assert!(end.starts_with("9999-12-31 23:59:5"), "{table}: expires_at {end}");

        for past in [seconds_to_datetime_end() + 60.0, mysqllock_core::MAX_LEASE_TTL + 1.0] {
            let e = lock.acquire(&r, "owner-a", past).unwrap_err();
            assert!(e.is_invalid_argument() && e.to_string().contains("9999-12-31 23:59:59"), "{table}: {e}");
            let e = lock.renew(&r, "owner-a", past).unwrap_err();
            assert!(e.is_invalid_argument() && e.to_string().contains("9999-12-31 23:59:59"), "{table}: {e}");
            let fresh = unique("datetime-past");
            assert!(lock.acquire(&fresh, "owner-a", past).unwrap_err().is_invalid_argument());
            assert!(row_of(table, &fresh).is_none(), "{table}: a refused TTL wrote a row");
        }
        assert_eq!(expires_at(table, &r), end, "{table}: a refused TTL changed the lease");
    }
}

#[test]
fn a_missing_table_names_the_ddl_and_the_init_command() {
    let mut lock = DistributedLock::native(lease_config("no_such_lease_table"));
    let err = lock.acquire("r", "o", 30.0).unwrap_err();
    assert!(matches!(err, Error::MissingTable { .. }), "{err}");
    let text = err.to_string();
    assert!(text.contains("run `mysqllock init --lease` or create it with: CREATE TABLE"), "{text}");
}

#[test]
fn a_myisam_lease_table_is_refused() {
    let table = "lease_myisam";
    // A shorter key: MySQL's MyISAM keys hold at most 1000 bytes (255 utf8mb4 characters
    // are 1020).
    let ddl =
        USERS_DDL.replace("distributed_locks", table).replace("VARCHAR(255) PRIMARY KEY", "VARCHAR(191) PRIMARY KEY");
    query(&mut raw(), &format!("{ddl} ENGINE=MyISAM"), &[]);
    let err = DistributedLock::native(lease_config(table)).acquire("r", "o", 30.0).unwrap_err();
    assert!(matches!(err, Error::UnusableTable { .. }), "{err}");
    assert!(err.to_string().contains("MyISAM"), "{err}");
    let rows = query(&mut raw(), &format!("SELECT COUNT(*) FROM {table}"), &[]);
    assert_eq!(rows[0][0].as_i64(), Some(0), "nothing was written");
}

#[test]
fn tokens_strictly_increase_across_takeovers_and_releases() {
    let r = unique("tokens");
    let (mut a, mut b) = (fenced(), fenced());
    let first = a.acquire(&r, "owner-a", 30.0).unwrap().unwrap().token.unwrap();
    assert_eq!(a.acquire(&r, "owner-a", 30.0).unwrap().unwrap().token, Some(first), "same owner keeps its token");
    assert_eq!(a.renew(&r, "owner-a", 30.0).unwrap().unwrap().token, Some(first), "renewal keeps the token");
    assert!(a.release(&r, "owner-a").unwrap());
    let second = b.acquire(&r, "owner-b", 30.0).unwrap().unwrap().token.unwrap();
    assert!(second > first, "{second} after {first}");
    query(
        &mut raw(),
        &format!("UPDATE {FENCED} SET expires_at = '2000-01-01' WHERE resource = ?"),
        &[r.as_str().into()],
    );
    let third = a.acquire(&r, "owner-a", 30.0).unwrap().unwrap().token.unwrap();
    assert!(third > second, "{third} after {second}");
    assert!(b.acquire(&r, "owner-b", 30.0).unwrap().is_none());
}

#[test]
fn release_on_the_upgraded_table_ends_the_lease_and_keeps_the_row() {
    let r = unique("keep-row");
    let mut lock = fenced();
    lock.acquire(&r, "owner-a", 30.0).unwrap();
    assert!(lock.release(&r, "owner-a").unwrap());
    let (owner, left) = row_of(FENCED, &r).unwrap();
    assert_eq!(owner, "owner-a");
    assert!(left <= 0.0, "the lease still has {left} s");
    assert!(!lock.is_held(&r).unwrap());
    assert!(!lock.release(&r, "owner-a").unwrap(), "released twice");
}

#[test]
fn the_upgraded_table_keeps_sub_second_ttls() {
    let r = unique("micro");
    let mut lock = fenced();
    lock.acquire(&r, "owner-a", 1.5).unwrap();
    let left = row_of(FENCED, &r).unwrap().1;
    assert!((1.0..=1.5).contains(&left), "{left} s left of 1.5");
}

#[test]
fn a_table_with_rows_upgrades_and_its_leases_carry_on() {
    let table = format!("lease_upgrade_{}", std::process::id());
    let mut s = raw();
    query(&mut s, &format!("DROP TABLE IF EXISTS {table}"), &[]);
    query(&mut s, &USERS_DDL.replace("IF NOT EXISTS distributed_locks", &table), &[]);
    let mut lock = DistributedLock::native(lease_config(&table));
    lock.acquire("held-before", "owner-a", 60.0).unwrap().unwrap();
    assert!(!lock.is_upgraded().unwrap());
    let mut admin = DistributedLock::native(lease_config(&table));
    assert!(admin.upgrade_table().unwrap());
    assert!(!admin.upgrade_table().unwrap(), "a second upgrade changes nothing");
    let mut after = DistributedLock::native(lease_config(&table));
    assert!(after.acquire("held-before", "owner-b", 60.0).unwrap().is_none(), "the lease survived the upgrade");
    let renewed = after.renew("held-before", "owner-a", 60.0).unwrap().unwrap();
    assert_eq!(renewed.token, Some(1), "rows from before the upgrade start at token 1");
    query(&mut s, &format!("DROP TABLE {table}"), &[]);
}

#[test]
fn acquire_waiting_returns_soon_after_the_holder_releases() {
    let r = unique("wait");
    let mut holder = plain();
    holder.acquire(&r, "holder", 30.0).unwrap();
    let (refused, told) = std::sync::mpsc::channel();
    let resource = r.clone();
    let waiter = std::thread::spawn(move || {
        let mut lock = plain();
        let first = lock.acquire(&resource, "waiter", 30.0).unwrap();
        refused.send(first.is_none()).unwrap();
        let got = lock.acquire_waiting(&resource, "waiter", 30.0, 20.0).unwrap();
        (got.is_some(), Instant::now())
    });
    assert!(told.recv().unwrap(), "the waiter got a held lease");
    // The holder's work, while the waiter polls with its backoff.
    std::thread::sleep(Duration::from_millis(50));
    let released = Instant::now();
    assert!(holder.release(&r, "holder").unwrap());
    let (got, at) = waiter.join().unwrap();
    assert!(got, "the waiter did not get the lease");
    assert!(at.duration_since(released) < Duration::from_secs(2), "waited {:?} after the release", at - released);
}

#[test]
fn acquire_waiting_gives_up_after_its_wait() {
    let r = unique("wait-out");
    plain().acquire(&r, "holder", 30.0).unwrap();
    let start = Instant::now();
    assert!(plain().acquire_waiting(&r, "waiter", 30.0, 0.3).unwrap().is_none());
    let took = start.elapsed();
    assert!(took >= Duration::from_millis(300) && took < Duration::from_secs(5), "{took:?}");
}

#[test]
fn a_lost_connection_is_replaced_and_the_lease_is_kept() {
    let r = unique("reconnect");
    let mut lock = plain();
    lock.acquire(&r, "owner-a", 30.0).unwrap();
    let id = lock.connection_id().unwrap();
    raw().kill(id).unwrap();
    wait_until_gone(id);
    assert!(lock.is_held(&r).unwrap(), "the lease lives in the table, not the session");
    assert!(lock.renew(&r, "owner-a", 30.0).unwrap().is_some());
    assert!(lock.release(&r, "owner-a").unwrap());
    assert_ne!(lock.connection_id(), Some(id), "a new session took over");
}

/// A session that sets `CLIENT_FOUND_ROWS`, as some applications configure PDO: the
/// affected-rows count then reports matched rows, not changed ones.
struct FoundRows(mysql::Conn);

impl Session for FoundRows {
    fn execute(
        &mut self,
        sql: &str,
        params: &[Value],
    ) -> Result<mysqllock_core::Outcome, mysqllock_core::SessionError> {
        use mysql::prelude::Queryable;
        let params: Vec<mysql::Value> = params
            .iter()
            .map(|v| match v {
                Value::Int(i) => mysql::Value::Int(*i),
                Value::Null => mysql::Value::NULL,
                other => mysql::Value::Bytes(other.as_text().unwrap().into_bytes()),
            })
            .collect();
        let params = if params.is_empty() { mysql::Params::Empty } else { mysql::Params::Positional(params) };
        let fail = |e: mysql::Error| mysqllock_core::SessionError::client(e.to_string());
        let rows: Vec<mysql::Row> = self.0.exec(sql, params).map_err(fail)?;
        let rows: Vec<Vec<Value>> = rows
            .into_iter()
            .map(|r| {
                r.unwrap()
                    .into_iter()
                    .map(|v| match v {
                        mysql::Value::NULL => Value::Null,
                        mysql::Value::Int(i) => Value::Int(i),
                        mysql::Value::UInt(u) => Value::UInt(u),
                        mysql::Value::Bytes(b) => Value::Text(String::from_utf8_lossy(&b).into_owned()),
                        other => Value::Text(other.as_sql(true)),
                    })
                    .collect()
            })
            .collect();
        // The test's statements with a result set return rows; the width of an empty one
        // is not needed here (no table probe runs on this session).
        let columns = rows.first().map_or(0, Vec::len);
        Ok(mysqllock_core::Outcome {
            rows,
            affected_rows: self.0.affected_rows(),
            last_insert_id: self.0.last_insert_id(),
            columns,
        })
    }

    fn connection_id(&self) -> u64 {
        u64::from(self.0.connection_id())
    }
}

struct FoundRowsConnector;

impl Connector for FoundRowsConnector {
    type Session = FoundRows;
    fn connect(&mut self) -> mysqllock_core::Result<FoundRows> {
        let c = config();
        let opts = mysql::OptsBuilder::new()
            .ip_or_hostname(Some(c.host.clone()))
            .tcp_port(c.port)
            .user(Some(c.user.clone()))
            .pass(c.password.clone())
            .db_name(c.database.clone())
            .prefer_socket(false)
            .additional_capabilities(mysql::consts::CapabilityFlags::CLIENT_FOUND_ROWS);
        Ok(FoundRows(mysql::Conn::new(opts).unwrap()))
    }
}

#[test]
fn verdicts_hold_when_the_client_counts_found_rows() {
    let r = unique("found-rows");
    query(&mut raw(), USERS_DDL, &[]);
    let table = Table::new(PLAIN, mysqllock_core::QuoteStyle::Backtick).unwrap();
    let mut a = DistributedLock::new(FoundRowsConnector, table.clone(), Dialect::MySql);
    let mut b = DistributedLock::new(FoundRowsConnector, table, Dialect::MySql);
    assert!(a.acquire(&r, "owner-a", 30.0).unwrap().is_some(), "fresh row");
    assert!(b.acquire(&r, "owner-b", 30.0).unwrap().is_none(), "a found, unchanged row is not a win");
    assert!(a.acquire(&r, "owner-a", 30.0).unwrap().is_some(), "re-acquired within the second");
    assert!(b.renew(&r, "owner-b", 30.0).unwrap().is_none());
    assert!(a.renew(&r, "owner-a", 30.0).unwrap().is_some());
    assert_eq!(row_of(PLAIN, &r).unwrap().0, "owner-a");
}

#[test]
fn concurrent_acquirers_never_hold_at_the_same_time() {
    let r = unique("race");
    plain(); // the table exists before the threads start
    let spans = std::sync::Arc::new(parking_lot::Mutex::new(Vec::new()));
    let threads: Vec<_> = (0..6)
        .map(|i| {
            let (r, spans) = (r.clone(), spans.clone());
            std::thread::spawn(move || {
                let mut lock = DistributedLock::native(lease_config(PLAIN));
                let owner = format!("thread-{i}");
                let until = Instant::now() + Duration::from_secs(2);
                let mut won = 0;
                while Instant::now() < until {
                    if lock.acquire(&r, &owner, 30.0).unwrap().is_some() {
                        let start = Instant::now();
                        std::thread::sleep(Duration::from_millis(1)); // the holder's work
                        let end = Instant::now();
                        assert!(lock.release(&r, &owner).unwrap(), "{owner} lost a live lease");
                        spans.lock().push((start, end, i));
                        won += 1;
                    }
                }
                won
            })
        })
        .collect();
    let wins: Vec<usize> = threads.into_iter().map(|t| t.join().unwrap()).collect();
    let mut spans = spans.lock().clone();
    spans.sort();
    for pair in spans.windows(2) {
        assert!(pair[0].1 <= pair[1].0, "thread {} and thread {} held at once", pair[0].2, pair[1].2);
    }
    assert!(wins.iter().sum::<usize>() > 10, "hardly any progress: {wins:?}");
}

#[test]
fn the_keeper_renews_the_lease_and_reports_its_loss() {
    let r = unique("keeper");
    let mut lock = plain();
    let grant = lock.acquire(&r, "owner-a", 2.0).unwrap().unwrap();
    let keeper = mysqllock_core::LeaseKeeper::start(lease_config(PLAIN), &r, "owner-a", 2.0, grant).unwrap();
    let first = keeper.deadline();
    wait_until("the keeper renewed", || keeper.deadline() > first);
    assert!(keeper.lost().is_none());
    // Another owner takes the row behind the keeper's back.
    craft(PLAIN, &r, "intruder", "2999-01-01 00:00:00");
    wait_until("the keeper noticed", || keeper.lost().is_some());
    assert_eq!(row_of(PLAIN, &r).unwrap().0, "intruder", "the keeper never overwrites another owner");
    keeper.stop();
}

#[test]
fn a_standalone_server_is_not_a_cluster_node() {
    let s = MysqlSession::connect(&config()).unwrap();
    let topology = s.topology().unwrap();
    assert!(!topology.is_cluster(), "{topology:?}");
    assert_eq!(topology.mariadb, !common::on_mysql(), "{topology:?}");
}

#[test]
fn a_lease_table_without_a_key_on_resource_is_refused() {
    let table = "lease_no_key";
    let ddl = USERS_DDL.replace("distributed_locks", table).replace(" PRIMARY KEY", "");
    query(&mut raw(), &ddl, &[]);
    let err = DistributedLock::native(lease_config(table)).acquire("r", "o", 30.0).unwrap_err();
    assert!(matches!(err, Error::UnusableTable { .. }), "{err}");
}

#[test]
fn unique_owners_name_host_and_pid_and_never_repeat() {
    let (a, b) = (mysqllock_core::unique_owner(), mysqllock_core::unique_owner());
    assert_ne!(a, b);
    let parts: Vec<&str> = a.split(':').collect();
    assert_eq!(parts.len(), 3, "{a}");
    assert_eq!(parts[1], std::process::id().to_string(), "{a}");
}
