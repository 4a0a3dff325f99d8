//! The core's own session, on the project's wire client ([`super::wire`]). A statement's
//! first run travels as text with its values written in as literals (one round trip,
//! nothing to prepare), and later runs are prepared.

use std::time::Duration;

use parking_lot::Mutex;

use super::literals::inline;
use super::statements::{Form, Statements};
use super::wire::{self, Bound, OpenError};
use crate::config::{Config, Table};
use crate::deadline::Deadline;
use crate::error::{Error, Result, SessionError};
use crate::session::{Connector, OpenSession, Session};
use crate::topology::{self, Topology};
use crate::value::{Outcome, Value};

/// How long the server lets a lock-holding session sit idle: a week, well past any
/// sensible job (MariaDB's maximum is a year).
const IDLE_SECONDS: u32 = 7 * 24 * 3600;

/// MariaDB's topology in one cheap statement: what [`topology::PROBE`] learns there,
/// plus the session's `wait_timeout`.
const MARIADB_PROBE: &str = "SELECT @@version, @@wsrep_on, @@session.wait_timeout";

/// The same for a server of the MySQL family in one cheap statement: its version and
/// version comment (where Galera builds of MySQL say so: Percona XtraDB Cluster's
/// "WSREP version", Codership's "wsrep_"), the session's `wait_timeout`, and whether
/// Group Replication can run there at all: it refuses to start without GTIDs and the
/// binary log, so a server with either off is no member, and reading two variables is
/// free. Where both are on, [`GROUP_REPLICATION_ACTIVE`] asks the plugin, in a statement
/// of its own ([`mysql_topology`]). Read once, at connect, as the plugin's state was.
const MYSQL_PROBE: &str = "SELECT @@version, @@version_comment, @@session.wait_timeout, \
    @@global.gtid_mode = 'ON' AND @@global.log_bin";

/// Whether the Group Replication plugin is active: asked only where [`MYSQL_PROBE`] says
/// the server could be a member. [`topology::PROBE`]'s `SHOW VARIABLES` reads every
/// variable of the server: 0.7-1.7 ms on MySQL 9.7 (PDO, 200 runs); this is cheaper but
/// not cheap, 0.71-0.94 ms of server time on a fresh connection in the slow log (the
/// probe without it 0.10 ms). It costs that much wherever the query names
/// `information_schema.PLUGINS`, under an `IF` or a `WHERE` that folds to false alike
/// (the server fills the table first), and prepared from a user variable only where the
/// server chose it (`PREPARE` fills it as well: 0.3 ms more than the subquery), so it
/// takes a round trip of its own where it is needed, and none where it is not.
/// `performance_schema.global_variables` and `variables_info` cost more;
/// `performance_schema.replication_group_members` costs 0.10 ms but is refused to an
/// account without SELECT on performance_schema (error 1142), which most applications'
/// accounts are.
const GROUP_REPLICATION_ACTIVE: &str =
    "SELECT COUNT(*) FROM information_schema.PLUGINS WHERE PLUGIN_NAME = 'group_replication' AND PLUGIN_STATUS = 'ACTIVE'";

/// ER_UNKNOWN_SYSTEM_VARIABLE.
const UNKNOWN_SYSTEM_VARIABLE: u16 = 1193;

/// Targets (`Config::target`) whose setup may not travel behind the handshake response:
/// learned the first time the server answers that response with a further step this
/// client could have taken ([`OpenError::Switched`]: a fresh scramble, which only a proxy
/// sends, a switch to `caching_sha2_password`, which a MySQL 8 greeting with
/// `mysql_native_password` sends for an account on it, or MariaDB's switch to `ed25519`).
/// That costs the one connection attempt (on MySQL it counts as a failed login of the
/// account); per target, so other accounts of the process keep the pipelined setup.
static SETUP_APART: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// How a session's connection logged in: which plugin, and what travelled. For
/// diagnostics (a slow first connection) and tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Authentication {
    /// `mysql_native_password` (MariaDB, older MySQL): one scramble.
    NativePassword,
    /// `caching_sha2_password` (MySQL's default) on its fast path: one scramble the
    /// server's cache accepted (or an account without a password).
    Sha2Fast,
    /// `caching_sha2_password`'s full authentication: the server's cache did not know the
    /// account (first login after a start, a `FLUSH PRIVILEGES` or a password change), so
    /// the password travelled, RSA-encrypted over TCP (a round trip more, to fetch the
    /// key) or in clear over a Unix socket. It fills the cache: the account's next login
    /// takes the fast path.
    Sha2Full,
    /// `sha256_password` (deprecated on MySQL): the password travelled RSA-encrypted with
    /// the server's public key, fetched first (a round trip more), on every login and over
    /// a Unix socket too (the plugin takes it in clear only over TLS). An account without
    /// a password sends none.
    Sha256Password,
    /// MariaDB's `ed25519`: a signature of the nonce, made with a key derived from the
    /// password (which never travels).
    Ed25519,
}

/// A native MySQL session. Never reconnects by itself: a new connection is a new
/// session, and the locks of the old one are gone.
pub struct MysqlSession {
    conn: wire::Connection,
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
    /// How many columns the lock table has, when the setup looked
    /// ([`MysqlSession::connect_learning`]).
    lock_table_columns: Option<usize>,
    /// The statement texts run on this session (see [`MysqlSession::run`]).
    statements: Statements,
}

/// What the connect does not speak, said with what it does: the end of the connect.
const SPOKEN: &str = "mysqllock logs in with mysql_native_password, caching_sha2_password, \
    sha256_password or ed25519, to a server of the 4.1 protocol with pluggable authentication";

/// Connects under the connect's `bound`; returns whether the server looks like MariaDB,
/// and the setup's answer when the setup travelled with the handshake.
///
/// What the wire client does not speak (an account on another authentication plugin, a
/// server older than the 4.1 protocol or its pluggable authentication, a greeting it
/// cannot read) ends the connect, saying so. The `mysql` crate once took those over, but
/// as configured it spoke no plugin the wire client does not, and of the servers only
/// those before pluggable authentication (MySQL 4.1 to 5.5.6, MariaDB 5.1), whose
/// `GET_LOCK` holds one lock per session, too few for this library (MySQL 5.7.5 and
/// MariaDB 10.0.2 hold many); it cost every process that loads the library a third of its
/// image (its greeting regexes' Unicode tables alone were 2,938 relocations), and a debug
/// build a panic on a junk greeting.
fn open(config: &Config, bound: Bound, set: &str, probe: Option<&str>) -> SetupStart {
    let build = |greeting: &wire::Greeting| setup_query(looks_mariadb(version_of(&greeting.version)), set, probe);
    let target = config.target();
    loop {
        let with_setup = !SETUP_APART.lock().contains(&target);
        let first: Option<&dyn Fn(&wire::Greeting) -> String> = if with_setup { Some(&build) } else { None };
        match wire::Connection::open(config, bound, first) {
            Ok((conn, answer)) => {
                let mariadb = looks_mariadb(version_of(&conn.greeting().version));
                return Ok((conn, mariadb, answer));
            }
            Err(OpenError::Failed(e)) => return Err(e),
            // Only a login with the setup behind it is switched: the next goes without,
            // so this loop connects twice at most.
            Err(OpenError::Switched) if with_setup => SETUP_APART.lock().push(target.clone()),
            Err(OpenError::Switched) => {
                return Err(SessionError::lost("the server switched the login again, with no setup behind it"))
            }
            Err(OpenError::Unsupported(why)) => return Err(SessionError::client(format!("{why}: {SPOKEN}"))),
        }
    }
}

/// The rows of each result set of one text-protocol query (a SET has none).
fn query_sets(conn: &mut wire::Connection, sql: &str, bound: Bound) -> Result<Vec<Vec<Vec<Value>>>, SessionError> {
    Ok(conn.query(sql, bound)?.into_iter().map(|outcome| outcome.rows).collect())
}

/// A connection, whether the server looks like MariaDB, and the setup's answer when it
/// travelled with the handshake.
type SetupStart = Result<(wire::Connection, bool, Option<wire::Answer>), SessionError>;

impl MysqlSession {
    /// Connects: TCP, TLS, the login and the session's setup, all by the connect's
    /// deadline ([`Config::connect_deadline`], made here, once). Every later read and
    /// write is bounded by `config.read_timeout` (plus the wait a statement asks for,
    /// see [`Session::execute_waiting`]) and `config.write_timeout`.
    pub fn connect(config: &Config) -> Result<Self> {
        Self::connect_probing(config, None)
    }

    /// [`connect`](Self::connect), and learn in the setup's round trip how many columns
    /// the lock table `table` has ([`Session::lock_table_columns`]), from a statement
    /// that reads no row. A missing table (or one this account may not read) costs a
    /// round trip more, and tells nothing.
    pub fn connect_learning(config: &Config, table: &Table) -> Result<Self> {
        Self::connect_probing(config, Some(&table_probe(table)))
    }

    fn connect_probing(config: &Config, probe: Option<&str>) -> Result<Self> {
        config.validate()?;
        let bound = Bound::connect(config.connect_deadline(), config.read_timeout, config.write_timeout);
        let connect_error = |e: SessionError| Error::Connect { target: config.target(), source: e };
        let set = session_settings(&config.charset);
        let (mut conn, mariadb, answer) = open(config, bound, &set, probe).map_err(connect_error)?;
        let learned = setup(&mut conn, mariadb, answer, &set, probe, bound).map_err(connect_error)?;
        let mut session = MysqlSession {
            conn,
            charset: config.charset.clone(),
            batches: config.charset.eq_ignore_ascii_case("utf8mb4"),
            topology: Topology::from_probe(&learned.topology),
            wait_timeout: learned.wait_timeout,
            lock_table_columns: learned.lock_table_columns,
            statements: Statements::default(),
        };
        let mut topology = session.topology;
        topology::complete(|sql| session.run(sql, &[], bound), &mut topology).map_err(connect_error)?;
        session.topology = topology;
        Ok(session)
    }

    /// A session whose every read and write (and its connect) gives up after `timeout`
    /// at most: for helpers (the keep-alive thread) that must never hang their owner on
    /// a stalled server.
    pub fn connect_with_io_timeout(config: &Config, timeout: Duration) -> Result<Self> {
        let mut config = config.clone();
        config.read_timeout = config.read_timeout.min(timeout);
        config.write_timeout = config.write_timeout.min(timeout);
        if config.connect_timeout.is_zero() || config.connect_timeout > timeout {
            config.connect_timeout = timeout;
        }
        Self::connect(&config)
    }

    /// The seconds this session may sit idle before the server ends it (its
    /// `wait_timeout`, at least a week unless the server caps it lower), as learned
    /// while connecting: no statement.
    pub fn wait_timeout(&self) -> Option<f64> {
        self.wait_timeout
    }

    /// How this session's connection logged in.
    pub fn authentication(&self) -> Authentication {
        match self.conn.login() {
            wire::Login::Native => Authentication::NativePassword,
            wire::Login::Sha2Fast => Authentication::Sha2Fast,
            wire::Login::Sha2Full => Authentication::Sha2Full,
            wire::Login::Sha256 => Authentication::Sha256Password,
            wire::Login::Ed25519 => Authentication::Ed25519,
        }
    }

    /// Whether the session's connection runs over TLS.
    pub fn encrypted(&self) -> bool {
        self.conn.encrypted()
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
///
/// `probe`, when given, goes last ([`table_probe`]).
fn setup_query(mariadb: bool, set: &str, probe: Option<&str>) -> String {
    let probe = probe.map(|p| format!("; {p}")).unwrap_or_default();
    match mariadb {
        true => format!("{set}; {MARIADB_PROBE}{probe}"),
        false => format!("{set}; {MYSQL_PROBE}{probe}"),
    }
}

/// A statement that answers with `table`'s columns and no row: it cannot fail for want of
/// a column (only for want of the table), and it reads no row. The probe it replaces
/// (the table joined `ON FALSE` to one row, for a row of NULLs) read the whole table on
/// MariaDB 10.11: 177 rows examined and 0.28 ms of server time for a table of 177 rows,
/// against none and 0.06 ms for this one, in the slow log.
fn table_probe(table: &Table) -> String {
    format!("SELECT * FROM {} LIMIT 0", table.sql_name())
}

/// Reads the setup's answer (running the setup first unless it travelled with the
/// handshake): the topology probe's rows and the session's `wait_timeout`.
///
/// With `probe` ([`table_probe`], last in the query), also how many columns the table
/// has. The server stops a query at its first failing statement, so an error may come
/// from the probe (no such table, no right to read it): the setup is then run again
/// without it, and the columns stay unknown.
fn setup(
    conn: &mut wire::Connection,
    mariadb: bool,
    answer: Option<wire::Answer>,
    set: &str,
    probe: Option<&str>,
    bound: Bound,
) -> Result<Learned, SessionError> {
    let answer = match answer {
        Some(answer) => answer,
        None => conn.query(&setup_query(mariadb, set, probe), bound),
    };
    let mut outcomes = match answer {
        Ok(outcomes) => outcomes,
        // No such variable: a MariaDB without `wsrep_on` (not Galera-capable), or a
        // MySQL-family server without `gtid_mode` (before 5.6.5, or a server or proxy that
        // only looks like MySQL); or a MySQL-family server that refused the short probe
        // otherwise. The full probe tells.
        Err(e)
            if e.code == Some(UNKNOWN_SYSTEM_VARIABLE)
                || (!mariadb && e.code.is_some() && !e.lost && probe.is_none()) =>
        {
            let (topology, wait_timeout) = full_probe(conn, bound)?;
            return Ok(Learned { topology, wait_timeout, lock_table_columns: None });
        }
        // A server error from the probe (no such table, no right to read it): nothing of
        // the connection is lost, the setup runs again without it. Any other failure (a
        // stall, a lost connection) is the connect's own.
        Err(e) if probe.is_some() && e.code.is_some() && !e.lost => {
            return setup(conn, mariadb, None, set, None, bound)
        }
        Err(e) => return Err(e),
    };
    let columns = match probe {
        Some(_) => outcomes.pop().map(|outcome| outcome.columns).filter(|&n| n > 0),
        None => None,
    };
    let sets = outcomes.into_iter().map(|outcome| outcome.rows).collect();
    let (topology, wait_timeout) = topology_answer(conn, mariadb, sets, bound)?;
    Ok(Learned { topology, wait_timeout, lock_table_columns: columns })
}

/// What a session's setup learned.
struct Learned {
    /// The topology probe's rows.
    topology: Vec<Vec<Value>>,
    /// The session's `wait_timeout` once raised.
    wait_timeout: Option<f64>,
    /// How many columns the lock table has, when the setup looked.
    lock_table_columns: Option<usize>,
}

/// The topology probe's rows and the `wait_timeout` from the setup's result sets.
fn topology_answer(
    conn: &mut wire::Connection,
    mariadb: bool,
    mut sets: Vec<Vec<Vec<Value>>>,
    bound: Bound,
) -> Result<(Vec<Vec<Value>>, Option<f64>), SessionError> {
    if !mariadb {
        return mysql_topology(conn, sets.pop().unwrap_or_default(), bound);
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
    full_probe(conn, bound)
}

/// A MySQL-family server's topology from [`MYSQL_PROBE`]'s `rows`: settled as standalone
/// where [`mysql_probe_says`] so, or (a second statement) where the Group Replication
/// plugin it could run is not active; any other server gets the full probe, as before.
fn mysql_topology(
    conn: &mut wire::Connection,
    rows: Vec<Vec<Value>>,
    bound: Bound,
) -> Result<(Vec<Vec<Value>>, Option<f64>), SessionError> {
    if let Some([version, comment, wait_timeout, member_possible]) = rows.first().and_then(|row| row.get(..4)) {
        let standalone = match mysql_probe_says(version, comment, member_possible) {
            MysqlProbe::Standalone => true,
            MysqlProbe::AskThePlugin => match query_sets(conn, GROUP_REPLICATION_ACTIVE, bound) {
                Ok(sets) => sets.first().and_then(|rows| rows.first()?.first()?.as_u64()) == Some(0),
                // Refused (a proxy without information_schema.PLUGINS): the full probe tells.
                Err(e) if e.code.is_some() && !e.lost => false,
                Err(e) => return Err(e),
            },
            MysqlProbe::Unsettled => false,
        };
        if standalone {
            return Ok((vec![vec![Value::Text("version".into()), version.clone()]], wait_timeout.as_f64()));
        }
    }
    full_probe(conn, bound)
}

/// What [`MYSQL_PROBE`]'s answer says of a MySQL-family server.
#[derive(Debug, PartialEq)]
enum MysqlProbe {
    /// No word of Galera, and Group Replication cannot run: GTIDs or the binary log off.
    Standalone,
    /// No word of Galera, GTIDs and the binary log on: whether the plugin is active tells.
    AskThePlugin,
    /// A Galera build, or an answer that cannot be read: the full probe tells.
    Unsettled,
}

/// Reads [`MYSQL_PROBE`]'s version, version comment and whether a Group Replication member
/// is possible (`gtid_mode = 'ON' AND log_bin`, 0 or 1). A server with the plugin loaded
/// but GTIDs or the binary log off is settled as standalone, where the full probe would
/// see a group name: it cannot take part in a group as it runs.
fn mysql_probe_says(version: &Value, comment: &Value, member_possible: &Value) -> MysqlProbe {
    let (Some(version), Some(comment)) = (version.as_text(), comment.as_text()) else {
        return MysqlProbe::Unsettled;
    };
    let said = format!("{version} {comment}").to_ascii_lowercase();
    if ["wsrep", "galera", "xtradb cluster"].iter().any(|word| said.contains(word)) {
        return MysqlProbe::Unsettled;
    }
    match member_possible.as_u64() {
        Some(0) => MysqlProbe::Standalone,
        Some(1) => MysqlProbe::AskThePlugin,
        _ => MysqlProbe::Unsettled,
    }
}

/// `SHOW VARIABLES` (the topology probe) and the session's `wait_timeout`.
fn full_probe(conn: &mut wire::Connection, bound: Bound) -> Result<(Vec<Vec<Value>>, Option<f64>), SessionError> {
    Ok(probe_answer(query_sets(conn, &format!("SELECT @@session.wait_timeout; {}", topology::PROBE), bound)?))
}

/// The probe's rows (the last result) and the `wait_timeout` (the one before).
fn probe_answer(mut sets: Vec<Vec<Vec<Value>>>) -> (Vec<Vec<Value>>, Option<f64>) {
    let rows = sets.pop().unwrap_or_default();
    let wait_timeout = sets.pop().and_then(|rows| rows.first()?.first()?.as_f64());
    (rows, wait_timeout)
}

/// The outcome of a single statement.
fn first(sql: &str, mut outcomes: Vec<Outcome>) -> Result<Outcome, SessionError> {
    match outcomes.is_empty() {
        true => Err(SessionError::client(format!("no result for {sql:?}"))),
        false => Ok(outcomes.swap_remove(0)),
    }
}

impl MysqlSession {
    /// [`Session::execute_pipelined`] on the own client, every statement prepared: all of
    /// them go out in one write, and the answers come back in order; `None` when one of
    /// them is a statement the server does not prepare (or one was closed again to
    /// prepare another: then they run one by one).
    fn pipeline_prepared(
        &mut self,
        statements: &[(&str, &[Value])],
        forms: &[Form],
        bound: Bound,
    ) -> Option<Result<Vec<Outcome>, SessionError>> {
        let conn = &mut self.conn;
        for ((sql, _), form) in statements.iter().zip(forms) {
            if *form == Form::Prepared {
                continue;
            }
            match self.statements.prepare(conn, sql, bound) {
                Ok(true) => {}
                Ok(false) => return None,
                Err(e) => return Some(Err(e)),
            }
        }
        let mut runs = Vec::with_capacity(statements.len());
        for (sql, params) in statements {
            runs.push((self.statements.prepared(sql)?, *params));
        }
        Some(conn.execute_pipelined(&runs, bound).and_then(|answers| {
            // Every answer was read (the connection is in step); the first error counts.
            answers.into_iter().zip(statements).map(|(answer, (sql, _))| first(sql, answer?)).collect()
        }))
    }

    /// Runs one statement under `bound`. A statement's first run travels as text with
    /// its values written in: a short-lived process (a cron job taking one lock) never
    /// pays a prepare round trip. From its second run on it is prepared once and
    /// executed: the server skips parsing, about 5 µs per statement, which a process
    /// locking in a loop notices.
    fn run(&mut self, sql: &str, params: &[Value], bound: Bound) -> Result<Outcome, SessionError> {
        if params.is_empty() {
            return first(sql, self.conn.query(sql, bound)?);
        }
        let form = self.statements.check(sql, params)?;
        let (conn, statements) = (&mut self.conn, &mut self.statements);
        let prepared = match form {
            Form::Text => {
                statements.ran(sql);
                false
            }
            Form::Unpreparable => false,
            Form::Prepared => true,
            Form::Prepare => statements.prepare(conn, sql, bound)?,
        };
        let answer = match statements.prepared(sql).filter(|_| prepared) {
            Some(statement) => conn.execute(statement, params, bound),
            None => conn.query(&inline(sql, params, &self.charset), bound),
        };
        first(sql, answer?)
    }
}

impl Session for MysqlSession {
    /// A statement answered at once: its reads bounded by `read_timeout`.
    fn execute(&mut self, sql: &str, params: &[Value]) -> Result<Outcome, SessionError> {
        self.execute_waiting(sql, params, Deadline::now())
    }

    /// Its reads may each block until `wait` ends and `read_timeout` more: so a wait of
    /// any length is one statement here.
    fn execute_waiting(&mut self, sql: &str, params: &[Value], wait: Deadline) -> Result<Outcome, SessionError> {
        let bound = self.conn.bound(wait);
        self.run(sql, params, bound)
    }

    fn connection_id(&self) -> u64 {
        u64::from(self.conn.greeting().connection_id)
    }

    fn pipelines(&self) -> bool {
        true
    }

    /// The first time these statements run on the session, one text batch with their
    /// values written in: a process that waits once pays no prepare round trips. From the
    /// second time on, prepared statements sent in one write (pipelined): the server
    /// parses nothing, which on the waiter's path is most of what it does between
    /// granting the GET_LOCK and writing the row (bench/server_cost.sh: the batch and a
    /// release cost MariaDB 220k instructions, the same prepared 100k).
    fn execute_pipelined(
        &mut self,
        statements: &[(&str, &[Value])],
        wait: Deadline,
    ) -> Result<Vec<Outcome>, SessionError> {
        let bound = self.conn.bound(wait);
        let mut forms = Vec::with_capacity(statements.len());
        for (sql, params) in statements {
            forms.push(self.statements.check(sql, params)?);
        }
        if forms.contains(&Form::Text) && self.batches {
            let texts: Vec<String> =
                statements.iter().map(|(sql, params)| inline(sql, params, &self.charset)).collect();
            for (sql, _) in statements {
                self.statements.ran(sql);
            }
            match self.conn.query(&texts.join("; "), bound) {
                // A syntax error at the first `;`: multi-statements are off somewhere on
                // the way (nothing ran). Prepared from now on.
                Err(e) if e.code == Some(1064) => self.batches = false,
                answer => return answer,
            }
        }
        if let Some(answer) = self.pipeline_prepared(statements, &forms, bound) {
            return answer;
        }
        let mut outcomes = Vec::with_capacity(statements.len());
        for (sql, params) in statements {
            outcomes.push(self.run(sql, params, bound)?);
        }
        Ok(outcomes)
    }

    fn topology(&self) -> Option<Topology> {
        Some(self.topology)
    }

    fn lock_table_columns(&self) -> Option<usize> {
        self.lock_table_columns
    }

    fn kill(&mut self, id: u64) -> Result<(), SessionError> {
        // KILL cannot take a bound parameter; the id is an integer, formatted here.
        let bound = self.conn.bound(Deadline::now());
        self.conn.query(&format!("KILL {id}"), bound).map(|_| ())
    }
}

impl Connector for Config {
    type Session = MysqlSession;
    fn connect(&mut self) -> Result<MysqlSession> {
        MysqlSession::connect(self)
    }

    fn connect_learning(&mut self, table: &Table) -> Result<MysqlSession> {
        MysqlSession::connect_learning(self, table)
    }

    /// Native sessions on this configuration, its bounds capped at `io_timeout`.
    fn keep_alive(&self, io_timeout: Duration) -> Option<OpenSession> {
        let config = self.clone();
        Some(Box::new(move || -> Result<Box<dyn Session + Send>> {
            Ok(Box::new(MysqlSession::connect_with_io_timeout(&config, io_timeout)?))
        }))
    }

    fn spreads(&self) -> bool {
        true
    }

    fn allows_cluster(&self) -> bool {
        self.allow_cluster
    }
}

#[cfg(test)]
#[path = "session_tests.rs"]
mod tests;
