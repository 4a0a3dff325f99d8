//! The one error type of the core. Every boundary (PHP, C, CLI) maps it exactly once.

use std::fmt;

use crate::dialect::Dialect;

/// What the database session reported when a statement failed.
///
/// Kept apart from [`Error`] because a [`Session`](crate::Session) implementation
/// outside the core (PDO in the PHP extension) must be able to build one.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionError {
    /// The database's error number (`1146`), if the database produced the error.
    pub code: Option<u16>,
    /// The server's or the client library's own text.
    pub message: String,
    /// True when the session is gone (I/O error, server restart, `KILL`): every lock it
    /// held is lost and it must not be used again.
    pub lost: bool,
    /// True when the server stopped answering: a read or write ran out of its bound
    /// (`connect_timeout`, `read_timeout`, `write_timeout`). The session is lost too;
    /// a caller does not try again at once, which would wait as long again.
    pub stalled: bool,
    /// Whose numbering `code` is in: MySQL/MariaDB's, or SQLite's (a user's SQLite PDO
    /// in the lease mode), where the same number means something else.
    pub dialect: Dialect,
}

impl SessionError {
    /// An error reported by a MySQL or MariaDB server with its error number.
    pub fn server(code: u16, message: impl Into<String>) -> Self {
        let lost = matches!(code, 1053 | 1152 | 1927 | 2006 | 2013 | 4031);
        SessionError { code: Some(code), message: message.into(), lost, stalled: false, dialect: Dialect::MySql }
    }

    /// An error reported by SQLite with its result code (`5`: the database is locked).
    pub fn sqlite(code: u16, message: impl Into<String>) -> Self {
        SessionError {
            code: Some(code),
            message: message.into(),
            lost: false,
            stalled: false,
            dialect: Dialect::Sqlite,
        }
    }

    /// An error without a database error number (the client library's, or a finding of
    /// the caller's own); the session stays usable.
    pub fn client(message: impl Into<String>) -> Self {
        SessionError { code: None, message: message.into(), lost: false, stalled: false, dialect: Dialect::MySql }
    }

    /// The connection itself failed; the session cannot be used again.
    pub fn lost(message: impl Into<String>) -> Self {
        SessionError { code: None, message: message.into(), lost: true, stalled: false, dialect: Dialect::MySql }
    }

    /// The server stopped answering within a bound (`connect_timeout`, `read_timeout`,
    /// `write_timeout`): the session is lost, and `stalled` says why.
    pub fn stalled(message: impl Into<String>) -> Self {
        SessionError { code: None, message: message.into(), lost: true, stalled: true, dialect: Dialect::MySql }
    }

    /// `code`, if it is a MySQL/MariaDB error number: what the mappings by number read.
    pub fn mysql_code(&self) -> Option<u16> {
        self.code.filter(|_| self.dialect == Dialect::MySql)
    }
}

impl fmt::Display for SessionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let numbering = match self.dialect {
            Dialect::MySql => "mysql",
            Dialect::Sqlite => "sqlite",
        };
        match self.code {
            Some(code) => write!(f, "{} ({numbering} error {code})", self.message),
            None => f.write_str(&self.message),
        }
    }
}

impl std::error::Error for SessionError {}

/// Why a lock this session once held is not held any more.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Loss {
    /// This session never acquired it (or already released it).
    NeverAcquired,
    /// The lock's row no longer belongs to this session: its TTL passed and another
    /// session took it over, or the row was deleted.
    RowGone,
    /// The database session that held it ended (killed, dropped, server restarted).
    SessionLost,
    /// The GET_LOCK half of the lock was released behind this session's back.
    GetLockGone,
    /// Its keep-alive could not renew it: the lease ran out unrenewed, or was no longer
    /// this session's when the keep-alive tried.
    RenewalFailed,
}

impl fmt::Display for Loss {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Loss::NeverAcquired => "this session does not hold it",
            Loss::RowGone => "its row was taken over or deleted (TTL passed?)",
            Loss::SessionLost => "the database session holding it was lost",
            Loss::GetLockGone => "its GET_LOCK is no longer held by this session",
            Loss::RenewalFailed => "its keep-alive could not renew it (the lease ran out or was taken over)",
        })
    }
}

/// Every failure of the core. Messages are one lowercase line naming the lock and the
/// cause; `source()` carries the server's own error where there is one.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Bad input, rejected before any statement ran: nothing changed.
    #[error("invalid {what}: {reason}")]
    InvalidArgument { what: &'static str, reason: String },

    /// Another session holds the lock and it did not become free in time.
    #[error("lock \"{name}\" was not acquired within {timeout} seconds: it is held by another session")]
    Timeout { name: String, timeout: f64 },

    /// This session already holds the lock (possibly under another spelling that maps
    /// to the same row); acquiring again would wait for itself.
    #[error("lock \"{name}\" is already held by this session{}", spelling_note(.name, .held_as))]
    AlreadyHeld { name: String, held_as: String },

    /// Release, renew or assert on a lock this session does not hold (any more).
    #[error("lock \"{name}\" is not held: {loss}")]
    NotHeld { name: String, loss: Loss },

    /// The lock is held but will expire sooner than the caller needs.
    #[error("lock \"{name}\" has {remaining:.3} seconds of its TTL left, {required} required")]
    TtlTooShort { name: String, remaining: f64, required: f64 },

    /// The locks table does not exist.
    /// `init` is the command that creates it, where there is one (not for SQLite).
    #[error("lock table {table} does not exist: {}create it with: {create_sql}", init_hint(.init))]
    MissingTable { table: String, create_sql: String, init: Option<&'static str>, source: SessionError },

    /// The lease table exists but cannot hold leases safely (engine or columns).
    #[error("lease table {table} cannot be used: {reason}")]
    UnusableTable { table: String, reason: String },

    /// A GET_LOCK-based lock on a replicated cluster node, where GET_LOCK, IS_USED_LOCK,
    /// CONNECTION_ID and KILL act on that node only: another node would grant the same
    /// lock at the same time.
    #[error("{}the server is {what}: GET_LOCK and KILL act on that node only, so another node would grant the same lock; use the lease mode (table-only leases: DistributedLock, `mysqllock run --lease`), or, only if every lock client talks to this one node, allow it (allow_cluster=1 in the DSN, mysqllock.allow_cluster=1 in php.ini, --allow-cluster)", lock_prefix(.name))]
    ClusterNode { name: Option<String>, what: &'static str },

    /// A cluster node that cannot serve the statement until it is back in its cluster: a
    /// Galera node outside the primary component (1047), a Group Replication member
    /// that lost the majority of its group or is not ONLINE in it (3100 a commit the
    /// group could not order, 3796 and 3797 a read that cannot see the group's state).
    #[error("database node not ready{}: {source} (the node is not part of its cluster's primary component or majority; retry, or connect to another node)", lock_note(.name))]
    NodeNotReady { name: Option<String>, source: SessionError },

    /// The server takes no writes (`super_read_only`/`read_only`, MySQL error 1290 or
    /// 1836): a secondary of a single-primary Group Replication group (also a member
    /// that left its group), or a replica.
    #[error("read-only server{}: {source} (a secondary of a single-primary Group Replication group, a member outside its group, or a replica takes no writes: send them to the primary; this member takes them again if it becomes the primary)", lock_note(.name))]
    ReadOnly { name: Option<String>, source: SessionError },

    /// Connecting failed; `target` never contains the password.
    #[error("cannot connect to {target}: {source}{}", connect_hint(.source))]
    Connect { target: String, source: SessionError },

    /// The server refused a statement for lack of privileges.
    #[error("access denied{}: {source}", lock_note(.name))]
    AccessDenied { name: Option<String>, source: SessionError },

    /// The session died while working on the lock; every lock it held is lost.
    #[error("connection lost{}: {source}", lock_note(.name))]
    ConnectionLost { name: Option<String>, source: SessionError },

    /// A stale holder's session could not be killed, so the lock cannot be taken over.
    #[error("lock \"{name}\": cannot take over from session {holder}: {source} (the user needs the CONNECTION ADMIN or SUPER privilege, or must be the same user)")]
    TakeoverDenied { name: String, holder: u64, source: SessionError },

    /// Waiting for the lock would wait forever: a session waiting for it holds, or waits
    /// for, a lock this session holds (MySQL 8: error 3058; MariaDB: 1213). The server
    /// refused this session's wait; the locks it held before are still held.
    #[error("deadlock{}: {source} (a session that holds this lock waits for one this session holds; release this session's other locks and retry, or take locks in one fixed order everywhere)", lock_note(.name))]
    Deadlock { name: Option<String>, source: SessionError },

    /// The lock table (MyISAM) is marked as crashed and `REPAIR TABLE` did not fix it.
    #[error("lock table {table} is crashed and could not be repaired: {reason}")]
    RepairFailed { table: String, reason: String },

    /// Any other error the server reported.
    #[error("database error{}: {source}", lock_note(.name))]
    Database { name: Option<String>, source: SessionError },
}

fn spelling_note(name: &str, held_as: &str) -> String {
    if name == held_as {
        String::new()
    } else {
        format!(" as \"{held_as}\" (names that differ only in case or trailing spaces are one lock)")
    }
}

fn init_hint(init: &Option<&'static str>) -> String {
    match init {
        Some(command) => format!("run `{command}` or "),
        None => String::new(),
    }
}

fn lock_prefix(name: &Option<String>) -> String {
    match name {
        Some(n) => format!("lock \"{n}\": "),
        None => String::new(),
    }
}

fn lock_note(name: &Option<String>) -> String {
    match name {
        Some(n) => format!(" on lock \"{n}\""),
        None => String::new(),
    }
}

fn connect_hint(source: &SessionError) -> &'static str {
    // The TLS layer's messages carry their own advice.
    if source.message.contains("TLS") {
        return "";
    }
    match source.code {
        Some(1045) => " (check the user name and password)",
        Some(1049) => " (the database does not exist)",
        // Only where nothing answered: a server that answered with what the client
        // cannot speak is running.
        None if source.lost => " (is the server running and reachable?)",
        _ => "",
    }
}

impl Error {
    /// The lock could not be acquired because someone else holds it.
    pub fn is_timeout(&self) -> bool {
        matches!(self, Error::Timeout { .. })
    }

    /// The caller's lock is gone (or was never there).
    pub fn is_not_held(&self) -> bool {
        matches!(self, Error::NotHeld { .. })
    }

    /// The lock is held but with less TTL left than required.
    pub fn is_ttl_too_short(&self) -> bool {
        matches!(self, Error::TtlTooShort { .. })
    }

    /// The input was rejected before anything happened.
    pub fn is_invalid_argument(&self) -> bool {
        matches!(self, Error::InvalidArgument { .. })
    }

    /// The session already holds this lock.
    pub fn is_already_held(&self) -> bool {
        matches!(self, Error::AlreadyHeld { .. })
    }

    /// The server refused a statement naming a column the table lacks (1054): raised
    /// while the statement is prepared, before any of it runs.
    pub(crate) fn is_unknown_column(&self) -> bool {
        matches!(self, Error::Database { source, .. } if source.mysql_code() == Some(1054))
    }

    /// Connecting failed or the connection was lost.
    pub fn is_connection(&self) -> bool {
        matches!(self, Error::Connect { .. } | Error::ConnectionLost { .. })
    }

    /// The table is missing, unusable or crashed beyond repair, or the server refused
    /// access to it.
    pub fn is_schema(&self) -> bool {
        matches!(
            self,
            Error::MissingTable { .. }
                | Error::UnusableTable { .. }
                | Error::RepairFailed { .. }
                | Error::AccessDenied { .. }
        )
    }

    /// A GET_LOCK-based lock was refused on a replicated cluster node.
    pub fn is_cluster_node(&self) -> bool {
        matches!(self, Error::ClusterNode { .. })
    }

    /// The cluster node is not part of the primary component (1047).
    pub fn is_node_not_ready(&self) -> bool {
        matches!(self, Error::NodeNotReady { .. })
    }

    /// The server takes no writes (a read-only secondary or replica).
    pub fn is_read_only(&self) -> bool {
        matches!(self, Error::ReadOnly { .. })
    }

    /// The server refused to wait because the wait would never end.
    pub fn is_deadlock(&self) -> bool {
        matches!(self, Error::Deadlock { .. })
    }

    /// A MyISAM lock table reported itself crashed: can't find record (1032), incorrect
    /// key file (1034), marked as crashed (1194, 1195), and the storage engine's own codes
    /// MariaDB passes through (126 index corrupt, 127 record file corrupt, 145 marked as
    /// crashed). `REPAIR TABLE` is the cure, as the original package knew.
    pub fn is_crashed_table(&self) -> bool {
        const CRASHED_TABLE: [u16; 7] = [126, 127, 145, 1032, 1034, 1194, 1195];
        let Error::Database { source, .. } = self else {
            return false;
        };
        source.mysql_code().is_some_and(|c| CRASHED_TABLE.contains(&c)) || source.message.contains("try to repair it")
    }

    /// The message followed by those parts of its `source()` chain it does not already
    /// quote, joined by ": ": one line that keeps the server's own words, for every
    /// boundary (PHP previous exception, C last error, CLI stderr).
    pub fn chain(&self) -> String {
        let mut text = self.to_string();
        let mut source = std::error::Error::source(self);
        while let Some(s) = source {
            let part = s.to_string();
            if !text.contains(&part) {
                text.push_str(": ");
                text.push_str(&part);
            }
            source = s.source();
        }
        text
    }

    /// The lock name this error is about, if any.
    pub fn lock_name(&self) -> Option<&str> {
        match self {
            Error::Timeout { name, .. }
            | Error::AlreadyHeld { name, .. }
            | Error::NotHeld { name, .. }
            | Error::TtlTooShort { name, .. }
            | Error::TakeoverDenied { name, .. } => Some(name),
            Error::AccessDenied { name, .. }
            | Error::ConnectionLost { name, .. }
            | Error::Database { name, .. }
            | Error::ClusterNode { name, .. }
            | Error::NodeNotReady { name, .. }
            | Error::ReadOnly { name, .. }
            | Error::Deadlock { name, .. } => name.as_deref(),
            _ => None,
        }
    }

    pub(crate) fn invalid(what: &'static str, reason: impl Into<String>) -> Self {
        Error::InvalidArgument { what, reason: reason.into() }
    }
}

impl Error {
    /// A failed statement as an [`Error`], by MySQL error number (lost connection,
    /// deadlock, access denied, node not ready, ...), for statements a caller runs on a
    /// locker's session itself; `name` is the lock it was about, if any.
    pub fn from_session(e: SessionError, name: Option<&str>) -> Error {
        let name = name.map(str::to_owned);
        if e.lost {
            return Error::ConnectionLost { name, source: e };
        }
        match e.mysql_code() {
            // ER_UNKNOWN_COM_ERROR from a Galera node outside the primary component;
            // ER_RUN_HOOK_ERROR from Group Replication's before_commit hook (the member
            // lost its majority or left the group); ER_GRP_TRX_CONSISTENCY_NOT_ALLOWED
            // and ER_GRP_TRX_CONSISTENCY_BEFORE (a `BEFORE` read on a member that is not
            // ONLINE, or that could not reach its group)
            Some(1047 | 3100 | 3796 | 3797) => Error::NodeNotReady { name, source: e },
            // ER_OPTION_PREVENTS_STATEMENT names the option: only read-only is this case
            // (not e.g. secure_file_priv); ER_READ_ONLY_MODE is InnoDB's innodb_read_only.
            Some(1290) if e.message.contains("read-only") || e.message.contains("read_only") => {
                Error::ReadOnly { name, source: e }
            }
            Some(1836) => Error::ReadOnly { name, source: e },
            // ER_USER_LOCK_DEADLOCK (MySQL 8) and ER_LOCK_DEADLOCK (MariaDB's GET_LOCK, InnoDB)
            Some(3058 | 1213) => Error::Deadlock { name, source: e },
            // access denied to database / table / column, or a missing global privilege
            Some(1044 | 1045 | 1142 | 1143 | 1227) => Error::AccessDenied { name, source: e },
            _ => Error::Database { name, source: e },
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn group_replication_refusals_are_typed() {
        let not_ready = [
            (3100, "Error on observer while running replication hook 'before_commit'."),
            (3796, "The option group_replication_consistency cannot be used on the current member state."),
            (3797, "Error while waiting for group transactions commit on group_replication_consistency= 'BEFORE'."),
        ];
        for (code, message) in not_ready {
            let e = Error::from_session(SessionError::server(code, message), Some("r"));
            assert!(e.is_node_not_ready(), "{code}: {e}");
        }
        let secondary = SessionError::server(
            1290,
            "The MySQL server is running with the --super-read-only option so it cannot execute this statement",
        );
        let e = Error::from_session(secondary, Some("r"));
        assert!(e.is_read_only(), "{e}");
        assert!(e.to_string().contains("secondary of a single-primary Group Replication group"), "{e}");
        let other = SessionError::server(1290, "The MySQL server is running with the --secure-file-priv option");
        assert!(!Error::from_session(other, None).is_read_only());
    }

    #[test]
    fn sqlite_errors_are_sqlites_and_not_read_as_mysql_numbers() {
        let busy = Error::from_session(SessionError::sqlite(5, "database is locked"), Some("r"));
        assert_eq!(busy.chain(), "database error on lock \"r\": database is locked (sqlite error 5)");
        // SQLITE_IOERR_FSYNC and SQLITE_IOERR_DIR_FSYNC share their numbers with MySQL's
        // "incorrect key file" and "read-only".
        let fsync = Error::from_session(SessionError::sqlite(1034, "disk I/O error"), None);
        assert!(!fsync.is_crashed_table(), "{fsync}");
        let dir_fsync = Error::from_session(SessionError::sqlite(1290, "disk I/O error (read-only?)"), None);
        assert!(!dir_fsync.is_read_only(), "{dir_fsync}");
        assert!(matches!(dir_fsync, Error::Database { .. }), "{dir_fsync}");
    }

    #[test]
    fn chain_keeps_the_servers_words_once() {
        let source = SessionError::server(1205, "Lock wait timeout exceeded");
        let quoted = Error::Database { name: Some("n".into()), source: source.clone() };
        assert_eq!(quoted.chain(), "database error on lock \"n\": Lock wait timeout exceeded (mysql error 1205)");
        let hidden = Error::TakeoverDenied { name: "n".into(), holder: 7, source };
        assert_eq!(hidden.chain().matches("Lock wait timeout exceeded").count(), 1);
    }
}
