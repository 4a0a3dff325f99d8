//! The seam between the protocol and a database connection.
//!
//! The protocol only needs "one MySQL session that runs statements with bound
//! parameters and knows its `CONNECTION_ID()`". The core ships a native implementation
//! ([`MysqlSession`](crate::MysqlSession)); the PHP extension plugs in a user's PDO.

use std::time::Duration;

use crate::config::{Config, Table};
use crate::error::{Error, Result, SessionError};
use crate::topology::Topology;
use crate::value::{Outcome, Value};

/// One MySQL session. Locks taken by GET_LOCK live exactly as long as the session, so
/// an implementation must never silently reconnect: when the connection breaks it
/// reports an error with [`SessionError::lost`] set.
pub trait Session {
    /// Runs one statement with bound parameters (`?` placeholders), as a prepared
    /// statement where the implementation can cache it.
    fn execute(&mut self, sql: &str, params: &[Value]) -> Result<Outcome, SessionError>;

    /// The server's `CONNECTION_ID()` of this session.
    fn connection_id(&self) -> u64;

    /// Announces that the next statement (or batch) asks the server to wait up to `wait`
    /// before it answers (a `GET_LOCK` with that timeout), and returns the wait to put in
    /// it: `wait`, or less where the session cannot allow that long (the caller then
    /// waits again for the rest). A session that bounds how long it waits for an answer
    /// allows that much more for the next statement only; one without such bounds (a
    /// user's PDO or mysqli, whose own timeouts rule) keeps the default.
    fn expect_wait(&mut self, wait: Duration) -> Duration {
        wait
    }

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
        Err(SessionError::client("this session cannot run statement batches"))
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

    /// Whether this session's `LAST_INSERT_ID()` is the library's own, read by no
    /// application, so that a statement may report its verdict there (the lease claims
    /// that take a free row over in place do). False for an application's PDO or mysqli,
    /// whose `lastInsertId()` the application may read after a lock call.
    fn owns_insert_id(&self) -> bool {
        false
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

    fn connection_id(&self) -> u64 {
        (**self).connection_id()
    }

    fn expect_wait(&mut self, wait: Duration) -> Duration {
        (**self).expect_wait(wait)
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

    fn owns_insert_id(&self) -> bool {
        (**self).owns_insert_id()
    }

    fn lock_table_columns(&self) -> Option<usize> {
        (**self).lock_table_columns()
    }
}

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
