//! `Locker`: the locks of one client on its database session (more sessions when it
//! holds many leases), and the bookkeeping around them.

mod held;
mod keepalive;
mod pool;
mod protocol;
pub mod session_lock;
mod sql;
mod table;

use held::Held;
pub use held::{AcquireOptions, Lease, LockStatus};
use keepalive::KeepAlive;
use pool::Pool;
pub use pool::{LEASES_PER_SESSION, MAX_SESSIONS};
use protocol::Db;
use sql::{Sql, ORIGINAL_COLUMNS, UPGRADE_COLUMNS};

use crate::config::Table;
use crate::deadline::Deadline;
use crate::error::{Error, Loss, Result};
use crate::limits;
use crate::name::{self, Charset};
use crate::session::{classify, Connector, Session};
use crate::value::Value;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

/// How long a keep-alive renews a lease when the caller sets no maximum: an hour, so a
/// process stuck in an endless loop does not hold a lock forever.
pub const DEFAULT_MAX_HOLD: f64 = 3600.0;

/// What the table looks like, looked up once per locker.
#[derive(Debug, Clone)]
struct Schema {
    charset: Charset,
    upgraded: bool,
}

/// The locks of one client: TTL leases on the table and plain session locks, on one
/// MySQL session (and on more when it holds many leases, see below).
///
/// Not thread-safe by itself (`&mut self` everywhere); wrap it in a mutex to share it.
/// Each `Locker` must have its own session: two lockers on one session would each take
/// the other's locks for stale ones. A locker whose connector [spreads](Connector::spreads)
/// takes leases beyond [`LEASES_PER_SESSION`] on further sessions of its own; the first
/// session keeps the session locks and is the one [`session`](Locker::session) returns.
pub struct Locker<C: Connector> {
    connector: C,
    /// The sessions, by slot: slot 0 is the first session; the others only hold leases.
    pool: Pool<C::Session>,
    table: Table,
    /// Shared with each release and keep-alive thread, which take it along by a count,
    /// not by copying its texts.
    sql: Arc<Sql>,
    /// The table's shape, looked up once where it is needed (status, names that not
    /// every character set stores, table changes).
    schema: Option<Schema>,
    /// Whether `sql.upgraded` (do the claims name the upgrade's columns?) is known. The
    /// core's own sessions learn the table's width in their setup round trip when they
    /// open for a lease ([`open_slot_for_lease`](Self::open_slot_for_lease)); until the
    /// shape is known, `sql` assumes an
    /// upgraded table and the first claim tells: on the original table it fails to
    /// prepare (unknown column, nothing ran) and is sent again without them. So taking a
    /// lock needs no look at information_schema, which a short-lived process would pay
    /// for in every run.
    shape_known: bool,
    leases: HashMap<String, Held>,
    /// Session locks by their GET_LOCK key ([`name::session_key`]), with the name they
    /// were taken under.
    session_locks: HashMap<String, String>,
    /// Locks that were held when the session was lost: their release/assert reports why.
    lost: HashMap<String, Loss>,
    /// Names whose last acquisition here found the GET_LOCK busy. Under contention the
    /// next one would too (the waiter our release woke holds it), so it queues at once:
    /// one statement less per acquisition. Bounded by [`CONTENDED_NAMES`].
    contended: HashSet<String>,
}

/// How many contended names a locker remembers; past it, it forgets them all (a wrong
/// guess costs one statement, nothing else).
const CONTENDED_NAMES: usize = 1024;

impl<C: Connector> Locker<C> {
    /// A locker that connects on first use.
    pub fn new(connector: C, table: Table) -> Self {
        Locker {
            connector,
            pool: Pool::new(),
            sql: Arc::new(Sql::new(&table, true)),
            table,
            schema: None,
            shape_known: false,
            leases: HashMap::new(),
            session_locks: HashMap::new(),
            lost: HashMap::new(),
            contended: HashSet::new(),
        }
    }

    pub fn table(&self) -> &Table {
        &self.table
    }

    /// Switches table or quote style. Refused while locks are held, since their rows
    /// live in the current table.
    pub fn set_table(&mut self, table: Table) -> Result<()> {
        if table == self.table {
            return Ok(());
        }
        if !self.leases.is_empty() {
            return Err(Error::invalid("table", "cannot change the table while leases on it are held"));
        }
        self.table = table;
        self.forget_shape();
        Ok(())
    }

    /// The table may have changed: look again when it matters. Until the next claim
    /// has told its shape, no name is queued for at once (the batch would sleep before
    /// the server could refuse its claim).
    fn forget_shape(&mut self) {
        self.schema = None;
        self.shape_known = false;
        self.sql = Arc::new(Sql::new(&self.table, true));
        self.contended.clear();
    }

    fn set_upgraded(&mut self, upgraded: bool) {
        if self.sql.upgraded != upgraded {
            self.sql = Arc::new(Sql::new(&self.table, upgraded));
        }
        self.shape_known = true;
    }

    pub fn connector(&self) -> &C {
        &self.connector
    }

    pub fn connector_mut(&mut self) -> &mut C {
        &mut self.connector
    }

    /// The first session, connecting if there is none.
    pub fn session(&mut self) -> Result<&mut C::Session> {
        self.session_of(0)
    }

    fn session_of(&mut self, slot: usize) -> Result<&mut C::Session> {
        let Locker { pool, connector, .. } = self;
        Ok(pool.open(slot, connector, None)?.0)
    }

    /// Opens session `slot` for a lease, if it is not open: while the table's shape is
    /// unknown, the session learns it in its setup where it can, so the first claim names
    /// the columns the table has ([`Connector::connect_learning`]): five are the original
    /// table's. Only for a lease: the look costs the server about as much as a statement
    /// (bench/server_cost.sh), which a session that only takes session locks, or only
    /// reads, would pay for nothing.
    fn open_slot_for_lease(&mut self, slot: usize) -> Result<()> {
        if self.pool.is_open(slot) {
            return Ok(());
        }
        let Locker { pool, connector, table, shape_known, .. } = self;
        let learn = (!*shape_known).then_some(&*table);
        let columns = pool.open(slot, connector, learn)?.0.lock_table_columns();
        if !self.shape_known && columns == Some(ORIGINAL_COLUMNS) {
            self.set_upgraded(false);
        }
        Ok(())
    }

    /// Whether the first session is open (no statement is run to check).
    pub fn is_connected(&self) -> bool {
        self.pool.is_connected()
    }

    /// `CONNECTION_ID()` of the first session, which holds the session locks and the
    /// first [`LEASES_PER_SESSION`] leases (each [`Lease`] names its own session).
    pub fn connection_id(&mut self) -> Result<u64> {
        Ok(self.session()?.connection_id())
    }

    /// Names held as leases or session locks, as this process sees them.
    pub fn held(&self) -> impl Iterator<Item = &str> {
        self.leases.keys().chain(self.session_locks.values()).map(String::as_str)
    }

    pub fn holds(&self, name: &str) -> bool {
        self.leases.contains_key(name) || self.session_lock_as(name).is_some()
    }

    /// The fencing token of a lease this locker holds; `Ok(None)` on a table without
    /// the `token` column. Answered locally: check it where it matters, in the write the
    /// lock protects (`UPDATE ... SET fence = :token WHERE fence < :token`).
    pub fn token(&mut self, name: &str) -> Result<Option<u64>> {
        match self.leases.get(name) {
            Some(held) => Ok(held.token),
            None => Err(self.not_held(name)),
        }
    }

    /// Closes the sessions: every lock on them is lost (the server releases GET_LOCKs,
    /// and lease rows are reclaimed by the next acquirer).
    pub fn disconnect(&mut self) {
        self.forget_locks(Loss::SessionLost);
        self.pool.close_all();
    }

    /// Gives up the session without closing it: for a forked child, whose inherited
    /// connection belongs to the parent (closing it would lose the parent's locks).
    pub fn abandon(&mut self) {
        // The keep-alive threads were not forked along; their state may be mid-use.
        for held in self.leases.values_mut() {
            if let Some(k) = held.keep_alive.take() {
                k.abandon();
            }
        }
        self.forget_locks(Loss::SessionLost);
        self.pool.abandon_all();
    }

    fn forget_locks(&mut self, loss: Loss) {
        for (n, held) in self.leases.drain() {
            if let Some(k) = held.keep_alive {
                k.stop();
            }
            self.lost.insert(n, loss);
        }
        for (_, n) in self.session_locks.drain() {
            self.lost.insert(n, loss);
        }
        self.pool.forget_leases();
    }

    /// One session was lost: so are the locks on it, and nothing else.
    fn lose_slot(&mut self, slot: usize) {
        let gone: Vec<String> = self.leases.iter().filter(|(_, h)| h.slot == slot).map(|(n, _)| n.clone()).collect();
        for n in gone {
            if let Some(k) = self.leases.remove(&n).and_then(|h| h.keep_alive) {
                k.stop();
            }
            self.lost.insert(n, Loss::SessionLost);
        }
        if slot == 0 {
            for (_, n) in self.session_locks.drain() {
                self.lost.insert(n, Loss::SessionLost);
            }
        }
        self.pool.vacate(slot);
    }

    /// Forgets a lease locally (its slot has room again), returning its bookkeeping.
    fn forget_lease(&mut self, name: &str) -> Option<Held> {
        let held = self.leases.remove(name)?;
        self.pool.lease_gone(held.slot, self.leases.len());
        Some(held)
    }

    /// Runs `f` on a `Db` of the first session (and the leases held).
    fn with_db<T>(
        &mut self,
        f: impl FnOnce(&mut Db<'_, C::Session>, &HashMap<String, Held>) -> Result<T>,
    ) -> Result<T> {
        self.with_db_on(0, f)
    }

    /// Runs `f` on a `Db` of session `slot`, connecting it if needed and forgetting it
    /// (with its locks) if it turned out to be lost.
    fn with_db_on<T>(
        &mut self,
        slot: usize,
        f: impl FnOnce(&mut Db<'_, C::Session>, &HashMap<String, Held>) -> Result<T>,
    ) -> Result<T> {
        let Locker { pool, connector, sql, table, leases, .. } = self;
        let (session, get_lock_fractions) = pool.open(slot, connector, None)?;
        let result = f(&mut Db { session, sql, table, get_lock_fractions }, leases);
        if matches!(result, Err(Error::ConnectionLost { .. })) {
            self.lose_slot(slot);
        }
        result
    }

    fn check_name(&mut self, name: &str) -> Result<()> {
        name::validate_shape(name)?;
        if self.schema.is_none() && name::is_portable(name) {
            return Ok(());
        }
        let charset = self.schema(name)?.charset;
        if !name::validate_for(name, &charset)? {
            // An unusual character set: let the server round-trip the name.
            let sql = format!(
                "SELECT CONVERT(CONVERT(? USING {cs}) USING utf8mb4) = CONVERT(? USING utf8mb4) COLLATE utf8mb4_bin",
                cs = charset.mysql_name()
            );
            let same = self.with_db(|db, _| db.run(name, &sql, &[name.into(), name.into()]))?.first(0).as_i64();
            if same != Some(1) {
                return Err(name::unstorable(name, charset.mysql_name(), None));
            }
        }
        Ok(())
    }

    /// The table's shape, looked up on first use (and the statements built for it).
    /// A missing table is an error naming `mysqllock init`.
    fn schema(&mut self, name: &str) -> Result<Schema> {
        if let Some(schema) = &self.schema {
            return Ok(schema.clone());
        }
        let Some(schema) = self.look_up_schema(name)? else {
            let missing = crate::SessionError::server(
                1146,
                format!("table '{}' doesn't exist or is not visible to this user", self.table.display_name()),
            );
            return Err(classify(missing, Some(name), &self.table));
        };
        Ok(schema)
    }

    /// Reads the table's shape from information_schema; `None` if the table is missing.
    /// An upgrade only counts when all its columns are there.
    fn look_up_schema(&mut self, name: &str) -> Result<Option<Schema>> {
        let Some((charset, upgrade_columns)) = self.read_columns(name)? else {
            return Ok(None);
        };
        let charset = charset.map_or(Charset::Latin1, |cs| Charset::from_mysql_name(&cs));
        let upgraded = upgrade_columns == UPGRADE_COLUMNS.len() as i64;
        let schema = Schema { charset, upgraded };
        self.set_upgraded(upgraded);
        self.schema = Some(schema.clone());
        Ok(Some(schema))
    }

    /// Acquires the TTL lease `name`, waiting up to `timeout` seconds (0 = one try,
    /// fractions allowed) while another session holds it. The lease lasts `ttl` seconds
    /// (rounded up to whole seconds on the database clock) unless released earlier.
    ///
    /// Fails with [`Error::Timeout`] if it stays held, and at once with
    /// [`Error::AlreadyHeld`] if this session holds it already.
    pub fn acquire(&mut self, name: &str, timeout: f64, ttl: f64) -> Result<Lease> {
        self.acquire_with(name, timeout, ttl, &AcquireOptions::default())
    }

    /// [`acquire`](Self::acquire) with keep-alive and "at least" (see [`AcquireOptions`]).
    /// Bad options are refused before anything is locked.
    pub fn acquire_with(&mut self, name: &str, timeout: f64, ttl: f64, options: &AcquireOptions) -> Result<Lease> {
        let deadline = Deadline::after(limits::duration("timeout", timeout)?);
        self.recovering(|locker| locker.acquire_once(name, deadline, ttl, options))
    }

    /// Runs a whole acquisition (`op`, which waits by the caller's deadline) and
    /// recovers, once each, from the two failures that say nothing about the lock
    /// itself, as the original package did:
    /// - the session turned out to be dead already (killed, timed out, server restarted
    ///   since the last call): the acquisition is run again on a fresh session. Not when
    ///   the session was opened for this very attempt: then the server is the problem.
    ///   Not when the server stopped answering (a bound ran out): trying again would wait
    ///   as long again; the caller hears it at once.
    /// - the MyISAM table is marked as crashed: `REPAIR TABLE`, then again.
    ///
    /// Running it again is safe: a failed acquisition is undone, and what a lost session
    /// may have left (its GET_LOCK ends with it; a row naming it) is reclaimed as a dead
    /// holder's by the next try. A retry waits by the same deadline: only for the time
    /// left, and its timeout still names the caller's figure.
    fn recovering<T>(&mut self, mut op: impl FnMut(&mut Self) -> Result<T>) -> Result<T> {
        let (mut reconnected, mut repaired) = (false, false);
        loop {
            let had_session = self.is_connected();
            match op(self) {
                Err(Error::ConnectionLost { source, .. }) if had_session && !reconnected && !source.stalled => {
                    reconnected = true
                }
                Err(e) if !repaired && e.is_crashed_table() => {
                    repaired = true;
                    if self.repair_table().is_err() {
                        return Err(e);
                    }
                }
                other => return other,
            }
        }
    }

    /// `REPAIR TABLE` on the lock table. The server answers with rows instead of an
    /// error; [`Error::RepairFailed`] carries their text when none says `OK`.
    pub fn repair_table(&mut self) -> Result<()> {
        let sql = format!("REPAIR TABLE {}", self.table.sql_name());
        let rows = self.with_db(|db, _| db.run("", &sql, &[]))?.rows;
        let text = |row: &Vec<Value>, i: usize| row.get(i).and_then(Value::as_text).unwrap_or_default();
        if rows.iter().any(|r| text(r, 2).eq_ignore_ascii_case("status") && text(r, 3).eq_ignore_ascii_case("OK")) {
            self.forget_shape();
            return Ok(());
        }
        let messages: Vec<String> = rows.iter().map(|r| format!("{}: {}", text(r, 2), text(r, 3))).collect();
        let reason = if messages.is_empty() { "the server returned no status".to_owned() } else { messages.join("; ") };
        Err(Error::RepairFailed { table: self.table.display_name(), reason })
    }

    fn acquire_once(&mut self, name: &str, deadline: Deadline, ttl: f64, options: &AcquireOptions) -> Result<Lease> {
        let ttl = limits::ttl_seconds(ttl)?;
        let at_least = limits::duration("at_least", options.at_least)?.as_secs_f64().ceil() as i64;
        let keep_alive = match (options.keep_alive, options.max_hold) {
            (false, Some(_)) => return Err(Error::invalid("max_hold", "only applies with keep_alive")),
            (false, None) => None,
            (true, max_hold) => {
                let max_hold = limits::whole_seconds("max_hold", max_hold.unwrap_or(DEFAULT_MAX_HOLD))?;
                let Some(open) = self.connector.keep_alive(keepalive::IO_TIMEOUT) else {
                    return Err(Error::invalid(
                        "keep_alive",
                        "needs the library's own connection (a DSN), not an application's session",
                    ));
                };
                Some((open, max_hold))
            }
        };
        self.check_name(name)?;
        if self.holds(name) {
            return Err(Error::AlreadyHeld { name: name.to_owned(), held_as: name.to_owned() });
        }
        let expect_busy = self.contended.contains(name);
        let slot = self.pool.slot_for_new_lease(&mut self.connector);
        self.open_slot_for_lease(slot)?;
        let claim = |locker: &mut Self| {
            let others = locker.pool.other_sessions(slot);
            let ours = |id: u64| others.contains(&id);
            locker.with_db_on(slot, |db, leases| {
                let held_here = |n: &str| leases.get(n).is_some_and(|h| h.slot == slot);
                protocol::acquire(db, name, deadline, ttl, &held_here, &ours, expect_busy)
            })
        };
        let mut acquired = claim(self);
        if !self.shape_known {
            match &acquired {
                Ok(_) => self.set_upgraded(true),
                Err(e) if e.is_unknown_column() => {
                    // The original table: the claim naming the upgrade's columns was
                    // refused before it ran.
                    self.set_upgraded(false);
                    acquired = claim(self);
                }
                Err(_) => {}
            }
        }
        let acquired = match acquired {
            Ok(acquired) => acquired,
            Err(e) => {
                if matches!(e, Error::Timeout { .. }) && !deadline.budget().is_zero() {
                    self.remember_contention(name, true);
                }
                return Err(e);
            }
        };
        self.remember_contention(name, acquired.contended);
        let token = acquired.token;
        self.lost.remove(name);
        let connection_id = self.session_of(slot)?.connection_id();
        self.pool.lease_taken(slot);
        let keep_alive = match keep_alive {
            None => None,
            Some((open, max_hold)) => {
                let plan = keepalive::Plan {
                    open,
                    sql: Arc::clone(&self.sql),
                    name: name.to_owned(),
                    owner: connection_id,
                    ttl,
                    max_hold,
                };
                match KeepAlive::start(plan) {
                    Ok(k) => Some(k),
                    Err(e) => {
                        // Nobody would renew it: do not hand out a lease the caller
                        // believes is kept alive.
                        self.leases.insert(name.to_owned(), Held::new(slot, token, 0, None));
                        let _ = self.release(name);
                        return Err(Error::invalid("keep_alive", format!("cannot start its thread: {e}")));
                    }
                }
            }
        };
        self.leases.insert(name.to_owned(), Held::new(slot, token, at_least, keep_alive));
        Ok(Lease { name: name.to_owned(), ttl, connection_id, token })
    }

    fn remember_contention(&mut self, name: &str, contended: bool) {
        if !contended {
            self.contended.remove(name);
        } else if !self.contended.contains(name) {
            if self.contended.len() >= CONTENDED_NAMES {
                self.contended.clear();
            }
            self.contended.insert(name.to_owned());
        }
    }

    /// One try: `Ok(None)` when another session holds the lock.
    pub fn try_acquire(&mut self, name: &str, ttl: f64) -> Result<Option<Lease>> {
        self.try_acquire_with(name, ttl, &AcquireOptions::default())
    }

    /// One try with options: `Ok(None)` when another session holds the lock.
    pub fn try_acquire_with(&mut self, name: &str, ttl: f64, options: &AcquireOptions) -> Result<Option<Lease>> {
        match self.acquire_with(name, 0.0, ttl, options) {
            Ok(lease) => Ok(Some(lease)),
            Err(Error::Timeout { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    fn not_held(&mut self, name: &str) -> Error {
        let loss = self.lost.remove(name).unwrap_or(Loss::NeverAcquired);
        Error::NotHeld { name: name.to_owned(), loss }
    }

    /// What a call on `name` reports when its session was lost (`e`): the lock went with
    /// the session ([`Error::NotHeld`]), unless the server stopped answering, which `e`
    /// says itself. Either way nothing is held here any more: the session was closed,
    /// and the server ends it, with its locks, once it hears of that.
    fn held_no_more(&mut self, name: &str, e: Error) -> Error {
        match &e {
            Error::ConnectionLost { source, .. } if source.stalled => {
                self.lost.remove(name);
                e
            }
            _ => self.not_held(name),
        }
    }

    /// Releases a lease: deletes its row, then its GET_LOCK (so a woken waiter finds the
    /// row gone). Fails with [`Error::NotHeld`] when the lease was taken over or lost;
    /// the local bookkeeping forgets it either way.
    ///
    /// If the statement fails for another reason than a lost session, the lease stays
    /// registered and whole (without its keep-alive, which is stopped first): retry.
    ///
    /// With "at least" ([`AcquireOptions::at_least`]) the row stays until that time,
    /// marked as no longer holding the GET_LOCK; only the GET_LOCK is released now.
    pub fn release(&mut self, name: &str) -> Result<()> {
        self.release_as(name, false)
    }

    /// `release`, or (`at_end`) what the end of the holder (request or process end,
    /// [`release_all`](Self::release_all)) does: a row no longer marked
    /// `lock_acquired = 1` is left in place until its TTL, as the original package leaves
    /// every row when its session ends; only the GET_LOCK is let go.
    fn release_as(&mut self, name: &str, at_end: bool) -> Result<()> {
        let Some(held) = self.leases.get_mut(name) else {
            return Err(self.not_held(name));
        };
        if let Some(k) = held.keep_alive.take() {
            held.renewal_failed |= k.failure().is_some();
            k.stop();
        }
        let renewal_failed = held.renewal_failed;
        let at_least = held.at_least;
        let slot = held.slot;
        let sql = Arc::clone(&self.sql);
        let result = self.with_db_on(slot, |db, _| {
            // Row and GET_LOCK in one statement when both are ours (the usual case).
            let lingered = at_least > 0
                && db.run(name, &sql.linger, &[at_least.into(), name.into(), at_least.into()])?.affected_rows == 1;
            let release = if at_end { &sql.release_at_end } else { &sql.release };
            if lingered || db.run(name, release, &[name.into()])?.affected_rows == 1 {
                return Ok((1, Ok(true)));
            }
            if at_end {
                // The row is gone or no longer marked: leave it; the GET_LOCK goes.
                return Ok((
                    0,
                    db.run(name, &sql.release_if_mine, &[name.into(), name.into()])
                        .map(|o| o.first(0).as_i64() == Some(1)),
                ));
            }
            // Something is off: clean up what is still ours, row first (so a waiter
            // woken by the GET_LOCK finds it gone), and find out what was lost.
            let deleted = db.run(name, &sql.delete_own, &[name.into()])?.affected_rows;
            Ok((deleted, db.release_get_lock(name)))
        });
        let (deleted, released) = match result {
            Ok(r) => r,
            Err(e @ Error::ConnectionLost { .. }) => {
                self.forget_lease(name);
                return Err(self.held_no_more(name, e));
            }
            Err(e) => return Err(e),
        };
        self.forget_lease(name);
        match (deleted, released) {
            (1, Ok(_)) if renewal_failed => Err(Error::NotHeld { name: name.to_owned(), loss: Loss::RenewalFailed }),
            (1, Ok(true)) => Ok(()),
            (1, Ok(false)) => Err(Error::NotHeld { name: name.to_owned(), loss: Loss::GetLockGone }),
            (_, Err(e @ Error::ConnectionLost { .. })) => Err(self.held_no_more(name, e)),
            (_, Err(e)) => Err(e),
            (_, Ok(_)) => Err(Error::NotHeld { name: name.to_owned(), loss: Loss::RowGone }),
        }
    }

    /// Seconds of the lease left (database clock), counted safely: another session can
    /// take it over no earlier than this, and at most a second later.
    pub fn remaining_ttl(&mut self, name: &str) -> Result<f64> {
        let slot = self.check_renewals(name)?;
        let sql = self.sql.remaining.clone();
        let result = self.with_db_on(slot, |db, _| db.run(name, &sql, &[name.into()]));
        let out = match result {
            Ok(out) => out,
            Err(e @ Error::ConnectionLost { .. }) => return Err(self.held_no_more(name, e)),
            Err(e) => return Err(e),
        };
        let Some(row) = out.rows.first() else {
            return Err(Error::NotHeld { name: name.to_owned(), loss: Loss::RowGone });
        };
        if row.get(1).and_then(Value::as_i64) != Some(1) {
            return Err(Error::NotHeld { name: name.to_owned(), loss: Loss::GetLockGone });
        }
        Ok(row.first().and_then(Value::as_f64).unwrap_or(0.0))
    }

    /// Extends the lease to `ttl` seconds from now (database clock), while this session
    /// still owns its row and holds its GET_LOCK; never shortens it. Fails with
    /// [`Error::NotHeld`] when the lease was lost (it is not re-acquired).
    pub fn renew(&mut self, name: &str, ttl: f64) -> Result<()> {
        let ttl = limits::ttl_seconds(ttl)?;
        let sql = self.sql.renew.clone();
        let no_cap = i64::from(i32::MAX);
        self.change_ttl(name, &sql, |me| vec![ttl.into(), no_cap.into(), name.into(), me.into()])
    }

    /// Sets the lease to end `ttl` seconds from now (database clock), sooner or later
    /// than it would have: a holder that needs less time than it took lets another
    /// session take the lock over sooner (Symfony's `putOffExpiration()`). Rounded up to
    /// whole seconds, counted as [`renew`](Self::renew) counts. Only while this session
    /// still owns its row and holds its GET_LOCK: [`Error::NotHeld`] when the lease was
    /// lost. A keep-alive goes on renewing it ([`renew`](Self::renew) never shortens).
    pub fn set_remaining_ttl(&mut self, name: &str, ttl: f64) -> Result<()> {
        let ttl = limits::ttl_seconds(ttl)?;
        let sql = self.sql.set_remaining.clone();
        self.change_ttl(name, &sql, |me| vec![ttl.into(), name.into(), me.into()])
    }

    /// Runs a statement that changes the TTL of the held lease `name` (`params` get the
    /// holding session's id) and tells a lost lease from one the statement left as it was.
    fn change_ttl(&mut self, name: &str, sql: &str, params: impl FnOnce(u64) -> Vec<Value>) -> Result<()> {
        let slot = self.check_renewals(name)?;
        let params = params(self.session_of(slot)?.connection_id());
        match self.with_db_on(slot, |db, _| db.run(name, sql, &params)) {
            Ok(out) if out.affected_rows == 1 => Ok(()),
            // Unchanged (already that long) or lost: the ownership check tells which.
            Ok(_) => self.remaining_ttl(name).map(|_| ()),
            Err(e @ Error::ConnectionLost { .. }) => Err(self.held_no_more(name, e)),
            Err(e) => Err(e),
        }
    }

    /// Whether the keep-alive of lease `name` has given up on it: the lease must then
    /// be treated as lost. Answered locally, without a statement, so a caller can poll
    /// it while its job runs. False when not held or held without keep-alive.
    pub fn renewal_failed(&self, name: &str) -> bool {
        self.leases.get(name).is_some_and(Held::renewal_failed)
    }

    /// Fails when `name` is not held here, or when its keep-alive has given up on it;
    /// else tells which session holds it.
    fn check_renewals(&mut self, name: &str) -> Result<usize> {
        match self.leases.get(name) {
            None => Err(self.not_held(name)),
            Some(held) if held.renewal_failed() => {
                Err(Error::NotHeld { name: name.to_owned(), loss: Loss::RenewalFailed })
            }
            Some(held) => Ok(held.slot),
        }
    }

    /// Fails unless the lease is still held with at least `min_remaining` seconds left.
    /// Returns the remaining seconds.
    pub fn assert_ttl(&mut self, name: &str, min_remaining: f64) -> Result<f64> {
        let required = limits::duration("minimum remaining TTL", min_remaining)?.as_secs_f64();
        let remaining = self.remaining_ttl(name)?;
        if remaining < required {
            return Err(Error::TtlTooShort { name: name.to_owned(), remaining, required });
        }
        Ok(remaining)
    }

    /// Releases everything this session holds (request end, process exit, client free).
    /// Returns the failures; a lock that was already lost is not one.
    ///
    /// As with the original package, whose rows outlive the session that ends: a lease
    /// whose row is no longer marked `lock_acquired = 1` keeps its row until its TTL
    /// (only its GET_LOCK is released); marked rows are deleted, which only spares the
    /// next acquirer the reclaim the original would do at once.
    pub fn release_all(&mut self) -> Vec<Error> {
        let mut errors = Vec::new();
        let leases: Vec<String> = self.leases.keys().cloned().collect();
        for n in leases {
            match self.release_as(&n, true) {
                Ok(()) | Err(Error::NotHeld { .. }) => {}
                Err(e) => errors.push(e),
            }
        }
        let locks: Vec<String> = self.session_locks.values().cloned().collect();
        for n in locks {
            match self.unlock_session(&n) {
                Ok(()) | Err(Error::NotHeld { .. }) => {}
                Err(e) => errors.push(e),
            }
        }
        self.lost.clear();
        errors
    }
}

/// The locker most callers want: native sessions from a [`Config`](crate::Config).
pub type NativeLocker = Locker<crate::Config>;

impl NativeLocker {
    /// A locker for `config`'s server and table; connects on first use.
    pub fn from_config(config: crate::Config) -> Self {
        let table = config.table.clone();
        Locker::new(config, table)
    }
}
