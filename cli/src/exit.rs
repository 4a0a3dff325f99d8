//! Exit codes: the contract with crontab wrappers and scripts.
//!
//! Codes 64–78 follow BSD `sysexits.h` so that the outcomes a wrapper branches on
//! ("someone else ran it", "the database is down") never collide with the small codes
//! a guarded command usually returns itself.

use std::io;
use std::process::ExitStatus;

use mysqllock_core::Error;

/// Bad arguments or connection URL; nothing was changed (EX_USAGE).
pub const USAGE: u8 = 64;
/// The server could not be reached, refused the login, or dropped the connection, or
/// cannot take the statement now: a cluster node outside its primary component or
/// majority, a read-only server such as a single-primary group's secondary
/// (EX_UNAVAILABLE).
pub const UNAVAILABLE: u8 = 69;
/// Any other database error (EX_SOFTWARE).
pub const SOFTWARE: u8 = 70;
/// Another node holds the lock: the command was not run (EX_TEMPFAIL).
pub const HELD_ELSEWHERE: u8 = 75;
/// The command succeeded, but the lock was lost while it ran, so the run may not have
/// been exclusive (EX_PROTOCOL). Not for a loss mysqllock noticed while the command
/// ran: it then stops the command and exits [`LOST_AND_TERMINATED`].
pub const LOST_WHILE_RUNNING: u8 = 76;
/// The server refused a statement for lack of privileges (EX_NOPERM).
pub const NO_PERMISSION: u8 = 77;
/// The lock table does not exist (run `mysqllock init`, or `init --lease`), the lease
/// table cannot hold leases safely (MyISAM), or the server does not show the session
/// locks of other clients to `status --session` (EX_CONFIG).
pub const NOT_SET_UP: u8 = 78;
/// `run --lease`, `--keep-alive` or `--session`: the lock was lost while the command
/// ran (a renewal was refused, or the local deadline passed without one; `--max-hold`
/// ended a kept-alive lock; the session holding a session lock ended), so the command
/// was terminated (SIGTERM, then SIGKILL after `--kill-after` with `--lease` and
/// `--session`).
pub const LOST_AND_TERMINATED: u8 = 79;
/// A GET_LOCK-based lock on a replicated cluster node (Galera, Group Replication), where
/// GET_LOCK and KILL act on that node only: use `--lease`, or `--allow-cluster` if every
/// lock client talks to this one node.
pub const CLUSTER_NODE: u8 = 80;
/// The command exists but could not be executed (as in a shell).
pub const CANNOT_EXECUTE: u8 = 126;
/// The command was not found (as in a shell).
pub const NOT_FOUND: u8 = 127;

/// The one mapping from core errors to exit codes.
pub fn for_error(e: &Error) -> u8 {
    match e {
        Error::InvalidArgument { .. } => USAGE,
        Error::Timeout { .. } => HELD_ELSEWHERE,
        Error::Connect { .. } | Error::ConnectionLost { .. } | Error::NodeNotReady { .. } | Error::ReadOnly { .. } => {
            UNAVAILABLE
        }
        Error::MissingTable { .. } | Error::UnusableTable { .. } => NOT_SET_UP,
        Error::ClusterNode { .. } => CLUSTER_NODE,
        Error::AccessDenied { .. } | Error::TakeoverDenied { .. } => NO_PERMISSION,
        Error::NotHeld { .. } => LOST_WHILE_RUNNING,
        _ => SOFTWARE,
    }
}

/// The command's own exit code, or 128 + the signal number if a signal killed it, as
/// a shell reports it.
pub fn for_child(status: ExitStatus) -> u8 {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        // Exit codes are 0..=255 on Unix; the mask only satisfies the type.
        (Some(code), _) => (code & 0xff) as u8,
        (None, Some(signal)) => (128 + (signal & 0x7f)) as u8,
        (None, None) => SOFTWARE,
    }
}

/// The exit code of a run's command: its own (see [`for_child`]) or, when it could not
/// be started, [`NOT_FOUND`] or [`CANNOT_EXECUTE`] (said on stderr), as a shell reports it.
pub fn for_command(program: &str, ran: io::Result<ExitStatus>) -> u8 {
    match ran {
        Ok(status) => for_child(status),
        Err(e) => {
            eprintln!("mysqllock: cannot run {program}: {e}");
            if e.kind() == io::ErrorKind::NotFound {
                NOT_FOUND
            } else {
                CANNOT_EXECUTE
            }
        }
    }
}

/// A run's exit code when its lock ended badly (`instead`): a failed command's code
/// speaks for itself; a success must not hide that the run may not have been guarded.
pub fn unless_failed(code: u8, instead: u8) -> u8 {
    if code == 0 {
        instead
    } else {
        code
    }
}

/// The error and its `source()` chain on one line (for cron mail and syslog).
pub fn describe(e: &Error) -> String {
    // The missing-table hint carries a multi-line CREATE TABLE; it reads fine flattened.
    e.chain().lines().map(str::trim).collect::<Vec<_>>().join(" ")
}

/// Prints `e` as one `mysqllock: ...` line on stderr and returns its exit code.
pub fn report(e: &Error) -> u8 {
    eprintln!("mysqllock: {}", describe(e));
    for_error(e)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::ExitStatusExt;

    #[test]
    fn command_status_maps_like_a_shell() {
        assert_eq!(for_child(ExitStatus::from_raw(7 << 8)), 7);
        assert_eq!(for_child(ExitStatus::from_raw(libc::SIGTERM)), 128 + 15);
    }

    #[test]
    fn bad_input_and_lock_contention_have_their_own_codes() {
        let invalid = Error::InvalidArgument { what: "ttl", reason: "NaN is not a finite number of seconds".into() };
        assert_eq!(for_error(&invalid), USAGE);
        assert_eq!(for_error(&Error::Timeout { name: "x".into(), timeout: 0.0 }), HELD_ELSEWHERE);
    }

    #[test]
    fn a_cluster_node_refusal_has_its_own_code_and_a_node_not_ready_is_unavailable() {
        let refused = Error::ClusterNode { name: Some("x".into()), what: "a Galera node (wsrep_on=ON)" };
        assert_eq!(for_error(&refused), CLUSTER_NODE);
        let not_ready = Error::NodeNotReady {
            name: None,
            source: mysqllock_core::SessionError::server(1047, "WSREP has not yet prepared node for application use"),
        };
        assert_eq!(for_error(&not_ready), UNAVAILABLE);
        let secondary = Error::ReadOnly {
            name: None,
            source: mysqllock_core::SessionError::server(1290, "running with the --super-read-only option"),
        };
        assert_eq!(for_error(&secondary), UNAVAILABLE);
    }

    #[test]
    fn describe_does_not_repeat_a_source_the_message_quotes() {
        let e = Error::Connect {
            target: "app@db:3306/prod".into(),
            source: mysqllock_core::SessionError::server(1045, "Access denied for user 'app'"),
        };
        let text = describe(&e);
        assert_eq!(text.matches("Access denied").count(), 1, "{text}");
        assert_eq!(for_error(&e), UNAVAILABLE);
    }
}
