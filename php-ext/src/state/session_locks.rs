//! The lockers of `MySqlLock\SessionLock`s: on the connection of the user's PDO or
//! mysqli (one locker per session, never two), or on the native connection, and how long
//! each is kept (while `SessionLock` objects use it or it holds locks).

use ext_php_rs::types::{ZendObject, Zval};
use mysqllock_core::{Error, Locker};

use super::lockers::{close, identity, runs_on, PhpLocker, State, NOT_CONFIGURED, OBJECT_OF_PARENT};
use crate::connection::{PdoOrigin, PhpConnector, Target};

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
pub(super) struct Attached {
    pub(super) locker: PhpLocker,
    /// The live `SessionLock` objects on its connection. While there are any (or it
    /// holds locks) it stays, with its session's id and prepared statements; then it
    /// goes, and with it the reference that kept the user's connection open.
    pub(super) users: usize,
}

/// Where a locker is kept.
#[derive(Clone, Copy)]
enum Place {
    Current,
    Retired(usize),
    Attached(usize),
}

impl State {
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
    pub(super) fn prune(&mut self) {
        let (keep, gone): (Vec<Attached>, Vec<Attached>) = std::mem::take(&mut self.attached)
            .into_iter()
            .partition(|a| a.locker.connector().object().is_none() || a.users > 0 || a.locker.held().next().is_some());
        self.attached = keep;
        for attached in gone {
            close(attached.locker);
        }
    }
}
