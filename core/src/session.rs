//! The seam between the protocol and a database connection.
//!
//! The protocol only needs "one MySQL session that runs statements with bound
//! parameters and knows its `CONNECTION_ID()`". The core ships a native implementation
//! ([`MysqlSession`](crate::MysqlSession)); the PHP extension plugs in a user's PDO.

use std::time::Duration;

use crate::config::Table;
use crate::deadline::Deadline;
use crate::error::{Error, Result, SessionError};
use crate::topology::Topology;
use crate::value::{Outcome, Value};

/// One MySQL session. Locks taken by GET_LOCK live exactly as long as the session, so
/// an implementation must never silently reconnect: when the connection breaks it
/// reports an error with [`SessionError::lost`] set.
pub trait Session {
    /// Runs one statement with bound parameters (`?` placeholders), as a prepared
    /// statement where the implementation can cache it. The server answers it at once
    /// (it asks for no wait).
    fn execute(&mut self, sql: &str, params: &[Value]) -> Result<Outcome, SessionError>;

    /// Runs a statement that asks the server to wait until `wait` before it answers (a
    /// `GET_LOCK` whose timeout is `wait`'s budget): a session that bounds how long it
    /// waits for an answer allows this statement that much more. The default runs it as
    /// [`execute`](Session::execute): a session without such bounds (a user's PDO or
    /// mysqli, whose own timeouts rule) has nothing to allow.
    fn execute_waiting(&mut self, sql: &str, params: &[Value], wait: Deadline) -> Result<Outcome, SessionError> {
        let _ = wait;
        self.execute(sql, params)
    }

    /// The wait to ask the server for in one statement when the caller would wait `wait`:
    /// `wait`, or less where the session cannot allow one statement that long (its reads
    /// were bounded once, when it connected); the caller then waits again for the rest.
    fn allowed_wait(&self, wait: Duration) -> Duration {
        wait
    }

    /// The server's `CONNECTION_ID()` of this session.
    fn connection_id(&self) -> u64;

    /// Whether [`execute_pipelined`](Session::execute_pipelined) works here. A waiter
    /// uses it to have the server claim the row the moment its GET_LOCK is granted,
    /// instead of waking the client for a second round trip.
    fn pipelines(&self) -> bool {
        false
    }

    /// Runs `statements` (each with bound parameters) in order, in one round trip, the
    /// first of which may ask the server to wait until `wait`, and returns one outcome
    /// per statement, or the first error. A statement after a failing one may run or not
    /// (a text batch stops at the failure, pipelined commands go on): the caller makes
    /// every later statement harmless when one before it fails. Only called when
    /// [`pipelines`](Session::pipelines).
    fn execute_pipelined(
        &mut self,
        statements: &[(&str, &[Value])],
        wait: Deadline,
    ) -> Result<Vec<Outcome>, SessionError> {
        let _ = (statements, wait);
        Err(SessionError::client("this session cannot run statements in one round trip"))
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

    /// How many columns the lock table has, when the session learned it while it was set
    /// up ([`Connector::connect_learning`]); `None` when it did not look, or the table was
    /// missing or not readable.
    fn lock_table_columns(&self) -> Option<usize> {
        None
    }
}

/// Lets a caller choose the session kind at run time (`Locker<C>` with
/// `C::Session = Box<dyn Session>`), as the PHP extension does for native vs PDO.
impl<S: Session + ?Sized> Session for Box<S> {
    fn execute(&mut self, sql: &str, params: &[Value]) -> Result<Outcome, SessionError> {
        (**self).execute(sql, params)
    }

    fn execute_waiting(&mut self, sql: &str, params: &[Value], wait: Deadline) -> Result<Outcome, SessionError> {
        (**self).execute_waiting(sql, params, wait)
    }

    fn allowed_wait(&self, wait: Duration) -> Duration {
        (**self).allowed_wait(wait)
    }

    fn connection_id(&self) -> u64 {
        (**self).connection_id()
    }

    fn pipelines(&self) -> bool {
        (**self).pipelines()
    }

    fn execute_pipelined(
        &mut self,
        statements: &[(&str, &[Value])],
        wait: Deadline,
    ) -> Result<Vec<Outcome>, SessionError> {
        (**self).execute_pipelined(statements, wait)
    }

    fn kill(&mut self, id: u64) -> Result<(), SessionError> {
        (**self).kill(id)
    }

    fn topology(&self) -> Option<Topology> {
        (**self).topology()
    }

    fn lock_table_columns(&self) -> Option<usize> {
        (**self).lock_table_columns()
    }
}

/// Opens a session that may be used on another thread (a keep-alive's).
pub type OpenSession = Box<dyn FnMut() -> Result<Box<dyn Session + Send>> + Send>;

/// Produces the session a [`Locker`](crate::Locker) runs on, when it first needs one and again after
/// the previous one was lost.
pub trait Connector {
    type Session: Session;
    fn connect(&mut self) -> Result<Self::Session>;

    /// [`connect`](Connector::connect), and learn in the same round trip how many
    /// columns `table` has, where the session can ([`Session::lock_table_columns`]): a
    /// locker's first session asks, so that its first claim names the columns the table
    /// has instead of being refused on the original table and sent again.
    fn connect_learning(&mut self, table: &Table) -> Result<Self::Session> {
        let _ = table;
        self.connect()
    }

    /// How a keep-alive thread opens sessions of its own to the same server, each read
    /// and write of them bounded by `io_timeout` at most (a renewal must never hang its
    /// holder on a stalled server). `None` when sessions come from elsewhere (an
    /// application's PDO, whose session a thread cannot use): keep-alive is then refused.
    fn keep_alive(&self, io_timeout: Duration) -> Option<OpenSession> {
        let _ = io_timeout;
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

/// The single place that turns a failed statement on the lock table into an [`Error`]:
/// by MySQL error number, with the lock it was about; a missing table names its DDL.
pub(crate) fn classify(e: SessionError, name: Option<&str>, table: &Table) -> Error {
    match e.mysql_code() {
        Some(1146) if !e.lost => Error::MissingTable {
            table: table.display_name(),
            create_sql: table.create_sql(),
            init: Some("mysqllock init"),
            source: e,
        },
        _ => Error::from_session(e, name),
    }
}
