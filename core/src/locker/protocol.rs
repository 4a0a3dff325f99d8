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

use super::sql::Sql;
use crate::config::Table;
use crate::deadline::Deadline;
use crate::error::{Error, Result, SessionError};
use crate::holder::holder_host;
use crate::session::{classify, Session};
use crate::value::{Outcome, Value};

/// How long one session other than the row owner may keep the GET_LOCK before the owner
/// treats it as a stale holder and KILLs it. Waiters hold it for a statement or two
/// (well under a millisecond); only a holder that lost its row keeps it this long.
/// On a server that waits whole seconds only, a whole second ([`waiter_grace`]).
const WAITER_GRACE: Duration = Duration::from_millis(500);

/// [`WAITER_GRACE`] where the server sleeps fractions; a whole second where it sleeps
/// whole seconds only (MySQL), so that a queued waiter still sleeps in the server and is
/// woken by the release instead of polling the fraction (see [`waiting`]).
fn waiter_grace(fractions: bool) -> Duration {
    if fractions {
        WAITER_GRACE
    } else {
        Duration::from_secs(1)
    }
}
/// After a KILL the server releases the victim's locks as soon as its thread notices;
/// wait that long for it even past the caller's deadline, so a takeover that has begun
/// is finished rather than left half done.
const KILL_SETTLE: Duration = Duration::from_secs(2);
/// Polling bounds while another owner is between claiming its row and taking the
/// GET_LOCK (there is nothing to block on in that short window).
const POLL_MIN: Duration = Duration::from_millis(2);
const POLL_MAX: Duration = Duration::from_millis(100);
/// Claims allowed past the deadline right after a reclaim: the reclaim was progress,
/// and "timeout 0" must still take over a dead holder's lock in its one try.
const CLAIMS_PAST_DEADLINE: u32 = 2;

/// While a server that takes whole seconds only has a fraction of a second of a wait
/// left, a GET_LOCK with timeout 0 is tried this often: how late a waiter may notice a
/// release in that fraction.
const FRACTION_POLL: Duration = Duration::from_millis(5);

/// The statements of one protocol step on one session, with error classification.
pub(crate) struct Db<'a, S: Session + ?Sized> {
    pub session: &'a mut S,
    pub sql: &'a Sql,
    pub table: &'a Table,
    /// The server waits in GET_LOCK for fractions of a second (see [`waiting`]).
    pub get_lock_fractions: bool,
}

impl<S: Session + ?Sized> Db<'_, S> {
    pub fn run(&mut self, name: &str, sql: &str, params: &[Value]) -> Result<Outcome> {
        self.session.execute(sql, params).map_err(|e| classify(e, Some(name), self.table))
    }

    /// [`run`](Self::run) for a statement that asks the server to wait until `wait`.
    pub fn run_waiting(&mut self, name: &str, sql: &str, params: &[Value], wait: Deadline) -> Result<Outcome> {
        self.session.execute_waiting(sql, params, wait).map_err(|e| classify(e, Some(name), self.table))
    }

    fn flag(&mut self, name: &str, sql: &str, params: &[Value]) -> Result<bool> {
        Ok(self.run(name, sql, params)?.first(0).as_i64() == Some(1))
    }

    pub fn release_get_lock(&mut self, name: &str) -> Result<bool> {
        let sql = self.sql;
        self.flag(name, &sql.release_get_lock, &[name.into()])
    }
}

/// Column `i` of a result row; NULL when a (third-party) session returned fewer.
fn col(row: &[Value], i: usize) -> &Value {
    row.get(i).unwrap_or(&Value::Null)
}

/// One row of the table as `inspect` sees it.
#[derive(Debug, Clone)]
struct Row {
    name: String,
    connection_id: Option<u64>,
    acquired: bool,
    created: i64,
    ttl: i64,
    until_reclaimable: f64,
    /// `IS_USED_LOCK(row.name)`: who holds the GET_LOCK of the owner's spelling.
    holder: Option<u64>,
}

impl Row {
    fn owner_alive(&self) -> bool {
        self.holder.is_some() && self.holder == self.connection_id
    }

    fn reclaimable(&self) -> bool {
        self.until_reclaimable <= 0.0 || (self.acquired && !self.owner_alive())
    }
}

/// What a claiming INSERT found.
enum Claim {
    /// Row and GET_LOCK are ours.
    Acquired,
    /// Someone holds our spelling's GET_LOCK.
    GetLockBusy,
    /// The row exists (under some spelling).
    RowTaken,
}

/// What queueing on our spelling's GET_LOCK ended with.
enum Queued {
    Wake(Wake),
    /// Busy for the whole grace: the caller claims the row alone and inspects.
    GaveUp,
}

/// Waits in GET_LOCK for up to `wait`: `once(timeout)` runs the statement with the
/// timeout to give the server and returns `Some` when the wait is over (granted, or
/// whatever else ends it) or `None` for "not granted". A server that takes whole seconds
/// only (`fractions` false: MySQL rounds 0.4 to 0 and 0.6 to 1) is given the whole
/// seconds left, and the fraction after them is polled for with timeout 0 every
/// [`FRACTION_POLL`]: the waiter neither gives up early nor waits past `wait`, and a
/// release during that fraction still reaches it. An answer that comes early for
/// another reason (the wait was killed) is followed up the same way.
pub(crate) fn waiting<T>(
    fractions: bool,
    wait: Duration,
    mut once: impl FnMut(Duration) -> Result<Option<T>>,
) -> Result<Option<T>> {
    let start = Instant::now();
    loop {
        let left = wait.saturating_sub(start.elapsed());
        // Whole seconds: rounded up only when that overshoots by less than one poll (a
        // grace of one second, computed a moment ago, is a whole second, not 0.9999 s).
        let timeout = if fractions { left } else { Duration::from_secs((left + FRACTION_POLL).as_secs()) };
        if let Some(done) = once(timeout)? {
            return Ok(Some(done));
        }
        let left = wait.saturating_sub(start.elapsed());
        if left.is_zero() {
            return Ok(None);
        }
        std::thread::sleep(left.min(FRACTION_POLL));
    }
}

/// What `take_get_lock` ended with.
enum Takeover {
    Held,
    /// Our claimed row vanished or is about to expire: start over.
    RowLost,
}

/// A session whose row this attempt reclaimed: it may still hold the GET_LOCK of the
/// spelling it stored, believing it holds the lock.
struct Reclaimed {
    spelling: String,
    connection_id: u64,
}

/// One acquisition in progress. Tracks what must be undone if it fails.
struct Attempt<'d, 'a, S: Session + ?Sized> {
    db: &'d mut Db<'a, S>,
    name: &'d str,
    ttl: i64,
    /// The caller's, made where the call entered the core.
    deadline: Deadline,
    me: u64,
    /// We hold GET_LOCK(name) once (never more: GET_LOCK is re-entrant).
    holding_get_lock: bool,
    /// A statement that may have taken GET_LOCK(name) failed: release it if it is ours.
    get_lock_unknown: bool,
    /// We own a row with `lock_acquired = 0`.
    claimed_row: bool,
    reclaimed: Vec<Reclaimed>,
    /// The insert id of our last successful claim: the fencing token on an upgraded table.
    token: u64,
    /// Skip the first try and queue on the GET_LOCK at once: the caller expects it busy.
    queue_first: bool,
    /// Our spelling's GET_LOCK was found busy: someone else held or wanted the name.
    contended: bool,
    /// Whether a connection id is another session of the same locker.
    ours: &'d dyn Fn(u64) -> bool,
}

/// A successful acquisition.
pub(crate) struct Acquired {
    /// The fencing token on an upgraded table, `None` on the original one.
    pub token: Option<u64>,
    /// The GET_LOCK was found busy during this acquisition: the next acquisition of the
    /// name by this locker had better queue at once.
    pub contended: bool,
}

/// What a waiter's sleep on a GET_LOCK ended with.
enum Wake {
    /// Granted, and the row claimed in the same round trip: the lock is ours.
    Acquired,
    /// Granted; the claim is still to be made (the session cannot batch).
    Granted,
    /// Granted, and the claim that rode along found the row taken (under some spelling).
    RowTaken,
    /// Not granted within the wait.
    TimedOut,
}

/// Acquires `name` for `ttl` whole seconds, waiting until `deadline`.
/// `held_here` tells whether this session already holds a spelling (exactly as stored);
/// `ours` whether a connection id is another session of the same locker (whose leases
/// are never treated as someone else's, let alone killed).
/// `expect_busy`: the locker's last acquisition of the name was contended, so the
/// first try (bound to fail on a GET_LOCK that a waiter we woke now holds) is skipped
/// and the attempt queues at once; it never applies to a single try (a timeout of 0).
/// Returns the fencing token on an upgraded table (the insert id of the INSERT that
/// claimed the row) and whether the name was contended.
pub(crate) fn acquire<S: Session + ?Sized>(
    db: &mut Db<'_, S>,
    name: &str,
    deadline: Deadline,
    ttl: i64,
    held_here: &dyn Fn(&str) -> bool,
    ours: &dyn Fn(u64) -> bool,
    expect_busy: bool,
) -> Result<Acquired> {
    let me = db.session.connection_id();
    let mut attempt = Attempt {
        db,
        name,
        ttl,
        deadline,
        me,
        holding_get_lock: false,
        get_lock_unknown: false,
        claimed_row: false,
        reclaimed: Vec::new(),
        token: 0,
        queue_first: expect_busy && !deadline.budget().is_zero(),
        contended: false,
        ours,
    };
    match attempt.run(held_here) {
        Ok(()) => {
            if let Err(e) = attempt.kill_stale_spellings() {
                // A stale holder of another spelling may still believe it holds the
                // lock: do not hold it beside it.
                attempt.give_up_acquired();
                return Err(e);
            }
            let upgraded = attempt.db.sql.upgraded;
            let token = Some(attempt.token).filter(|&t| upgraded && t > 0);
            Ok(Acquired { token, contended: attempt.contended })
        }
        Err(e) => {
            attempt.undo();
            Err(e)
        }
    }
}

impl<S: Session + ?Sized> Attempt<'_, '_, S> {
    fn run(&mut self, held_here: &dyn Fn(&str) -> bool) -> Result<()> {
        let sql = self.db.sql;
        let mut poll = POLL_MIN;
        // Since when our spelling's GET_LOCK has been busy with no row of ours.
        let mut busy_since: Option<Instant> = None;
        // Claims still allowed once the deadline has passed (the first try always runs).
        let mut claims_left = 1;
        loop {
            if self.deadline.passed() {
                if claims_left == 0 {
                    return Err(self.timeout_error());
                }
                claims_left -= 1;
            }
            let claim = if std::mem::take(&mut self.queue_first) { Claim::GetLockBusy } else { self.claim()? };
            match claim {
                Claim::Acquired => return Ok(()),
                Claim::GetLockBusy => match self.queue_for_get_lock(&mut busy_since)? {
                    Queued::Wake(Wake::Acquired) => return Ok(()),
                    // `inspect` below tells by whom.
                    Queued::Wake(Wake::RowTaken) => {}
                    Queued::Wake(Wake::Granted | Wake::TimedOut) => continue,
                    Queued::GaveUp => self.claim_pending()?,
                },
                Claim::RowTaken => {}
            }
            if self.claimed_row {
                match self.take_get_lock()? {
                    Takeover::Held => return Ok(()),
                    Takeover::RowLost => continue,
                }
            }
            let (my_get_lock, row) = self.inspect()?;
            self.holding_get_lock = my_get_lock;
            self.get_lock_unknown = false;
            let Some(row) = row else {
                // The row vanished between our INSERT and our look: its owner released.
                self.pause(&mut poll, f64::INFINITY);
                continue;
            };
            if row.connection_id == Some(self.me) && row.holder == Some(self.me) && row.acquired {
                if row.name == self.name && !held_here(&row.name) {
                    // Our id on a row we never created: an earlier server life reused ids.
                    self.reclaim_reused_id(&row)?;
                    continue;
                }
                self.release_our_get_lock()?;
                return Err(Error::AlreadyHeld { name: self.name.to_owned(), held_as: row.name });
            }
            if row.acquired && row.owner_alive() && row.connection_id.is_some_and(self.ours) {
                // Another spelling, held by another session of this locker.
                self.release_our_get_lock()?;
                return Err(Error::AlreadyHeld { name: self.name.to_owned(), held_as: row.name });
            }
            if row.reclaimable() {
                if self.reclaim(&row)? {
                    claims_left = CLAIMS_PAST_DEADLINE;
                } else {
                    // The server disagreed (the row changed under us): look again later.
                    self.pause(&mut poll, f64::INFINITY);
                }
                continue;
            }
            // Somebody else holds it. Never sit on the GET_LOCK while we cannot own the row:
            // the owner (or owner-to-be) needs it.
            self.release_our_get_lock()?;
            let left = self.deadline.left();
            if left.is_zero() {
                return Err(self.timeout_error());
            }
            claims_left = 1;
            if row.acquired {
                // Sleep on the owner's GET_LOCK until it is released or the lease runs out.
                let wait = Duration::from_secs_f64(left.as_secs_f64().min(row.until_reclaimable.max(0.001)));
                if row.name == self.name {
                    if let Wake::Acquired = self.wait_for_get_lock(wait)? {
                        return Ok(());
                    }
                } else {
                    let (got, _) = self.get_lock(&sql.wait_get_lock, &row.name, wait, false)?;
                    if got {
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
        let mut nap = (*poll).min(self.deadline.left());
        if until_reclaimable.is_finite() && until_reclaimable > 0.0 {
            nap = nap.min(Duration::from_secs_f64(until_reclaimable));
        }
        std::thread::sleep(nap.max(Duration::from_millis(1)));
        *poll = (*poll * 2).min(POLL_MAX);
    }

    /// Runs a `GET_LOCK(spelling, wait)` statement (`with_holder`: it also returns
    /// `IS_USED_LOCK`, as the last try saw it) until granted or `wait` is over.
    fn get_lock(
        &mut self,
        sql: &str,
        spelling: &str,
        wait: Duration,
        with_holder: bool,
    ) -> Result<(bool, Option<u64>)> {
        let (name, db, mut holder) = (self.name, &mut *self.db, None);
        let got = waiting(db.get_lock_fractions, wait, |timeout| {
            let wait = Deadline::after(db.session.allowed_wait(timeout));
            let mut params: Vec<Value> = vec![spelling.into(), wait.budget().as_secs_f64().into()];
            if with_holder {
                params.push(spelling.into());
            }
            let out = db.run_waiting(name, sql, &params, wait)?;
            holder = out.first(1).as_u64();
            Ok((out.first(0).as_i64() == Some(1)).then_some(()))
        })?;
        Ok((got.is_some(), holder))
    }

    /// GET_LOCK is busy: most likely the owner holds it, or a waiter it woke is about
    /// to claim the row. Queue for it on the server (GET_LOCK waiters are served in
    /// order) instead of claiming the row ahead of that waiter. After [`waiter_grace`] of
    /// waiting with no luck, gives up: the caller claims the row and inspects (the
    /// holder may be stale, or own the row under a TTL that ends sooner).
    fn queue_for_get_lock(&mut self, busy_since: &mut Option<Instant>) -> Result<Queued> {
        let now = Instant::now();
        let since = *busy_since.get_or_insert(now);
        let grace = waiter_grace(self.db.get_lock_fractions);
        let wait = grace.saturating_sub(now - since).min(self.deadline.left());
        if wait.is_zero() {
            *busy_since = None;
            return Ok(Queued::GaveUp);
        }
        let wake = self.wait_for_get_lock(wait)?;
        if !matches!(wake, Wake::TimedOut) {
            *busy_since = None;
        }
        Ok(Queued::Wake(wake))
    }

    /// Sleeps in GET_LOCK on our own spelling for up to `wait`. Where the session can
    /// batch, the claim rides along: the server writes the row as soon as the GET_LOCK
    /// is granted, one round trip in all. Notes whether the name was contended.
    fn wait_for_get_lock(&mut self, wait: Duration) -> Result<Wake> {
        let fractions = self.db.get_lock_fractions;
        Ok(waiting(fractions, wait, |timeout| self.wait_for_get_lock_once(timeout))?.unwrap_or(Wake::TimedOut))
    }

    /// One statement (or batch) of [`wait_for_get_lock`](Self::wait_for_get_lock) with
    /// the server's `timeout`; `None` when it timed out.
    fn wait_for_get_lock_once(&mut self, timeout: Duration) -> Result<Option<Wake>> {
        let wait = Deadline::after(self.db.session.allowed_wait(timeout));
        let timeout = wait.budget();
        let sql = self.db.sql;
        let queue = [self.name.into(), self.name.into(), timeout.as_secs_f64().into()];
        if !self.db.session.pipelines() {
            let out = self.db.run_waiting(self.name, &sql.queue_get_lock, &queue, wait)?;
            self.contended |= out.first(0).as_i64() != Some(1);
            if out.first(1).as_i64() == Some(1) {
                self.holding_get_lock = true;
                return Ok(Some(Wake::Granted));
            }
            return Ok(None);
        }
        // The claim's lock_acquired is NULL (error 1048, nothing written) unless the
        // GET_LOCK was granted: harmless when the sleep before it failed.
        let claim = self.claim_params(true);
        let statements: [(&str, &[Value]); 2] = [(&sql.queue_get_lock, &queue), (&sql.claim_if_granted, &claim)];
        match self.db.session.execute_pipelined(&statements, wait) {
            Ok(outcomes) => {
                self.contended |= outcomes.first().map(|o| o.first(0).as_i64()) != Some(Some(1));
                self.holding_get_lock = true;
                self.token = outcomes.get(1).map_or(0, |o| o.last_insert_id);
                Ok(Some(Wake::Acquired))
            }
            // GET_LOCK timed out: the claim found NULL and wrote nothing.
            Err(SessionError { code: Some(1048), .. }) => {
                self.contended = true;
                Ok(None)
            }
            // Granted, but the row exists: the GET_LOCK is ours.
            Err(SessionError { code: Some(1062), .. }) => {
                self.holding_get_lock = true;
                Ok(Some(Wake::RowTaken))
            }
            Err(e) => {
                self.get_lock_unknown = true;
                Err(classify(e, Some(self.name), self.db.table))
            }
        }
    }

    /// Step 1: INSERT the row (and take the GET_LOCK in the same statement).
    fn claim(&mut self) -> Result<Claim> {
        let sql = self.db.sql;
        if self.holding_get_lock {
            let params = self.claim_params(false);
            return match self.db.session.execute(&sql.claim_holding, &params) {
                Ok(out) => {
                    self.token = out.last_insert_id;
                    Ok(Claim::Acquired)
                }
                Err(SessionError { code: Some(1062), .. }) => Ok(Claim::RowTaken),
                Err(e) => Err(classify(e, Some(self.name), self.db.table)),
            };
        }
        let params = self.claim_params(true);
        match self.db.session.execute(&sql.claim_trying, &params) {
            Ok(out) => {
                self.token = out.last_insert_id;
                self.holding_get_lock = true;
                Ok(Claim::Acquired)
            }
            // GET_LOCK was busy (the NOT NULL check comes before the unique key's, so
            // the row may or may not exist).
            Err(SessionError { code: Some(1048), .. }) => {
                self.contended = true;
                Ok(Claim::GetLockBusy)
            }
            Err(SessionError { code: Some(1062), .. }) => Ok(Claim::RowTaken),
            Err(e) => {
                // GET_LOCK ran before the INSERT failed: it may be ours now. Not after an
                // unknown column or table, which the server refuses before it evaluates
                // anything.
                self.get_lock_unknown = !matches!(e.code, Some(1054 | 1146));
                Err(classify(e, Some(self.name), self.db.table))
            }
        }
    }

    /// The claims' parameters: name, TTL, the name again for the GET_LOCK (`trying`),
    /// and on an upgraded table who claims (for introspection only).
    fn claim_params(&self, trying: bool) -> Vec<Value> {
        let mut params = vec![Value::from(self.name), Value::Int(self.ttl)];
        if trying {
            params.push(self.name.into());
        }
        if self.db.sql.upgraded {
            params.extend([holder_host().into(), u64::from(std::process::id()).into()]);
        }
        params
    }

    /// Claims the row without the GET_LOCK (someone else has it): then either the row
    /// was free and is ours while we get the GET_LOCK, or it was taken.
    fn claim_pending(&mut self) -> Result<()> {
        let sql = self.db.sql;
        let params = self.claim_params(false);
        match self.db.session.execute(&sql.claim_pending, &params) {
            Ok(out) => {
                self.token = out.last_insert_id;
                self.claimed_row = true;
                Ok(())
            }
            Err(SessionError { code: Some(1062), .. }) => Ok(()),
            Err(e) => Err(classify(e, Some(self.name), self.db.table)),
        }
    }

    fn inspect(&mut self) -> Result<(bool, Option<Row>)> {
        let sql = self.db.sql;
        let out = self.db.run(self.name, &sql.inspect, &[self.name.into(), self.name.into()])?;
        let Some(r) = out.rows.first() else {
            return Ok((false, None));
        };
        let my_get_lock = col(r, 0).as_i64() == Some(1);
        let row = col(r, 1).as_text().map(|name| Row {
            name,
            connection_id: col(r, 2).as_u64(),
            acquired: col(r, 3).as_i64() == Some(1),
            created: col(r, 4).as_i64().unwrap_or(0),
            ttl: col(r, 5).as_i64().unwrap_or(0),
            // NULL would mean a broken row; never read it as "expired"
            until_reclaimable: col(r, 6).as_f64().unwrap_or(1.0),
            holder: col(r, 7).as_u64(),
        });
        Ok((my_get_lock, row))
    }

    /// Deletes a reclaimable row; false when the server's re-check found it changed.
    fn reclaim(&mut self, row: &Row) -> Result<bool> {
        let sql = self.db.sql;
        let Some(owner) = row.connection_id else { return Ok(false) };
        let params = [row.name.as_str().into(), owner.into(), row.created.into(), row.ttl.into()];
        let deleted = self.db.run(self.name, &sql.reclaim, &params)?.affected_rows == 1;
        if deleted {
            self.reclaimed.push(Reclaimed { spelling: row.name.clone(), connection_id: owner });
        }
        Ok(deleted)
    }

    /// Deletes a row with our id that we never created, and lets go of the GET_LOCK
    /// entirely (however often it was taken): we start from a clean slate.
    fn reclaim_reused_id(&mut self, row: &Row) -> Result<()> {
        let sql = self.db.sql;
        self.db.run(
            self.name,
            &sql.reclaim_reused_id,
            &[row.name.as_str().into(), row.created.into(), row.ttl.into()],
        )?;
        while self.db.release_get_lock(self.name)? {}
        self.holding_get_lock = false;
        Ok(())
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
        let sql = self.db.sql;
        // A takeover that has begun gets the time to tell a waiter passing through from
        // a stale holder (two grace periods), even past the caller's deadline: giving up
        // sooner would leave a hung holder blocking every short try for as long as it
        // lives.
        let grace = waiter_grace(self.db.get_lock_fractions);
        let deadline = self.deadline.end().max(Instant::now() + 2 * grace + POLL_MAX);
        // The session currently seen holding the GET_LOCK, and since when.
        let mut seen: Option<(u64, Instant)> = None;
        let mut killed: Option<(u64, Instant)> = None;
        let mut kills = 0;
        loop {
            let now = Instant::now();
            let left = deadline.saturating_duration_since(now);
            let wait = match (killed, seen) {
                (Some((_, at)), _) => KILL_SETTLE.saturating_sub(now - at),
                (None, Some((h, _))) if self.is_reclaimed(h) => Duration::ZERO,
                (None, Some((_, since))) => left.min(grace.saturating_sub(now - since)),
                // Whose row we just reclaimed is likely who keeps the GET_LOCK: look first.
                (None, None) if !self.reclaimed.is_empty() => Duration::ZERO,
                (None, None) => left.min(grace),
            };
            let (got, holder) = self.get_lock(&sql.get_lock_or_holder, self.name, wait, true)?;
            if got {
                self.holding_get_lock = true;
                self.claimed_row = false;
                if self.db.run(self.name, &sql.mark_acquired, &[self.name.into()])?.affected_rows == 1 {
                    return Ok(Takeover::Held);
                }
                self.release_our_get_lock()?;
                return Ok(Takeover::RowLost);
            }
            let now = Instant::now();
            if let Some((k, at)) = killed {
                if holder == Some(k) && now - at < KILL_SETTLE {
                    continue;
                }
                killed = None;
            }
            let Some(h) = holder else {
                seen = None;
                if now >= deadline {
                    return Err(self.timeout_error());
                }
                continue;
            };
            if (self.ours)(h) {
                // Another session of this locker keeps our spelling's GET_LOCK (a session
                // lock of the same name): it is held here, never a stale holder.
                self.abandon_claim()?;
                return Err(Error::AlreadyHeld { name: self.name.to_owned(), held_as: self.name.to_owned() });
            }
            if seen.map(|(id, _)| id) != Some(h) {
                seen = Some((h, now));
            }
            let since = seen.map_or(now, |(_, s)| s);
            // Past the deadline only the first KILL may still happen (then its settling).
            let may_kill = now < deadline || kills == 0;
            if may_kill && (self.is_reclaimed(h) || now - since >= grace) {
                match self.stale_holder_check(h)? {
                    StaleCheck::Kill => {
                        self.kill(h)?;
                        kills += 1;
                        killed = Some((h, Instant::now()));
                        continue;
                    }
                    StaleCheck::RowLost => {
                        self.abandon_claim()?;
                        return Ok(Takeover::RowLost);
                    }
                    StaleCheck::Moved => seen = None,
                }
            }
            if now >= deadline {
                return Err(self.timeout_error());
            }
        }
    }

    fn is_reclaimed(&self, id: u64) -> bool {
        self.reclaimed.iter().any(|r| r.connection_id == id)
    }

    /// Re-checks, right before a KILL, that `holder` still has the GET_LOCK and that we
    /// still own our row with time left (so `holder` cannot have become its owner).
    fn stale_holder_check(&mut self, holder: u64) -> Result<StaleCheck> {
        if holder == self.me {
            return Ok(StaleCheck::Moved);
        }
        let sql = self.db.sql;
        let out =
            self.db.run(self.name, &sql.still_stale_holder, &[self.name.into(), holder.into(), self.name.into()])?;
        Ok(match (out.first(0).as_i64() == Some(1), out.first(1).as_i64() == Some(1)) {
            (_, false) => StaleCheck::RowLost,
            (true, true) => StaleCheck::Kill,
            (false, true) => StaleCheck::Moved,
        })
    }

    /// Once the lock is ours: a stale holder whose spelling differs from ours (`Foo`
    /// vs `foo`) does not stand in the way of our GET_LOCK, so nothing above killed it;
    /// it must still learn, through its failed session, that the lock is gone.
    fn kill_stale_spellings(&mut self) -> Result<()> {
        let sql = self.db.sql;
        let stale: Vec<(String, u64)> = self
            .reclaimed
            .iter()
            .filter(|r| r.spelling != self.name && r.connection_id != self.me && !(self.ours)(r.connection_id))
            .map(|r| (r.spelling.clone(), r.connection_id))
            .collect();
        for (spelling, id) in stale {
            let out = self.db.run(
                self.name,
                &sql.still_stale_holder,
                &[spelling.as_str().into(), id.into(), self.name.into()],
            )?;
            if out.first(0).as_i64() == Some(1) && out.first(1).as_i64() == Some(1) {
                self.kill(id)?;
            }
        }
        Ok(())
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

    fn abandon_claim(&mut self) -> Result<()> {
        let sql = self.db.sql;
        self.claimed_row = false;
        self.db.run(self.name, &sql.abandon_claim, &[self.name.into()])?;
        Ok(())
    }

    fn timeout_error(&self) -> Error {
        Error::Timeout { name: self.name.to_owned(), timeout: self.deadline.budget().as_secs_f64() }
    }

    /// Lets go of a lock this attempt acquired: its row and its GET_LOCK, best effort
    /// (if the session is gone, so is the lock).
    fn give_up_acquired(&mut self) {
        let sql = self.db.sql;
        let _ = self.db.run(self.name, &sql.release, &[self.name.into()]);
        let _ = self.db.run(self.name, &sql.delete_own, &[self.name.into()]);
        let _ = self.db.run(self.name, &sql.release_if_mine, &[self.name.into(), self.name.into()]);
    }

    /// Leaves nothing behind after a failed attempt: no half-claimed row, no GET_LOCK.
    fn undo(&mut self) {
        let sql = self.db.sql;
        if self.claimed_row {
            let _ = self.abandon_claim();
        }
        if self.holding_get_lock {
            self.holding_get_lock = false;
            let _ = self.db.release_get_lock(self.name);
        } else if self.get_lock_unknown {
            self.get_lock_unknown = false;
            let _ = self.db.run(self.name, &sql.release_if_mine, &[self.name.into(), self.name.into()]);
        }
    }
}

/// What the re-check before a KILL found.
enum StaleCheck {
    Kill,
    /// Our row is gone or about to expire: start over rather than kill anyone.
    RowLost,
    /// The GET_LOCK changed hands meanwhile: look again.
    Moved,
}

#[cfg(test)]
#[path = "protocol_tests.rs"]
mod tests;
