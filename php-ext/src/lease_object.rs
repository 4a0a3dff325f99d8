//! What one `Nene\Kit\DistributedLock` object holds: its core `DistributedLock` (lease
//! mode) on a `PhpConnector`, and the lease its last successful `acquire()`/`renew()`
//! granted (`getToken()`, `getRemaining()`). `state` keeps these by the object's handle;
//! `distributed` converts arguments and calls them. Every lease decision is the core's.

use ext_php_rs::types::ZendObject;
use mysqllock_core::fork::{self, Owner};
use mysqllock_core::{Dialect, DistributedLock, Error, Grant, Table};

use crate::connection::PhpConnector;
use crate::php::{self, Noise};

pub type Core = DistributedLock<PhpConnector>;

/// The lease a successful `acquire()`/`renew()` of this object granted last.
#[derive(Clone)]
struct Held {
    resource: String,
    owner: String,
    grant: Grant,
}

/// One PHP object's state.
pub struct LeaseObject {
    /// The process that made `lock`'s session (see [`LeaseObject::follow_fork`]).
    owner: Owner,
    dialect: Dialect,
    lock: Core,
    held: Option<Held>,
}

impl LeaseObject {
    pub fn new(connector: PhpConnector, table: Table, dialect: Dialect) -> LeaseObject {
        LeaseObject {
            owner: Owner::current(),
            dialect,
            lock: DistributedLock::new(connector, table, dialect),
            held: None,
        }
    }

    /// A copy on a session of its own (`clone $lock`).
    pub fn duplicate(&self) -> LeaseObject {
        let mut copy = LeaseObject::new(self.lock.connector().fresh(), self.lock.table().clone(), self.dialect);
        copy.held = self.held.clone();
        copy
    }

    /// In a forked child: leave the parent's session and statements alone, start anew.
    pub fn follow_fork(&mut self) {
        if !self.owner.take_over() {
            return;
        }
        let fresh = DistributedLock::new(self.lock.connector().fresh(), self.lock.table().clone(), self.dialect);
        abandon(std::mem::replace(&mut self.lock, fresh));
    }

    /// Drops the state; in a child of the process that made it, abandons it instead.
    pub fn close(self) {
        if self.owner.is_current() {
            drop(self);
        } else {
            abandon(self.lock);
        }
    }

    /// The core lock, for the calls that change nothing this object remembers (reads,
    /// the table's creation and upgrade).
    pub fn lock(&mut self) -> &mut Core {
        &mut self.lock
    }

    /// `acquire()`: waits up to `wait` seconds (0: one try).
    pub fn acquire(&mut self, resource: &str, owner: &str, ttl: f64, wait: f64) -> Result<bool, Error> {
        let grant = self.keeping_insert_id(|lock| lock.acquire_waiting(resource, owner, ttl, wait))?;
        self.record(resource, owner, grant);
        Ok(grant.is_some())
    }

    pub fn renew(&mut self, resource: &str, owner: &str, ttl: f64) -> Result<bool, Error> {
        let grant = self.keeping_insert_id(|lock| lock.renew(resource, owner, ttl))?;
        self.record(resource, owner, grant);
        Ok(grant.is_some())
    }

    pub fn release(&mut self, resource: &str, owner: &str) -> Result<bool, Error> {
        let released = self.lock.release(resource, owner)?;
        self.forget(resource, owner);
        Ok(released)
    }

    /// `forceRelease()`: ends the live lease of `resource` whoever holds it.
    pub fn force_release(&mut self, resource: &str) -> Result<bool, Error> {
        let ended = self.lock.force_release(resource)?;
        if self.held.as_ref().is_some_and(|h| h.resource == resource) {
            self.held = None;
        }
        Ok(ended)
    }

    /// `forceReleaseWithPrefix()`: ends every live lease whose name begins with `prefix`.
    pub fn force_release_with_prefix(&mut self, prefix: &str) -> Result<u64, Error> {
        let ended = self.lock.force_release_with_prefix(prefix)?;
        if self.held.as_ref().is_some_and(|h| h.resource.starts_with(prefix)) {
            self.held = None;
        }
        Ok(ended)
    }

    /// The fencing token of the current lease (upgraded table only).
    pub fn token(&self) -> Option<u64> {
        self.held.as_ref().and_then(|h| h.grant.token)
    }

    /// Seconds until the current lease's local deadline; 0 without one.
    pub fn remaining(&self) -> f64 {
        self.held.as_ref().map_or(0.0, |h| h.grant.remaining().as_secs_f64())
    }

    /// Remembers what `acquire()`/`renew()` answered for `resource` and `owner`: a grant
    /// becomes the current lease; a refusal ends the current lease if it was that one.
    fn record(&mut self, resource: &str, owner: &str, grant: Option<Grant>) {
        match grant {
            Some(grant) => self.held = Some(Held { resource: resource.to_owned(), owner: owner.to_owned(), grant }),
            None => self.forget(resource, owner),
        }
    }

    fn forget(&mut self, resource: &str, owner: &str) {
        if self.held.as_ref().is_some_and(|h| h.resource == resource && h.owner == owner) {
            self.held = None;
        }
    }

    /// Runs `f` (an acquire or a renew) and then, on a user's MySQL PDO whose
    /// `lastInsertId()` its statements changed, sets it back to what it was before: they
    /// report their verdict (or the fencing token) through `LAST_INSERT_ID(expr)`, which
    /// would otherwise pass for the application's own last insert id. That costs one more
    /// statement, without a commit, only when the id changed. A PDO that `$reconnect`
    /// returned during the call is given a fresh connection's 0, never the lost one's id.
    /// A failure to give it back leaves it as the statements left it and does not turn
    /// the call's outcome into an error; a lost session cannot take the statement at all.
    fn keeping_insert_id<T>(&mut self, f: impl FnOnce(&mut Core) -> Result<T, Error>) -> Result<T, Error> {
        let before = self.insert_id();
        let result = f(&mut self.lock);
        let lost = matches!(&result, Err(e) if e.is_connection());
        if let (Some(_), false) = (before, lost) {
            if let Some((now, pdo)) = self.insert_id() {
                let own = before.filter(|(_, was)| *was == pdo).map_or(0, |(id, _)| id);
                if now != own {
                    let _ = self.lock.give_back_insert_id(own);
                }
            }
        }
        result
    }

    /// `lastInsertId()` of the user's MySQL PDO, with the PDO's identity (its address,
    /// never dereferenced); `None` on the extension's own connection and on SQLite.
    fn insert_id(&self) -> Option<(u64, *const ZendObject)> {
        let pdo = self.lock.connector().pdo()?;
        if self.dialect != Dialect::MySql {
            return None;
        }
        let identity: *const ZendObject = pdo.object()?;
        let id = php::call_method(pdo, "lastInsertId", vec![], Noise::Quiet).ok()?;
        id.str().and_then(|s| s.parse().ok()).map(|id| (id, identity))
    }
}

/// Never closes or frees what a core lock inherited from a parent process: its native
/// socket (no COM_QUIT) and its prepared PDO statements (no COM_STMT_CLOSE).
fn abandon(mut lock: Core) {
    lock.connector_mut().protect_parents_session();
    fork::abandon(lock);
}
