//! The core's own session: the project's wire client ([`crate::wire`]) where it can
//! authenticate, the `mysql` crate where it cannot. Either way a statement's first run
//! travels as text with its values written in as literals (one round trip, nothing to
//! prepare), and later runs are prepared.

use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;

use parking_lot::Mutex;

use mysql::prelude::Queryable;
use mysql::{Conn, OptsBuilder, Params};

use crate::config::Config;
use crate::error::{Error, Result, SessionError};
use crate::session::{Connector, Session};
use crate::topology::{self, Topology};
use crate::value::{Outcome, Value};
use crate::wire::{self, OpenError};

/// How long the server lets a lock-holding session sit idle: a week, well past any
/// sensible job (MariaDB's maximum is a year).
const IDLE_SECONDS: u32 = 7 * 24 * 3600;

/// MariaDB's topology in one cheap statement: what [`topology::PROBE`] learns there,
/// plus the session's `wait_timeout`.
const MARIADB_PROBE: &str = "SELECT @@version, @@wsrep_on, @@session.wait_timeout";

/// ER_UNSUPPORTED_PS: "This command is not supported in the prepared statement protocol yet".
const ER_UNSUPPORTED_PS: u16 = 1295;

/// ER_UNKNOWN_SYSTEM_VARIABLE.
const UNKNOWN_SYSTEM_VARIABLE: u16 = 1193;

/// The largest packet this client sends or accepts: far above any lock statement.
const CLIENT_MAX_PACKET: usize = 4 * 1024 * 1024;

/// Targets (`Config::target`) whose setup may not travel behind the handshake response:
/// learned the first time the server answers that response with a further step this
/// client could have taken ([`OpenError::Switched`]: a fresh scramble, which only a proxy
/// sends, a switch to `caching_sha2_password`, which a MySQL 8 greeting with
/// `mysql_native_password` sends for an account on it, or MariaDB's switch to `ed25519`).
/// That costs the one connection attempt (on MySQL it counts as a failed login of the
/// account); per target, so other accounts of the process keep the pipelined setup.
static SETUP_APART: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// Targets (`Config::target`) whose account the wire client cannot authenticate, learned
/// in this process: later connections go to the `mysql` crate at once instead of paying
/// a refused handshake each time.
static CRATE_TARGETS: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// How a session's connection logged in: which client, and what travelled. For
/// diagnostics (a slow first connection) and tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Authentication {
    /// The project's own client, `mysql_native_password` (MariaDB, older MySQL): one
    /// scramble.
    NativePassword,
    /// The own client, `caching_sha2_password` (MySQL's default) on its fast path: one
    /// scramble the server's cache accepted (or an account without a password).
    Sha2Fast,
    /// The own client, `caching_sha2_password`'s full authentication: the server's cache
    /// did not know the account (first login after a start, a `FLUSH PRIVILEGES` or a
    /// password change), so the password travelled, RSA-encrypted over TCP (a round
    /// trip more, to fetch the key) or in clear over a Unix socket. It fills the cache:
    /// the account's next login takes the fast path.
    Sha2Full,
    /// The own client, `sha256_password` (deprecated on MySQL, which the `mysql` crate
    /// does not speak): the password travelled RSA-encrypted with the server's public key,
    /// fetched first (a round trip more), on every login and over a Unix socket too (the
    /// plugin takes it in clear only over TLS). An account without a password sends none.
    Sha256Password,
    /// The own client, MariaDB's `ed25519`: a signature of the nonce, made with a key
    /// derived from the password (which never travels).
    Ed25519,
    /// The `mysql` crate: an account on a plugin the own client does not speak.
    Crate,
}

/// A native MySQL session. Never reconnects by itself: a new connection is a new
/// session, and the locks of the old one are gone.
pub struct MysqlSession {
    link: Link,
    id: u64,
    /// The connection's character set, the introducer of every string literal.
    charset: String,
    /// Batches are used: the connection speaks utf8mb4 (so a name written as a
    /// `_utf8mb4` literal in a batch is the very string a bound parameter carries), and
    /// the server (or a proxy in between) has not refused a multi-statement query.
    batches: bool,
    /// Learned in the setup round trip.
    topology: Topology,
    /// The session's `wait_timeout` after the setup raised it, in seconds (also learned
    /// in the setup round trip).
    wait_timeout: Option<f64>,
    /// Statement texts run once already (see [`Session::execute`] below).
    seen: HashSet<String>,
    /// Statements prepared on the own client's session, by text.
    prepared: HashMap<String, wire::Prepared>,
    /// Texts the server refused to prepare: always written in.
    unpreparable: HashSet<String>,
}

/// Prepared statements kept per session; lock statements are a handful of texts per
/// table, so this is only reached by a program using many tables.
const STATEMENT_CACHE: usize = 64;

/// The connection under a session.
enum Link {
    Own(wire::Connection),
    /// For what the wire client does not speak (see [`wire`]): another authentication
    /// plugin, an old server.
    Crate(Conn),
}

impl Link {
    /// Connects; returns whether the server looks like MariaDB, and the setup's answer
    /// when the setup travelled with the handshake.
    fn open(config: &Config, io_timeout: Option<std::time::Duration>, set: &str) -> SetupStart {
        let build = |greeting: &wire::Greeting| setup_query(looks_mariadb(version_of(&greeting.version)), set);
        let target = config.target();
        let why = loop {
            if CRATE_TARGETS.lock().contains(&target) {
                break "an earlier connection found the account on another plugin".to_owned();
            }
            let with_setup = !SETUP_APART.lock().contains(&target);
            let first: Option<&dyn Fn(&wire::Greeting) -> String> = if with_setup { Some(&build) } else { None };
            match wire::Connection::open(config, io_timeout, first) {
                Ok((conn, answer)) => {
                    let mariadb = looks_mariadb(version_of(&conn.greeting().version));
                    return Ok((Link::Own(conn), mariadb, answer));
                }
                Err(OpenError::Failed(e)) => return Err(e),
                Err(OpenError::Switched) => SETUP_APART.lock().push(target.clone()),
                Err(OpenError::Unsupported(why)) => {
                    CRATE_TARGETS.lock().push(target.clone());
                    break why;
                }
            }
        };
        Self::open_crate(config, io_timeout, &why)
    }

    /// Connects through the `mysql` crate, because of `why`.
    fn open_crate(config: &Config, io_timeout: Option<std::time::Duration>, why: &str) -> SetupStart {
        // The crate is built without TLS (it would bring a second TLS stack and an older
        // webpki): an account only it can log in is reached in clear, so a mode that
        // requires TLS is refused here rather than quietly weakened.
        if config.tls.mode().requires_tls() {
            return Err(SessionError::lost(format!(
                "TLS: ssl-mode={} requires TLS, but {why}, and only the plain fallback client speaks that; \
                 move the account to caching_sha2_password, mysql_native_password or ed25519",
                config.tls.mode().name()
            )));
        }
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
            .write_timeout(io_timeout);
        opts = match &config.socket {
            Some(path) => opts.socket(Some(path.clone())),
            None => opts.ip_or_hostname(Some(config.host.clone())).tcp_port(config.port),
        };
        let conn = Conn::new(opts).map_err(|e| {
            let e = session_error(e);
            SessionError { message: format!("{} (connecting through the mysql crate because {why})", e.message), ..e }
        })?;
        let mariadb = looks_mariadb(conn.server_version());
        Ok((Link::Crate(conn), mariadb, None))
    }

    fn connection_id(&self) -> u64 {
        match self {
            Link::Own(conn) => u64::from(conn.greeting().connection_id),
            Link::Crate(conn) => u64::from(conn.connection_id()),
        }
    }

    /// One text-protocol query, one outcome per statement in it.
    fn query(&mut self, sql: &str) -> wire::Answer {
        match self {
            Link::Own(conn) => conn.query(sql),
            Link::Crate(conn) => outcomes(conn.query_iter(sql).map_err(session_error)?),
        }
    }

    /// The rows of each result set (a SET has none).
    fn query_sets(&mut self, sql: &str) -> Result<Vec<Vec<Vec<Value>>>, SessionError> {
        Ok(self.query(sql)?.into_iter().map(|outcome| outcome.rows).collect())
    }
}

/// Every result of a query run through the `mysql` crate.
fn outcomes<P: mysql::prelude::Protocol>(mut result: mysql::QueryResult<'_, '_, '_, P>) -> wire::Answer {
    let mut outcomes = Vec::new();
    while let Some(mut set) = result.iter() {
        // A statement without rows has its OK packet now; reading the (absent) rows
        // moves past it.
        let (affected_rows, last_insert_id) = (set.affected_rows(), set.last_insert_id().unwrap_or(0));
        let rows = set
            .by_ref()
            .map(|row| {
                let row = row.map_err(session_error)?;
                let columns = row.columns();
                Ok(row.unwrap().into_iter().zip(columns.iter()).map(|(v, c)| from_mysql(v, c)).collect())
            })
            .collect::<Result<_, SessionError>>()?;
        outcomes.push(Outcome { rows, affected_rows, last_insert_id });
    }
    Ok(outcomes)
}

/// A connected link, whether the server looks like MariaDB, and the setup's answer when
/// it travelled with the handshake.
type SetupStart = Result<(Link, bool, Option<wire::Answer>), SessionError>;

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
        let connect_error = |e: SessionError| Error::Connect { target: config.target(), source: e };
        let set = session_settings(&config.charset);
        let (mut link, mariadb, answer) = Link::open(config, io_timeout, &set).map_err(connect_error)?;
        let (rows, wait_timeout) = setup(&mut link, mariadb, answer, &set).map_err(connect_error)?;
        let mut session = MysqlSession {
            id: link.connection_id(),
            link,
            charset: config.charset.clone(),
            batches: config.charset.eq_ignore_ascii_case("utf8mb4"),
            topology: Topology::from_probe(&rows),
            wait_timeout,
            seen: HashSet::new(),
            prepared: HashMap::new(),
            unpreparable: HashSet::new(),
        };
        let mut topology = session.topology;
        topology::complete(|sql| session.execute(sql, &[]), &mut topology).map_err(connect_error)?;
        session.topology = topology;
        Ok(session)
    }

    /// The seconds this session may sit idle before the server ends it (its
    /// `wait_timeout`, at least a week unless the server caps it lower), as learned
    /// while connecting: no statement.
    pub fn wait_timeout(&self) -> Option<f64> {
        self.wait_timeout
    }

    /// How this session's connection logged in.
    pub fn authentication(&self) -> Authentication {
        match &self.link {
            Link::Own(conn) => match conn.login() {
                wire::Login::Native => Authentication::NativePassword,
                wire::Login::Sha2Fast => Authentication::Sha2Fast,
                wire::Login::Sha2Full => Authentication::Sha2Full,
                wire::Login::Sha256 => Authentication::Sha256Password,
                wire::Login::Ed25519 => Authentication::Ed25519,
            },
            Link::Crate(_) => Authentication::Crate,
        }
    }

    /// Whether the session's connection runs over TLS.
    pub fn encrypted(&self) -> bool {
        match &self.link {
            Link::Own(conn) => conn.encrypted(),
            Link::Crate(_) => false,
        }
    }
}

/// A server whose greeting looks like MariaDB's: `5.5.5-…` before 11.0, `1x.…` after.
fn looks_mariadb(version: (u16, u16, u16)) -> bool {
    version == (5, 5, 5) || version.0 >= 10
}

/// The leading `major.minor.patch` of a greeting's version text (0 where it has none).
fn version_of(text: &str) -> (u16, u16, u16) {
    let mut numbers = text.split(['.', '-']).map(|part| part.parse::<u16>().unwrap_or(0));
    (numbers.next().unwrap_or(0), numbers.next().unwrap_or(0), numbers.next().unwrap_or(0))
}

/// The session variables. A holder sits idle while its job runs; the server's default
/// wait_timeout (8 h) would end the session, and with it the lock, under a long job.
/// SET NAMES although the handshake named a character set: a server started with
/// skip-character-set-client-handshake ignores that, and string literals must mean what
/// bound parameters would. The CAST: MySQL refuses GREATEST's result for an integer
/// variable (error 1232, "Incorrect argument type"), MariaDB takes either.
fn session_settings(charset: &str) -> String {
    format!("SET NAMES {charset}, SESSION wait_timeout = CAST(GREATEST(@@session.wait_timeout, {IDLE_SECONDS}) AS UNSIGNED)")
}

/// The setup: the session variables, and what the server is (the topology probe's rows)
/// with the session's `wait_timeout`, in one query.
///
/// What the server is: `SHOW VARIABLES` (the topology probe) reads every variable, some
/// 200 µs of server time per connection. A server that looks like MariaDB is asked for
/// the two variables instead (`@@wsrep_on`), and only one that then does not say
/// MariaDB in `@@version` or has no `wsrep_on` (a build without Galera support) gets the
/// full probe as well. MariaDB has no Group Replication, so the probe's third variable
/// is not needed there.
fn setup_query(mariadb: bool, set: &str) -> String {
    match mariadb {
        true => format!("{set}; {MARIADB_PROBE}"),
        false => format!("{set}; SELECT @@session.wait_timeout; {}", topology::PROBE),
    }
}

/// Reads the setup's answer (running the setup first unless it travelled with the
/// handshake): the topology probe's rows and the session's `wait_timeout`.
fn setup(
    link: &mut Link,
    mariadb: bool,
    answer: Option<wire::Answer>,
    set: &str,
) -> Result<(Vec<Vec<Value>>, Option<f64>), SessionError> {
    let answer = match answer {
        Some(answer) => answer,
        None => link.query(&setup_query(mariadb, set)),
    };
    let mut sets: Vec<Vec<Vec<Value>>> = match answer {
        Ok(outcomes) => outcomes.into_iter().map(|outcome| outcome.rows).collect(),
        // No such variable: not a Galera-capable MariaDB; the full probe tells.
        Err(e) if mariadb && e.code == Some(UNKNOWN_SYSTEM_VARIABLE) => return full_probe(link),
        Err(e) => return Err(e),
    };
    if !mariadb {
        return Ok(probe_answer(sets));
    }
    if let Some([version, wsrep_on, wait_timeout]) = sets.pop().as_ref().and_then(|s| s.first()?.get(..3)) {
        let rows = vec![
            vec![Value::Text("version".into()), version.clone()],
            vec![Value::Text("wsrep_on".into()), wsrep_on.clone()],
        ];
        if Topology::from_probe(&rows).mariadb {
            return Ok((rows, wait_timeout.as_f64()));
        }
    }
    // The variables are set either way (SET ran first).
    full_probe(link)
}

/// `SHOW VARIABLES` (the topology probe) and the session's `wait_timeout`.
fn full_probe(link: &mut Link) -> Result<(Vec<Vec<Value>>, Option<f64>), SessionError> {
    Ok(probe_answer(link.query_sets(&format!("SELECT @@session.wait_timeout; {}", topology::PROBE))?))
}

/// The probe's rows (the last result) and the `wait_timeout` (the one before).
fn probe_answer(mut sets: Vec<Vec<Vec<Value>>>) -> (Vec<Vec<Value>>, Option<f64>) {
    let rows = sets.pop().unwrap_or_default();
    let wait_timeout = sets.pop().and_then(|rows| rows.first()?.first()?.as_f64());
    (rows, wait_timeout)
}

/// Writes `params` into `sql` at its `?` placeholders (outside quotes), as literals:
/// the statement then travels in one text-protocol round trip, where a prepared
/// statement costs a second one the first time, in every short-lived process.
///
/// Nothing a caller passes can change the statement: a string becomes a hexadecimal
/// literal (only hex digits reach the SQL) with the connection's character set as its
/// introducer, which makes it the very string a bound parameter would be (same bytes,
/// same character set, the same coercibility in comparisons, so an indexed column keeps
/// its collation); numbers are formatted from Rust integers and finite floats. The values
/// have passed [`check_values`].
fn inline(sql: &str, params: &[Value], charset: &str) -> String {
    let mut out = String::with_capacity(sql.len() + params.len() * 24);
    let mut copied = 0;
    for (at, value) in placeholders(sql).into_iter().zip(params) {
        out.push_str(&sql[copied..at]);
        // Set apart, so it never joins the token before it (`LIKE?`).
        out.push(' ');
        write_literal(&mut out, value, charset);
        copied = at + 1;
    }
    out.push_str(&sql[copied..]);
    out
}

/// Writes one value; a float must be finite (see [`check_values`]).
fn write_literal(out: &mut String, value: &Value, charset: &str) {
    let hex = |out: &mut String, bytes: &[u8]| {
        out.push_str("X'");
        for b in bytes {
            let _ = write!(out, "{b:02X}");
        }
        out.push('\'');
    };
    match value {
        Value::Null => out.push_str("NULL"),
        Value::Int(i) => {
            let _ = write!(out, "{i}");
        }
        Value::UInt(u) => {
            let _ = write!(out, "{u}");
        }
        // With an exponent, which makes SQL read it as a DOUBLE, as a bound float is
        // (without one it would be a DECIMAL: 0.1 + 0.2 = 0.3 would hold).
        Value::Float(f) => {
            let _ = write!(out, "{f:e}");
        }
        Value::Text(s) => {
            let _ = write!(out, "_{charset} ");
            hex(out, s.as_bytes());
        }
        // A binary string, as a bound BLOB is.
        Value::Bytes(b) => {
            out.push_str("_binary ");
            hex(out, b);
        }
    }
}

/// The byte offsets of the `?` placeholders of `sql` as the server counts them: not in
/// quoted strings or identifiers (a backslash escapes the next character in a string),
/// not in comments (`#` and `-- ` to the end of the line, `/* */`; but the server runs
/// what `/*!` and `/*M!` hold, so those count).
fn placeholders(sql: &str) -> Vec<usize> {
    #[derive(Clone, Copy, PartialEq)]
    enum In {
        Code,
        Quote(u8),
        Line,
        Block,
    }
    let bytes = sql.as_bytes();
    let mut at = Vec::new();
    let mut state = In::Code;
    let mut i = 0;
    while i < bytes.len() {
        let (b, next) = (bytes[i], bytes.get(i + 1).copied());
        match state {
            In::Quote(q) if b == b'\\' && q != b'`' => i += 1,
            In::Quote(q) if b == q => state = In::Code,
            In::Line if b == b'\n' => state = In::Code,
            In::Block if b == b'*' && next == Some(b'/') => {
                state = In::Code;
                i += 1;
            }
            In::Code => match b {
                b'\'' | b'"' | b'`' => state = In::Quote(b),
                b'?' => at.push(i),
                b'#' => state = In::Line,
                b'-' if next == Some(b'-') && !matches!(bytes.get(i + 2), Some(c) if !c.is_ascii_whitespace()) => {
                    state = In::Line
                }
                b'/' if next == Some(b'*') && !executable_comment(&bytes[i..]) => {
                    state = In::Block;
                    i += 1;
                }
                _ => {}
            },
            _ => {}
        }
        i += 1;
    }
    at
}

/// `/*!` (MySQL) and `/*M!` (MariaDB) open comments whose content the server runs.
fn executable_comment(from: &[u8]) -> bool {
    from.starts_with(b"/*!") || from.starts_with(b"/*M!")
}

/// The outcome of a single statement.
fn first(sql: &str, mut outcomes: Vec<Outcome>) -> Result<Outcome, SessionError> {
    match outcomes.is_empty() {
        true => Err(SessionError::client(format!("no result for {sql:?}"))),
        false => Ok(outcomes.swap_remove(0)),
    }
}

/// Refuses, before anything is sent, what either protocol would get wrong: a value count
/// that does not match the placeholders, and floats SQL has no literal for.
fn check_values(sql: &str, params: &[Value]) -> Result<(), SessionError> {
    if params.len() != placeholders(sql).len() {
        return Err(placeholder_mismatch(sql, params.len()));
    }
    match params.iter().find(|v| matches!(v, Value::Float(f) if !f.is_finite())) {
        Some(value) => Err(SessionError::client(format!("{value:?} is not an SQL value"))),
        None => Ok(()),
    }
}

fn placeholder_mismatch(sql: &str, given: usize) -> SessionError {
    SessionError::client(format!("{given} values for the placeholders of {sql:?}"))
}

impl MysqlSession {
    /// Runs a statement prepared (binary protocol), preparing it on first need.
    fn execute_prepared(&mut self, sql: &str, params: &[Value]) -> wire::Answer {
        let conn = match &mut self.link {
            Link::Own(conn) => conn,
            Link::Crate(conn) => {
                // The crate keeps its own statement cache.
                let params = Params::Positional(params.iter().map(to_mysql).collect());
                return outcomes(conn.exec_iter(sql, params).map_err(session_error)?);
            }
        };
        if !self.prepared.contains_key(sql) {
            if self.prepared.len() >= STATEMENT_CACHE {
                if let Some(old) = self.prepared.keys().next().cloned() {
                    if let Some(statement) = self.prepared.remove(&old) {
                        conn.close(statement)?;
                    }
                }
            }
            let statement = match conn.prepare(sql) {
                Ok(statement) => statement,
                // Not a statement the server prepares: written in every time.
                Err(e) if e.code == Some(ER_UNSUPPORTED_PS) => {
                    self.unpreparable.insert(sql.to_owned());
                    return conn.query(&inline(sql, params, &self.charset));
                }
                Err(e) => return Err(e),
            };
            self.prepared.insert(sql.to_owned(), statement);
        }
        match self.prepared.get(sql) {
            Some(statement) => conn.execute(statement, params),
            None => Err(SessionError::lost("a prepared statement went missing")),
        }
    }
}

impl Session for MysqlSession {
    /// A statement's first run travels as text with its values written in: a
    /// short-lived process (a cron job taking one lock) never pays a prepare round trip.
    /// From its second run on it is prepared once and executed: the server skips
    /// parsing, about 5 µs per statement, which a process locking in a loop notices.
    fn execute(&mut self, sql: &str, params: &[Value]) -> Result<Outcome, SessionError> {
        if params.is_empty() {
            return first(sql, self.link.query(sql)?);
        }
        check_values(sql, params)?;
        // Through the mysql crate (the fallback), always prepared: its parameters are not
        // quite what this module writes in (bytes bound as strings).
        let written_in =
            matches!(self.link, Link::Own(_)) && (!self.seen.contains(sql) || self.unpreparable.contains(sql));
        let answer = if !written_in {
            self.execute_prepared(sql, params)
        } else {
            if self.seen.len() >= 4 * STATEMENT_CACHE {
                self.seen.clear();
            }
            self.seen.insert(sql.to_owned());
            self.link.query(&inline(sql, params, &self.charset))
        };
        first(sql, answer?)
    }

    fn connection_id(&self) -> u64 {
        self.id
    }

    fn batches(&self) -> bool {
        self.batches
    }

    fn execute_batch(&mut self, sql: &str) -> Result<Vec<Outcome>, SessionError> {
        self.link.query(sql).inspect_err(|e| {
            // A syntax error at the first `;`: multi-statements are off somewhere on
            // the way (nothing ran). Statement by statement from now on.
            if e.code == Some(1064) {
                self.batches = false;
            }
        })
    }

    fn topology(&self) -> Option<Topology> {
        Some(self.topology)
    }

    fn kill(&mut self, id: u64) -> Result<(), SessionError> {
        // KILL cannot take a bound parameter; the id is an integer, formatted here.
        self.link.query(&format!("KILL {id}")).map(|_| ())
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

/// A value of the crate's, as the own client reads it: temporal values as the text
/// protocol shows them (the column says DATE or DATETIME and how many fractional digits).
fn from_mysql(v: mysql::Value, column: &mysql::Column) -> Value {
    use mysql::consts::ColumnType;
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
        mysql::Value::Date(year, month, day, hour, minute, second, micros) => {
            let date = format!("{year:04}-{month:02}-{day:02}");
            Value::Text(match column.column_type() {
                ColumnType::MYSQL_TYPE_DATE | ColumnType::MYSQL_TYPE_NEWDATE => date,
                _ => format!("{date} {hour:02}:{minute:02}:{second:02}{}", wire::fraction(micros, column.decimals())),
            })
        }
        mysql::Value::Time(negative, days, hours, minutes, seconds, micros) => {
            let sign = if negative { "-" } else { "" };
            let hours = days * 24 + u32::from(hours);
            Value::Text(format!(
                "{sign}{hours:02}:{minutes:02}:{seconds:02}{}",
                wire::fraction(micros, column.decimals())
            ))
        }
    }
}

/// The one mapping from the `mysql` crate's errors: server errors keep their number,
/// everything about the transport means the session is gone.
fn session_error(e: mysql::Error) -> SessionError {
    match e {
        mysql::Error::MySqlError(m) => SessionError::server(m.code, m.message),
        mysql::Error::UrlError(u) => SessionError::client(u.to_string()),
        mysql::Error::DriverError(d) => SessionError::lost(d.to_string()),
        mysql::Error::IoError(io) => SessionError::lost(io.to_string()),
        other => SessionError::lost(other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // tests: a panic is the failure report
    use super::*;

    fn config() -> Config {
        let dsn = std::env::var("MYSQLLOCK_TEST_DSN")
            .expect("MYSQLLOCK_TEST_DSN is not set: start a server with scripts/mariadb.sh or scripts/mysql.sh");
        Config::from_url(&dsn).unwrap()
    }

    /// Whether the test server is MariaDB (`MYSQLLOCK_TEST_SERVER`, written by
    /// scripts/mariadb.sh and scripts/mysql.sh): some answers differ by server.
    fn on_mariadb() -> bool {
        match std::env::var("MYSQLLOCK_TEST_SERVER").as_deref() {
            Ok("mariadb") => true,
            Ok("mysql") => false,
            other => panic!("MYSQLLOCK_TEST_SERVER is {other:?}, not mariadb or mysql: export DIR/env of scripts/mariadb.sh or scripts/mysql.sh"),
        }
    }

    fn session() -> MysqlSession {
        MysqlSession::connect(&config()).unwrap()
    }

    #[test]
    fn greetings_of_mariadb_look_like_mariadb_and_mysqls_do_not() {
        for (text, mariadb) in [
            ("5.5.5-10.11.19-MariaDB-0+deb12u1", true),
            ("11.4.2-MariaDB", true),
            ("8.0.36", false),
            ("5.7.44-log", false),
        ] {
            assert_eq!(looks_mariadb(version_of(text)), mariadb, "{text}");
        }
        assert_eq!(version_of("5.7.44-log"), (5, 7, 44));
    }

    #[test]
    fn a_session_runs_on_the_projects_own_client() {
        // mysql_native_password on MariaDB, caching_sha2_password on MySQL.
        let session = session();
        assert!(matches!(session.link, Link::Own(_)));
        let native = session.authentication() == Authentication::NativePassword;
        assert_eq!(native, on_mariadb(), "{:?}", session.authentication());
    }

    #[test]
    fn the_short_mariadb_setup_learns_what_the_full_probe_learns() {
        let config = config();
        let set = session_settings(&config.charset);
        let (mut link, mariadb, _) = Link::open(&config, None, &set).unwrap();
        assert_eq!(mariadb, on_mariadb(), "the greeting tells MariaDB from MySQL");
        if !mariadb {
            // MySQL gets the full probe in its setup: the same rows as the probe alone.
            let (rows, wait) = setup(&mut link, false, None, &set).unwrap();
            let (full_rows, full_wait) = full_probe(&mut link).unwrap();
            assert_eq!((rows, wait), (full_rows, full_wait));
            return;
        }
        let (short_rows, short_wait) = setup(&mut link, true, None, &set).unwrap();
        let (full_rows, full_wait) = full_probe(&mut link).unwrap();
        assert_eq!(short_rows.len(), 2, "the MariaDB probe was not used: {full_rows:?}");
        assert_eq!(Topology::from_probe(&short_rows), Topology::from_probe(&full_rows));
        assert!(Topology::from_probe(&short_rows).mariadb);
        assert_eq!(short_wait, full_wait);
    }

    #[test]
    fn a_session_knows_its_raised_wait_timeout_without_asking() {
        let mut session = session();
        let asked = session.execute("SELECT @@session.wait_timeout", &[]).unwrap().first(0).as_f64();
        assert_eq!(session.wait_timeout(), asked);
        assert!(asked.unwrap() >= f64::from(IDLE_SECONDS));
    }

    #[test]
    fn a_session_knows_its_own_connection_id() {
        let mut session = session();
        let asked = session.execute("SELECT CONNECTION_ID()", &[]).unwrap().first(0).as_u64();
        assert_eq!(asked, Some(session.connection_id()));
    }

    #[test]
    fn values_come_back_exactly_written_in_and_bound() {
        let mut session = session();
        let text = "it's \\ a \"?\" `x` ü 🔒 \0 end";
        let params = [
            Value::from(text),
            Value::Text(String::new()),
            Value::Bytes(vec![0, 0x27, 0x5C, 0xFF]),
            Value::Int(i64::MIN),
            Value::UInt(u64::MAX),
            Value::Float(0.000_125),
            Value::Null,
        ];
        // The first run travels as text, the later ones prepared.
        for run in 0..3 {
            let out = session.execute("SELECT ?, ?, ?, ?, ?, ?, ?", &params).unwrap();
            let row = &out.rows[0];
            assert_eq!(row[0], Value::from(text), "run {run}");
            assert_eq!(row[1], Value::Text(String::new()), "run {run}");
            assert_eq!(row[2], Value::Bytes(vec![0, 0x27, 0x5C, 0xFF]), "run {run}");
            assert_eq!(row[3].as_i64(), Some(i64::MIN), "run {run}");
            assert_eq!(row[4].as_text().as_deref(), Some("18446744073709551615"), "run {run}");
            assert_eq!(row[5].as_f64(), Some(0.000_125), "run {run}");
            assert!(row[6].is_null(), "run {run}");
        }
    }

    #[test]
    fn a_written_in_value_means_what_the_bound_one_means() {
        let mut session = session();
        // A float is a DOUBLE (as a DECIMAL, 0.1 + 0.2 would equal 0.3); bytes are a
        // binary string (compared byte by byte, not in the connection's collation).
        let sql = "SELECT ? + 0.2 = 0.3, ? = 'a', ? = 'A', ? LIKE 'x%'";
        let params = [Value::Float(0.1), Value::Bytes(b"A".to_vec()), Value::Bytes(b"A".to_vec()), Value::from("xy")];
        for run in ["written in", "bound"] {
            let row = session.execute(sql, &params).unwrap().rows.remove(0);
            let flags: Vec<_> = row.iter().map(Value::as_i64).collect();
            assert_eq!(flags, [Some(0), Some(0), Some(1), Some(1)], "{run}");
        }
        assert_eq!(session.prepared.len(), 1, "the second run prepares, the third reuses");
    }

    #[test]
    fn results_read_the_same_as_text_and_prepared() {
        let mut session = session();
        let sql = "SELECT ? + 0, CAST(7 AS UNSIGNED), -5, CAST(-3 AS SIGNED) * 1000000000000, 2.5e0, 1.25, \
                   DATE('2024-02-03'), TIMESTAMP('2024-02-03 04:05:06.000007'), CAST('2024-02-03 04:05:06' AS DATETIME), \
                   TIME('-25:01:02'), CONNECTION_ID(), NULL, 'x'";
        let runs: Vec<Vec<Option<String>>> = (0..2)
            .map(|_| session.execute(sql, &[Value::Int(1)]).unwrap().rows[0].iter().map(Value::as_text).collect())
            .collect();
        assert_eq!(runs[0], runs[1], "text first, prepared second");
        let id = session.connection_id().to_string();
        let expected = [
            Some("1"),
            Some("7"),
            Some("-5"),
            Some("-3000000000000"),
            Some("2.5"),
            Some("1.25"),
            Some("2024-02-03"),
            Some("2024-02-03 04:05:06.000007"),
            Some("2024-02-03 04:05:06"),
            Some("-25:01:02"),
            Some(id.as_str()),
            None,
            Some("x"),
        ];
        assert_eq!(runs[1].iter().map(Option::as_deref).collect::<Vec<_>>(), expected);
    }

    #[test]
    fn a_written_in_string_compares_like_a_bound_one() {
        // Coercibility: the column's collation decides, so a latin1 case-insensitive
        // column matches another spelling, written in or bound, through its index.
        let mut session = session();
        session
            .execute("CREATE TEMPORARY TABLE spellings (n VARCHAR(10) CHARACTER SET latin1 COLLATE latin1_swedish_ci, KEY (n))", &[])
            .unwrap();
        session.execute("INSERT INTO spellings VALUES ('Fóo'), ('bar')", &[]).unwrap();
        for run in ["written in", "bound"] {
            let out = session.execute("SELECT COUNT(*) FROM spellings WHERE n = ?", &[Value::from("FÓO")]).unwrap();
            assert_eq!(out.first(0).as_i64(), Some(1), "{run}");
            let coercibility = session.execute("SELECT COERCIBILITY(?), 1", &[Value::from("x")]).unwrap();
            assert_eq!(coercibility.first(0).as_i64(), Some(4), "{run}: as coercible as a parameter");
        }
        let plan = session.execute("EXPLAIN SELECT n FROM spellings WHERE n = ?", &[Value::from("x")]).unwrap();
        // MariaDB's plan is a table (key = n); MySQL 9's default is a tree of text.
        let uses_n = |v: &Value| v.as_text().is_some_and(|t| t == "n" || t.contains(" on spellings using n "));
        assert!(plan.rows[0].iter().any(uses_n), "the index is used: {plan:?}");
    }

    #[test]
    fn question_marks_in_strings_and_comments_are_not_placeholders() {
        let cases = [
            ("SELECT '?', \"?\", ? AS `?`", 1),
            ("SELECT 'it\\'s ?', ?", 1),
            ("SELECT ? -- why?\n, ?", 2),
            ("SELECT ? # why?\n, ?", 2),
            ("SELECT ? /* why? */, ?", 2),
            ("SELECT ?--1", 1),
            ("SELECT ? /*! , ? */", 2),
            ("SELECT ? /*M!100000 , ? */", 2),
            ("SELECT `a\\`, ?", 1),
        ];
        for (sql, count) in cases {
            assert_eq!(placeholders(sql).len(), count, "{sql}");
        }
        let mut session = session();
        let sql = "SELECT 'it\\'s ?', ? /* ? */ -- ?\n";
        for run in ["written in", "bound"] {
            let row = session.execute(sql, &[Value::Int(7)]).unwrap().rows.remove(0);
            assert_eq!(
                row.iter().map(Value::as_text).collect::<Vec<_>>(),
                [Some("it's ?".into()), Some("7".into())],
                "{run}"
            );
        }
    }

    #[test]
    fn an_error_in_the_middle_of_the_rows_leaves_the_session_usable() {
        let mut session = session();
        let e = session
            .execute(
                "SELECT IF(seq = 3, (SELECT 1 UNION SELECT 2), seq) \
             FROM (SELECT 1 AS seq UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4 UNION ALL SELECT 5) AS s",
                &[],
            )
            .unwrap_err();
        assert_eq!((e.code, e.lost), (Some(1242), false), "{e:?}");
        assert_eq!(session.execute("SELECT ?", &[Value::Int(5)]).unwrap().first(0).as_i64(), Some(5));
    }

    #[test]
    fn a_placeholder_count_mismatch_is_an_error_not_a_statement() {
        let mut session = session();
        // Each statement once written in, then prepared.
        session.execute("SELECT ?, ?", &[Value::Int(1), Value::Int(2)]).unwrap();
        session.execute("SELECT ?", &[Value::Int(1)]).unwrap();
        for _ in 0..2 {
            for (sql, params) in
                [("SELECT ?, ?", vec![Value::Int(1)]), ("SELECT ?", vec![Value::Int(1), Value::Int(2)])]
            {
                let e = session.execute(sql, &params).unwrap_err();
                assert!(!e.lost && e.code.is_none(), "{e:?}");
            }
            let e = session.execute("SELECT ?", &[Value::Float(f64::NAN)]).unwrap_err();
            assert!(!e.lost && e.message.contains("NaN"), "{e:?}");
        }
        assert_eq!(
            session.execute("SELECT 1", &[]).unwrap().first(0).as_i64(),
            Some(1),
            "the session must stay usable"
        );
    }

    #[test]
    fn a_batch_returns_each_statements_outcome_and_stops_at_an_error() {
        let mut session = session();
        let outcomes = session
            .execute_batch("SET @mysqllock_t = 1; SELECT @mysqllock_t + 1; SELECT 'a' UNION SELECT 'b'")
            .unwrap();
        assert_eq!(outcomes.len(), 3);
        assert_eq!(outcomes[1].first(0).as_i64(), Some(2));
        assert_eq!(outcomes[2].rows, vec![vec![Value::from("a")], vec![Value::from("b")]]);
        let e = session
            .execute_batch("SET @mysqllock_t = 5; SELECT * FROM no_such_table_here; SET @mysqllock_t = 9")
            .unwrap_err();
        assert_eq!(e.code, Some(1146));
        assert!(!e.lost);
        assert_eq!(session.execute("SELECT @mysqllock_t", &[]).unwrap().first(0).as_i64(), Some(5));
    }

    #[test]
    fn a_killed_session_reports_itself_lost() {
        let mut victim = session();
        let mut killer = session();
        killer.kill(victim.connection_id()).unwrap();
        let e = victim.execute("SELECT 1", &[]).unwrap_err();
        assert!(e.lost, "{e:?}");
        assert!(victim.execute("SELECT 1", &[]).unwrap_err().lost);
    }

    #[test]
    fn the_mysql_crate_fallback_connects_and_runs_the_setup() {
        // No account on either test server needs the fallback any more (the own client
        // speaks every plugin they offer a password account on), so it is called
        // directly: what an account on another plugin, or an old server, would get.
        let config = config();
        let (mut link, mariadb, answer) = Link::open_crate(&config, None, "a test asked for it").unwrap();
        assert!(matches!(link, Link::Crate(_)) && answer.is_none());
        assert_eq!(mariadb, on_mariadb());
        let who = link.query("SELECT CURRENT_USER(), _utf8mb4'ü''?'").unwrap();
        assert_eq!(who[0].rows[0][1], Value::from("ü'?"));
    }

    #[test]
    fn the_fallback_refuses_a_mode_that_requires_tls() {
        let mut config = config();
        config.tls.mode = Some(crate::config::SslMode::Required);
        let e = Link::open_crate(&config, None, "a test asked for it").err().expect("a plain connection was made");
        assert!(e.message.contains("ssl-mode=REQUIRED"), "{e}");
    }

    #[test]
    fn an_account_on_the_second_plugin_connects_through_the_own_client() {
        let dsn = std::env::var("MYSQLLOCK_TEST_ED25519_DSN").expect(
            "MYSQLLOCK_TEST_ED25519_DSN is not set: start the server with scripts/mariadb.sh or scripts/mysql.sh",
        );
        let mut session = MysqlSession::connect(&Config::from_url(&dsn).unwrap()).unwrap();
        // MariaDB: ed25519. MySQL 9.7 has no ed25519: its env file names a
        // sha256_password account (which the crate would refuse).
        let (path, user) = match on_mariadb() {
            true => (Authentication::Ed25519, "locker_ed@127.0.0.1"),
            false => (Authentication::Sha256Password, "locker_sha@127.0.0.1"),
        };
        assert_eq!(session.authentication(), path);
        let user_row = session.execute("SELECT CURRENT_USER(), ?", &[Value::from("ü'?")]).unwrap();
        assert_eq!(user_row.rows[0], vec![Value::from(user), Value::from("ü'?")]);
        assert!(session.wait_timeout().unwrap() >= f64::from(IDLE_SECONDS), "the setup must run on this path too");
    }

    #[test]
    fn a_server_that_accepts_but_never_greets_fails_within_the_connect_timeout() {
        let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let mut config = config();
        config.host = "127.0.0.1".into();
        config.port = silent.local_addr().unwrap().port();
        config.connect_timeout = std::time::Duration::from_millis(300);
        let started = std::time::Instant::now();
        let e = MysqlSession::connect(&config).err().expect("a silent server must not give a session");
        assert!(matches!(e, Error::Connect { .. }), "{e:?}");
        assert!(started.elapsed() < std::time::Duration::from_secs(5), "waited {:?}", started.elapsed());
        drop(silent);
    }

    #[test]
    fn a_wrong_password_is_refused_with_the_servers_error() {
        let mut config = config();
        config.password = Some("certainly-not-the-password".into());
        match MysqlSession::connect(&config) {
            Err(Error::Connect { source, .. }) => assert_eq!(source.code, Some(1045), "{source:?}"),
            other => panic!("expected access denied, got {:?}", other.err()),
        }
    }
}
