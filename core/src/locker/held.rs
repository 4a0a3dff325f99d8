//! What a locker holds and reports: the options of an acquire, the [`Lease`] it grants,
//! the [`LockStatus`] it reads, and its own bookkeeping per lease (its sessions are
//! `pool.rs`'s).

use super::*;

/// Extras for [`Locker::acquire_with`]; the default is a plain lease.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AcquireOptions {
    /// Renew the lease from a background thread with its own connection, every third
    /// of the TTL, for as long as it is held, up to `max_hold`. If a renewal fails the
    /// lease counts as lost, and the next renew/assert/release reports it.
    pub keep_alive: bool,
    /// Seconds after acquisition when keep-alive stops renewing (default
    /// [`DEFAULT_MAX_HOLD`]); the lease then ends by its TTL, never later than this.
    pub max_hold: Option<f64>,
    /// Seconds from acquisition the lock stays taken even if released sooner ("lock at
    /// least for"), so a node whose cron fires a little later does not run the same job
    /// again. 0 = released at once. Rounded up to whole seconds, on the database clock.
    pub at_least: f64,
}

/// A successful TTL-lease acquisition.
#[derive(Debug, Clone, PartialEq)]
pub struct Lease {
    pub name: String,
    /// The TTL in whole seconds, as stored.
    pub ttl: i64,
    /// `CONNECTION_ID()` of the session holding it.
    pub connection_id: u64,
    /// The fencing token: greater than every token issued for this table before, also
    /// across server restarts. `None` on a table without the `token` column (run
    /// `mysqllock init --upgrade`).
    pub token: Option<u64>,
}

/// A lease this locker holds, and what its release must do.
pub(super) struct Held {
    /// Which of the locker's sessions holds it.
    pub(super) slot: usize,
    pub(super) token: Option<u64>,
    /// Whole seconds from acquisition the row must outlive a release (0: none).
    pub(super) at_least: i64,
    pub(super) keep_alive: Option<KeepAlive>,
    /// The keep-alive gave up on it; kept after the thread is stopped, so a release that
    /// failed and is retried still reports the loss.
    pub(super) renewal_failed: bool,
}

impl Held {
    pub(super) fn new(slot: usize, token: Option<u64>, at_least: i64, keep_alive: Option<KeepAlive>) -> Held {
        Held { slot, token, at_least, keep_alive, renewal_failed: false }
    }

    pub(super) fn renewal_failed(&self) -> bool {
        self.renewal_failed || self.keep_alive.as_ref().is_some_and(|k| k.failure().is_some())
    }
}

/// One row of the table, for `status` and introspection.
#[derive(Debug, Clone, PartialEq)]
pub struct LockStatus {
    pub name: String,
    pub connection_id: u64,
    /// Host (and port) of the holder's connection, when the process list shows it.
    pub host: Option<String>,
    pub created: i64,
    pub ttl: i64,
    /// Seconds since the row was created (database clock).
    pub age: f64,
    /// Seconds of the lease left (database clock, counted to `created + ttl`); < 0 = expired.
    pub remaining: f64,
    /// The holder has taken the GET_LOCK (`lock_acquired = 1`).
    pub acquired: bool,
    /// The holder's session still holds the GET_LOCK of the name it stored.
    pub holder_alive: bool,
    /// The fencing token of the acquisition (upgraded tables).
    pub token: Option<u64>,
    /// The host name of the machine that acquired it, where recorded (upgraded tables,
    /// mysqllock holders; the original package records none).
    pub hostname: Option<String>,
    /// The process id of the holder, where recorded (as `hostname`).
    pub pid: Option<u64>,
}

impl LockStatus {
    /// When the lock was acquired (`created`, Unix seconds, database clock). Renewals
    /// extend the TTL and keep this.
    pub fn acquired_at(&self) -> i64 {
        self.created
    }

    /// When the lease ends unless renewed (Unix seconds, database clock).
    pub fn expires_at(&self) -> i64 {
        self.created.saturating_add(self.ttl)
    }
}
