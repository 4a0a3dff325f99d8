//! What the process (one PHP request at a time) holds: connection settings, the table,
//! and the core `Locker`s with their sessions. Every lock decision (retrying on a fresh
//! session, repairing a crashed table) is the core's; this module only knows which
//! locker a call goes to, and what request end and fork do to them.
//!
//! One `Locker` is current: new locks go there. Switching connections
//! (`setConnection()`, `getConnection()`) retires the current one if it still holds
//! locks, so they stay on the session they were taken on until released; a locker on
//! one session must never be given a second session (the core would take its own
//! locks for stale ones).
//!
//! Lifecycle:
//! - request end: every lock still held is released and every connection closed (the
//!   original's PDO closed at process end too; under PHP-FPM the worker outlives the
//!   request, so it must happen here). PDO objects are released while the engine still
//!   runs, never from a thread-local destructor at process exit.
//! - fork: the child inherits the parent's sockets. It must neither use nor close them
//!   (COM_QUIT would end the parent's session and with it the parent's locks), so the
//!   first call in a child abandons everything and connects anew.

use std::cell::RefCell;

use ext_php_rs::types::Zval;
use mysqllock_core::{AcquireOptions, Error, Lease, LockStatus, Locker, Loss, QuoteStyle, Table};

use crate::connection::{PhpConnector, Settings, Target};
use crate::ini;
use crate::options;
use crate::pdo_session;

type PhpLocker = Locker<PhpConnector>;

const NOT_CONFIGURED: &str = "no connection is configured: call SharedLock::configureConnection() or \
                              SharedLock::setConnection(), or set mysqllock.dsn in php.ini";
const KEEP_ALIVE_ON_PDO: &str = "keep-alive needs the extension's own connection (SharedLock::configureConnection() \
                                 or mysqllock.dsn): locks here run on a PDO (setConnection()/getConnection()), whose \
                                 session a background thread cannot use";
const PDO_OF_PARENT: &str = "the PDO given to setConnection() belongs to the parent of this forked process; \
                             call setConnection() with a PDO opened in this process, or configureConnection()";

thread_local! {
    static STATE: RefCell<Option<State>> = const { RefCell::new(None) };
}

/// Runs `f` on this thread's state, created from php.ini on first use.
///
/// Fails instead of panicking when called re-entrantly: a PDO subclass or an error
/// handler running inside one of our calls may call `SharedLock` again.
pub fn with<T>(f: impl FnOnce(&mut State) -> Result<T, Error>) -> Result<T, Error> {
    STATE.with(|cell| {
        let Ok(mut slot) = cell.try_borrow_mut() else {
            return Err(Error::InvalidArgument {
                what: "call",
                reason: "SharedLock was called from code that SharedLock itself is running (a PDO subclass or an \
                         error handler); call it again afterwards"
                    .to_owned(),
            });
        };
        // The causes kept for the previous operation's exception are stale now.
        pdo_session::clear_causes();
        let state = slot.get_or_insert_with(State::from_ini);
        state.follow_fork();
        f(state)
    })
}

/// Request shutdown: releases what is held, closes connections, drops PDO references.
pub fn request_shutdown() {
    let state = STATE.with(|cell| cell.try_borrow_mut().ok().and_then(|mut slot| slot.take()));
    crate::php::clear_bailout();
    if let Some(mut state) = state {
        state.follow_fork();
        pdo_session::set_shutting_down(true);
        state.close_all();
        pdo_session::set_shutting_down(false);
    }
    pdo_session::clear_causes();
}

/// Module shutdown: the engine is going away, so nothing may touch PHP values any
/// more. Anything left (only if request shutdown never ran) is leaked, not dropped.
pub fn module_shutdown() {
    let state = STATE.with(|cell| cell.try_borrow_mut().ok().and_then(|mut slot| slot.take()));
    std::mem::forget(state);
}

/// The state of this thread.
pub struct State {
    /// The process that opened the connections below (see `follow_fork`).
    pid: u32,
    settings: Option<Settings>,
    /// Why there are no settings, when it is not simply "not configured".
    settings_problem: Option<String>,
    table: Table,
    /// An invalid `mysqllock.table`, reported at first use until `setTable()`.
    table_problem: Option<String>,
    current: Option<PhpLocker>,
    retired: Vec<Retired>,
}

/// A locker that is no longer current but still holds locks.
struct Retired {
    locker: PhpLocker,
    /// `getConnection()` was called while it held locks: they live and die with that
    /// PDO's session (SPEC §3), which is checked before each use of them.
    follows_pdo: bool,
}

impl State {
    fn from_ini() -> State {
        let (mut settings, mut settings_problem, mut dsn_table) = (None, None, None);
        if let Some(url) = ini::get(ini::DSN) {
            match Settings::from_url(&url) {
                Ok((s, t)) => (settings, dsn_table) = (Some(s), t),
                Err(e) => settings_problem = Some(format!("mysqllock.dsn: {e}")),
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
            pid: std::process::id(),
            settings,
            settings_problem,
            table,
            table_problem,
            current: None,
            retired: Vec::new(),
        }
    }

    /// In a forked child: abandon every inherited session without closing it.
    fn follow_fork(&mut self) {
        let pid = std::process::id();
        if pid == self.pid {
            return;
        }
        self.pid = pid;
        let user_pdo =
            self.current.as_ref().is_some_and(|l| l.connector().pdo().is_some() && !l.connector().owns_pdo());
        for mut locker in self.current.take().into_iter().chain(self.retired.drain(..).map(|r| r.locker)) {
            locker.abandon();
            if locker.connector().pdo().is_some() {
                locker.connector_mut().protect_parents_session();
                // Our references stay unreleased too: nothing of the parent's session
                // is ever freed here.
                std::mem::forget(locker);
            }
        }
        if user_pdo && self.settings.is_none() {
            self.settings_problem = Some(PDO_OF_PARENT.to_owned());
        }
    }

    /// The current locker, created (not yet connected) from the settings if needed.
    fn current(&mut self) -> Result<&mut PhpLocker, Error> {
        if self.current.is_none() {
            if let Some(problem) = &self.table_problem {
                return Err(Error::InvalidArgument { what: "table", reason: problem.clone() });
            }
            let Some(settings) = &self.settings else {
                let reason = self.settings_problem.clone().unwrap_or_else(|| NOT_CONFIGURED.to_owned());
                return Err(Error::InvalidArgument { what: "connection", reason });
            };
            let connector = PhpConnector { target: Target::Native(Box::new(settings.native(&self.table))) };
            self.current = Some(Locker::new(connector, self.table.clone()));
        }
        self.current
            .as_mut()
            .ok_or_else(|| Error::InvalidArgument { what: "connection", reason: NOT_CONFIGURED.to_owned() })
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

    /// `REPAIR TABLE` on the current session (`tryRepairTable()`).
    pub fn repair_table(&mut self) -> Result<(), Error> {
        self.current()?.repair_table()
    }

    /// `configureConnection()`: new settings; every current connection is closed (its
    /// locks released first, so no row outlives them).
    pub fn configure(&mut self, settings: Settings) {
        self.close_all();
        self.settings = Some(settings);
        self.settings_problem = None;
    }

    /// Locks from now on run on `pdo`'s session. `owned`: created by `getConnection()`,
    /// which also ties the locks held so far to that session.
    pub fn use_pdo(&mut self, pdo: Zval, owned: bool) {
        if self.current.as_ref().is_some_and(|l| runs_on(l, &pdo)) {
            return;
        }
        // A retired locker on this very PDO becomes current again: one session must
        // never have two lockers.
        let revived = self.retired.iter().position(|r| runs_on(&r.locker, &pdo)).map(|i| self.retired.remove(i).locker);
        if let Some(locker) = self.current.take() {
            if locker.held().next().is_some() {
                self.retired.push(Retired { locker, follows_pdo: false });
            } else {
                close(locker);
            }
        }
        if owned {
            for retired in &mut self.retired {
                retired.follows_pdo = true;
            }
        }
        self.settings_problem = None;
        self.current = Some(
            revived
                .unwrap_or_else(|| Locker::new(PhpConnector { target: Target::pdo(pdo, owned) }, self.table.clone())),
        );
    }

    /// The PDO locks currently run on, if any.
    pub fn pdo(&self) -> Option<Zval> {
        self.current.as_ref().and_then(|l| l.connector().pdo()).map(Zval::shallow_clone)
    }

    /// DSN, user and password for `new PDO(...)`.
    pub fn pdo_parameters(&self) -> Result<(String, String, Option<String>), Error> {
        let settings = self.settings.as_ref().ok_or_else(|| Error::InvalidArgument {
            what: "connection",
            reason: self.settings_problem.clone().unwrap_or_else(|| NOT_CONFIGURED.to_owned()),
        })?;
        Ok((settings.pdo_dsn(), settings.user.clone(), settings.password.clone()))
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

    fn close_all(&mut self) {
        for locker in self.current.take().into_iter().chain(self.retired.drain(..).map(|r| r.locker)) {
            close(locker);
        }
    }
}

/// Releases what `locker` holds and closes its session.
fn close(mut locker: PhpLocker) {
    // Not `is_connected()`: that is the first session, and leases may live on others.
    if locker.held().next().is_some() {
        // Nothing to report to: the connection goes away either way, and the server
        // then frees the GET_LOCKs (the rows become reclaimable).
        let _ = locker.release_all();
    }
    drop(locker);
}

/// Whether `locker` takes its sessions from the PDO object `pdo`.
fn runs_on(locker: &PhpLocker, pdo: &Zval) -> bool {
    let ours = locker.connector().pdo().and_then(Zval::object);
    ours.zip(pdo.object()).is_some_and(|(a, b)| std::ptr::eq(a, b))
}

fn never_held(name: &str) -> Error {
    Error::NotHeld { name: name.to_owned(), loss: Loss::NeverAcquired }
}
