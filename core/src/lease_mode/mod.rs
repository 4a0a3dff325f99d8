//! The lease mode: table-only leases with owner strings (`Nene\Kit\DistributedLock`'s
//! `distributed_locks` table), safe on replicated clusters.
//!
//! No GET_LOCK, no KILL, no connection ids: everything a Galera node or a Group
//! Replication member keeps to itself. What a cluster does keep consistent is an InnoDB
//! row changed by a committed conditional write: of two nodes writing the same row at once,
//! the first to commit wins and the other gets a deadlock (1213), duplicate-key (1062) or,
//! on Group Replication, a rollback-at-commit (3101, 1180) error. So each operation is one
//! autocommitted statement whose own effect tells whether it won:
//!
//! - acquire: an `INSERT ... ON DUPLICATE KEY UPDATE` that takes the row when it is
//!   absent, expired, or already the owner's (then the lease restarts). The update clause
//!   reports its verdict through `LAST_INSERT_ID(expr)`, which travels back in the OK
//!   packet of the same round trip: [`LOST`] when another owner holds the row, the
//!   fencing token (or a small code without the token column) when the caller won. The
//!   affected-rows count alone could not tell a lost race from a fresh insert when the
//!   client sets `CLIENT_FOUND_ROWS`, nor a won renewal within the same second from a
//!   lost race without it.
//! - release: a `DELETE` (on an upgraded table, an `UPDATE` that ends the lease and keeps
//!   the row, so the token keeps counting) matching the owner's unexpired row.
//! - renew: an `UPDATE` of the owner's unexpired row that reports through
//!   `LAST_INSERT_ID(expr)` as well.
//!
//! Expiry is judged by the database clock only, in UTC (`UTC_TIMESTAMP()`), so clients
//! in different session time zones agree. The holder's side keeps a local deadline on the
//! monotonic clock, taken *before* the acquire was sent, minus a margin for clock skew
//! between nodes ([`DEFAULT_MARGIN`]): past it the holder must stop trusting its lease
//! even if it could not hear from the database.

use std::time::{Duration, Instant};

use crate::config::{Config, Table};
use crate::deadline::Deadline;
pub use crate::dialect::Dialect;
use crate::error::{Error, Result, SessionError};
use crate::limits;
use crate::name::Charset;
use crate::session::{classify, Connector, Session};
use crate::topology::{self, Topology};
use crate::value::Value;

mod keeper;
mod reads;
mod shape;
mod statements;

use keeper::Jitter;
pub use keeper::LeaseKeeper;
use reads::SyncRead;
use shape::{mysql_shape, sqlite_shape, Shape};

/// The verdict of a lost acquisition, reported through `LAST_INSERT_ID(expr)`: larger
/// than any token (tokens start near the microseconds since 1970, about 1.8e15).
const LOST: u64 = i64::MAX as u64;

/// Codes of a won acquisition on a table without the token column.
const TAKEN_OVER: u64 = 1;
const STILL_MINE: u64 = 2;

/// How often one statement is sent at most after a cluster's "someone else committed
/// first" (see [`lost_race`]; waits of 4, 8, 16 and 32 ms in between, while the node
/// applies the winner's write) or a lost connection.
/// A lock wait timeout (1205) is not retried: it took `innodb_lock_wait_timeout` already.
const ATTEMPTS: usize = 5;

/// The default margin between the database's lease end and the holder's local deadline:
/// room for clock skew between cluster nodes (each judges expiry by its own clock) and
/// for the time between taking the local timestamp and the statement running. A lease
/// shorter than twice the margin gets half its TTL as margin.
pub const DEFAULT_MARGIN: Duration = Duration::from_millis(500);

/// The longest TTL that can fit at all: `expires_at` is a `DATETIME`, whose range ends at
/// 9999-12-31 23:59:59, this many seconds after 1970-01-01 00:00:00 UTC. The original class
/// sets no maximum; the real one is the end of that range minus the database's clock
/// (about 2.5e11 seconds, 7,900 years, in 2026), which the statements check themselves:
/// a lease that would end after it is refused, nothing written. `INTERVAL ? SECOND`
/// (`MICROSECOND` on an upgraded table: 2.5e17, well inside the BIGINT parameter) and
/// SQLite's `datetime('now', '+N seconds')` answer NULL past the end, never a wrapped date.
pub const MAX_LEASE_TTL: f64 = 253_402_300_799.0;

/// The last second a `DATETIME` (and SQLite's date functions) can hold.
const DATETIME_END: &str = "9999-12-31 23:59:59";

/// The verdict of a renewal whose new end would be past [`DATETIME_END`] (reported
/// through `LAST_INSERT_ID(expr)`, like every renewal's): the row is left as it was.
const PAST_DATETIME_END: u64 = LOST - 1;

/// The first wait of a blocking acquire between two tries, and the most it grows to.
const FIRST_BACKOFF: Duration = Duration::from_millis(5);
const MAX_BACKOFF: Duration = Duration::from_millis(250);

// Defined in a module of its own, below `error` (whose `SessionError` names it).
impl Dialect {
    /// From a PDO driver name (`PDO::ATTR_DRIVER_NAME`).
    pub fn from_driver(driver: &str) -> Result<Dialect> {
        match driver {
            "mysql" => Ok(Dialect::MySql),
            "sqlite" => Ok(Dialect::Sqlite),
            other => Err(Error::invalid("PDO driver", format!("{other:?} is not supported (mysql or sqlite)"))),
        }
    }
}

/// An owner string unique to this process and call: `host:pid:random`. Owners must never
/// repeat across runs (a restarted job with a fixed name would take over its crashed
/// predecessor's lease as its own), so a host name alone is not one.
pub fn unique_owner() -> String {
    use std::io::Read;
    let mut random = [0u8; 8];
    let read = std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut random));
    let suffix = match read {
        Ok(()) => u64::from_ne_bytes(random),
        // Not for security: uniqueness next to the pid is enough.
        Err(_) => Jitter::new().0,
    };
    let host = match crate::holder::holder_host() {
        "" => "localhost",
        host => host,
    };
    format!("{host}:{}:{suffix:016x}", std::process::id())
}

/// A won acquisition or renewal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Grant {
    /// The fencing token: strictly increasing per resource across takeovers, unchanged
    /// when the owner renews or acquires again. `None` without the token column
    /// (`mysqllock init --lease --upgrade` adds it).
    pub token: Option<u64>,
    /// Past this instant the holder must not trust the lease any more: the monotonic time
    /// taken before the statement was sent, plus the TTL, minus the margin.
    pub deadline: Instant,
}

impl Grant {
    /// Time left until [`Grant::deadline`] (zero once it passed).
    pub fn remaining(&self) -> Duration {
        self.deadline.saturating_duration_since(Instant::now())
    }
}

/// One row of the lease table, as `status` shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct LeaseRow {
    pub resource: String,
    pub owner: String,
    /// `expires_at` as stored (UTC).
    pub expires_at: String,
    pub acquired_at: String,
    /// Seconds until the lease ends by the database clock; negative once it ended.
    pub remaining: f64,
    pub token: Option<u64>,
}

impl LeaseRow {
    pub fn is_live(&self) -> bool {
        self.remaining >= 0.0
    }
}

/// Table-only leases on one database session (reconnected when it is lost, where the
/// connector can: a lease does not live in the session).
///
/// ```no_run
/// use mysqllock_core::{Config, DistributedLock};
///
/// let config = Config::from_url("mysql://app:secret@127.0.0.1:3306/app")?;
/// let mut lock = DistributedLock::native(config);
/// if let Some(grant) = lock.acquire("report:monthly", "worker-7f3a", 30.0)? {
///     // ... the exclusive work, finished before grant.deadline ...
///     lock.release("report:monthly", "worker-7f3a")?;
/// }
/// # Ok::<(), mysqllock_core::Error>(())
/// ```
pub struct DistributedLock<C: Connector> {
    connector: C,
    session: Option<C::Session>,
    table: Table,
    dialect: Dialect,
    shape: Option<Shape>,
    margin: Duration,
}

impl DistributedLock<Config> {
    /// Native sessions to `config`'s server, on its `lease_table`.
    pub fn native(config: Config) -> Self {
        let table = config.lease_table.clone();
        DistributedLock::new(config, table, Dialect::MySql)
    }
}

impl<C: Connector> DistributedLock<C> {
    pub fn new(connector: C, table: Table, dialect: Dialect) -> Self {
        DistributedLock { connector, session: None, table, dialect, shape: None, margin: DEFAULT_MARGIN }
    }

    pub fn table(&self) -> &Table {
        &self.table
    }

    pub fn connector(&self) -> &C {
        &self.connector
    }

    pub fn connector_mut(&mut self) -> &mut C {
        &mut self.connector
    }

    /// The database session id in use, if connected (for diagnostics: a lease does not
    /// live in its session).
    pub fn connection_id(&self) -> Option<u64> {
        self.session.as_ref().map(Session::connection_id)
    }

    /// Sets the margin subtracted from each lease for the local deadline.
    pub fn set_margin(&mut self, margin: Duration) {
        self.margin = margin;
    }

    /// Takes `resource` for `owner` for `ttl` seconds when it is free, expired, or already
    /// `owner`'s (the lease then restarts). `None` when another owner holds it.
    pub fn acquire(&mut self, resource: &str, owner: &str, ttl: f64) -> Result<Option<Grant>> {
        let span = self.check(resource, Some(owner), ttl)?;
        self.try_acquire(resource, owner, span)
    }

    /// Like [`acquire`](Self::acquire), trying again for up to `wait` seconds with capped
    /// exponential backoff and jitter (a table-only lock cannot be woken by the server).
    /// A `wait` of 0 is exactly one try, the same as [`acquire`](Self::acquire).
    pub fn acquire_waiting(&mut self, resource: &str, owner: &str, ttl: f64, wait: f64) -> Result<Option<Grant>> {
        let span = self.check(resource, Some(owner), ttl)?;
        let until = Deadline::after(limits::duration("wait", wait)?);
        let mut backoff = FIRST_BACKOFF;
        let mut jitter = Jitter::new();
        loop {
            if let Some(grant) = self.try_acquire(resource, owner, span)? {
                return Ok(Some(grant));
            }
            if until.passed() {
                return Ok(None);
            }
            std::thread::sleep(jitter.spread(backoff).min(until.left()));
            backoff = (backoff * 2).min(MAX_BACKOFF);
        }
    }

    /// Ends `owner`'s lease on `resource`. `false` when the lease is not `owner`'s, has
    /// expired, or does not exist.
    pub fn release(&mut self, resource: &str, owner: &str) -> Result<bool> {
        self.check_names(resource, Some(owner))?;
        let shape = self.shape(resource)?;
        let sql = statements::release(self.dialect, &self.table, shape.upgraded);
        let params = [Value::from(resource), Value::from(owner)];
        Ok(self.write(resource, &sql, &params)?.is_some_and(|(out, _)| out.affected_rows > 0))
    }

    /// Restarts `owner`'s unexpired lease on `resource` with `ttl` seconds from now.
    /// `None` when the lease is not `owner`'s, has expired, or does not exist.
    pub fn renew(&mut self, resource: &str, owner: &str, ttl: f64) -> Result<Option<Grant>> {
        let span = self.check(resource, Some(owner), ttl)?;
        let shape = self.shape(resource)?;
        let sql = statements::renew(self.dialect, &self.table, shape.upgraded);
        let ttl = span.value(self.dialect);
        let params: Vec<Value> = match self.dialect {
            Dialect::MySql => vec![ttl.clone(), ttl, resource.into(), owner.into()],
            Dialect::Sqlite => vec![ttl, resource.into(), owner.into()],
        };
        let Some((out, sent)) = self.write_lease(resource, &sql, &params, span)? else {
            return Ok(None);
        };
        let renewed = match self.dialect {
            Dialect::Sqlite => out.affected_rows > 0,
            Dialect::MySql if out.last_insert_id == PAST_DATETIME_END => return Err(past_datetime_end(span)),
            Dialect::MySql => out.last_insert_id != 0,
        };
        Ok(renewed.then(|| Grant {
            token: shape.upgraded.then_some(out.last_insert_id),
            deadline: self.deadline(sent, span),
        }))
    }

    /// Whether any unexpired lease on `resource` exists (read after every commit the
    /// cluster made before it, on a Galera node or a Group Replication member; a node
    /// that cannot see its cluster's state answers [`Error::NodeNotReady`]).
    pub fn is_held(&mut self, resource: &str) -> Result<bool> {
        self.check_names(resource, None)?;
        let shape = self.shape(resource)?;
        let sql = statements::is_held(self.dialect, &self.table, shape.upgraded);
        let out = self.read(resource, &sql, &[Value::from(resource)], shape.sync)?;
        Ok(out.first(0).as_i64().unwrap_or(0) > 0)
    }

    /// The owner of the unexpired lease on `resource`, `None` when there is none: expiry
    /// judged as by every other call (database clock, the table's precision), read as
    /// [`is_held`](Self::is_held) reads, after every commit the cluster made before it.
    pub fn owner(&mut self, resource: &str) -> Result<Option<String>> {
        self.check_names(resource, None)?;
        let shape = self.shape(resource)?;
        let sql = statements::owner(self.dialect, &self.table, shape.upgraded);
        let out = self.read(resource, &sql, &[Value::from(resource)], shape.sync)?;
        Ok(out.rows.first().and_then(|row| row.first()).and_then(Value::as_text))
    }

    /// Whether `owner` holds an unexpired lease on `resource`: owners compare exactly, as
    /// [`release`](Self::release) and [`renew`](Self::renew) compare them; read as
    /// [`is_held`](Self::is_held) reads.
    pub fn is_held_by(&mut self, resource: &str, owner: &str) -> Result<bool> {
        self.check_names(resource, Some(owner))?;
        let shape = self.shape(resource)?;
        let sql = statements::is_held_by(self.dialect, &self.table, shape.upgraded);
        let out = self.read(resource, &sql, &[Value::from(resource), Value::from(owner)], shape.sync)?;
        Ok(out.first(0).as_i64().unwrap_or(0) > 0)
    }

    /// Ends the unexpired lease on `resource` whoever holds it, as its owner's
    /// [`release`](Self::release) would (on an upgraded table the row stays, ended, so
    /// the token counts on): one conditional write, no read first, so an owner that
    /// changes meanwhile is ended too. `false` when no lease was live. For a holder that
    /// died or hangs (a scheduler mutex cleared by hand); its own later release and
    /// renew answer `false`.
    pub fn force_release(&mut self, resource: &str) -> Result<bool> {
        self.check_names(resource, None)?;
        let shape = self.shape(resource)?;
        let sql = statements::force_release(self.dialect, &self.table, shape.upgraded);
        match self.write(resource, &sql, &[Value::from(resource)])? {
            Some((out, _)) => Ok(out.affected_rows > 0),
            // Unlike a refused release, "false" would claim the resource is free.
            None => Err(Error::Database {
                name: Some(resource.to_owned()),
                source: SessionError::client(format!(
                    "other writers kept changing the lease first ({ATTEMPTS} attempts); try again"
                )),
            }),
        }
    }

    /// The resources of the live leases whose name begins with `prefix`, exactly (case,
    /// accents and trailing blanks count, whatever the column's collation folds), ordered
    /// by resource, read as [`is_held`](Self::is_held) reads. An empty prefix is refused:
    /// it would name every lease of the table, other applications' included.
    pub fn held_with_prefix(&mut self, prefix: &str) -> Result<Vec<String>> {
        if prefix.is_empty() {
            return Err(Error::invalid(
                "prefix",
                "an empty prefix would name every lease of the table, other applications' too",
            ));
        }
        self.check_names(prefix, None)?;
        let shape = self.shape(prefix)?;
        let sql = statements::held_with_prefix(self.dialect, &self.table, shape.upgraded);
        let pattern = format!("{}%", statements::like_escaped(prefix));
        let out = self.read(prefix, &sql, &[Value::from(pattern)], shape.sync)?;
        let mut held: Vec<String> = out
            .rows
            .iter()
            .filter_map(|row| row.first().and_then(Value::as_text))
            .filter(|resource| resource.starts_with(prefix))
            .collect();
        held.dedup();
        Ok(held)
    }

    /// Ends every live lease whose resource begins with `prefix` (exactly, as
    /// [`held_with_prefix`](Self::held_with_prefix) reads it), whoever holds it, each as
    /// [`force_release`](Self::force_release) ends one (an upgraded table keeps its rows,
    /// ended, and their fencing tokens count on). Returns how many it ended. A lease taken
    /// while this runs may outlive it. What a framework's "flush the locks" asks for
    /// (Laravel's `CanFlushLocks`), without SQL of its own.
    pub fn force_release_with_prefix(&mut self, prefix: &str) -> Result<u64> {
        let mut ended = 0;
        for resource in self.held_with_prefix(prefix)? {
            ended += u64::from(self.force_release(&resource)?);
        }
        Ok(ended)
    }

    /// The row of `resource`, live or not; `None` when there is none.
    pub fn holder(&mut self, resource: &str) -> Result<Option<LeaseRow>> {
        self.check_names(resource, None)?;
        let shape = self.shape(resource)?;
        let sql = statements::rows(self.dialect, &self.table, shape.upgraded, true);
        let out = self.read(resource, &sql, &[Value::from(resource)], shape.sync)?;
        Ok(out.rows.first().map(|row| lease_row(row)))
    }

    /// Every row of the table, ordered by resource.
    pub fn rows(&mut self) -> Result<Vec<LeaseRow>> {
        let shape = self.shape("")?;
        let sql = statements::rows(self.dialect, &self.table, shape.upgraded, false);
        let out = self.read("", &sql, &[], shape.sync)?;
        Ok(out.rows.iter().map(|row| lease_row(row)).collect())
    }

    /// Whether the table has the upgrade (fencing tokens, sub-second times).
    pub fn is_upgraded(&mut self) -> Result<bool> {
        Ok(self.shape("")?.upgraded)
    }

    /// Creates the table as `Nene\Kit\DistributedLock` documents it (InnoDB), unless it
    /// exists. `true` when it was created.
    pub fn create_table(&mut self) -> Result<bool> {
        match self.shape("") {
            Ok(_) => return Ok(false),
            Err(Error::MissingTable { .. }) => {}
            Err(e) => return Err(e),
        }
        let sql = statements::create(self.dialect, &self.table);
        match self.run_plain(&sql) {
            // Created by someone else since the look: there it is.
            Err(Error::Database { source: SessionError { code: Some(1050), .. }, .. }) => return Ok(false),
            other => other?,
        }
        self.shape = None;
        Ok(true)
    }

    /// Adds the fencing `token` column and microsecond times (MySQL/MariaDB only). `true`
    /// when it changed the table, `false` when it was upgraded already. Everything works
    /// without it; with it, acquisitions return a token and releases keep the row (ended)
    /// so the token keeps counting.
    pub fn upgrade_table(&mut self) -> Result<bool> {
        if self.dialect == Dialect::Sqlite {
            return Err(Error::invalid("table upgrade", "SQLite lease tables have no upgrade (tokens need MySQL)"));
        }
        if self.shape("")?.upgraded {
            return Ok(false);
        }
        let sql = statements::upgrade(&self.table);
        match self.run_plain(&sql) {
            // A concurrent upgrade added the column first.
            Err(Error::Database { source: SessionError { code: Some(1060), .. }, .. }) => {}
            other => other?,
        }
        self.shape = None;
        Ok(self.shape("")?.upgraded)
    }

    /// The SQL that creates the table, for messages and `init`.
    pub fn create_sql(&self) -> String {
        statements::create(self.dialect, &self.table)
    }

    /// Sets the session's insert id to `id` with a statement that changes nothing
    /// (MySQL/MariaDB only), for a session an application shares: acquire and renew
    /// report their verdict through `LAST_INSERT_ID(expr)`, and every statement replaces
    /// the insert id the client library keeps (PDO's `lastInsertId()`), so the caller
    /// gives back the id the application saw before the lease operation. One round trip
    /// without a commit; also sets the session's `LAST_INSERT_ID()` to `id`.
    pub fn give_back_insert_id(&mut self, id: u64) -> Result<()> {
        if self.dialect != Dialect::MySql {
            return Err(Error::invalid("insert id", "only a MySQL/MariaDB session reports its verdicts through it"));
        }
        let sql = statements::give_back_insert_id(&self.table);
        let result = self.session()?.execute(&sql, &[Value::UInt(id)]);
        result.map(|_| ()).map_err(|e| self.classify(e, None))
    }

    fn try_acquire(&mut self, resource: &str, owner: &str, span: Span) -> Result<Option<Grant>> {
        let shape = self.shape(resource)?;
        let sql = statements::acquire(self.dialect, &self.table, shape.upgraded);
        let ttl = span.value(self.dialect);
        let params: Vec<Value> = match self.dialect {
            Dialect::MySql => {
                vec![resource.into(), owner.into(), ttl.clone(), owner.into(), owner.into(), owner.into(), ttl]
            }
            Dialect::Sqlite => vec![resource.into(), owner.into(), ttl],
        };
        // The local deadline counts from before the statement was sent: the database's
        // lease starts when the statement runs, later than this.
        let Some((out, sent)) = self.write_lease(resource, &sql, &params, span)? else {
            return Ok(None);
        };
        let won = match self.dialect {
            Dialect::Sqlite => out.affected_rows > 0,
            Dialect::MySql => match (out.last_insert_id, shape.upgraded) {
                (LOST, _) => false,
                // A fresh row: the insert path ran, no update clause reported anything.
                (0, false) if out.affected_rows == 1 => true,
                (TAKEN_OVER | STILL_MINE, false) => true,
                (token, true) if token != 0 => true,
                (code, _) => {
                    return Err(Error::Database {
                        name: Some(resource.to_owned()),
                        source: SessionError::client(format!(
                            "the lease statement reported {} affected rows and verdict {code}, which it cannot (is the table {} the lease table?)",
                            out.affected_rows,
                            self.table.display_name()
                        )),
                    })
                }
            },
        };
        Ok(won.then(|| Grant {
            token: (shape.upgraded && self.dialect == Dialect::MySql).then_some(out.last_insert_id),
            deadline: self.deadline(sent, span),
        }))
    }

    fn deadline(&self, sent: Instant, span: Span) -> Instant {
        let margin = self.margin.min(span.duration / 2);
        sent + span.duration - margin
    }

    /// Validates the names and the TTL; nothing runs on bad input.
    fn check(&mut self, resource: &str, owner: Option<&str>, ttl: f64) -> Result<Span> {
        if !ttl.is_finite() || ttl <= 0.0 {
            return Err(Error::invalid("ttl", format!("{ttl} must be a positive number of seconds")));
        }
        if ttl > MAX_LEASE_TTL {
            return Err(Error::invalid(
                "ttl",
                format!(
                    "{ttl} exceeds {MAX_LEASE_TTL} seconds: no lease can end after {DATETIME_END} (UTC), where expires_at, a DATETIME, ends"
                ),
            ));
        }
        self.check_names(resource, owner)?;
        let upgraded = self.shape(resource)?.upgraded && self.dialect == Dialect::MySql;
        Ok(Span::new(ttl, upgraded))
    }

    /// Empty values and NUL are refused before anything runs; lengths and characters are
    /// checked against the real columns (a read, which changes nothing).
    fn check_names(&mut self, resource: &str, owner: Option<&str>) -> Result<()> {
        for (what, value) in [("resource", Some(resource)), ("owner", owner)] {
            if let Some(value) = value {
                if value.is_empty() {
                    return Err(Error::invalid(what, "it must not be empty"));
                }
                if value.contains('\0') {
                    return Err(Error::invalid(what, format!("{value:?} contains a NUL character")));
                }
            }
        }
        let shape = self.shape(resource)?;
        for (what, value, limit) in
            [("resource", Some(resource), shape.resource_chars), ("owner", owner, shape.owner_chars)]
        {
            let Some(value) = value else { continue };
            let chars = value.chars().count();
            if chars > limit {
                return Err(Error::invalid(
                    what,
                    format!("{value:?} has {chars} characters; the column holds {limit} (longer values would be cut and could collide)"),
                ));
            }
            if let Some(bad) = value.chars().find(|&c| shape.charset.stores(c) == Some(false)) {
                return Err(Error::invalid(
                    what,
                    format!(
                        "{value:?} contains {bad:?}, which the column's character set {} cannot store exactly",
                        shape.charset.mysql_name()
                    ),
                ));
            }
        }
        Ok(())
    }

    fn session(&mut self) -> Result<&mut C::Session> {
        if self.session.is_none() {
            self.session = Some(self.connector.connect()?);
        }
        self.session.as_mut().ok_or_else(|| Error::invalid("session", "not connected"))
    }

    /// The table's shape, looked up on first use (one statement, or two on a server whose
    /// topology the session did not learn while it was set up).
    fn shape(&mut self, resource: &str) -> Result<Shape> {
        if let Some(shape) = &self.shape {
            return Ok(shape.clone());
        }
        let dialect = self.dialect;
        let table = self.table.clone();
        let name = (!resource.is_empty()).then_some(resource);
        let session = self.session()?;
        let shape = match dialect {
            Dialect::MySql => mysql_shape(session, &table, name)?,
            Dialect::Sqlite => sqlite_shape(session, &table, name)?,
        };
        self.shape = Some(shape.clone());
        Ok(shape)
    }

    /// A read that decides, made to see every commit of the cluster before it (`sync`),
    /// sent again on a new session when the connection was lost.
    fn read(&mut self, resource: &str, sql: &str, params: &[Value], sync: SyncRead) -> Result<crate::Outcome> {
        let name = (!resource.is_empty()).then_some(resource);
        let mut attempt = 0;
        loop {
            attempt += 1;
            let result = sync.read(self.session()?, sql, params);
            match result {
                Ok(out) => return Ok(out),
                // A server that stopped answering is not asked again at once: that would
                // wait as long again.
                Err(e) if e.lost && !e.stalled && attempt < ATTEMPTS => self.session = None,
                // A Galera node outside the primary component fails a causal read at
                // once with 1205 "Lock wait timeout exceeded" (measured on MariaDB 10.11
                // with a node cut off by gmcast.isolate), not with its usual 1047.
                Err(e) if sync == SyncRead::Galera && e.code == Some(1205) => {
                    return Err(Error::NodeNotReady { name: name.map(str::to_owned), source: e })
                }
                Err(e) => {
                    if e.lost {
                        self.session = None;
                    }
                    return Err(self.classify(e, name));
                }
            }
        }
    }

    /// One write, with what a cluster needs around it: the outcome and the instant its
    /// successful attempt was sent, or `None` when another writer kept committing first.
    /// Each statement of the lease mode can be sent again safely: acquire and renew by the
    /// same owner are idempotent, and a release whose first attempt committed finds
    /// nothing the second time (it then answers `false`, on the safe side: the caller no
    /// longer holds the lease either way).
    fn write(&mut self, resource: &str, sql: &str, params: &[Value]) -> Result<Option<(crate::Outcome, Instant)>> {
        let mut attempt = 0;
        loop {
            attempt += 1;
            let sent = Instant::now();
            let result = self.session()?.execute(sql, params);
            let e = match result {
                Ok(out) => return Ok(Some((out, sent))),
                Err(e) => e,
            };
            let last = attempt == ATTEMPTS;
            if e.lost && !e.stalled && !last {
                // The statement may or may not have committed: send it again on a new
                // session (the connector refuses where it cannot make one, e.g. a PDO).
                // Not after a server that stopped answering: that would wait as long again;
                // a lease it may have committed is not reported as held, and ends at its
                // expiry.
                self.session = None;
            } else if lost_race(&e) {
                // Another writer committed first: never a success that was not
                // committed. Once more after a moment; then the other writer won.
                if last {
                    return Ok(None);
                }
                std::thread::sleep(Duration::from_millis(2u64 << attempt));
            } else {
                if e.lost {
                    self.session = None;
                }
                return Err(self.classify(e, Some(resource)));
            }
        }
    }

    /// A write that starts a lease of `span` (acquire, renew): as [`Self::write`], and a
    /// database clock that would end it past the DATETIME range is the caller's TTL.
    fn write_lease(
        &mut self,
        resource: &str,
        sql: &str,
        params: &[Value],
        span: Span,
    ) -> Result<Option<(crate::Outcome, Instant)>> {
        match self.write(resource, sql, params) {
            Err(Error::Database { source, .. }) if ends_past_datetime_end(&source) => Err(past_datetime_end(span)),
            other => other,
        }
    }

    fn run_plain(&mut self, sql: &str) -> Result<()> {
        let result = self.session()?.execute(sql, &[]);
        result.map(|_| ()).map_err(|e| self.classify(e, None))
    }

    fn classify(&self, e: SessionError, name: Option<&str>) -> Error {
        if e.mysql_code() == Some(1146) || (self.dialect == Dialect::Sqlite && e.message.contains("no such table")) {
            return missing_table(self.dialect, &self.table, e);
        }
        classify(e, name, &self.table)
    }
}

/// Whether a write failed because another node's write to the row came first, so the
/// statement was rolled back and may be sent again (it then sees the winner's row):
/// - 1213, deadlock: a Galera certification failure, or a brute-force abort by Galera's
///   applier of a conflicting local transaction;
/// - 3101, "Plugin instructed the server to rollback the current transaction": a Group
///   Replication certification failure at commit (multi-primary mode);
/// - 1180 with handler error 149 (lock deadlock) "during COMMIT": Group Replication's
///   applier, which runs at high priority, aborted the local transaction that held the
///   row it had to change, before the local one was certified (measured: a few of 180
///   simultaneous acquisitions from three members of a multi-primary group);
/// - 1062, duplicate key: the row appeared from another node between the upsert's
///   look-up and its insert.
fn lost_race(e: &SessionError) -> bool {
    match e.mysql_code() {
        Some(1213 | 3101 | 1062) => true,
        Some(1180) => e.message.contains("error 149"),
        _ => false,
    }
}

/// A write refused because the TTL took the new `expires_at` past [`DATETIME_END`]:
/// `now + INTERVAL` overflows (1441, an error in a strict `sql_mode`; the statements'
/// only date arithmetic is that), or its NULL met the `NOT NULL` column (1048: a
/// single-row INSERT fails so in every `sql_mode`, before its duplicate-key update could
/// run). SQLite checks `NOT NULL` on every write.
fn ends_past_datetime_end(e: &SessionError) -> bool {
    let expires_at = e.message.contains("expires_at");
    match e.dialect {
        Dialect::MySql => e.mysql_code() == Some(1441) || (e.mysql_code() == Some(1048) && expires_at),
        Dialect::Sqlite => e.code == Some(19) && e.message.contains("NOT NULL") && expires_at,
    }
}

fn past_datetime_end(span: Span) -> Error {
    Error::invalid(
        "ttl",
        format!(
            "{} seconds from the database's clock end after {DATETIME_END} (UTC), where expires_at, a DATETIME, ends; nothing was written",
            span.duration.as_secs()
        ),
    )
}

/// The lease table is not there: the error names the DDL (and `mysqllock init --lease`,
/// which creates it on MySQL).
fn missing_table(dialect: Dialect, table: &Table, source: SessionError) -> Error {
    Error::MissingTable {
        table: table.display_name(),
        create_sql: statements::create(dialect, table),
        init: (dialect == Dialect::MySql).then_some("mysqllock init --lease"),
        source,
    }
}

/// A TTL as the table stores it: whole seconds (rounded up: a lease never ends earlier
/// than asked) or, on an upgraded table, microseconds.
#[derive(Debug, Clone, Copy)]
struct Span {
    duration: Duration,
    units: i64,
}

impl Span {
    fn new(ttl: f64, micros: bool) -> Span {
        if micros {
            let units = (ttl * 1e6).ceil() as i64;
            Span { duration: Duration::from_micros(units as u64), units }
        } else {
            let units = ttl.ceil() as i64;
            Span { duration: Duration::from_secs(units as u64), units }
        }
    }

    /// The bound parameter: the units (seconds or microseconds, as the span was made
    /// for the table), or SQLite's `datetime()` modifier.
    fn value(&self, dialect: Dialect) -> Value {
        match dialect {
            Dialect::Sqlite => Value::Text(format!("+{} seconds", self.units)),
            Dialect::MySql => Value::Int(self.units),
        }
    }
}

fn lease_row(row: &[Value]) -> LeaseRow {
    let text = |i: usize| row.get(i).and_then(Value::as_text).unwrap_or_default();
    LeaseRow {
        resource: text(0),
        owner: text(1),
        expires_at: text(2),
        acquired_at: text(3),
        remaining: row.get(4).and_then(Value::as_f64).unwrap_or(f64::NEG_INFINITY),
        token: row.get(5).and_then(Value::as_u64),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_write_that_another_node_beat_is_a_lost_race_and_nothing_else_is() {
        let beaten = [
            SessionError::server(1213, "Deadlock found when trying to get lock; try restarting transaction"),
            SessionError::server(3101, "Plugin instructed the server to rollback the current transaction."),
            SessionError::server(1180, "Got error 149 - 'Lock deadlock; Retry transaction' during COMMIT"),
            SessionError::server(1062, "Duplicate entry 'r' for key 'PRIMARY'"),
        ];
        for e in &beaten {
            assert!(lost_race(e), "{e}");
        }
        let other = [
            SessionError::server(1180, "Got error 28 - 'No space left on device' during COMMIT"),
            SessionError::server(1205, "Lock wait timeout exceeded; try restarting transaction"),
            SessionError::server(1290, "The MySQL server is running with the --super-read-only option"),
        ];
        for e in &other {
            assert!(!lost_race(e), "{e}");
        }
    }
}
