//! `Locker`: the locks of one database session, and the bookkeeping around them.

use crate::config::Table;
use crate::error::{classify, Error, Loss, Result};
use crate::lease::{self, Db};
use crate::limits;
use crate::name::{self, Charset};
use crate::session::{Session, Value};
use crate::sql::Sql;
use std::collections::{HashMap, HashSet};

/// Produces the session a [`Locker`] runs on, when it first needs one and again after
/// the previous one was lost.
pub trait Connector {
    type Session: Session;
    fn connect(&mut self) -> Result<Self::Session>;
}

/// A successful TTL-lease acquisition.
#[derive(Debug, Clone, PartialEq)]
pub struct Lease {
    pub name: String,
    /// The TTL in whole seconds, as stored.
    pub ttl: i64,
    /// `CONNECTION_ID()` of the session holding it.
    pub connection_id: u64,
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
}

/// The locks of one MySQL session: TTL leases on the table and plain session locks.
///
/// Not thread-safe by itself (`&mut self` everywhere); wrap it in a mutex to share it.
/// Each `Locker` must have its own session: two lockers on one session would each take
/// the other's locks for stale ones.
pub struct Locker<C: Connector> {
    connector: C,
    session: Option<C::Session>,
    table: Table,
    sql: Sql,
    /// The `name` column's character set, looked up once.
    charset: Option<Charset>,
    leases: HashSet<String>,
    session_locks: HashSet<String>,
    /// Locks that were held when the session was lost: their release/assert reports why.
    lost: HashMap<String, Loss>,
}

impl<C: Connector> Locker<C> {
    /// A locker that connects on first use.
    pub fn new(connector: C, table: Table) -> Self {
        Locker {
            connector,
            session: None,
            sql: Sql::new(&table),
            table,
            charset: None,
            leases: HashSet::new(),
            session_locks: HashSet::new(),
            lost: HashMap::new(),
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
        self.sql = Sql::new(&table);
        self.table = table;
        self.charset = None;
        Ok(())
    }

    pub fn connector(&self) -> &C {
        &self.connector
    }

    pub fn connector_mut(&mut self) -> &mut C {
        &mut self.connector
    }

    /// The current session, connecting if there is none.
    pub fn session(&mut self) -> Result<&mut C::Session> {
        if self.session.is_none() {
            self.session = Some(self.connector.connect()?);
        }
        self.session.as_mut().ok_or_else(|| Error::invalid("session", "not connected"))
    }

    /// Whether a session is open (no statement is run to check).
    pub fn is_connected(&self) -> bool {
        self.session.is_some()
    }

    pub fn connection_id(&mut self) -> Result<u64> {
        Ok(self.session()?.connection_id())
    }

    /// Names held as leases or session locks, as this process sees them.
    pub fn held(&self) -> impl Iterator<Item = &str> {
        self.leases.iter().chain(self.session_locks.iter()).map(String::as_str)
    }

    pub fn holds(&self, name: &str) -> bool {
        self.leases.contains(name) || self.session_locks.contains(name)
    }

    /// Closes the session: every lock on it is lost (the server releases GET_LOCKs, and
    /// lease rows are reclaimed by the next acquirer).
    pub fn disconnect(&mut self) {
        self.forget_locks(Loss::SessionLost);
        self.session = None;
    }

    /// Gives up the session without closing it: for a forked child, whose inherited
    /// connection belongs to the parent (closing it would lose the parent's locks).
    pub fn abandon(&mut self) {
        self.forget_locks(Loss::SessionLost);
        if let Some(s) = self.session.take() {
            std::mem::forget(s);
        }
    }

    fn forget_locks(&mut self, loss: Loss) {
        for n in self.leases.drain().chain(self.session_locks.drain()) {
            self.lost.insert(n, loss);
        }
    }

    /// Runs `f` on a `Db` (and the names held as leases), dropping the session if it
    /// turned out to be lost.
    fn with_db<T>(&mut self, f: impl FnOnce(&mut Db<'_, C::Session>, &HashSet<String>) -> Result<T>) -> Result<T> {
        let Locker { session, connector, sql, table, leases, .. } = self;
        let session = match session {
            Some(session) => session,
            None => session.insert(connector.connect()?),
        };
        let result = f(&mut Db { session, sql, table }, leases);
        if matches!(result, Err(Error::ConnectionLost { .. })) {
            self.disconnect();
        }
        result
    }

    fn check_name(&mut self, name: &str) -> Result<()> {
        name::validate_shape(name)?;
        if self.charset.is_none() {
            let Some(cs) = self.column_charset(name)? else {
                let missing = crate::SessionError::server(
                    1146,
                    format!("table '{}' doesn't exist or is not visible to this user", self.table.display_name()),
                );
                return Err(classify(missing, Some(name), &self.table));
            };
            self.charset = Some(Charset::from_mysql_name(&cs));
        }
        let charset = self.charset.clone().unwrap_or(Charset::Latin1);
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

    /// The character set of the table's `name` column; `None` if the table is missing.
    fn column_charset(&mut self, name: &str) -> Result<Option<String>> {
        let lookup = self.sql.column_charset.clone();
        let mut params: Vec<Value> = Vec::new();
        if let Some(schema) = self.table.schema() {
            params.push(schema.into());
        }
        params.push(self.table.name().into());
        Ok(self.with_db(|db, _| db.run(name, &lookup, &params))?.first(0).as_text())
    }

    /// Acquires the TTL lease `name`, waiting up to `timeout` seconds (0 = one try,
    /// fractions allowed) while another session holds it. The lease lasts `ttl` seconds
    /// (rounded up to whole seconds on the database clock) unless released earlier.
    ///
    /// Fails with [`Error::Timeout`] if it stays held, and at once with
    /// [`Error::AlreadyHeld`] if this session holds it already.
    pub fn acquire(&mut self, name: &str, timeout: f64, ttl: f64) -> Result<Lease> {
        let timeout = limits::duration("timeout", timeout)?;
        let ttl = limits::ttl_seconds(ttl)?;
        self.check_name(name)?;
        if self.holds(name) {
            return Err(Error::AlreadyHeld { name: name.to_owned(), held_as: name.to_owned() });
        }
        self.with_db(|db, leases| lease::acquire(db, name, timeout, ttl, &|n| leases.contains(n)))?;
        self.lost.remove(name);
        self.leases.insert(name.to_owned());
        let connection_id = self.connection_id()?;
        Ok(Lease { name: name.to_owned(), ttl, connection_id })
    }

    /// One try: `Ok(None)` when another session holds the lock.
    pub fn try_acquire(&mut self, name: &str, ttl: f64) -> Result<Option<Lease>> {
        match self.acquire(name, 0.0, ttl) {
            Ok(lease) => Ok(Some(lease)),
            Err(Error::Timeout { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    fn not_held(&mut self, name: &str) -> Error {
        let loss = self.lost.remove(name).unwrap_or(Loss::NeverAcquired);
        Error::NotHeld { name: name.to_owned(), loss }
    }

    /// Releases a lease: deletes its row, then its GET_LOCK (so a woken waiter finds the
    /// row gone). Fails with [`Error::NotHeld`] when the lease was taken over or lost;
    /// the local bookkeeping forgets it either way.
    pub fn release(&mut self, name: &str) -> Result<()> {
        if !self.leases.contains(name) {
            return Err(self.not_held(name));
        }
        let sql = self.sql.clone();
        let result = self.with_db(|db, _| {
            // Row first, so a waiter woken by the GET_LOCK finds it gone. If the DELETE
            // fails the lease is still whole (row and GET_LOCK): the caller may retry.
            let deleted = db.run(name, &sql.delete_own, &[name.into()])?.affected_rows;
            Ok((deleted, db.release_get_lock(name)))
        });
        let (deleted, released) = match result {
            Ok(r) => r,
            Err(Error::ConnectionLost { .. }) => {
                self.leases.remove(name);
                return Err(self.not_held(name));
            }
            Err(e) => return Err(e),
        };
        self.leases.remove(name);
        match (deleted, released) {
            (1, Ok(_)) => Ok(()),
            (_, Err(Error::ConnectionLost { .. })) => Err(self.not_held(name)),
            (_, Err(e)) => Err(e),
            (_, Ok(_)) => Err(Error::NotHeld { name: name.to_owned(), loss: Loss::RowGone }),
        }
    }

    /// Seconds of the lease left (database clock), counted safely: another session can
    /// take it over no earlier than this, and at most a second later.
    pub fn remaining_ttl(&mut self, name: &str) -> Result<f64> {
        if !self.leases.contains(name) {
            return Err(self.not_held(name));
        }
        let sql = self.sql.remaining.clone();
        let result = self.with_db(|db, _| db.run(name, &sql, &[name.into()]));
        let out = match result {
            Ok(out) => out,
            Err(Error::ConnectionLost { .. }) => return Err(self.not_held(name)),
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

    /// Plain session lock (seeds 000/002): GET_LOCK only, no table, no TTL. Lives until
    /// released or until the session ends.
    pub fn lock_session(&mut self, name: &str, timeout: f64) -> Result<()> {
        let timeout = limits::duration("timeout", timeout)?;
        name::validate_shape(name)?;
        if self.holds(name) {
            return Err(Error::AlreadyHeld { name: name.to_owned(), held_as: name.to_owned() });
        }
        let sql = self.sql.wait_get_lock.clone();
        let got = self.with_db(|db, _| db.run(name, &sql, &[name.into(), timeout.as_secs_f64().into()]))?;
        match got.first(0) {
            Value::Null => Err(Error::Database {
                name: Some(name.to_owned()),
                source: crate::SessionError { code: None, message: "GET_LOCK returned NULL".into(), lost: false },
            }),
            v if v.as_i64() == Some(1) => {
                self.lost.remove(name);
                self.session_locks.insert(name.to_owned());
                Ok(())
            }
            _ => Err(Error::Timeout { name: name.to_owned(), timeout: timeout.as_secs_f64() }),
        }
    }

    pub fn unlock_session(&mut self, name: &str) -> Result<()> {
        if !self.session_locks.contains(name) {
            return Err(self.not_held(name));
        }
        let result = self.with_db(|db, _| db.release_get_lock(name));
        self.session_locks.remove(name);
        match result {
            Ok(true) => Ok(()),
            Ok(false) => Err(Error::NotHeld { name: name.to_owned(), loss: Loss::GetLockGone }),
            Err(Error::ConnectionLost { .. }) => Err(self.not_held(name)),
            Err(e) => Err(e),
        }
    }

    /// Releases everything this session holds (request end, process exit). Returns the
    /// failures; a lock that was already lost is not one.
    pub fn release_all(&mut self) -> Vec<Error> {
        let mut errors = Vec::new();
        let leases: Vec<String> = self.leases.iter().cloned().collect();
        for n in leases {
            match self.release(&n) {
                Ok(()) | Err(Error::NotHeld { .. }) => {}
                Err(e) => errors.push(e),
            }
        }
        let locks: Vec<String> = self.session_locks.iter().cloned().collect();
        for n in locks {
            match self.unlock_session(&n) {
                Ok(()) | Err(Error::NotHeld { .. }) => {}
                Err(e) => errors.push(e),
            }
        }
        self.lost.clear();
        errors
    }

    /// The table's rows (all, or the one for `name`), for introspection.
    pub fn status(&mut self, name: Option<&str>) -> Result<Vec<LockStatus>> {
        let (sql, params): (String, Vec<Value>) = match name {
            Some(n) => (self.sql.status_one.clone(), vec![n.into()]),
            None => (self.sql.status_all.clone(), vec![]),
        };
        let out = self.with_db(|db, _| db.run(name.unwrap_or(""), &sql, &params))?;
        Ok(out
            .rows
            .iter()
            .map(|r| {
                let connection_id = r[1].as_u64().unwrap_or(0);
                LockStatus {
                    name: r[0].as_text().unwrap_or_default(),
                    connection_id,
                    created: r[2].as_i64().unwrap_or(0),
                    ttl: r[3].as_i64().unwrap_or(0),
                    acquired: r[4].as_i64().unwrap_or(0) != 0,
                    remaining: r[5].as_f64().unwrap_or(0.0),
                    age: r[6].as_f64().unwrap_or(0.0),
                    holder_alive: r[7].as_u64() == Some(connection_id),
                    host: r[8].as_text(),
                }
            })
            .collect())
    }

    /// Creates the table with the original package's SQL if it does not exist.
    /// Returns whether it was created.
    pub fn init_table(&mut self) -> Result<bool> {
        let exists = self.column_charset("")?.is_some();
        if !exists {
            let create = self.sql.create.clone();
            self.with_db(|db, _| db.run("", &create, &[]))?;
        }
        Ok(!exists)
    }
}
