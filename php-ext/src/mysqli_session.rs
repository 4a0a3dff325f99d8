//! The core's `Session` over a user's `mysqli`: session locks run in that connection's own
//! MySQL session, so the script's transaction and its lock end together (a killed
//! process, `$mysqli->close()`, the end of the session).
//!
//! Statements go through the object's own methods: `query()` for statements without
//! parameters (all the session-lock statements: their values are literals the core made
//! safe), `execute_query()` (PHP 8.2) otherwise. Nothing is prepared and kept, so a forked
//! child has no statement of the parent's session to free.
//!
//! Errors: since PHP 8.1 mysqli throws `mysqli_sql_exception` by default. It is caught,
//! turned into a `SessionError` with the server's error number (so 2006/2013, a lost
//! connection, is recognised) and kept as the cause (`getPrevious()`) of the lock
//! exception. With reporting off, a call returns `false` and `errno`/`error` tell. At
//! request shutdown no exception may be thrown, so reporting is switched off for each
//! statement then (and restored). A closed `mysqli` throws `Error` for every property and
//! method: it is recognised beforehand (`isset($mysqli->thread_id)` is false) and
//! reported as a lost session, without a call.

use ext_php_rs::types::{ZendHashTable, ZendObject, Zval};
use ext_php_rs::zend::{ce, ClassEntry};
use mysqllock_core::{Outcome, Session, SessionError, Value};

use crate::driver::{self, unknown};
use crate::php::{self, CallError, Noise};

/// `MYSQLI_NUM`: rows as lists.
const NUM: i64 = 2;
/// `MYSQLI_REPORT_OFF`.
const REPORT_OFF: i64 = 0;

const CLOSED: &str = "the mysqli connection is closed ($mysqli->close() ran, or it never connected)";

/// A MySQL session reached through a `mysqli` object.
pub struct MysqliSession {
    mysqli: Zval,
    /// `$mysqli->thread_id`: the server's `CONNECTION_ID()`, known without a statement.
    id: u64,
}

impl MysqliSession {
    /// Starts using `mysqli`'s session.
    pub fn open(mysqli: &Zval) -> Result<Self, SessionError> {
        let session = MysqliSession { mysqli: mysqli.shallow_clone(), id: 0 };
        session.check_open()?;
        let id = php::property(mysqli, "thread_id").map_err(failure)?;
        let id = id.long().and_then(|i| u64::try_from(i).ok()).ok_or_else(|| unknown("mysqli has no thread_id"))?;
        Ok(MysqliSession { id, ..session })
    }

    fn check_open(&self) -> Result<(), SessionError> {
        if php::property_isset(&self.mysqli, "thread_id") {
            Ok(())
        } else {
            Err(SessionError::lost(CLOSED))
        }
    }

    fn run(&mut self, sql: &str, params: &[Value]) -> Result<Outcome, SessionError> {
        self.check_open()?;
        let result = if params.is_empty() {
            php::call_method(&self.mysqli, "query", vec![&sql], Noise::Quiet)
        } else {
            let list = list(params).map_err(|e| unknown(&e))?;
            php::call_method(&self.mysqli, "execute_query", vec![&sql, &list], Noise::Quiet)
        }
        .map_err(failure)?;
        if result.is_false() {
            return Err(self.last_error());
        }
        if result.is_object() {
            // A result set: its rows are all the core reads (see `Outcome`). The result is
            // freed with its last reference, at the end of this function.
            let all = php::call_method(&result, "fetch_all", vec![&NUM], Noise::Quiet).map_err(failure)?;
            return Ok(Outcome { rows: driver::rows_of(&all), ..Outcome::default() });
        }
        Ok(Outcome {
            rows: Vec::new(),
            affected_rows: self.number("affected_rows"),
            last_insert_id: self.number("insert_id"),
        })
    }

    /// A counter property (`affected_rows`, `insert_id`: an int, or a numeric string
    /// beyond PHP's ints); 0 when it is negative or unreadable.
    fn number(&self, name: &str) -> u64 {
        let Ok(value) = php::property(&self.mysqli, name) else { return 0 };
        value
            .long()
            .and_then(|n| u64::try_from(n).ok())
            .or_else(|| value.str().and_then(|s| s.parse().ok()))
            .unwrap_or(0)
    }

    /// The error of a call that returned `false` (reporting off): `errno` and `error`.
    fn last_error(&self) -> SessionError {
        let code = php::property(&self.mysqli, "errno").ok().and_then(|c| c.long());
        let message = php::property(&self.mysqli, "error").ok().and_then(|m| m.string()).unwrap_or_default();
        match code.and_then(|c| u16::try_from(c).ok()).filter(|c| *c > 0) {
            Some(code) => SessionError::server(code, message),
            None => unknown("the mysqli call failed without an error number"),
        }
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
}

/// mysqli's reporting mode (`(new mysqli_driver)->report_mode`), global to the process.
fn report_mode() -> Option<i64> {
    let class = ClassEntry::try_find("mysqli_driver")?;
    let driver = php::instantiate(class, vec![]).ok()?;
    php::property(&driver, "report_mode").ok()?.long()
}

/// The parameters as the list `execute_query()` binds (every value as a string; MySQL
/// converts where a number is needed).
fn list(params: &[Value]) -> Result<Zval, String> {
    let mut list = ZendHashTable::new();
    for param in params {
        let pushed = match param {
            Value::Null => list.push(()),
            Value::Int(i) => list.push(*i),
            Value::UInt(u) => list.push(u.to_string()),
            Value::Float(f) => list.push(*f),
            Value::Text(s) => list.push(s.as_str()),
            Value::Bytes(b) => list.push(String::from_utf8_lossy(b).into_owned()),
        };
        pushed.map_err(|e| e.to_string())?;
    }
    let mut z = Zval::new();
    z.set_hashtable(list);
    Ok(z)
}

/// A failed call as the core's session error; a thrown exception is kept as a cause.
fn failure(error: CallError) -> SessionError {
    match error {
        CallError::Threw(exception) => {
            let session_error = from_exception(&exception);
            driver::remember_cause(session_error.clone(), php::object_zval(exception));
            session_error
        }
        // The request is ending, not the connection: request shutdown still releases
        // through it.
        CallError::Bailout | CallError::Exiting => unknown(&error.describe()),
        CallError::Failed(why) => unknown(&why),
    }
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
