//! Session locks: plain `GET_LOCK`/`RELEASE_LOCK` on a locker's first session, held until
//! released or until the session ends (`Locker::lock_session`, `unlock_session`), and
//! who holds them, for `mysqllock status --session` and any caller that shows them.
//!
//! One lock's holder is always visible: `IS_USED_LOCK` answers for any session. Listing
//! every lock of every client needs the server's help, which is detected, never assumed:
//! MariaDB's `metadata_lock_info` plugin (`information_schema.METADATA_LOCK_INFO`, the
//! lock name in its TABLE_SCHEMA column) or `performance_schema.metadata_locks` (MySQL 8,
//! and MariaDB with the `wait/lock/metadata/sql/mdl` instrument enabled). What the
//! holders' sessions are doing comes from the process list, where the user may see it.

use super::Locker;
use super::{protocol, sql};
use crate::deadline::Deadline;
use crate::error::{Error, SessionError};
use crate::limits;
use crate::name;
use crate::session::{Connector, Session};
use crate::value::{Outcome, Value};
use crate::Loss;
use crate::Result;

/// A session lock and, where the process list shows it, its holder's session.
#[derive(Debug, Clone, PartialEq)]
pub struct Holder {
    /// The name as asked for; in a listing, the GET_LOCK name itself.
    pub name: String,
    /// The GET_LOCK name the lock takes ([`name::session_key`]).
    pub key: String,
    /// `CONNECTION_ID()` of the holding session.
    pub holder: u64,
    pub user: Option<String>,
    /// The holder's client address (`host:port`, or the host alone from
    /// performance_schema).
    pub host: Option<String>,
    /// What the holder's session does now (`Sleep` = idle between statements).
    pub command: Option<String>,
    /// Seconds the holder's session has been in that command.
    pub time: Option<i64>,
}

/// The holder of the session lock `name` now, `None` when it is free.
pub fn holder<C: Connector>(locker: &mut Locker<C>, name: &str) -> Result<Option<Holder>, Error> {
    let key = name::session_key(name)?;
    let Some(holder) = locker.session_lock_holder(name)? else {
        return Ok(None);
    };
    // The holder may end in between: then its session is simply not shown.
    let sql = "SELECT USER, HOST, COMMAND, TIME FROM information_schema.PROCESSLIST WHERE ID = ?";
    let out = query(locker, sql, &[holder.into()])?;
    let session = out.rows.first();
    let text = |i: usize| session.and_then(|row| row[i].as_text());
    Ok(Some(Holder {
        name: name.to_owned(),
        key,
        holder,
        user: text(0),
        host: text(1),
        command: text(2),
        time: session.and_then(|row| row[3].as_i64()),
    }))
}

/// Every session lock on the server, or why the server does not show them.
pub enum Listing {
    Visible(Vec<Holder>),
    /// What is missing and how to provide it, one line.
    Hidden(String),
}

/// The held GET_LOCKs of all sessions, from the plugin, else from performance_schema.
const FROM_PLUGIN: &str = "SELECT m.TABLE_SCHEMA, m.THREAD_ID, p.USER, p.HOST, p.COMMAND, p.TIME \
     FROM information_schema.METADATA_LOCK_INFO m LEFT JOIN information_schema.PROCESSLIST p ON p.ID = m.THREAD_ID \
     WHERE m.LOCK_TYPE = 'User lock' ORDER BY m.TABLE_SCHEMA, m.THREAD_ID";
const FROM_PERFORMANCE_SCHEMA: &str = "SELECT m.OBJECT_NAME, t.PROCESSLIST_ID, t.PROCESSLIST_USER, \
     t.PROCESSLIST_HOST, t.PROCESSLIST_COMMAND, t.PROCESSLIST_TIME \
     FROM performance_schema.metadata_locks m JOIN performance_schema.threads t ON t.THREAD_ID = m.OWNER_THREAD_ID \
     WHERE m.OBJECT_TYPE = 'USER LEVEL LOCK' AND m.LOCK_STATUS = 'GRANTED' ORDER BY m.OBJECT_NAME, t.PROCESSLIST_ID";

/// The performance_schema instrument that records user-level locks.
const MDL_INSTRUMENT: &str = "wait/lock/metadata/sql/mdl";

/// Every session lock of every client, where the server shows them.
pub fn list<C: Connector>(locker: &mut Locker<C>) -> Result<Listing, Error> {
    let probe = "SELECT VERSION(), (SELECT COUNT(*) FROM information_schema.PLUGINS \
                 WHERE PLUGIN_NAME = 'METADATA_LOCK_INFO' AND PLUGIN_STATUS = 'ACTIVE')";
    let out = query(locker, probe, &[])?;
    let mariadb = out.first(0).as_text().is_some_and(|v| v.contains("MariaDB"));
    if out.first(1).as_i64().is_some_and(|n| n > 0) {
        return Ok(Listing::Visible(rows(query(locker, FROM_PLUGIN, &[])?)));
    }
    let performance_schema = match performance_schema(locker, mariadb)? {
        Ok(()) => return Ok(Listing::Visible(rows(query(locker, FROM_PERFORMANCE_SCHEMA, &[])?))),
        Err(why) => why,
    };
    let plugin = if mariadb {
        "information_schema.METADATA_LOCK_INFO is not installed (an administrator can run \
         INSTALL SONAME 'metadata_lock_info' once), and "
    } else {
        ""
    };
    Ok(Listing::Hidden(format!(
        "the session locks of other clients are not visible on this server: {plugin}{performance_schema}; \
         `mysqllock status --session NAME` shows the holder of one lock without them"
    )))
}

/// Whether performance_schema shows user-level locks to this user: `Ok(Err(why not))`
/// when it does not, with what would change that.
fn performance_schema<C: Connector>(locker: &mut Locker<C>, mariadb: bool) -> Result<Result<(), String>, Error> {
    match query(locker, "SELECT @@performance_schema", &[]) {
        Ok(out) if out.first(0).as_i64() == Some(1) => {}
        Ok(_) => {
            // MariaDB leaves the instrument off by default; MySQL 8 has it on.
            let instrument = if mariadb {
                format!(" and performance_schema_instrument='{MDL_INSTRUMENT}=ON'")
            } else {
                String::new()
            };
            return Ok(Err(format!(
                "performance_schema is OFF (start the server with performance_schema=ON{instrument})"
            )));
        }
        // ER_UNKNOWN_SYSTEM_VARIABLE: a server built without it.
        Err(Error::Database { source: SessionError { code: Some(1193), .. }, .. }) => {
            return Ok(Err("the server has no performance_schema".into()))
        }
        Err(e) => return Err(e),
    }
    let sql = "SELECT ENABLED FROM performance_schema.setup_instruments WHERE NAME = ?";
    match query(locker, sql, &[MDL_INSTRUMENT.into()]) {
        Ok(out) if out.first(0).as_text().is_some_and(|e| e.eq_ignore_ascii_case("YES")) => Ok(Ok(())),
        Ok(_) => Ok(Err(format!(
            "performance_schema does not record them (enable the instrument: UPDATE \
             performance_schema.setup_instruments SET ENABLED = 'YES' WHERE NAME = '{MDL_INSTRUMENT}')"
        ))),
        // Access denied to the table: a privilege the user lacks.
        Err(Error::AccessDenied { source: SessionError { code: Some(1142 | 1143), .. }, .. }) => {
            Ok(Err("this user may not read performance_schema (GRANT SELECT ON performance_schema.* to it)".into()))
        }
        Err(e) => Err(e),
    }
}

/// Listing rows: name, holder id, user, host, command, time.
fn rows(out: Outcome) -> Vec<Holder> {
    out.rows
        .iter()
        .map(|row| {
            let key = row[0].as_text().unwrap_or_default();
            Holder {
                name: key.clone(),
                key,
                holder: row[1].as_u64().unwrap_or(0),
                user: row[2].as_text(),
                host: row[3].as_text(),
                command: row[4].as_text(),
                time: row[5].as_i64(),
            }
        })
        .collect()
}

/// The seconds the locker's first session may sit idle before the server ends it: as
/// learned while connecting, else asked.
pub fn wait_timeout(locker: &mut super::NativeLocker) -> Result<Option<f64>, Error> {
    if let Some(known) = locker.session()?.wait_timeout() {
        return Ok(Some(known));
    }
    Ok(query(locker, "SELECT @@session.wait_timeout", &[])?.first(0).as_f64())
}

/// A statement on the locker's first session (the one holding the session locks). Its
/// failures are not about a lock: a lost connection, or a plain database error.
fn query<C: Connector>(locker: &mut Locker<C>, sql: &str, params: &[Value]) -> Result<Outcome, Error> {
    locker.session()?.execute(sql, params).map_err(|source| Error::from_session(source, None))
}

impl<C: Connector> Locker<C> {
    /// Takes the session lock `name`: a plain `GET_LOCK`, no table, no TTL, held until
    /// released or until the session ends (with the process, the request, the
    /// connection: whatever ends first). Waits up to `timeout` seconds (0 = one try,
    /// fractions allowed) and fails with [`Error::Timeout`] if it stays held.
    ///
    /// The GET_LOCK name is [`name::session_key`]`(name)`, so spellings that differ only
    /// in case or accents are one lock. A lock that must not be free again the moment its
    /// holder ends (a job shorter than the clock skew between the nodes that run it) is
    /// a lease with "at least" ([`AcquireOptions::at_least`](super::AcquireOptions::at_least)), not a session lock.
    pub fn lock_session(&mut self, name: &str, timeout: f64) -> Result<()> {
        let timeout = limits::duration("timeout", timeout)?;
        let key = name::session_key(name)?;
        if let Some(held_as) = self.session_lock_as(name).or_else(|| self.leases.contains_key(name).then_some(name)) {
            return Err(Error::AlreadyHeld { name: name.to_owned(), held_as: held_as.to_owned() });
        }
        let hex = sql::hex(&key);
        // GET_LOCK's answer: 1 granted, 0 timed out (waited on), NULL killed or failed.
        let deadline = Deadline::after(timeout);
        let got = self.recovering(|locker| {
            locker.with_db(|db, _| {
                protocol::waiting(db.get_lock_fractions, deadline.left(), |wait| {
                    let wait = Deadline::after(db.session.allowed_wait(wait));
                    let params = [hex.as_str().into(), wait.budget().as_secs_f64().into()];
                    let answer = db.run_waiting(name, sql::SESSION_GET_LOCK, &params, wait)?.first(0).as_i64();
                    Ok((answer != Some(0)).then_some(answer))
                })
            })
        })?;
        match got {
            Some(Some(1)) => {
                self.lost.remove(name);
                self.session_locks.insert(key, name.to_owned());
                Ok(())
            }
            Some(Some(_)) | None => Err(Error::Timeout { name: name.to_owned(), timeout: timeout.as_secs_f64() }),
            // MariaDB answers NULL when the wait was killed (KILL QUERY) or failed.
            Some(None) => Err(Error::Database {
                name: Some(name.to_owned()),
                source: crate::SessionError::client("GET_LOCK returned NULL"),
            }),
        }
    }

    /// Releases the session lock `name` (any spelling with the same key). Fails with
    /// [`Error::NotHeld`] when this locker does not hold it or the server no longer has
    /// it for this session (released behind its back, session lost).
    pub fn unlock_session(&mut self, name: &str) -> Result<()> {
        let key = name::session_key(name)?;
        let Some(held_as) = self.session_locks.remove(&key) else {
            return Err(self.not_held(name));
        };
        let params = [sql::hex(&key).into()];
        match self.with_db(|db, _| db.run(&held_as, sql::SESSION_RELEASE_LOCK, &params)) {
            Ok(out) if out.first(0).as_i64() == Some(1) => Ok(()),
            Ok(_) => Err(Error::NotHeld { name: name.to_owned(), loss: Loss::GetLockGone }),
            // The session ended, and the lock with it.
            Err(e @ Error::ConnectionLost { .. }) => match &e {
                // The server stopped answering: the session was closed, and says why.
                Error::ConnectionLost { source, .. } if source.stalled => Err(e),
                _ => Err(Error::NotHeld { name: name.to_owned(), loss: Loss::SessionLost }),
            },
            Err(e) => {
                // Not known to be released: keep it, so a retry or the end releases it.
                self.session_locks.insert(key, held_as);
                Err(e)
            }
        }
    }

    /// The `CONNECTION_ID()` of the session that holds the session lock `name` on the
    /// server now (any client, not only this locker), `None` when it is free.
    pub fn session_lock_holder(&mut self, name: &str) -> Result<Option<u64>> {
        let params = [sql::hex(&name::session_key(name)?).into()];
        Ok(self.with_db(|db, _| db.run(name, sql::SESSION_HOLDER, &params))?.first(0).as_u64())
    }

    /// Whether this locker's session holds the session lock `name`, asked of the server
    /// (one statement), so a lock lost with its session or released behind the locker's
    /// back reads as not held.
    pub fn holds_session_lock(&mut self, name: &str) -> Result<bool> {
        let key = name::session_key(name)?;
        if !self.session_locks.contains_key(&key) || !self.is_connected() {
            return Ok(false);
        }
        let holder = match self.session_lock_holder(name) {
            Ok(holder) => holder,
            // The session is gone, and every lock it held with it.
            Err(Error::ConnectionLost { .. }) => return Ok(false),
            Err(e) => return Err(e),
        };
        Ok(holder.is_some() && holder == self.pool.first_connection_id())
    }

    /// The spelling under which this locker holds the session lock `name`, if it does.
    pub(super) fn session_lock_as(&self, name: &str) -> Option<&str> {
        let key = name::session_key(name).ok()?;
        self.session_locks.get(&key).map(String::as_str)
    }
}
