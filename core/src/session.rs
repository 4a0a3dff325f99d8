//! The seam between the protocol and a database connection.
//!
//! The protocol only needs "one MySQL session that runs statements with bound
//! parameters and knows its `CONNECTION_ID()`". The core ships a native implementation
//! ([`MysqlSession`](crate::MysqlSession)); the PHP extension plugs in a user's PDO.

use crate::config::Config;
use crate::error::{Result, SessionError};
use crate::topology::Topology;

/// A parameter or result value. Deliberately small: the protocol binds names (text),
/// numbers, and reads back integers, decimals and strings.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Null,
    Int(i64),
    UInt(u64),
    Float(f64),
    Text(String),
    Bytes(Vec<u8>),
}

impl Value {
    /// The value as an integer, whatever form the driver returned it in
    /// (drivers return `DECIMAL` and sometimes integers as text).
    pub fn as_i64(&self) -> Option<i64> {
        match self {
            Value::Int(v) => Some(*v),
            Value::UInt(v) => i64::try_from(*v).ok(),
            Value::Float(v) if v.is_finite() => Some(*v as i64),
            Value::Text(s) => s.trim().parse().ok().or_else(|| s.trim().parse::<f64>().ok().map(|f| f as i64)),
            Value::Bytes(b) => Value::Text(String::from_utf8_lossy(b).into_owned()).as_i64(),
            _ => None,
        }
    }

    pub fn as_u64(&self) -> Option<u64> {
        self.as_i64().and_then(|v| u64::try_from(v).ok())
    }

    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Value::Int(v) => Some(*v as f64),
            Value::UInt(v) => Some(*v as f64),
            Value::Float(v) => Some(*v),
            Value::Text(s) => s.trim().parse().ok(),
            Value::Bytes(b) => std::str::from_utf8(b).ok()?.trim().parse().ok(),
            Value::Null => None,
        }
    }

    pub fn as_text(&self) -> Option<String> {
        match self {
            Value::Text(s) => Some(s.clone()),
            Value::Bytes(b) => Some(String::from_utf8_lossy(b).into_owned()),
            Value::Int(v) => Some(v.to_string()),
            Value::UInt(v) => Some(v.to_string()),
            Value::Float(v) => Some(v.to_string()),
            Value::Null => None,
        }
    }

    pub fn is_null(&self) -> bool {
        matches!(self, Value::Null)
    }
}

impl From<&str> for Value {
    fn from(s: &str) -> Self {
        Value::Text(s.to_owned())
    }
}

impl From<i64> for Value {
    fn from(v: i64) -> Self {
        Value::Int(v)
    }
}

impl From<u64> for Value {
    fn from(v: u64) -> Self {
        Value::UInt(v)
    }
}

impl From<f64> for Value {
    fn from(v: f64) -> Self {
        Value::Float(v)
    }
}

/// What one statement produced.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Outcome {
    pub rows: Vec<Vec<Value>>,
    pub affected_rows: u64,
    /// The OK packet's insert id; the protocol reports GET_LOCK's result through
    /// `LAST_INSERT_ID(expr)` so an INSERT needs no second round trip.
    pub last_insert_id: u64,
}

impl Outcome {
    /// Column `col` of the first row, `Value::Null` when absent.
    pub fn first(&self, col: usize) -> &Value {
        self.rows.first().and_then(|r| r.get(col)).unwrap_or(&Value::Null)
    }
}

/// One MySQL session. Locks taken by GET_LOCK live exactly as long as the session, so
/// an implementation must never silently reconnect: when the connection breaks it
/// reports an error with [`SessionError::lost`] set.
pub trait Session {
    /// Runs one statement with bound parameters (`?` placeholders), as a prepared
    /// statement where the implementation can cache it.
    fn execute(&mut self, sql: &str, params: &[Value]) -> Result<Outcome, SessionError>;

    /// The server's `CONNECTION_ID()` of this session.
    fn connection_id(&self) -> u64;

    /// Whether [`execute_batch`](Session::execute_batch) works here. A waiter uses it
    /// to have the server claim the row the moment its GET_LOCK is granted, instead of
    /// waking the client for a second round trip.
    fn batches(&self) -> bool {
        false
    }

    /// Runs several `;`-separated statements in one round trip (text protocol, so no
    /// bound parameters: every value in `sql` is a literal the caller made safe) and
    /// returns one outcome per statement. The server stops at the first failing
    /// statement, whose error is returned. Only called when [`batches`](Session::batches).
    fn execute_batch(&mut self, sql: &str) -> Result<Vec<Outcome>, SessionError> {
        let _ = sql;
        Err(SessionError { code: None, message: "this session cannot run statement batches".into(), lost: false })
    }

    /// Runs `KILL <id>`. KILL takes no bound parameter, so the id is formatted from an
    /// integer here and nowhere else.
    fn kill(&mut self, id: u64) -> Result<(), SessionError> {
        self.execute(&format!("KILL {id}"), &[]).map(|_| ())
    }

    /// What the server is (standalone, Galera node, Group Replication member), when the
    /// session learned it while it was set up; `None` makes the caller ask
    /// ([`topology::probe`](crate::topology::probe)), once per session.
    fn topology(&self) -> Option<Topology> {
        None
    }
}

/// Lets a caller choose the session kind at run time (`Locker<C>` with
/// `C::Session = Box<dyn Session>`), as the PHP extension does for native vs PDO.
impl<S: Session + ?Sized> Session for Box<S> {
    fn execute(&mut self, sql: &str, params: &[Value]) -> Result<Outcome, SessionError> {
        (**self).execute(sql, params)
    }

    fn connection_id(&self) -> u64 {
        (**self).connection_id()
    }

    fn batches(&self) -> bool {
        (**self).batches()
    }

    fn execute_batch(&mut self, sql: &str) -> Result<Vec<Outcome>, SessionError> {
        (**self).execute_batch(sql)
    }

    fn kill(&mut self, id: u64) -> Result<(), SessionError> {
        (**self).kill(id)
    }

    fn topology(&self) -> Option<Topology> {
        (**self).topology()
    }
}

/// Produces the session a [`Locker`](crate::Locker) runs on, when it first needs one and again after
/// the previous one was lost.
pub trait Connector {
    type Session: Session;
    fn connect(&mut self) -> Result<Self::Session>;

    /// Where a keep-alive thread opens its own connection to the same server and table.
    /// `None` when sessions come from elsewhere (an application's PDO): keep-alive is
    /// then refused.
    fn keep_alive_config(&self) -> Option<Config> {
        None
    }

    /// Whether the locker may open more sessions when one holds many leases (see
    /// [`LEASES_PER_SESSION`](crate::LEASES_PER_SESSION)). `false` when every lock must live in one given session
    /// (an application's PDO, whose session the application also uses).
    fn spreads(&self) -> bool {
        false
    }

    /// Whether GET_LOCK-based locks may run on a replicated cluster node (see
    /// [`Topology`]): only for deployments that route all lock traffic to one node.
    fn allows_cluster(&self) -> bool {
        false
    }
}
