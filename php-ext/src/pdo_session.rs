//! The core's `Session` over a user's PDO: lock SQL runs on the PDO's own MySQL session,
//! so the original package's "same connection for locks and application code"
//! strategy keeps working (a takeover KILLs that session and the application's open
//! transaction fails with it).
//!
//! The user's PDO settings are respected and restored: statements run with
//! `ERRMODE_EXCEPTION` for the duration of one statement (so a failure arrives as a
//! `PDOException`, kept as the `getPrevious()` of the lock exception), whatever mode the
//! user chose; emulated prepares are left as they are. At request shutdown no exception
//! may be thrown, so `ERRMODE_SILENT` and `errorInfo()` are used instead.
//!
//! mysqlnd may bound every read of a PDO (`mysqlnd.net_read_timeout`, taken when it
//! connects): the user's choice on their PDO, [`ReadBound`] on the one `getConnection()`
//! opens. So lock waits are split into statements of at most
//! [`LONGEST_WAIT_PER_STATEMENT`] on every PDO, and any bound above that (plus the
//! server's time to answer) holds whatever the caller waits; on our PDO a read that
//! runs out says so as the native connection does.

use std::time::{Duration, Instant};

use ext_php_rs::convert::IntoZvalDyn;
use ext_php_rs::types::{ZendObject, Zval};
use mysqllock_core::{
    stopped_answering, Deadline, Dialect, During, Outcome, Session, SessionError, Value, LONGEST_WAIT_PER_STATEMENT,
};

use crate::driver::{self, unknown, Statements};
use crate::php::{self, CallError, Noise};

// PDO's class constants (stable since PHP 5.1).
const PARAM_NULL: i64 = 0;
const PARAM_INT: i64 = 1;
const PARAM_STR: i64 = 2;
const FETCH_NUM: i64 = 3;
const ATTR_ERRMODE: i64 = 3;
const ATTR_DRIVER_NAME: i64 = 16;
const ATTR_EMULATE_PREPARES: i64 = 20;
const ERRMODE_SILENT: i64 = 0;
const ERRMODE_EXCEPTION: i64 = 2;

/// The bound mysqlnd was given for every read of a PDO the extension opened
/// (`mysqlnd.net_read_timeout`, which it takes once, when it connects), in the whole
/// seconds mysqlnd counts in.
#[derive(Clone)]
pub struct ReadBound {
    pub limit: Duration,
    /// `host:port`, for the message when the bound runs out.
    pub peer: String,
}

impl ReadBound {
    /// `limit` in [`whole_seconds`].
    pub fn new(limit: Duration, peer: String) -> ReadBound {
        ReadBound { limit: Duration::from_secs(whole_seconds(limit)), peer }
    }
}

/// A bound as mysqlnd and PDO count it: whole seconds, rounded up, at least one (0
/// would mean none).
pub fn whole_seconds(d: Duration) -> u64 {
    d.as_secs().saturating_add(u64::from(d.subsec_nanos() > 0)).max(1)
}

/// A MySQL session reached through a PDO object.
pub struct PdoSession {
    pdo: Zval,
    /// Prepared statements by SQL text: the protocol runs a small fixed set with bound
    /// parameters.
    statements: Statements,
    id: u64,
    /// pdo_mysql, whose statements without parameters run as one COM_QUERY.
    mysql: bool,
    /// Whose error numbers the driver reports: SQLite's for pdo_sqlite (the lease
    /// mode's test databases), MySQL's otherwise.
    dialect: Dialect,
    /// Set for a PDO the extension opened with a bound on its reads.
    bound: Option<ReadBound>,
}

impl PdoSession {
    /// Starts using `pdo`'s session; asks the server for its `CONNECTION_ID()`.
    /// Statements prepared for an earlier (lost) session are dropped.
    pub fn open(pdo: &Zval, statements: Statements) -> Result<Self, SessionError> {
        let mut session = PdoSession::attach(pdo, statements);
        let out = session.execute("SELECT CONNECTION_ID()", &[])?;
        session.id =
            out.first(0).as_u64().ok_or_else(|| SessionError::client("SELECT CONNECTION_ID() returned no id"))?;
        Ok(session)
    }

    /// Starts using `pdo`'s session without a statement: for the lease mode, which needs
    /// no connection id (and whose SQLite dialect has no `CONNECTION_ID()`). Statements
    /// prepared for an earlier session are dropped.
    pub fn attach(pdo: &Zval, statements: Statements) -> Self {
        let stale = std::mem::take(&mut *statements.borrow_mut());
        drop(stale);
        let driver = driver_name(pdo).unwrap_or_default();
        let dialect = if driver == "sqlite" { Dialect::Sqlite } else { Dialect::MySql };
        PdoSession { pdo: pdo.shallow_clone(), statements, id: 0, mysql: driver == "mysql", dialect, bound: None }
    }

    /// The session of a PDO whose reads mysqlnd bounds at `bound` (none: the user's).
    pub fn bounded(self, bound: Option<ReadBound>) -> Self {
        PdoSession { bound, ..self }
    }

    /// Runs `f` with the PDO in the error mode we need, then restores the user's.
    fn in_errmode<T>(&mut self, f: impl FnOnce(&mut Self) -> Result<T, SessionError>) -> Result<T, SessionError> {
        let wanted = if driver::shutting_down() { ERRMODE_SILENT } else { ERRMODE_EXCEPTION };
        let current = self.pdo_call("getAttribute", vec![&ATTR_ERRMODE])?.long();
        let switch = current != Some(wanted);
        if switch {
            self.pdo_call("setAttribute", vec![&ATTR_ERRMODE, &wanted])?;
        }
        let result = f(self);
        if let (true, Some(mode)) = (switch, current) {
            // A failure here leaves the PDO in exception mode: report the statement's
            // outcome anyway, which is what the caller is waiting for.
            let _ = self.pdo_call("setAttribute", vec![&ATTR_ERRMODE, &mode]);
        }
        result
    }

    fn pdo_call(&self, method: &str, args: Vec<&dyn IntoZvalDyn>) -> Result<Zval, SessionError> {
        let value = php::call_method(&self.pdo, method, args, Noise::Quiet).map_err(|e| self.failure(e))?;
        if value.is_false() {
            return Err(self.error_info(&self.pdo));
        }
        Ok(value)
    }

    fn statement_call(
        &self,
        statement: &Zval,
        method: &str,
        args: Vec<&dyn IntoZvalDyn>,
    ) -> Result<Zval, SessionError> {
        let value = php::call_method(statement, method, args, Noise::Quiet).map_err(|e| self.failure(e))?;
        if value.is_false() {
            return Err(self.error_info(statement));
        }
        Ok(value)
    }

    /// The error of a call that returned `false` in silent mode: `errorInfo()`.
    fn error_info(&self, object: &Zval) -> SessionError {
        match php::call_method(object, "errorInfo", vec![], Noise::Quiet) {
            Ok(info) => {
                from_error_info(&info, self.dialect).unwrap_or_else(|| unknown("the PDO call failed without errorInfo"))
            }
            Err(e) => self.failure(e),
        }
    }

    /// A failed call as the core's session error; a thrown exception is kept as a cause.
    fn failure(&self, error: CallError) -> SessionError {
        let dialect = self.dialect;
        driver::failure(error, |exception| from_exception(exception, dialect))
    }

    fn statement(&mut self, sql: &str) -> Result<Zval, SessionError> {
        if let Some(statement) = self.statements.borrow().get(sql) {
            return Ok(statement.shallow_clone());
        }
        let statement = self.pdo_call("prepare", vec![&sql])?;
        self.statements.borrow_mut().insert(sql.to_owned(), statement.shallow_clone());
        Ok(statement)
    }

    fn run(&mut self, sql: &str, params: &[Value]) -> Result<Outcome, SessionError> {
        if params.is_empty() && self.mysql {
            return self.run_text(sql);
        }
        let statement = self.statement(sql)?;
        let result = self.run_prepared(&statement, params);
        if result.is_err() && self.dialect == Dialect::Sqlite {
            // pdo_sqlite does not reset a statement whose execution failed: every later
            // execute() of it fails with SQLite's error 21 ("bad parameter or other API
            // misuse"), so it is prepared again next time (measured after a NOT NULL
            // failure of an INSERT on PHP 8.2, 8.4 and 8.5; of the lease upsert, whose TTL
            // ran past the DATETIME range, on PHP 8.4.27 with SQLite 3.53.4). pdo_mysql
            // re-runs a failed statement, and its lock waits fail and retry often.
            self.statements.borrow_mut().remove(sql);
        }
        result
    }

    /// Binds `params` to `statement` (prepared by [`Self::statement`]) and executes it.
    fn run_prepared(&self, statement: &Zval, params: &[Value]) -> Result<Outcome, SessionError> {
        if params.iter().all(|p| !matches!(p, Value::Int(_) | Value::UInt(_))) {
            // One call: `execute($values)` binds each value as PARAM_STR (NULL as NULL),
            // which is what `bind` chooses for these (a float as its decimal text).
            let values = driver::list(params).map_err(|e| unknown(&e))?;
            self.statement_call(statement, "execute", vec![&values])?;
        } else {
            // Numbers keep their type (`execute($values)` would send them as strings:
            // compared as doubles by MySQL, as text by SQLite).
            for (index, param) in params.iter().enumerate() {
                let position = i64::try_from(index + 1).unwrap_or(i64::MAX);
                let (value, kind) = bind(param);
                self.statement_call(statement, "bindValue", vec![&position, &value, &kind])?;
            }
            self.statement_call(statement, "execute", vec![])?;
        }
        self.outcome(statement)
    }

    /// A statement without parameters, as one COM_QUERY: `query()` with emulated prepares
    /// (switched on for it, then back to the user's setting). Prepared for real it would
    /// cost a second round trip and keep a statement on the server for texts that run
    /// once or rarely (the connection probes, status listings, table DDL; statements
    /// that run per lock bind their values, so their texts are few and kept prepared).
    fn run_text(&mut self, sql: &str) -> Result<Outcome, SessionError> {
        // pdo_mysql answers 0 or 1.
        let emulating = php::call_method(&self.pdo, "getAttribute", vec![&ATTR_EMULATE_PREPARES], Noise::Quiet)
            .map_err(|e| self.failure(e))?;
        let switch = emulating.bool().or_else(|| emulating.long().map(|v| v != 0)) == Some(false);
        if switch {
            self.pdo_call("setAttribute", vec![&ATTR_EMULATE_PREPARES, &true])?;
        }
        let result = self.pdo_call("query", vec![&sql]).and_then(|statement| self.outcome(&statement));
        if switch {
            let _ = self.pdo_call("setAttribute", vec![&ATTR_EMULATE_PREPARES, &false]);
        }
        result
    }

    /// What an executed statement produced: its rows, or, for a statement without a
    /// result set, its counters (the core reads them only then, see `Outcome`).
    fn outcome(&self, statement: &Zval) -> Result<Outcome, SessionError> {
        let columns = self.statement_call(statement, "columnCount", vec![])?.long().unwrap_or(0);
        if columns > 0 {
            let all = self.statement_call(statement, "fetchAll", vec![&FETCH_NUM])?;
            return Ok(Outcome { rows: driver::rows_of(&all), columns: columns as usize, ..Outcome::default() });
        }
        let affected = self.statement_call(statement, "rowCount", vec![])?.long().unwrap_or(0);
        // GET_LOCK's result comes back through LAST_INSERT_ID(expr) after an INSERT.
        let insert_id = self.pdo_call("lastInsertId", vec![])?;
        Ok(Outcome {
            rows: Vec::new(),
            affected_rows: u64::try_from(affected).unwrap_or(0),
            last_insert_id: insert_id.str().and_then(|s| s.parse().ok()).unwrap_or(0),
            columns: 0,
        })
    }
}

impl Session for PdoSession {
    fn execute(&mut self, sql: &str, params: &[Value]) -> Result<Outcome, SessionError> {
        self.execute_waiting(sql, params, Deadline::now())
    }

    /// mysqlnd bounds each read as it was told when the PDO connected; `wait` only names
    /// the lock wait in the message when that bound ran out.
    fn execute_waiting(&mut self, sql: &str, params: &[Value], wait: Deadline) -> Result<Outcome, SessionError> {
        let started = Instant::now();
        self.in_errmode(|s| s.run(sql, params)).map_err(|e| self.ran_out(e, started.elapsed(), wait.budget()))
    }

    fn connection_id(&self) -> u64 {
        self.id
    }

    /// A PDO's reads may be bounded from when it connected, so a longer wait is cut
    /// (the core waits again for the rest).
    fn allowed_wait(&self, wait: Duration) -> Duration {
        wait.min(LONGEST_WAIT_PER_STATEMENT)
    }

    fn kill(&mut self, id: u64) -> Result<(), SessionError> {
        // KILL takes no bound parameter; `id` is an integer, formatted here.
        let sql = format!("KILL {id}");
        self.in_errmode(|s| s.pdo_call("exec", vec![&sql]).map(|_| ()))
    }
}

impl PdoSession {
    /// `error`, or, when a bounded PDO lost its session after waiting out its bound
    /// (mysqlnd reports that as "MySQL server has gone away"), what happened: the server
    /// stopped answering.
    fn ran_out(&self, error: SessionError, took: Duration, wait: Duration) -> SessionError {
        match &self.bound {
            // mysqlnd gives up at the bound itself; a little less is the clocks' grain.
            Some(bound) if error.lost && took + Duration::from_millis(200) >= bound.limit => {
                let during = if wait.is_zero() { During::Statement } else { During::Wait(wait) };
                stopped_answering(&bound.peer, bound.limit, during)
            }
            _ => error,
        }
    }
}

/// A value and the `PDO::PARAM_*` to bind it with (see `driver::zval_of`).
fn bind(value: &Value) -> (Zval, i64) {
    let z = driver::zval_of(value);
    let kind = match value {
        Value::Null => PARAM_NULL,
        _ if z.is_long() => PARAM_INT,
        _ => PARAM_STR,
    };
    (z, kind)
}

/// `$pdo->getAttribute(PDO::ATTR_DRIVER_NAME)`: `mysql`, `sqlite`, ...
pub(crate) fn driver_name(pdo: &Zval) -> Result<String, CallError> {
    let name = php::call_method(pdo, "getAttribute", vec![&ATTR_DRIVER_NAME], Noise::Quiet)?;
    Ok(name.string().unwrap_or_default())
}

/// A failed call on a PDO of `dialect`'s driver as the core's session error; a thrown
/// exception is kept as a cause.
pub(crate) fn failure(error: CallError, dialect: Dialect) -> SessionError {
    driver::failure(error, |exception| from_exception(exception, dialect))
}

/// A `PDOException`'s `errorInfo` (`[SQLSTATE, driver code, driver message]`), or
/// another exception's class and message.
fn from_exception(exception: &ZendObject, dialect: Dialect) -> SessionError {
    php::read_property(exception, exception.get_class_entry(), "errorInfo")
        .and_then(|info| from_error_info(&info, dialect))
        .unwrap_or_else(|| unknown(&php::exception_message(exception)))
}

/// The driver's error code is in `dialect`'s numbering: MySQL's error numbers from
/// pdo_mysql, SQLite's result codes from pdo_sqlite.
fn from_error_info(info: &Zval, dialect: Dialect) -> Option<SessionError> {
    let info = info.array()?;
    let message = info.get_index(2).and_then(Zval::string);
    let code = info.get_index(1).and_then(Zval::long).and_then(|c| u16::try_from(c).ok());
    match (code, message) {
        (Some(code), Some(message)) => Some(match dialect {
            Dialect::MySql => SessionError::server(code, message),
            Dialect::Sqlite => SessionError::sqlite(code, message),
        }),
        (None, Some(message)) => Some(unknown(&message)),
        // No driver error: PDO's own (SQLSTATE only, e.g. HY093 bad parameter count).
        (_, None) => info.get_index(0).and_then(Zval::string).map(|state| unknown(&format!("SQLSTATE[{state}]"))),
    }
}
