//! The status codes every call returns, and the one mapping from the core's errors.

use std::ffi::{c_char, c_int, CStr};

use mysqllock_core::Error;

/// The outcome of a call. `MYSQLLOCK_OK` (0) is success; every other value has a
/// message in `mysqllock_last_error()` on the calling thread.
///
/// The numbers are stable: they are never reused or renumbered, so they may be
/// stored, logged or hard-coded in other languages. New codes are only ever appended.
// The Rust variant names are the C names without the `MYSQLLOCK_` prefix, which
// cbindgen adds (`rename_variants` in ffi/cbindgen.toml): C callers see one namespace.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(non_camel_case_types, clippy::upper_case_acronyms)]
pub enum mysqllock_status {
    /// Success.
    OK = 0,
    /// Another session holds the lock and it did not become free in time.
    TIMEOUT = 1,
    /// The lock is not held by this client (never acquired, already released, taken
    /// over after its TTL passed, or lost with the database session).
    NOT_HELD = 2,
    /// The lock is held, but with less TTL left than required.
    TTL_TOO_SHORT = 3,
    /// This client already holds the lock; acquiring it again would wait for itself.
    ALREADY_HELD = 4,
    /// Bad input, rejected before anything happened: NULL pointer, invalid UTF-8,
    /// empty or over-long name, name the table cannot store, NaN/negative/infinite
    /// seconds, malformed URL or table name.
    INVALID_ARGUMENT = 5,
    /// Connecting failed (unreachable server, wrong password, unknown database) or the
    /// connection was lost; every lock of the lost session is gone.
    CONNECTION = 6,
    /// The lock table is missing (the message has the CREATE TABLE statement), the
    /// server refused access to it, it is a crashed MyISAM table that `REPAIR TABLE`
    /// could not fix (acquisitions repair a crashed table once by themselves), or it lacks the token column that
    /// `mysqllock_token()` needs (the message says to run `mysqllock init --upgrade`).
    TABLE = 7,
    /// Any other error the database server reported.
    DATABASE = 8,
    /// A bug in mysqllock (a caught panic). The client's state is unknown: free it.
    INTERNAL = 9,
    /// A GET_LOCK-based call on a replicated cluster node (Galera `wsrep_on=ON`, a Group
    /// Replication member), where GET_LOCK and KILL act on that node only and another
    /// node would grant the same lock: use the lease mode (`mysqllock_lease_*`), or, only
    /// if every lock client talks to this one node, `mysqllock_client_allow_cluster()`
    /// (`allow_cluster=1` in the URL).
    CLUSTER_NODE = 10,
    /// The server cannot take the statement now: a Galera node outside the primary
    /// component (MySQL error 1047), a Group Replication member that lost its group's
    /// majority or is not ONLINE in it (3100, 3796, 3797), or a read-only server (1290:
    /// a single-primary group's secondary, which takes no writes). Retry, or connect to
    /// another node (for writes in a single-primary group: the primary).
    NODE_NOT_READY = 11,
    /// The server refused to wait for the lock because the wait would never end: a
    /// session that holds it waits for a lock this client holds (MariaDB error 1213,
    /// MySQL 3058). This client's other locks are still held; release them and retry,
    /// or take locks in one fixed order everywhere.
    DEADLOCK = 12,
}

impl From<&Error> for mysqllock_status {
    /// The single place that decides which status a core error becomes.
    fn from(e: &Error) -> Self {
        match e {
            e if e.is_timeout() => Self::TIMEOUT,
            e if e.is_not_held() => Self::NOT_HELD,
            e if e.is_ttl_too_short() => Self::TTL_TOO_SHORT,
            e if e.is_already_held() => Self::ALREADY_HELD,
            e if e.is_invalid_argument() => Self::INVALID_ARGUMENT,
            e if e.is_connection() => Self::CONNECTION,
            e if e.is_schema() => Self::TABLE,
            e if e.is_cluster_node() => Self::CLUSTER_NODE,
            e if e.is_node_not_ready() || e.is_read_only() => Self::NODE_NOT_READY,
            e if e.is_deadlock() => Self::DEADLOCK,
            // `Database`, `TakeoverDenied`, and variants the core may add later: all are
            // failures reported by the server that callers do not branch on.
            _ => Self::DATABASE,
        }
    }
}

impl mysqllock_status {
    /// The C name of the status, for logs.
    fn name(self) -> &'static CStr {
        match self {
            Self::OK => c"MYSQLLOCK_OK",
            Self::TIMEOUT => c"MYSQLLOCK_TIMEOUT",
            Self::NOT_HELD => c"MYSQLLOCK_NOT_HELD",
            Self::TTL_TOO_SHORT => c"MYSQLLOCK_TTL_TOO_SHORT",
            Self::ALREADY_HELD => c"MYSQLLOCK_ALREADY_HELD",
            Self::INVALID_ARGUMENT => c"MYSQLLOCK_INVALID_ARGUMENT",
            Self::CONNECTION => c"MYSQLLOCK_CONNECTION",
            Self::TABLE => c"MYSQLLOCK_TABLE",
            Self::DATABASE => c"MYSQLLOCK_DATABASE",
            Self::INTERNAL => c"MYSQLLOCK_INTERNAL",
            Self::CLUSTER_NODE => c"MYSQLLOCK_CLUSTER_NODE",
            Self::NODE_NOT_READY => c"MYSQLLOCK_NODE_NOT_READY",
            Self::DEADLOCK => c"MYSQLLOCK_DEADLOCK",
        }
    }

    /// The status with this number, if there is one. Takes the raw number because C
    /// may hand over any `int`, and an out-of-range Rust enum would be undefined behaviour.
    fn from_number(n: c_int) -> Option<Self> {
        const ALL: [mysqllock_status; 13] = [
            mysqllock_status::OK,
            mysqllock_status::TIMEOUT,
            mysqllock_status::NOT_HELD,
            mysqllock_status::TTL_TOO_SHORT,
            mysqllock_status::ALREADY_HELD,
            mysqllock_status::INVALID_ARGUMENT,
            mysqllock_status::CONNECTION,
            mysqllock_status::TABLE,
            mysqllock_status::DATABASE,
            mysqllock_status::INTERNAL,
            mysqllock_status::CLUSTER_NODE,
            mysqllock_status::NODE_NOT_READY,
            mysqllock_status::DEADLOCK,
        ];
        ALL.into_iter().find(|s| *s as c_int == n)
    }
}

/// The name of a status as a static, NUL-terminated string ("MYSQLLOCK_TIMEOUT"), or
/// "MYSQLLOCK_UNKNOWN_STATUS" for a number that is not a `mysqllock_status`.
///
/// Takes an `int` so that any number is safe to pass. The string is owned by the
/// library and valid for the life of the process; do not free it. Any thread may call
/// this at any time; it does not touch the last error.
#[no_mangle]
pub extern "C" fn mysqllock_status_name(status: c_int) -> *const c_char {
    let unknown = c"MYSQLLOCK_UNKNOWN_STATUS";
    crate::last_error::guard(unknown.as_ptr(), || {
        mysqllock_status::from_number(status).map_or(unknown, mysqllock_status::name).as_ptr()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_number_round_trips_through_its_name() {
        for n in 0..13 {
            let status = mysqllock_status::from_number(n).expect("statuses are numbered 0..=12");
            assert_eq!(status as c_int, n);
            // SAFETY: the function returns a static NUL-terminated string.
            let name = unsafe { CStr::from_ptr(mysqllock_status_name(n)) };
            assert!(name.to_bytes().starts_with(b"MYSQLLOCK_"), "{name:?}");
        }
        // SAFETY: as above.
        let unknown = unsafe { CStr::from_ptr(mysqllock_status_name(42)) };
        assert_eq!(unknown, c"MYSQLLOCK_UNKNOWN_STATUS");
    }

    #[test]
    fn core_errors_map_to_their_status() {
        let invalid = Error::InvalidArgument { what: "lock name", reason: "it is empty".into() };
        assert_eq!(mysqllock_status::from(&invalid), mysqllock_status::INVALID_ARGUMENT);
        let timeout = Error::Timeout { name: "x".into(), timeout: 0.5 };
        assert_eq!(mysqllock_status::from(&timeout), mysqllock_status::TIMEOUT);
        let cluster = Error::ClusterNode { name: Some("x".into()), what: "a Galera node (wsrep_on=ON)" };
        assert_eq!(mysqllock_status::from(&cluster), mysqllock_status::CLUSTER_NODE);
        let not_ready = Error::NodeNotReady {
            name: None,
            source: mysqllock_core::SessionError::server(1047, "WSREP has not yet prepared node for application use"),
        };
        assert_eq!(mysqllock_status::from(&not_ready), mysqllock_status::NODE_NOT_READY);
        let secondary = Error::ReadOnly {
            name: None,
            source: mysqllock_core::SessionError::server(1290, "running with the --super-read-only option"),
        };
        assert_eq!(mysqllock_status::from(&secondary), mysqllock_status::NODE_NOT_READY);
    }
}
