//! The core's own session: the `mysql` crate, prepared statements cached by SQL text.

use mysql::prelude::Queryable;
use mysql::{Conn, OptsBuilder, Params};

use crate::config::Config;
use crate::error::{Error, Result, SessionError};
use crate::session::{Connector, Session};
use crate::topology::{self, Topology};
use crate::value::{Outcome, Value};

/// How long the server lets a lock-holding session sit idle: a week, well past any
/// sensible job (MariaDB's maximum is a year).
const IDLE_SECONDS: u32 = 7 * 24 * 3600;

/// MariaDB's topology in one cheap statement: what [`topology::PROBE`] learns there,
/// plus the session's `wait_timeout`.
const MARIADB_PROBE: &str = "SELECT @@version, @@wsrep_on, @@session.wait_timeout";

/// ER_UNKNOWN_SYSTEM_VARIABLE.
const UNKNOWN_SYSTEM_VARIABLE: u16 = 1193;

/// The largest packet this client sends or accepts: far above any lock statement.
const CLIENT_MAX_PACKET: usize = 4 * 1024 * 1024;

/// A native MySQL session. Never reconnects by itself: a new connection is a new
/// session, and the locks of the old one are gone.
pub struct MysqlSession {
    conn: Conn,
    id: u64,
    /// Batches are used: the connection speaks utf8mb4 (so a name written as a
    /// `_utf8mb4` literal in a batch is the very string a bound parameter carries), and
    /// the server (or a proxy in between) has not refused a multi-statement query.
    batches: bool,
    /// Learned in the setup round trip.
    topology: Topology,
    /// The session's `wait_timeout` after the setup raised it, in seconds (also learned
    /// in the setup round trip).
    wait_timeout: Option<f64>,
}

impl MysqlSession {
    pub fn connect(config: &Config) -> Result<Self> {
        Self::open(config, None)
    }

    /// A session whose every read and write gives up after `timeout`: for helpers (the
    /// keep-alive thread) that must never hang their owner on a stalled server.
    pub fn connect_with_io_timeout(config: &Config, timeout: std::time::Duration) -> Result<Self> {
        Self::open(config, Some(timeout))
    }

    fn open(config: &Config, io_timeout: Option<std::time::Duration>) -> Result<Self> {
        config.validate()?;
        let mut opts = OptsBuilder::new()
            .user(Some(config.user.clone()))
            .pass(config.password.clone())
            .db_name(config.database.clone())
            .tcp_connect_timeout(Some(config.connect_timeout))
            .prefer_socket(false)
            // Known here, so connecting does not ask the server for it (a round trip
            // every short-lived process would pay). Lock statements are tiny.
            .max_allowed_packet(Some(CLIENT_MAX_PACKET))
            .read_timeout(io_timeout)
            .write_timeout(io_timeout)
            .stmt_cache_size(64);
        opts = match &config.socket {
            Some(path) => opts.socket(Some(path.clone())),
            None => opts.ip_or_hostname(Some(config.host.clone())).tcp_port(config.port),
        };
        let connect_error = |e: SessionError| Error::Connect { target: config.target(), source: e };
        let mut conn = Conn::new(opts).map_err(|e| connect_error(session_error(e)))?;
        let (rows, wait_timeout) = setup(&mut conn, &config.charset).map_err(connect_error)?;
        let id = u64::from(conn.connection_id());
        let mut session = MysqlSession {
            conn,
            id,
            batches: config.charset.eq_ignore_ascii_case("utf8mb4"),
            topology: Topology::from_probe(&rows),
            wait_timeout,
        };
        let mut topology = session.topology;
        topology::complete(|sql| session.execute(sql, &[]), &mut topology).map_err(connect_error)?;
        session.topology = topology;
        Ok(session)
    }
}

impl MysqlSession {
    /// The seconds this session may sit idle before the server ends it (its
    /// `wait_timeout`, at least a week unless the server caps it lower), as learned
    /// while connecting: no statement.
    pub fn wait_timeout(&self) -> Option<f64> {
        self.wait_timeout
    }
}

/// The one round trip after the handshake: the session variables, and what the server
/// is (the topology probe's rows) with the session's `wait_timeout`.
///
/// A holder sits idle while its job runs; the server's default wait_timeout (8 h) would
/// end the session, and with it the lock, under a long job. SET NAMES although the
/// handshake asked for the character set: a server started with
/// skip-character-set-client-handshake ignores that, and the batch's `_utf8mb4`
/// literals must mean what bound parameters mean.
///
/// What the server is: `SHOW VARIABLES` (the topology probe) reads every variable, some
/// 200 µs of server time per connection. A server whose greeting looks like MariaDB's
/// (`5.5.5-…` before 11.0, `1x.…` after) is asked for the two variables instead
/// (`@@wsrep_on`), and only a server that then does not say MariaDB in `@@version` or
/// has no `wsrep_on` (a build without Galera support) gets the full probe as well. MariaDB
/// has no Group Replication, so the probe's third variable is not needed there.
fn setup(conn: &mut Conn, charset: &str) -> Result<(Vec<Vec<Value>>, Option<f64>), SessionError> {
    let set = format!("SET NAMES {charset}, SESSION wait_timeout = GREATEST(@@session.wait_timeout, {IDLE_SECONDS})");
    let version = conn.server_version();
    let looks_mariadb = version == (5, 5, 5) || version.0 >= 10;
    if looks_mariadb {
        let sets = match query_sets(conn, &format!("{set}; {MARIADB_PROBE}")) {
            Ok(sets) => Some(sets),
            // No such variable: not a Galera-capable MariaDB; the full probe tells.
            Err(e) if e.code == Some(UNKNOWN_SYSTEM_VARIABLE) => None,
            Err(e) => return Err(e),
        };
        if let Some([version, wsrep_on, wait_timeout]) = sets.as_ref().and_then(|s| s.last()?.first()?.get(..3)) {
            let rows = vec![
                vec![Value::Text("version".into()), version.clone()],
                vec![Value::Text("wsrep_on".into()), wsrep_on.clone()],
            ];
            if Topology::from_probe(&rows).mariadb {
                return Ok((rows, wait_timeout.as_f64()));
            }
        }
        // The variables are set either way (SET ran first in the batch).
        return full_probe(conn, None);
    }
    full_probe(conn, Some(&set))
}

/// `SHOW VARIABLES` (the topology probe) and the session's `wait_timeout`, after `set`
/// when given: one round trip.
fn full_probe(conn: &mut Conn, set: Option<&str>) -> Result<(Vec<Vec<Value>>, Option<f64>), SessionError> {
    let sql = match set {
        Some(set) => format!("{set}; SELECT @@session.wait_timeout; {}", topology::PROBE),
        None => format!("SELECT @@session.wait_timeout; {}", topology::PROBE),
    };
    let mut sets = query_sets(conn, &sql)?;
    let rows = sets.pop().unwrap_or_default();
    let wait_timeout = sets.pop().and_then(|rows| rows.first()?.first()?.as_f64());
    Ok((rows, wait_timeout))
}

/// Runs a batch; the rows of each result set (a SET has none).
fn query_sets(conn: &mut Conn, sql: &str) -> Result<Vec<Vec<Vec<Value>>>, SessionError> {
    let mut result = conn.query_iter(sql).map_err(session_error)?;
    let mut sets = Vec::new();
    while let Some(set) = result.iter() {
        sets.push(read_rows(set)?);
    }
    Ok(sets)
}

impl Session for MysqlSession {
    fn execute(&mut self, sql: &str, params: &[Value]) -> Result<Outcome, SessionError> {
        if params.is_empty() {
            // The text protocol: statements without parameters carry their values as
            // literals (session-lock names, KILL ids), so preparing them would cost a
            // round trip per new value and fill the statement cache with one-offs.
            let mut result = self.conn.query_iter(sql).map_err(session_error)?;
            let rows = match result.iter() {
                Some(set) => read_rows(set)?,
                None => Vec::new(),
            };
            drop(result);
            return Ok(Outcome {
                rows,
                affected_rows: self.conn.affected_rows(),
                last_insert_id: self.conn.last_insert_id(),
            });
        }
        let params = Params::Positional(params.iter().map(to_mysql).collect());
        let mut result = self.conn.exec_iter(sql, params).map_err(session_error)?;
        let rows = match result.iter() {
            Some(set) => read_rows(set)?,
            None => Vec::new(),
        };
        drop(result);
        // The OK packet is only complete once the result is consumed.
        Ok(Outcome { rows, affected_rows: self.conn.affected_rows(), last_insert_id: self.conn.last_insert_id() })
    }

    fn connection_id(&self) -> u64 {
        self.id
    }

    fn batches(&self) -> bool {
        self.batches
    }

    fn execute_batch(&mut self, sql: &str) -> Result<Vec<Outcome>, SessionError> {
        let mut result = match self.conn.query_iter(sql).map_err(session_error) {
            Ok(result) => result,
            Err(e) => {
                // A syntax error at the first `;`: multi-statements are off somewhere
                // on the way (nothing ran). Statement by statement from now on.
                if e.code == Some(1064) {
                    self.batches = false;
                }
                return Err(e);
            }
        };
        let mut outcomes = Vec::new();
        while let Some(mut set) = result.iter() {
            // A statement without rows has its OK packet now; reading the (absent) rows
            // moves past it.
            let (affected_rows, last_insert_id) = (set.affected_rows(), set.last_insert_id().unwrap_or(0));
            let rows = read_rows(set.by_ref())?;
            outcomes.push(Outcome { rows, affected_rows, last_insert_id });
        }
        Ok(outcomes)
    }

    fn topology(&self) -> Option<Topology> {
        Some(self.topology)
    }

    fn kill(&mut self, id: u64) -> Result<(), SessionError> {
        // KILL cannot take a bound parameter; the id is an integer, formatted here.
        self.conn.query_drop(format!("KILL {id}")).map_err(session_error)
    }
}

impl Connector for Config {
    type Session = MysqlSession;
    fn connect(&mut self) -> Result<MysqlSession> {
        MysqlSession::connect(self)
    }

    fn keep_alive_config(&self) -> Option<Config> {
        Some(self.clone())
    }

    fn spreads(&self) -> bool {
        true
    }

    fn allows_cluster(&self) -> bool {
        self.allow_cluster
    }
}

/// The rows of one result set, as the protocol's values.
fn read_rows(set: impl Iterator<Item = mysql::Result<mysql::Row>>) -> Result<Vec<Vec<Value>>, SessionError> {
    set.map(|row| Ok(row.map_err(session_error)?.unwrap().into_iter().map(from_mysql).collect())).collect()
}

fn to_mysql(v: &Value) -> mysql::Value {
    match v {
        Value::Null => mysql::Value::NULL,
        Value::Int(i) => mysql::Value::Int(*i),
        Value::UInt(u) => mysql::Value::UInt(*u),
        Value::Float(f) => mysql::Value::Double(*f),
        Value::Text(s) => mysql::Value::Bytes(s.as_bytes().to_vec()),
        Value::Bytes(b) => mysql::Value::Bytes(b.clone()),
    }
}

fn from_mysql(v: mysql::Value) -> Value {
    match v {
        mysql::Value::NULL => Value::Null,
        mysql::Value::Int(i) => Value::Int(i),
        mysql::Value::UInt(u) => Value::UInt(u),
        mysql::Value::Float(f) => Value::Float(f64::from(f)),
        mysql::Value::Double(f) => Value::Float(f),
        mysql::Value::Bytes(b) => match String::from_utf8(b) {
            Ok(s) => Value::Text(s),
            Err(e) => Value::Bytes(e.into_bytes()),
        },
        other => Value::Text(other.as_sql(true)),
    }
}

/// The one mapping from the `mysql` crate's errors: server errors keep their number,
/// everything about the transport means the session is gone.
fn session_error(e: mysql::Error) -> SessionError {
    match e {
        mysql::Error::MySqlError(m) => SessionError::server(m.code, m.message),
        mysql::Error::UrlError(u) => SessionError { code: None, message: u.to_string(), lost: false },
        mysql::Error::DriverError(d) => SessionError::lost(d.to_string()),
        mysql::Error::IoError(io) => SessionError::lost(io.to_string()),
        other => SessionError::lost(other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // tests: a panic is the failure report
    use super::*;

    fn conn() -> (Conn, Config) {
        let dsn = std::env::var("MYSQLLOCK_TEST_DSN")
            .expect("MYSQLLOCK_TEST_DSN is not set: start a server with scripts/mariadb.sh");
        let config = Config::from_url(&dsn).unwrap();
        let opts = OptsBuilder::new()
            .user(Some(config.user.clone()))
            .pass(config.password.clone())
            .ip_or_hostname(Some(config.host.clone()))
            .tcp_port(config.port)
            .prefer_socket(false);
        (Conn::new(opts).unwrap(), config)
    }

    #[test]
    fn the_short_mariadb_setup_learns_what_the_full_probe_learns() {
        let (mut c, config) = conn();
        let (short_rows, short_wait) = setup(&mut c, &config.charset).unwrap();
        let (full_rows, full_wait) = full_probe(&mut c, None).unwrap();
        assert_eq!(short_rows.len(), 2, "the MariaDB probe was not used: {full_rows:?}");
        assert_eq!(Topology::from_probe(&short_rows), Topology::from_probe(&full_rows));
        assert!(Topology::from_probe(&short_rows).mariadb);
        assert_eq!(short_wait, full_wait);
    }

    #[test]
    fn a_session_knows_its_raised_wait_timeout_without_asking() {
        let mut session =
            MysqlSession::connect(&Config::from_url(&std::env::var("MYSQLLOCK_TEST_DSN").unwrap()).unwrap()).unwrap();
        let asked = session.execute("SELECT @@session.wait_timeout", &[]).unwrap().first(0).as_f64();
        assert_eq!(session.wait_timeout(), asked);
        assert!(asked.unwrap() >= f64::from(IDLE_SECONDS));
    }
}
