//! The core's `Session` over a user's `mysqli`: session locks run in that connection's own
//! MySQL session, so the script's transaction and its lock end together (a killed
//! process, `$mysqli->close()`, the end of the session).
//!
//! Statements go through the object's own methods: `query()` for statements without
//! parameters, and for the others a `mysqli_stmt` prepared once per statement text and
//! session and executed with its values (`execute_query()` would prepare and close the
//! statement on every call: twice the round trips). The session-lock statements have one
//! text for every name, so a session keeps three statements at most. They are kept
//! beside the target (`driver::Statements`), so that a forked child never closes them on
//! the parent's session.
//!
//! Errors: since PHP 8.1 mysqli throws `mysqli_sql_exception` by default. It is caught,
//! turned into a `SessionError` with the server's error number (so 2006/2013, a lost
//! connection, is recognised) and kept as the cause (`getPrevious()`) of the lock
//! exception. With reporting off, a call returns `false` and `errno`/`error` tell. At
//! request shutdown no exception may be thrown, so reporting is switched off for each
//! statement then (and restored). A closed `mysqli` throws `Error` for every property and
//! method: it is recognised beforehand (`isset($mysqli->thread_id)` is false) and
//! reported as a lost session, without a call.

use std::time::Duration;

use ext_php_rs::types::{ZendObject, Zval};
use ext_php_rs::zend::{ce, ClassEntry};
use mysqllock_core::{Outcome, Session, SessionError, Value, LONGEST_WAIT_PER_STATEMENT};

use crate::driver::{self, unknown, Statements};
use crate::php::{self, CallError, Noise};

/// `MYSQLI_NUM`: rows as lists.
const NUM: i64 = 2;
/// `MYSQLI_REPORT_OFF`.
const REPORT_OFF: i64 = 0;

const CLOSED: &str = "the mysqli connection is closed ($mysqli->close() ran, or it never connected)";
const REPLACED: &str = "the mysqli object was connected anew (real_connect()): the session that held the locks ended";

/// A MySQL session reached through a `mysqli` object.
pub struct MysqliSession {
    mysqli: Zval,
    /// `$mysqli->thread_id`: the server's `CONNECTION_ID()`, known without a statement.
    id: u64,
    /// Prepared statements by their text (shared with the target).
    statements: Statements,
}

/// `ER_UNKNOWN_STMT_HANDLER`: the server no longer knows a statement it prepared (its
/// session was reset or replaced behind the object's back).
const UNKNOWN_STATEMENT: u16 = 1243;

impl MysqliSession {
    /// Starts using `mysqli`'s session. Statements prepared for an earlier (lost)
    /// session are dropped.
    pub fn open(mysqli: &Zval, statements: Statements) -> Result<Self, SessionError> {
        let stale = std::mem::take(&mut *statements.borrow_mut());
        drop(stale);
        let session = MysqliSession { mysqli: mysqli.shallow_clone(), id: 0, statements };
        session.check_open()?;
        let id = php::property(mysqli, "thread_id").map_err(failure)?;
        let id = id.long().and_then(|i| u64::try_from(i).ok()).ok_or_else(|| unknown("mysqli has no thread_id"))?;
        Ok(MysqliSession { id, ..session })
    }

    /// The object still talks to the session it was opened on: not closed, and not
    /// connected anew (`real_connect()` gives it another session, and the locks of the
    /// old one ended with it).
    fn check_open(&self) -> Result<(), SessionError> {
        if !php::property_isset(&self.mysqli, "thread_id") {
            return Err(SessionError::lost(CLOSED));
        }
        if self.id != 0 {
            let now = php::property(&self.mysqli, "thread_id").ok().and_then(|id| id.long());
            if now.and_then(|id| u64::try_from(id).ok()) != Some(self.id) {
                return Err(SessionError::lost(REPLACED));
            }
        }
        Ok(())
    }

    fn run(&mut self, sql: &str, params: &[Value]) -> Result<Outcome, SessionError> {
        self.check_open()?;
        if !params.is_empty() {
            return match self.run_prepared(sql, params) {
                Err(e) if e.code == Some(UNKNOWN_STATEMENT) => {
                    let stale = std::mem::take(&mut *self.statements.borrow_mut());
                    drop(stale);
                    self.run_prepared(sql, params)
                }
                other => other,
            };
        }
        let result = php::call_method(&self.mysqli, "query", vec![&sql], Noise::Quiet).map_err(failure)?;
        if result.is_false() {
            return Err(self.last_error());
        }
        self.outcome(&result, &self.mysqli)
    }

    /// `sql` with `params` on its statement, prepared on first use; a statement that
    /// failed is prepared afresh next time.
    fn run_prepared(&mut self, sql: &str, params: &[Value]) -> Result<Outcome, SessionError> {
        let list = driver::list(params).map_err(|e| unknown(&e))?;
        let kept = self.statements.borrow().get(sql).map(Zval::shallow_clone);
        let statement = match kept {
            Some(statement) => statement,
            None => {
                let statement = php::call_method(&self.mysqli, "prepare", vec![&sql], Noise::Quiet).map_err(failure)?;
                if !statement.is_object() {
                    return Err(self.last_error());
                }
                self.statements.borrow_mut().insert(sql.to_owned(), statement.shallow_clone());
                statement
            }
        };
        let result = self.execute_statement(&statement, &list);
        if result.is_err() {
            // Released outside the borrow: freeing a PHP object may run PHP code.
            let failed = self.statements.borrow_mut().remove(sql);
            drop(failed);
        }
        result
    }

    fn execute_statement(&self, statement: &Zval, list: &Zval) -> Result<Outcome, SessionError> {
        let executed = php::call_method(statement, "execute", vec![list], Noise::Quiet).map_err(failure)?;
        if executed.is_false() {
            return Err(statement_error(statement));
        }
        let result = php::call_method(statement, "get_result", vec![], Noise::Quiet).map_err(failure)?;
        self.outcome(&result, statement)
    }

    /// What a statement produced: the rows of a result set, else the counters of
    /// `counters` (the mysqli or the mysqli_stmt that ran it).
    fn outcome(&self, result: &Zval, counters: &Zval) -> Result<Outcome, SessionError> {
        if result.is_object() {
            // A result set: its rows are all the core reads (see `Outcome`). The result is
            // freed with its last reference, at the end of this function.
            let all = php::call_method(result, "fetch_all", vec![&NUM], Noise::Quiet).map_err(failure)?;
            return Ok(Outcome { rows: driver::rows_of(&all), ..Outcome::default() });
        }
        Ok(Outcome {
            rows: Vec::new(),
            affected_rows: number(counters, "affected_rows"),
            last_insert_id: number(counters, "insert_id"),
            columns: 0,
        })
    }

    /// The error of a call that returned `false` (reporting off): `errno` and `error`.
    fn last_error(&self) -> SessionError {
        statement_error(&self.mysqli)
    }
}

/// A counter property (`affected_rows`, `insert_id`: an int, or a numeric string beyond
/// PHP's ints); 0 when it is negative or unreadable.
fn number(object: &Zval, name: &str) -> u64 {
    let Ok(value) = php::property(object, name) else { return 0 };
    value.long().and_then(|n| u64::try_from(n).ok()).or_else(|| value.str().and_then(|s| s.parse().ok())).unwrap_or(0)
}

/// The error of a mysqli or mysqli_stmt call that returned `false` (reporting off):
/// its `errno` and `error`.
fn statement_error(object: &Zval) -> SessionError {
    let code = php::property(object, "errno").ok().and_then(|c| c.long());
    let message = php::property(object, "error").ok().and_then(|m| m.string()).unwrap_or_default();
    match code.and_then(|c| u16::try_from(c).ok()).filter(|c| *c > 0) {
        Some(code) => SessionError::server(code, message),
        None => unknown("the mysqli call failed without an error number"),
    }
}

impl Session for MysqliSession {
    fn execute(&mut self, sql: &str, params: &[Value]) -> Result<Outcome, SessionError> {
        if !driver::shutting_down() {
            return self.run(sql, params);
        }
        let previous = report_mode();
        let _ = php::call_function("mysqli_report", vec![&REPORT_OFF], Noise::Quiet);
        let result = self.run(sql, params);
        if let Some(mode) = previous {
            let _ = php::call_function("mysqli_report", vec![&mode], Noise::Quiet);
        }
        result
    }

    fn connection_id(&self) -> u64 {
        self.id
    }

    /// The user may bound the connection's reads (`MYSQLI_OPT_READ_TIMEOUT`,
    /// `mysqlnd.net_read_timeout`), so a lock wait runs as statements of at most
    /// [`LONGEST_WAIT_PER_STATEMENT`] (the core waits again for the rest), and any bound
    /// above that holds however long the caller waits.
    fn allowed_wait(&self, wait: Duration) -> Duration {
        wait.min(LONGEST_WAIT_PER_STATEMENT)
    }
}

/// mysqli's reporting mode (`(new mysqli_driver)->report_mode`), global to the process.
fn report_mode() -> Option<i64> {
    let class = ClassEntry::try_find("mysqli_driver")?;
    let driver = php::instantiate(class, vec![]).ok()?;
    php::property(&driver, "report_mode").ok()?.long()
}

/// A failed call as the core's session error; a thrown exception is kept as a cause.
fn failure(error: CallError) -> SessionError {
    driver::failure(error, from_exception)
}

/// A `mysqli_sql_exception`: its code is the error number (the server's, or the client
/// library's 2006/2013 for a lost connection). An `Error` about a closed connection
/// means the session is gone.
fn from_exception(exception: &ZendObject) -> SessionError {
    let message = php::read_property(exception, ce::exception(), "message").and_then(|m| m.string());
    let message = message.unwrap_or_else(|| php::exception_message(exception));
    let is_sql = ClassEntry::try_find("mysqli_sql_exception").is_some_and(|class| exception.instance_of(class));
    if is_sql {
        let code = php::read_property(exception, ce::exception(), "code").and_then(|c| c.long());
        if let Some(code) = code.and_then(|c| u16::try_from(c).ok()).filter(|c| *c > 0) {
            return SessionError::server(code, message);
        }
        return unknown(&message);
    }
    if exception.instance_of(ce::error()) && message.contains("already closed") {
        return SessionError::lost(CLOSED);
    }
    unknown(&php::exception_message(exception))
}
