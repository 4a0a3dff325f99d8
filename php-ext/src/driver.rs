//! What the core's sessions over a PHP database driver (`pdo_session`, `mysqli_session`)
//! share: their prepared statements, the driver exceptions kept as causes, whether the
//! request is ending, and the conversion of parameters and fetched rows.
//!
//! A failed statement reaches the core as a `SessionError`; the driver's own exception
//! (a `PDOException`, a `mysqli_sql_exception`) is kept here beside it, so the lock
//! exception made from the core error can carry that very exception as `getPrevious()`.

use std::cell::{Cell, RefCell};
use std::collections::{HashMap, VecDeque};
use std::error::Error as _;
use std::rc::Rc;

use ext_php_rs::types::{ZendHashTable, ZendObject, ZendStr, Zval};
use mysqllock_core::{Error, SessionError, Value};

use crate::php;

/// Prepared statements (`PDOStatement`s, `mysqli_stmt`s) by SQL text, shared by a
/// connection target and the session made from it, so that a forked child can find them
/// and make sure the engine never closes them on the parent's session (see
/// `PhpConnector::protect_parents_session`). A new session clears what an earlier one
/// prepared.
pub type Statements = Rc<RefCell<HashMap<String, Zval>>>;

/// How many recent driver exceptions are kept as candidate causes. A long wait retries
/// its INSERT many times, and each duplicate-key failure is one PDOException.
const KEPT_CAUSES: usize = 8;

thread_local! {
    /// Recent driver exceptions with the session error made from each.
    static CAUSES: RefCell<VecDeque<(SessionError, Zval)>> = const { RefCell::new(VecDeque::new()) };
    /// Request shutdown: no exception may be thrown any more (the engine has no frame to
    /// throw into and turns one into a fatal error).
    static SHUTTING_DOWN: Cell<bool> = const { Cell::new(false) };
}

/// Keeps `exception` as the cause of `error`.
pub fn remember_cause(error: SessionError, exception: Zval) {
    let dropped = CAUSES.with(|causes| {
        let mut causes = causes.borrow_mut();
        causes.push_back((error, exception));
        (causes.len() > KEPT_CAUSES).then(|| causes.pop_front())
    });
    // Released outside the borrow: freeing a PHP object may run PHP code.
    drop(dropped);
}

/// The session error inside a core error, if the database reported one.
pub fn session_error(error: &Error) -> Option<&SessionError> {
    error.source().and_then(|s| s.downcast_ref::<SessionError>())
}

/// The server's (or client library's) error number behind a core error, 0 if none: the
/// code of the exceptions made from it.
pub fn error_code(error: &Error) -> i64 {
    session_error(error).and_then(|e| e.code).map_or(0, i64::from)
}

/// The driver exception behind a core error, if a driver call produced it (taken: each
/// is the cause of one lock exception).
pub fn cause_of(error: &Error) -> Option<Zval> {
    let wanted = session_error(error)?;
    CAUSES.with(|causes| {
        let mut causes = causes.borrow_mut();
        let index = causes.iter().rposition(|(e, _)| e == wanted)?;
        causes.remove(index).map(|(_, exception)| exception)
    })
}

/// Forgets the kept causes (a new operation starts, or the request ends).
pub fn clear_causes() {
    let old = CAUSES.with(|causes| std::mem::take(&mut *causes.borrow_mut()));
    drop(old);
}

/// Switches the sessions to their quiet error reporting for request shutdown (and back).
pub fn set_shutting_down(on: bool) {
    SHUTTING_DOWN.set(on);
}

pub fn shutting_down() -> bool {
    SHUTTING_DOWN.get()
}

/// A session error without a server error number.
pub fn unknown(message: &str) -> SessionError {
    SessionError::client(message)
}

/// A failed call of a user's connection object as the core's session error;
/// `from_exception` reads the driver's exception, which is kept as the cause.
pub fn failure(error: php::CallError, from_exception: impl Fn(&ZendObject) -> SessionError) -> SessionError {
    match error {
        php::CallError::Threw(exception) => {
            let session_error = from_exception(&exception);
            remember_cause(session_error.clone(), php::object_zval(exception));
            session_error
        }
        // The request is ending, not the connection: request shutdown still releases
        // through it, so the session must not be given up as lost.
        php::CallError::Bailout | php::CallError::Exiting => unknown(&error.describe()),
        php::CallError::Failed(why) => unknown(&why),
    }
}

/// A parameter as a PHP value: integers as ints (beyond PHP's ints as their decimal
/// text), a float as its shortest exact decimal text (PDO has no float parameter, and
/// `mysqli_stmt::execute($values)` sends every value as a string anyway), text and bytes
/// as strings, NULL as null.
pub fn zval_of(value: &Value) -> Zval {
    let mut z = Zval::new();
    match value {
        Value::Null => z.set_null(),
        Value::Int(i) => z.set_long(*i),
        Value::UInt(u) => match i64::try_from(*u) {
            Ok(i) => z.set_long(i),
            Err(_) => z.set_zend_string(ZendStr::new(u.to_string(), false)),
        },
        Value::Float(f) => z.set_zend_string(ZendStr::new(f.to_string(), false)),
        Value::Text(s) => z.set_zend_string(ZendStr::new(s, false)),
        Value::Bytes(b) => z.set_zend_string(ZendStr::new(b, false)),
    }
    z
}

/// The parameters as the list `PDOStatement::execute($values)` and
/// `mysqli_stmt::execute($values)` take (see [`zval_of`]).
pub fn list(params: &[Value]) -> Result<Zval, String> {
    let mut list = ZendHashTable::new();
    for param in params {
        list.push(zval_of(param)).map_err(|e| e.to_string())?;
    }
    let mut z = Zval::new();
    z.set_hashtable(list);
    Ok(z)
}

/// The rows of a `fetchAll(PDO::FETCH_NUM)` / `fetch_all(MYSQLI_NUM)` array.
pub fn rows_of(all: &Zval) -> Vec<Vec<Value>> {
    let Some(rows) = all.array() else { return Vec::new() };
    rows.values()
        .map(|row| row.array().map(|cells| cells.values().map(value_of).collect()).unwrap_or_default())
        .collect()
}

/// A fetched cell (native types with real prepares, strings with emulated ones and the
/// text protocol).
fn value_of(cell: &Zval) -> Value {
    let cell = cell.dereference();
    if cell.is_null() {
        Value::Null
    } else if let Some(i) = cell.long() {
        Value::Int(i)
    } else if cell.is_double() {
        cell.double().map_or(Value::Null, Value::Float)
    } else if let Some(b) = cell.bool() {
        Value::Int(i64::from(b))
    } else if let Some(bytes) = cell.zend_str().map(ZendStr::as_bytes) {
        match std::str::from_utf8(bytes) {
            Ok(s) => Value::Text(s.to_owned()),
            Err(_) => Value::Bytes(bytes.to_vec()),
        }
    } else {
        Value::Text(php::to_php_string(cell))
    }
}
