//! What the thread (one PHP request at a time) holds, in one place with one lifecycle:
//! the connection settings, table and core `Locker`s of `SharedLock` and `SessionLock`
//! ([`State`]), and the state of every `Nene\Kit\DistributedLock` object
//! ([`LeaseObject`], by the object's handle). Every lock decision (retrying on a fresh
//! session, repairing a crashed table) is the core's; this module only knows which
//! locker or object a call goes to, and what request end and fork do to them.
//!
//! The two live in separate cells of one thread-local, each borrowed only by calls of
//! its own kind: PHP code running inside a call (a PDO subclass, an error handler) may
//! use the other kind. A `SharedLock`/`SessionLock` call holds its cell throughout, so
//! such code calling them again is refused ([`with`]); a `DistributedLock` call takes its
//! object out of the map for as long as it runs ([`with_lease`]), so only that object
//! refuses. `State` is made from php.ini at the first `SharedLock`/`SessionLock` call,
//! not before (`ini_set()` up to then counts); a `DistributedLock` never makes it and
//! reads `mysqllock.dsn` in its constructor.
//!
//! One `Locker` is current: new `SharedLock` locks go there. Switching connections
//! (`setConnection()`, `getConnection()`) retires the current one if it still holds
//! locks, so they stay on the session they were taken on until released. A
//! `SessionLock` on a PDO or mysqli of the user's runs on the locker of that object's
//! session: the current or a retired one if `SharedLock` uses it too, else one attached
//! for session locks. A locker on one session must never be given a second session, and
//! one session must never have two lockers (GET_LOCK is re-entrant, so two lockers on one
//! session could both take the same lock).
//!
//! Lifecycle:
//! - request end: every `SharedLock` and `SessionLock` lock still held is released and
//!   every connection closed (the original's PDO closed at process end too; under
//!   PHP-FPM the worker outlives the request, so it must happen here). That includes
//!   session locks on the user's own PDOs and mysqlis, which may be persistent and
//!   outlive the request. What `DistributedLock` destructors left (after a fatal error
//!   they do not run) is dropped, its sessions closed but its leases kept: they are owner
//!   strings with a TTL, which may outlive the request on purpose, as with the original
//!   class. PHP objects are released while the engine still runs, never from a
//!   thread-local destructor at process exit.
//! - fork: the child inherits the parent's sockets. It must neither use nor close them
//!   (COM_QUIT would end the parent's session and with it the parent's locks), nor free
//!   what was prepared on them. The first `SharedLock`/`SessionLock` call in a child
//!   abandons every inherited locker and connects anew; the user's objects whose sessions
//!   held the parent's locks are refused from then on. Each `DistributedLock` object
//!   does the same at its own first call in the child (`LeaseObject::follow_fork`), and
//!   one the child never calls is abandoned, not closed, at its end.

use std::cell::RefCell;
use std::collections::HashMap;

use ext_php_rs::types::{ZendObject, Zval};
use mysqllock_core::fork::{self, Owner};
use mysqllock_core::{AcquireOptions, Error, Lease, LockStatus, Locker, Loss, QuoteStyle, Table};

use crate::connection::{OwnConnection, PdoOrigin, PdoTarget, PhpConnector, Target};
use crate::driver;
use crate::ini;
use crate::lease_object::LeaseObject;
use crate::options;

type PhpLocker = Locker<PhpConnector>;

const NOT_CONFIGURED: &str = "no connection is configured: call SharedLock::configureConnection() or \
                              SharedLock::setConnection(), or set mysqllock.dsn in php.ini";
const KEEP_ALIVE_ON_PDO: &str = "keep-alive needs the extension's own connection (SharedLock::configureConnection() \
                                 or mysqllock.dsn): locks here run on a PDO (setConnection()/getConnection()), whose \
                                 session a background thread cannot use";
const PDO_OF_PARENT: &str = "the PDO given to setConnection() belongs to the parent of this forked process; \
                             call setConnection() with a PDO opened in this process, or configureConnection()";
const OBJECT_OF_PARENT: &str = "this connection belongs to the parent of this forked process, whose locks live in \
                                its session; open a connection in this process";

thread_local! {
    static THREAD: Thread = Thread::default();
}

/// What this thread holds (see the module documentation).
#[derive(Default)]
struct Thread {
    /// `SharedLock`'s and `SessionLock`'s, made at their first call.
    state: RefCell<Option<State>>,
    leases: RefCell<Leases>,
}

/// The live `DistributedLock` objects, by the number in their private `handle` property.
struct Leases {
    objects: HashMap<i64, LeaseObject>,
    /// The next object's handle: never reused, not even by a later request.
    next: i64,
}

impl Default for Leases {
    fn default() -> Leases {
        Leases { objects: HashMap::new(), next: 1 }
    }
}

/// Runs `f` on this thread's state, created from php.ini on first use.
///
/// Fails instead of panicking when called re-entrantly: a PDO subclass or an error
/// handler running inside one of our calls may call `SharedLock` again.
pub fn with<T>(f: impl FnOnce(&mut State) -> Result<T, Error>) -> Result<T, Error> {
    THREAD.with(|thread| {
        let Ok(mut slot) = thread.state.try_borrow_mut() else {
            return Err(reentered());
        };
        // The causes kept for the previous operation's exception are stale now.
        driver::clear_causes();
        let state = slot.get_or_insert_with(State::from_ini);
        state.follow_fork();
        f(state)
    })
}

/// The refusal of a call made from code the extension is running itself.
fn reentered() -> Error {
    Error::InvalidArgument {
        what: "call",
        reason: "the extension was called from code that it is running itself (a PDO or mysqli subclass, \
                 an error handler); call it again afterwards"
            .to_owned(),
    }
}

/// `MySqlLock\end_request()`: what request end does to `SharedLock` and `SessionLock`,
/// for a worker that serves many requests in one PHP request (FrankenPHP's worker mode,
/// RoadRunner, Swoole, Octane), where request end never comes between them. Returns how
/// many locks were still held (all of them released now). See [`State::end_request`].
pub fn end_request() -> Result<usize, Error> {
    THREAD.with(|thread| {
        let Ok(mut slot) = thread.state.try_borrow_mut() else {
            return Err(reentered());
        };
        driver::clear_causes();
        let Some(state) = slot.as_mut() else {
            return Ok(0);
        };
        state.follow_fork();
        let held = state.end_request();
        // What the releases' failures left as causes belongs to no exception.
        driver::clear_causes();
        Ok(held)
    })
}

/// Runs `f` on this thread's state if there is one, never creating it: for destructors,
/// which may also run after request shutdown took the state.
pub fn with_existing(f: impl FnOnce(&mut State)) {
    THREAD.with(|thread| {
        if let Some(state) = thread.state.try_borrow_mut().ok().as_deref_mut().and_then(Option::as_mut) {
            state.follow_fork();
            f(state);
        }
    });
}

/// Keeps `object` for a new `DistributedLock` object; returns its handle.
pub fn add_lease(object: LeaseObject) -> i64 {
    THREAD.with(|thread| {
        let mut leases = thread.leases.borrow_mut();
        let handle = leases.next;
        leases.next += 1;
        leases.objects.insert(handle, object);
        handle
    })
}

/// Runs `f` on the object of `handle`, taken out of the map meanwhile so that PHP code
/// running inside (a PDO subclass, an error handler) can use other objects, and
/// `SharedLock`. `None`: there is no such object, or it is the one whose call is
/// running.
pub fn with_lease<T>(handle: i64, f: impl FnOnce(&mut LeaseObject) -> T) -> Option<T> {
    let mut object = take_lease(handle)?;
    // Causes kept for an earlier call's exception are stale now.
    driver::clear_causes();
    object.follow_fork();
    let result = f(&mut object);
    let displaced = THREAD.with(|thread| thread.leases.borrow_mut().objects.insert(handle, object));
    drop(displaced);
    Some(result)
}

/// A copy of the object of `handle`, on a session of its own (`clone`).
pub fn copy_lease(handle: i64) -> Option<LeaseObject> {
    THREAD.with(|thread| thread.leases.borrow().objects.get(&handle).map(LeaseObject::duplicate))
}

/// Takes the object of `handle` out of the map (a destructor, a second constructor).
pub fn take_lease(handle: i64) -> Option<LeaseObject> {
    THREAD.with(|thread| thread.leases.try_borrow_mut().ok().and_then(|mut leases| leases.objects.remove(&handle)))
}

/// Request shutdown: releases what `SharedLock` and `SessionLock` hold (session locks on
/// the user's connections too), closes connections, drops references to PHP objects;
/// then drops what `DistributedLock` destructors left (their leases stay).
pub fn request_shutdown() {
    let state = THREAD.with(|thread| thread.state.try_borrow_mut().ok().and_then(|mut slot| slot.take()));
    crate::php::clear_bailout();
    if let Some(mut state) = state {
        state.follow_fork();
        driver::set_shutting_down(true);
        state.close_all();
        for attached in std::mem::take(&mut state.attached) {
            close(attached.locker);
        }
        driver::set_shutting_down(false);
    }
    driver::clear_causes();
    for object in take_leases().into_values() {
        object.close();
    }
}

/// Module shutdown: the engine is going away, so nothing may touch PHP values any
/// more. Anything left (only if request shutdown never ran) is leaked, not dropped.
pub fn module_shutdown() {
    let state = THREAD.with(|thread| thread.state.try_borrow_mut().ok().and_then(|mut slot| slot.take()));
    std::mem::forget(state);
    std::mem::forget(take_leases());
}

/// Every `DistributedLock` object's state; the handles go on counting.
fn take_leases() -> HashMap<i64, LeaseObject> {
    THREAD.with(|thread| {
        thread.leases.try_borrow_mut().map(|mut leases| std::mem::take(&mut leases.objects)).unwrap_or_default()
    })
}

/// The state of `SharedLock` and `SessionLock` in this thread.
pub struct State {
    /// The process that opened the connections below (see `follow_fork`).
    owner: Owner,
    settings: Option<OwnConnection>,
    /// Why there are no settings, when it is not simply "not configured".
    settings_problem: Option<String>,
    table: Table,
    /// An invalid `mysqllock.table`, reported at first use until `setTable()`.
    table_problem: Option<String>,
    current: Option<PhpLocker>,
    retired: Vec<Retired>,
    /// Lockers for `SessionLock`s on connections that are neither current nor retired:
    /// the user's PDOs and mysqlis, and the native connection while `SharedLock` runs on
    /// a PDO.
    attached: Vec<Attached>,
    /// The user's objects whose sessions belonged to the parent of this forked process.
    /// Kept alive by the abandoned lockers' references, so no new object takes their
    /// address.
    parents: Vec<*const ZendObject>,
}

/// The connection of a `SessionLock`.
#[derive(Clone, Copy)]
pub enum Conn<'a> {
    /// The extension's own connection, with `SharedLock`'s settings (and its locker,
    /// when that is on the native connection too).
    Native,
    Pdo(&'a Zval),
    Mysqli(&'a Zval),
}

impl Conn<'_> {
    /// The object's identity (its address, never dereferenced).
    fn object(self) -> Option<*const ZendObject> {
        match self {
            Conn::Native => None,
            Conn::Pdo(z) | Conn::Mysqli(z) => identity(z),
        }
    }
}

/// A locker for session locks only.
struct Attached {
    locker: PhpLocker,
    /// The live `SessionLock` objects on its connection. While there are any (or it
    /// holds locks) it stays, with its session's id and prepared statements; then it
    /// goes, and with it the reference that kept the user's connection open.
    users: usize,
}

/// Where a locker is kept.
#[derive(Clone, Copy)]
enum Place {
    Current,
    Retired(usize),
    Attached(usize),
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
    fn follow_fork(&mut self) {
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
    fn current(&mut self) -> Result<&mut PhpLocker, Error> {
        if self.current.is_none() {
            self.current = Some(self.native_locker()?);
        }
        self.current
            .as_mut()
            .ok_or_else(|| Error::InvalidArgument { what: "connection", reason: NOT_CONFIGURED.to_owned() })
    }

    /// A new locker on the extension's own connection (not yet connected).
    fn native_locker(&self) -> Result<PhpLocker, Error> {
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

    /// The worker's request end ([`end_request`]): every `SharedLock` and `SessionLock`
    /// lock still held is released, on the user's PDOs and mysqlis too, and the
    /// extension's own connections (and a `getConnection()` PDO) are closed, as at
    /// request end. What the worker set up stays: the settings of
    /// `configureConnection()` and php.ini, the table, a PDO given to `setConnection()`
    /// (its locks released, the PDO left open: it is the user's), and the lockers of
    /// live `SessionLock` objects on the user's connections. Returns how many locks were
    /// held. Failures are not reported: a session that fails to release has lost its
    /// connection, and the server freed its GET_LOCKs with it, as at request end.
    fn end_request(&mut self) -> usize {
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

    // -----------------------------------------------------------------------------
    // Session locks (`SessionLock`)

    /// A `SessionLock` on `conn` was created.
    pub fn attach(&mut self, conn: Conn<'_>) -> Result<(), Error> {
        if conn.object().is_none() {
            return Ok(());
        }
        // Current or retired: `SharedLock` runs on it too, and keeps it while it does.
        if let Place::Attached(i) = self.place_of(conn)? {
            if let Some(attached) = self.attached.get_mut(i) {
                attached.users += 1;
            }
        }
        Ok(())
    }

    /// A `SessionLock` on `conn` was destroyed. Its locks stay (they belong to the
    /// session); the locker goes once nothing uses it.
    pub fn detach(&mut self, conn: Conn<'_>) {
        let object = conn.object();
        if let Some(attached) = self.attached.iter_mut().find(|a| runs_on(&a.locker, object)) {
            attached.users = attached.users.saturating_sub(1);
        }
        self.prune();
    }

    /// Takes the session lock `name` on `conn`'s session (see `Locker::lock_session`).
    pub fn lock_session(&mut self, conn: Conn<'_>, name: &str, timeout: f64) -> Result<(), Error> {
        let place = self.session_place(conn, name)?;
        self.at(place)?.lock_session(name, timeout)
    }

    pub fn unlock_session(&mut self, conn: Conn<'_>, name: &str) -> Result<(), Error> {
        let place = self.session_place(conn, name)?;
        let result = self.at(place)?.unlock_session(name);
        self.retired.retain(|r| r.locker.held().next().is_some());
        self.prune();
        result
    }

    /// Whether `conn`'s session holds the session lock `name` (asked of the server). A
    /// session found dead holds nothing: the server released its locks.
    pub fn holds_session_lock(&mut self, conn: Conn<'_>, name: &str) -> Result<bool, Error> {
        let place = self.session_place(conn, name)?;
        let held = match self.at(place)?.holds_session_lock(name) {
            Err(Error::ConnectionLost { .. }) => Ok(false),
            other => other,
        };
        self.prune();
        held
    }

    /// The connection id of the session holding the session lock `name` (any client).
    pub fn session_lock_holder(&mut self, conn: Conn<'_>, name: &str) -> Result<Option<u64>, Error> {
        let place = self.session_place(conn, name)?;
        self.at(place)?.session_lock_holder(name)
    }

    /// The locker for session lock `name` on `conn`. On the native connection: the one
    /// that holds `name`, else the current locker when it is native (or none is set up
    /// yet), else the attached native one.
    fn session_place(&mut self, conn: Conn<'_>, name: &str) -> Result<Place, Error> {
        if conn.object().is_some() {
            return self.place_of(conn);
        }
        if let Some(place) = self.find(|l| l.connector().object().is_none() && l.holds(name)) {
            return Ok(place);
        }
        if self.current.as_ref().is_none_or(|l| l.connector().object().is_none()) {
            self.current()?;
            return Ok(Place::Current);
        }
        if let Some(i) = self.attached.iter().position(|a| a.locker.connector().object().is_none()) {
            return Ok(Place::Attached(i));
        }
        let locker = self.native_locker()?;
        self.attached.push(Attached { locker, users: 0 });
        Ok(Place::Attached(self.attached.len() - 1))
    }

    /// The locker on the session of `conn`'s object, attached anew if there is none.
    fn place_of(&mut self, conn: Conn<'_>) -> Result<Place, Error> {
        let object = conn.object();
        if object.is_some_and(|o| self.parents.contains(&o)) {
            return Err(Error::InvalidArgument { what: "connection", reason: OBJECT_OF_PARENT.to_owned() });
        }
        if let Some(place) = self.find(|l| runs_on(l, object)) {
            return Ok(place);
        }
        let target = match conn {
            Conn::Pdo(pdo) => Target::pdo(pdo.shallow_clone(), PdoOrigin::User),
            Conn::Mysqli(mysqli) => Target::mysqli(mysqli.shallow_clone()),
            Conn::Native => return Err(Error::InvalidArgument { what: "connection", reason: "not an object".into() }),
        };
        let locker = Locker::new(PhpConnector { target }, self.table.clone());
        self.attached.push(Attached { locker, users: 0 });
        Ok(Place::Attached(self.attached.len() - 1))
    }

    fn find(&self, wanted: impl Fn(&PhpLocker) -> bool) -> Option<Place> {
        if self.current.as_ref().is_some_and(&wanted) {
            return Some(Place::Current);
        }
        if let Some(i) = self.retired.iter().position(|r| wanted(&r.locker)) {
            return Some(Place::Retired(i));
        }
        self.attached.iter().position(|a| wanted(&a.locker)).map(Place::Attached)
    }

    fn at(&mut self, place: Place) -> Result<&mut PhpLocker, Error> {
        let locker = match place {
            Place::Current => self.current.as_mut(),
            Place::Retired(i) => self.retired.get_mut(i).map(|r| &mut r.locker),
            Place::Attached(i) => self.attached.get_mut(i).map(|a| &mut a.locker),
        };
        locker.ok_or_else(|| Error::InvalidArgument { what: "connection", reason: NOT_CONFIGURED.to_owned() })
    }

    /// Drops attached lockers of the user's connections that nothing uses any more.
    fn prune(&mut self) {
        let (keep, gone): (Vec<Attached>, Vec<Attached>) = std::mem::take(&mut self.attached)
            .into_iter()
            .partition(|a| a.locker.connector().object().is_none() || a.users > 0 || a.locker.held().next().is_some());
        self.attached = keep;
        for attached in gone {
            close(attached.locker);
        }
    }
}

/// Releases what `locker` holds and closes its session (the extension's own; a user's
/// PDO or mysqli only loses our reference).
fn close(mut locker: PhpLocker) {
    // Not `is_connected()`: that is the first session, and leases may live on others.
    if locker.held().next().is_some() {
        // Nothing to report to: a failure here means the session is gone, and the server
        // freed its GET_LOCKs with it (the rows become reclaimable).
        let _ = locker.release_all();
    }
    drop(locker);
}

/// Whether `locker` takes its sessions from the PDO or mysqli `object`.
fn runs_on(locker: &PhpLocker, object: Option<*const ZendObject>) -> bool {
    let ours = locker.connector().object().and_then(identity);
    ours.is_some() && ours == object
}

/// An object's identity: its address, compared, never dereferenced. Unique while the
/// object lives, which a locker's reference to it guarantees.
fn identity(value: &Zval) -> Option<*const ZendObject> {
    value.object().map(std::ptr::from_ref)
}

fn never_held(name: &str) -> Error {
    Error::NotHeld { name: name.to_owned(), loss: Loss::NeverAcquired }
}
