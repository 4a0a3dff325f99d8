//! The state of `SharedLock` (and what `SessionLock` shares with it): the connection
//! settings and table made from php.ini, the current locker and the retired ones that
//! still hold locks, and what a fork leaves of them.

use ext_php_rs::types::{ZendObject, Zval};
use mysqllock_core::fork::{self, Owner};
use mysqllock_core::{AcquireOptions, Error, Lease, LockStatus, Locker, Loss, QuoteStyle, Table};

use super::session_locks::Attached;
use crate::connection::{OwnConnection, PdoOrigin, PdoTarget, PhpConnector, Target};
use crate::ini;
use crate::options;

pub(super) type PhpLocker = Locker<PhpConnector>;

pub(super) const NOT_CONFIGURED: &str = "no connection is configured: call SharedLock::configureConnection() or \
                              SharedLock::setConnection(), or set mysqllock.dsn in php.ini";
const KEEP_ALIVE_ON_PDO: &str = "keep-alive needs the extension's own connection (SharedLock::configureConnection() \
                                 or mysqllock.dsn): locks here run on a PDO (setConnection()/getConnection()), whose \
                                 session a background thread cannot use";
const PDO_OF_PARENT: &str = "the PDO given to setConnection() belongs to the parent of this forked process; \
                             call setConnection() with a PDO opened in this process, or configureConnection()";
pub(super) const OBJECT_OF_PARENT: &str =
    "this connection belongs to the parent of this forked process, whose locks live in \
                                its session; open a connection in this process";

/// The state of `SharedLock` and `SessionLock` in this thread.
pub struct State {
    /// The process that opened the connections below (see `follow_fork`).
    pub(super) owner: Owner,
    pub(super) settings: Option<OwnConnection>,
    /// Why there are no settings, when it is not simply "not configured".
    pub(super) settings_problem: Option<String>,
    pub(super) table: Table,
    /// An invalid `mysqllock.table`, reported at first use until `setTable()`.
    pub(super) table_problem: Option<String>,
    pub(super) current: Option<PhpLocker>,
    pub(super) retired: Vec<Retired>,
    /// Lockers for `SessionLock`s on connections that are neither current nor retired:
    /// the user's PDOs and mysqlis, and the native connection while `SharedLock` runs on
    /// a PDO.
    pub(super) attached: Vec<Attached>,
    /// The user's objects whose sessions belonged to the parent of this forked process.
    /// Kept alive by the abandoned lockers' references, so no new object takes their
    /// address.
    pub(super) parents: Vec<*const ZendObject>,
}

/// A locker that is no longer current but still holds locks.
pub(super) struct Retired {
    pub(super) locker: PhpLocker,
    /// `getConnection()` was called while it held locks: they live and die with that
    /// PDO's session (SPEC §3), which is checked before each use of them.
    pub(super) follows_pdo: bool,
}

impl State {
    pub(super) fn from_ini() -> State {
        let (mut settings, mut settings_problem, mut dsn_table) = (None, None, None);
        if let Some(url) = ini::get(ini::DSN) {
            match ini::config().map(|base| OwnConnection::from_url(base, &url)) {
                Ok(Ok((s, t))) => (settings, dsn_table) = (Some(s), t),
                Ok(Err(e)) => settings_problem = Some(format!("mysqllock.dsn: {e}")),
                Err(e) => settings_problem = Some(e.to_string()),
            }
        }
        let (table, table_problem) = match (dsn_table, ini::get(ini::TABLE)) {
            (Some(table), _) => (table, None),
            (None, None) => (Table::default(), None),
            (None, Some(name)) => match Table::new(&name, QuoteStyle::Backtick) {
                Ok(table) => (table, None),
                Err(e) => (Table::default(), Some(format!("mysqllock.table: {e}"))),
            },
        };
        State {
            owner: Owner::current(),
            settings,
            settings_problem,
            table,
            table_problem,
            current: None,
            retired: Vec::new(),
            attached: Vec::new(),
            parents: Vec::new(),
        }
    }

    /// In a forked child: abandon every inherited session without closing it.
    pub(super) fn follow_fork(&mut self) {
        if !self.owner.take_over() {
            return;
        }
        let user_pdo =
            self.current.as_ref().is_some_and(|l| l.connector().pdo().is_some() && !l.connector().owns_pdo());
        let retired = self.retired.drain(..).map(|r| r.locker);
        let attached = self.attached.drain(..).map(|a| a.locker);
        for mut locker in self.current.take().into_iter().chain(retired).chain(attached) {
            locker.abandon();
            if let Some(object) = locker.connector().object().and_then(identity) {
                self.parents.push(object);
                locker.connector_mut().protect_parents_session();
                // Our references stay unreleased too: nothing of the parent's session
                // is ever freed here.
                fork::abandon(locker);
            }
        }
        if user_pdo && self.settings.is_none() {
            self.settings_problem = Some(PDO_OF_PARENT.to_owned());
        }
    }

    /// The current locker, created (not yet connected) from the settings if needed.
    pub(super) fn current(&mut self) -> Result<&mut PhpLocker, Error> {
        if self.current.is_none() {
            self.current = Some(self.native_locker()?);
        }
        self.current
            .as_mut()
            .ok_or_else(|| Error::InvalidArgument { what: "connection", reason: NOT_CONFIGURED.to_owned() })
    }

    /// A new locker on the extension's own connection (not yet connected).
    pub(super) fn native_locker(&self) -> Result<PhpLocker, Error> {
        if let Some(problem) = &self.table_problem {
            return Err(Error::InvalidArgument { what: "table", reason: problem.clone() });
        }
        let Some(settings) = &self.settings else {
            let reason = self.settings_problem.clone().unwrap_or_else(|| NOT_CONFIGURED.to_owned());
            return Err(Error::InvalidArgument { what: "connection", reason });
        };
        let connector = PhpConnector { target: Target::Native(Box::new(settings.native(&self.table))) };
        Ok(Locker::new(connector, self.table.clone()))
    }

    /// Acquires on the current locker, unless a retired one holds `name` already. The
    /// core recovers from a dead session and a crashed table itself.
    fn acquire<T>(&mut self, name: &str, op: impl FnOnce(&mut PhpLocker) -> Result<T, Error>) -> Result<T, Error> {
        if self.retired.iter().any(|r| r.locker.holds(name)) {
            return Err(Error::AlreadyHeld { name: name.to_owned(), held_as: name.to_owned() });
        }
        op(self.current()?)
    }

    pub fn lock(&mut self, name: &str, timeout: f64, ttl: f64, options: &AcquireOptions) -> Result<Lease, Error> {
        self.check_keep_alive(options)?;
        self.acquire(name, |l| l.acquire_with(name, timeout, ttl, options))
    }

    pub fn try_lock(&mut self, name: &str, ttl: f64, options: &AcquireOptions) -> Result<Option<Lease>, Error> {
        self.check_keep_alive(options)?;
        match self.acquire(name, |l| l.try_acquire_with(name, ttl, options)) {
            // Held by this very process: as contended as it gets.
            Err(Error::AlreadyHeld { .. }) => Ok(None),
            other => other,
        }
    }

    /// Keep-alive renews from a thread with its own native connection; locks taken on a
    /// PDO session cannot have one. Refused before anything is locked, in PHP's words.
    fn check_keep_alive(&mut self, options: &AcquireOptions) -> Result<(), Error> {
        if options.keep_alive && self.current()?.connector().pdo().is_some() {
            return Err(Error::InvalidArgument {
                what: options::KEEP_ALIVE_OPTION,
                reason: KEEP_ALIVE_ON_PDO.to_owned(),
            });
        }
        Ok(())
    }

    /// The fencing token of a lock this process holds (`None`: the table has no token
    /// column), and the table the lock lives in, for the hint.
    pub fn token(&mut self, name: &str) -> Result<(Option<u64>, String), Error> {
        let locker = self.locker_for(name).ok_or_else(|| never_held(name))?;
        let token = locker.token(name)?;
        Ok((token, locker.table().display_name()))
    }

    /// Extends a held lock to `ttl` seconds from now.
    pub fn renew(&mut self, name: &str, ttl: f64) -> Result<(), Error> {
        self.locker_for(name).map_or_else(|| Err(never_held(name)), |l| l.renew(name, ttl))
    }

    /// Sets a held lock to end `ttl` seconds from now, sooner or later than it would have.
    pub fn set_remaining_ttl(&mut self, name: &str, ttl: f64) -> Result<(), Error> {
        self.locker_for(name).map_or_else(|| Err(never_held(name)), |l| l.set_remaining_ttl(name, ttl))
    }

    pub fn release(&mut self, name: &str) -> Result<(), Error> {
        let result = match self.locker_for(name) {
            Some(locker) => locker.release(name),
            None => Err(never_held(name)),
        };
        self.retired.retain(|r| r.locker.held().next().is_some());
        result
    }

    pub fn assert_ttl(&mut self, name: &str, min_remaining: f64) -> Result<f64, Error> {
        self.locker_for(name).map_or_else(|| Err(never_held(name)), |l| l.assert_ttl(name, min_remaining))
    }

    pub fn remaining_ttl(&mut self, name: &str) -> Result<f64, Error> {
        self.locker_for(name).map_or_else(|| Err(never_held(name)), |l| l.remaining_ttl(name))
    }

    /// The table row of `name` and whether this process holds it.
    pub fn status(&mut self, name: &str) -> Result<(Option<LockStatus>, bool), Error> {
        mysqllock_core::name::validate_shape(name)?;
        let mine =
            self.current.as_ref().is_some_and(|l| l.holds(name)) || self.retired.iter().any(|r| r.locker.holds(name));
        let row = self.current()?.status(Some(name))?.into_iter().next();
        Ok((row, mine))
    }

    /// The locks table on the current session unless it exists (`createTable()`).
    pub fn create_table(&mut self) -> Result<bool, Error> {
        self.current()?.init_table()
    }

    /// `REPAIR TABLE` on the current session (`tryRepairTable()`).
    pub fn repair_table(&mut self) -> Result<(), Error> {
        self.current()?.repair_table()
    }

    /// `configureConnection()`: new settings; every current connection is closed (its
    /// locks released first, so no row outlives them).
    pub fn configure(&mut self, settings: OwnConnection) {
        self.close_all();
        self.settings = Some(settings);
        self.settings_problem = None;
    }

    /// Locks from now on run on `pdo`'s session. One `getConnection()` created also
    /// ties the locks held so far to that session.
    pub fn use_pdo(&mut self, pdo: Zval, origin: PdoOrigin) {
        if self.current.as_ref().is_some_and(|l| runs_on(l, identity(&pdo))) {
            return;
        }
        // A retired locker on this very PDO, or one attached for session locks, becomes
        // current: one session must never have two lockers.
        let object = identity(&pdo);
        let revived = match self.retired.iter().position(|r| runs_on(&r.locker, object)) {
            Some(i) => Some(self.retired.remove(i).locker),
            None => {
                self.attached.iter().position(|a| runs_on(&a.locker, object)).map(|i| self.attached.remove(i).locker)
            }
        };
        if let Some(locker) = self.current.take() {
            if locker.held().next().is_some() {
                self.retired.push(Retired { locker, follows_pdo: false });
            } else {
                close(locker);
            }
        }
        if matches!(origin, PdoOrigin::GetConnection(_)) {
            for retired in &mut self.retired {
                retired.follows_pdo = true;
            }
        }
        self.settings_problem = None;
        self.current = Some(
            revived
                .unwrap_or_else(|| Locker::new(PhpConnector { target: Target::pdo(pdo, origin) }, self.table.clone())),
        );
    }

    /// The PDO locks currently run on, if any.
    pub fn pdo(&self) -> Option<Zval> {
        self.current.as_ref().and_then(|l| l.connector().pdo()).map(Zval::shallow_clone)
    }

    /// DSN, login and TLS settings for `new PDO(...)`.
    pub fn pdo_parameters(&self) -> Result<PdoTarget, Error> {
        let settings = self.settings.as_ref().ok_or_else(|| Error::InvalidArgument {
            what: "connection",
            reason: self.settings_problem.clone().unwrap_or_else(|| NOT_CONFIGURED.to_owned()),
        })?;
        Ok(settings.pdo_target())
    }

    pub fn table(&self) -> &Table {
        &self.table
    }

    /// Changes the table (and quote style) for the current and future sessions; refused
    /// while the current session holds locks in the old one.
    pub fn set_table(&mut self, table: Table) -> Result<(), Error> {
        if let Some(locker) = self.current.as_mut() {
            locker.set_table(table.clone())?;
        }
        self.table = table;
        self.table_problem = None;
        Ok(())
    }

    /// The locker holding `name`, else the current one (which explains why it is not
    /// held). Locks tied to a `getConnection()` PDO are dropped first if its session died.
    fn locker_for(&mut self, name: &str) -> Option<&mut PhpLocker> {
        if let Some(index) = self.retired.iter().position(|r| r.locker.holds(name)) {
            if self.retired[index].follows_pdo && !self.owned_pdo_alive() {
                for retired in self.retired.iter_mut().filter(|r| r.follows_pdo) {
                    retired.locker.disconnect();
                }
            }
            return self.retired.get_mut(index).map(|r| &mut r.locker);
        }
        self.current.as_mut()
    }

    /// Whether the session of a `getConnection()` PDO still lives (one round trip).
    fn owned_pdo_alive(&mut self) -> bool {
        let Some(locker) = self.current.as_mut().filter(|l| l.connector().owns_pdo()) else {
            return true;
        };
        let alive = match locker.session() {
            Ok(session) => session.execute("SELECT 1", &[]).map_err(|e| e.lost),
            Err(e) => Err(matches!(e, Error::ConnectionLost { .. })),
        };
        match alive {
            Err(true) => {
                locker.disconnect();
                false
            }
            _ => true,
        }
    }

    /// Closes the extension's own connections and the lockers of `SharedLock`, releasing
    /// their locks first. Session locks on the user's connections stay.
    fn close_all(&mut self) {
        for locker in self.current.take().into_iter().chain(self.retired.drain(..).map(|r| r.locker)) {
            close(locker);
        }
        let (native, user): (Vec<Attached>, Vec<Attached>) =
            std::mem::take(&mut self.attached).into_iter().partition(|a| a.locker.connector().object().is_none());
        self.attached = user;
        for attached in native {
            close(attached.locker);
        }
    }

    /// The worker's request end ([`end_request`](super::end_request)): every `SharedLock`
    /// and `SessionLock` lock still held is released, on the user's PDOs and mysqlis too,
    /// and the extension's own connections (and a `getConnection()` PDO) are closed, as at
    /// request end. What the worker set up stays: the settings of `configureConnection()`
    /// and php.ini, the table, a PDO given to `setConnection()` (its locks released, the
    /// PDO left open: it is the user's), and the lockers of live `SessionLock` objects on
    /// the user's connections. Returns how many locks were held. Failures are not
    /// reported: a session that fails to release has lost its connection, and the server
    /// freed its GET_LOCKs with it, as at request end.
    pub(super) fn end_request(&mut self) -> usize {
        let lockers = self.current.iter().chain(self.retired.iter().map(|r| &r.locker));
        let held = lockers.chain(self.attached.iter().map(|a| &a.locker)).map(|l| l.held().count()).sum();
        if let Some(mut locker) = self.current.take() {
            if locker.connector().pdo().is_some() && !locker.connector().owns_pdo() {
                let _ = locker.release_all();
                self.current = Some(locker);
            } else {
                close(locker);
            }
        }
        for retired in self.retired.drain(..) {
            close(retired.locker);
        }
        for attached in &mut self.attached {
            let _ = attached.locker.release_all();
        }
        let (native, user): (Vec<Attached>, Vec<Attached>) =
            std::mem::take(&mut self.attached).into_iter().partition(|a| a.locker.connector().object().is_none());
        self.attached = user;
        for attached in native {
            close(attached.locker);
        }
        self.prune();
        held
    }

    /// Request end: closes every connection, the extension's own and (releasing their
    /// session locks first) the lockers attached to the user's PDOs and mysqlis.
    pub(super) fn close_everything(&mut self) {
        self.close_all();
        for attached in std::mem::take(&mut self.attached) {
            close(attached.locker);
        }
    }
}

/// Releases what `locker` holds and closes its session (the extension's own; a user's
/// PDO or mysqli only loses our reference).
pub(super) fn close(mut locker: PhpLocker) {
    // Not `is_connected()`: that is the first session, and leases may live on others.
    if locker.held().next().is_some() {
        // Nothing to report to: a failure here means the session is gone, and the server
        // freed its GET_LOCKs with it (the rows become reclaimable).
        let _ = locker.release_all();
    }
    drop(locker);
}

/// Whether `locker` takes its sessions from the PDO or mysqli `object`.
pub(super) fn runs_on(locker: &PhpLocker, object: Option<*const ZendObject>) -> bool {
    let ours = locker.connector().object().and_then(identity);
    ours.is_some() && ours == object
}

/// An object's identity: its address, compared, never dereferenced. Unique while the
/// object lives, which a locker's reference to it guarantees.
pub(super) fn identity(value: &Zval) -> Option<*const ZendObject> {
    value.object().map(std::ptr::from_ref)
}

fn never_held(name: &str) -> Error {
    Error::NotHeld { name: name.to_owned(), loss: Loss::NeverAcquired }
}
