//! `mysqllock run`: the command runs only under the lease, and the lease ends with it.

use std::ffi::OsString;
use std::io;
use std::process::{Command, ExitStatus};

use mysqllock_core::{Error, Lease, NativeLocker};

use crate::{exit, signals};

/// What to run under which lock.
pub struct Job<'a> {
    pub name: &'a str,
    pub timeout: f64,
    pub ttl: f64,
    /// The program and its arguments; never empty (clap requires one).
    pub command: &'a [OsString],
}

/// Acquires the lease, runs the command, releases, and returns the exit code.
pub fn run(locker: &mut NativeLocker, job: &Job<'_>) -> u8 {
    let program = job.command[0].to_string_lossy();
    let lease = match locker.acquire(job.name, job.timeout, job.ttl) {
        Ok(lease) => lease,
        Err(e) if e.is_timeout() => {
            let waited = if job.timeout > 0.0 { format!(" (waited {} s)", job.timeout) } else { String::new() };
            eprintln!("mysqllock: lock \"{}\" is held elsewhere{waited}; not running {program}", job.name);
            return exit::HELD_ELSEWHERE;
        }
        Err(e) => return exit::report(&e),
    };

    let code = match execute(job.command, &lease) {
        Ok(status) => exit::for_child(status),
        Err(e) => {
            eprintln!("mysqllock: cannot run {program}: {e}");
            if e.kind() == io::ErrorKind::NotFound {
                exit::NOT_FOUND
            } else {
                exit::CANNOT_EXECUTE
            }
        }
    };

    match locker.release(job.name) {
        Ok(()) => code,
        Err(Error::NotHeld { loss, .. }) => {
            eprintln!("mysqllock: warning: lock \"{}\" was lost while the command ran ({loss})", job.name);
            // A failure speaks for itself; a success must not hide that the run may
            // have overlapped with another node's.
            if code == 0 {
                exit::LOST_WHILE_RUNNING
            } else {
                code
            }
        }
        Err(e) => {
            // The lease was still ours; it ends when this process closes its session.
            eprintln!("mysqllock: warning: releasing lock \"{}\" failed: {}", job.name, exit::describe(&e));
            code
        }
    }
}

/// Runs the command to its end with the lease's details in its environment.
fn execute(command: &[OsString], lease: &Lease) -> io::Result<ExitStatus> {
    let mut cmd = Command::new(&command[0]);
    cmd.args(&command[1..])
        .env("MYSQLLOCK_NAME", &lease.name)
        .env("MYSQLLOCK_CONNECTION_ID", lease.connection_id.to_string());
    let mut child = signals::spawn(&mut cmd)?;
    signals::wait(&mut child)
}
