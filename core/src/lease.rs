//! The TTL-lease protocol over the original package's `shared_locks` table.
//!
//! The row is the lock: its owner is `connection_id`, its lease ends when
//! `created + ttl < UNIX_TIMESTAMP()` on the database clock. The owner also holds
//! `GET_LOCK(name)`, which is how waiters sleep without polling and how a dead owner is
//! noticed (the server releases a session's GET_LOCKs when it ends). A session that
//! still holds the GET_LOCK after losing its row is KILLed by the new row owner, which
//! also fails any transaction it has open.
//!
//! Fixed against the original package: the KILL targets only the session that
//! `IS_USED_LOCK()` names, never the row owner, is re-checked right before, and is not
//! aimed at a session that merely holds the GET_LOCK for an instant while waiting; every
//! wait is clamped (no negative GET_LOCK timeout, no zero-timeout busy loop); and the
//! liveness check reads the GET_LOCK of the spelling stored in the row, so names that
//! the table's key folds together (`Foo`, `foo`, `Foo `) can never have two holders.

use std::time::{Duration, Instant};

use crate::config::Table;
use crate::error::{classify, Error, Result, SessionError};
use crate::session::{Outcome, Session, Value};
use crate::sql::Sql;

/// How long a session other than the row owner may hold the GET_LOCK before the owner
/// treats it as a stale holder and KILLs it. Waiters hold it for a statement or two
/// (well under a millisecond); only a holder that lost its row keeps it this long.
const WAITER_GRACE: Duration = Duration::from_millis(500);
/// After a KILL the server releases the victim's locks as soon as its thread notices;
/// wait that long for it even past the caller's deadline, so a takeover that has begun
/// is finished rather than left half done.
const KILL_SETTLE: Duration = Duration::from_secs(2);
/// Polling bounds while another owner is between claiming its row and taking the
/// GET_LOCK (there is nothing to block on in that short window).
const POLL_MIN: Duration = Duration::from_millis(2);
const POLL_MAX: Duration = Duration::from_millis(100);

/// The statements of one protocol step on one session, with error classification.
pub(crate) struct Db<'a, S: Session + ?Sized> {
    pub session: &'a mut S,
    pub sql: &'a Sql,
    pub table: &'a Table,
}

impl<S: Session + ?Sized> Db<'_, S> {
    pub fn run(&mut self, name: &str, sql: &str, params: &[Value]) -> Result<Outcome> {
        self.session.execute(sql, params).map_err(|e| classify(e, Some(name), self.table))
    }

    fn flag(&mut self, name: &str, sql: &str, params: &[Value]) -> Result<bool> {
        Ok(self.run(name, sql, params)?.first(0).as_i64() == Some(1))
    }

    pub fn release_get_lock(&mut self, name: &str) -> Result<bool> {
        let release = self.sql.release_get_lock.clone();
        self.flag(name, &release, &[name.into()])
    }
}

/// One row of the table as `inspect` sees it.
#[derive(Debug, Clone)]
struct Row {
    name: String,
    connection_id: u64,
    acquired: bool,
    created: i64,
    ttl: i64,
    until_reclaimable: f64,
    /// `IS_USED_LOCK(row.name)`: who holds the GET_LOCK of the owner's spelling.
    holder: Option<u64>,
}

impl Row {
    fn owner_alive(&self) -> bool {
        self.holder == Some(self.connection_id)
    }

    fn reclaimable(&self) -> bool {
        self.until_reclaimable <= 0.0 || (self.acquired && !self.owner_alive())
    }
}

/// What `take_get_lock` ended with.
enum Takeover {
    Held,
    /// Our claimed row vanished (its TTL ran out while we waited): start over.
    RowLost,
}

/// One acquisition in progress. Tracks what must be undone if it fails.
struct Attempt<'d, 'a, S: Session + ?Sized> {
    db: &'d mut Db<'a, S>,
    name: &'d str,
    ttl: i64,
    deadline: Instant,
    timeout: Duration,
    me: u64,
    /// We hold GET_LOCK(name) once (never more: GET_LOCK is re-entrant).
    holding_get_lock: bool,
    /// We own a row with `lock_acquired = 0`.
    claimed_row: bool,
    /// Sessions whose rows this attempt reclaimed: known stale holders.
    reclaimed_from: Vec<u64>,
}

/// Acquires `name` for `ttl` whole seconds, waiting until `timeout` has passed.
/// `held_here` tells whether this session already holds a spelling (exactly as stored).
pub(crate) fn acquire<S: Session + ?Sized>(
    db: &mut Db<'_, S>,
    name: &str,
    timeout: Duration,
    ttl: i64,
    held_here: &dyn Fn(&str) -> bool,
) -> Result<()> {
    let me = db.session.connection_id();
    let mut attempt = Attempt {
        db,
        name,
        ttl,
        deadline: Instant::now() + timeout,
        timeout,
        me,
        holding_get_lock: false,
        claimed_row: false,
        reclaimed_from: Vec::new(),
    };
    let result = attempt.run(held_here);
    if result.is_err() {
        attempt.undo();
    }
    result
}

impl<S: Session + ?Sized> Attempt<'_, '_, S> {
    fn run(&mut self, held_here: &dyn Fn(&str) -> bool) -> Result<()> {
        let mut poll = POLL_MIN;
        let mut quick_retries = 0u32;
        loop {
            if self.claim()? {
                return Ok(());
            }
            if self.claimed_row {
                match self.take_get_lock()? {
                    Takeover::Held => return Ok(()),
                    Takeover::RowLost => continue,
                }
            }
            let (my_get_lock, row) = self.inspect()?;
            self.holding_get_lock = my_get_lock;
            let Some(row) = row else {
                // The row vanished between our INSERT and our look: its owner released.
                // Retry at once, but do not let a pathological churn become a busy loop.
                quick_retries += 1;
                if quick_retries > 3 {
                    self.pause(&mut poll, f64::INFINITY);
                }
                continue;
            };
            if row.connection_id == self.me && row.holder == Some(self.me) {
                if row.name == self.name && !held_here(&row.name) {
                    // Our id on a row we never created: an earlier server life reused ids.
                    self.reclaim_reused_id(&row)?;
                    continue;
                }
                self.release_our_get_lock()?;
                return Err(Error::AlreadyHeld { name: self.name.to_owned(), held_as: row.name });
            }
            if row.reclaimable() {
                if !self.reclaim(&row)? {
                    // The server disagreed (the row changed under us): look again later.
                    self.pause(&mut poll, f64::INFINITY);
                }
                continue;
            }
            // Somebody else holds it. Never sit on the GET_LOCK while we cannot own the row:
            // the owner (or owner-to-be) needs it.
            self.release_our_get_lock()?;
            let left = self.deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(self.timeout_error());
            }
            quick_retries = 0;
            if row.acquired {
                // Sleep on the owner's GET_LOCK until it is released or the lease runs out.
                let wait = left.as_secs_f64().min(row.until_reclaimable.max(0.001));
                if self.wait_get_lock(&row.name, wait)? {
                    if row.name == self.name {
                        self.holding_get_lock = true;
                    } else {
                        self.db.release_get_lock(&row.name)?;
                    }
                }
                poll = POLL_MIN;
            } else {
                // The owner claimed the row but has not taken the GET_LOCK yet (it is
                // waiting for a stale holder to go). Nothing to block on: poll gently.
                self.pause(&mut poll, row.until_reclaimable);
            }
        }
    }

    fn pause(&self, poll: &mut Duration, until_reclaimable: f64) {
        let left = self.deadline.saturating_duration_since(Instant::now());
        let mut nap = (*poll).min(left);
        if until_reclaimable.is_finite() && until_reclaimable > 0.0 {
            nap = nap.min(Duration::from_secs_f64(until_reclaimable));
        }
        std::thread::sleep(nap.max(Duration::from_millis(1)));
        *poll = (*poll * 2).min(POLL_MAX);
    }

    /// Step 1: INSERT the row. Returns true when the lock is fully ours.
    fn claim(&mut self) -> Result<bool> {
        let ttl = Value::Int(self.ttl);
        let name = Value::from(self.name);
        let (sql, params) = if self.holding_get_lock {
            (&self.db.sql.claim_holding, vec![name, ttl])
        } else {
            (&self.db.sql.claim_trying, vec![name.clone(), ttl, name])
        };
        let sql = sql.clone();
        match self.db.session.execute(&sql, &params) {
            Ok(outcome) => {
                let got = self.holding_get_lock || outcome.last_insert_id == 2;
                if got {
                    self.holding_get_lock = true;
                    return Ok(true);
                }
                self.claimed_row = true;
                Ok(false)
            }
            Err(SessionError { code: Some(1062), .. }) => Ok(false),
            Err(e) => Err(classify(e, Some(self.name), self.db.table)),
        }
    }

    fn inspect(&mut self) -> Result<(bool, Option<Row>)> {
        let sql = self.db.sql.inspect.clone();
        let out = self.db.run(self.name, &sql, &[self.name.into(), self.name.into()])?;
        let Some(r) = out.rows.first() else {
            return Ok((false, None));
        };
        let my_get_lock = r[0].as_i64() == Some(1);
        let row = r[1].as_text().map(|name| Row {
            name,
            connection_id: r[2].as_u64().unwrap_or(0),
            acquired: r[3].as_i64().unwrap_or(0) != 0,
            created: r[4].as_i64().unwrap_or(0),
            ttl: r[5].as_i64().unwrap_or(0),
            // NULL would mean a broken row; never read it as "expired"
            until_reclaimable: r[6].as_f64().unwrap_or(1.0),
            holder: r[7].as_u64(),
        });
        Ok((my_get_lock, row))
    }

    /// Deletes a reclaimable row; false when the server's re-check found it changed.
    fn reclaim(&mut self, row: &Row) -> Result<bool> {
        let sql = self.db.sql.reclaim.clone();
        let params = [row.name.as_str().into(), row.connection_id.into(), row.created.into(), row.ttl.into()];
        let deleted = self.db.run(self.name, &sql, &params)?.affected_rows == 1;
        if deleted {
            self.reclaimed_from.push(row.connection_id);
        }
        Ok(deleted)
    }

    fn reclaim_reused_id(&mut self, row: &Row) -> Result<()> {
        let sql = self.db.sql.reclaim_reused_id.clone();
        self.db.run(self.name, &sql, &[row.name.as_str().into(), row.created.into(), row.ttl.into()])?;
        Ok(())
    }

    fn wait_get_lock(&mut self, spelling: &str, seconds: f64) -> Result<bool> {
        let sql = self.db.sql.wait_get_lock.clone();
        self.db.flag(self.name, &sql, &[spelling.into(), seconds.into()])
    }

    fn release_our_get_lock(&mut self) -> Result<()> {
        if self.holding_get_lock {
            self.holding_get_lock = false;
            self.db.release_get_lock(self.name)?;
        }
        Ok(())
    }

    /// Step 2, when the INSERT won the row but GET_LOCK was busy: take the GET_LOCK,
    /// killing a stale holder if it keeps it.
    fn take_get_lock(&mut self) -> Result<Takeover> {
        let grace_end = Instant::now() + WAITER_GRACE;
        let mut killed: Option<u64> = None;
        let mut holder: Option<u64> = None;
        loop {
            let now = Instant::now();
            let left = self.deadline.saturating_duration_since(now);
            let known_stale = holder.is_some_and(|h| self.reclaimed_from.contains(&h));
            let wait = if killed.is_some() {
                KILL_SETTLE
            } else if known_stale {
                Duration::ZERO
            } else {
                left.min(grace_end.saturating_duration_since(now))
            };
            let sql = self.db.sql.get_lock_or_holder.clone();
            let out = self.db.run(self.name, &sql, &[self.name.into(), wait.as_secs_f64().into(), self.name.into()])?;
            if out.first(0).as_i64() == Some(1) {
                self.holding_get_lock = true;
                let mark = self.db.sql.mark_acquired.clone();
                if self.db.run(self.name, &mark, &[self.name.into()])?.affected_rows == 1 {
                    self.claimed_row = false;
                    return Ok(Takeover::Held);
                }
                self.claimed_row = false;
                self.release_our_get_lock()?;
                return Ok(Takeover::RowLost);
            }
            holder = out.first(1).as_u64();
            let Some(h) = holder else { continue };
            if killed == Some(h) {
                // Still there after the settle time: the KILL did not take. Try again.
                killed = None;
            }
            if self.reclaimed_from.contains(&h) || Instant::now() >= grace_end {
                if self.still_stale_holder(h)? {
                    self.kill(h)?;
                    killed = Some(h);
                }
                continue;
            }
            if Instant::now() >= self.deadline {
                return Err(self.timeout_error());
            }
        }
    }

    /// Re-checks, right before a KILL, that `holder` still has the GET_LOCK and we still
    /// own the row (so `holder` is not the owner).
    fn still_stale_holder(&mut self, holder: u64) -> Result<bool> {
        if holder == self.me {
            return Ok(false);
        }
        let sql = self.db.sql.still_stale_holder.clone();
        self.db.flag(self.name, &sql, &[self.name.into(), holder.into(), self.name.into()])
    }

    fn kill(&mut self, holder: u64) -> Result<()> {
        match self.db.session.kill(holder) {
            Ok(()) => Ok(()),
            // Unknown thread: it ended on its own meanwhile.
            Err(SessionError { code: Some(1094), .. }) => Ok(()),
            Err(e) if e.code == Some(1095) => {
                Err(Error::TakeoverDenied { name: self.name.to_owned(), holder, source: e })
            }
            Err(e) => Err(classify(e, Some(self.name), self.db.table)),
        }
    }

    fn timeout_error(&self) -> Error {
        Error::Timeout { name: self.name.to_owned(), timeout: self.timeout.as_secs_f64() }
    }

    /// Leaves nothing behind after a failed attempt: no half-claimed row, no GET_LOCK.
    fn undo(&mut self) {
        if self.claimed_row {
            let sql = self.db.sql.abandon_claim.clone();
            let _ = self.db.session.execute(&sql, &[self.name.into()]);
            self.claimed_row = false;
        }
        if self.holding_get_lock {
            self.holding_get_lock = false;
            let _ = self.db.release_get_lock(self.name);
        }
    }
}
