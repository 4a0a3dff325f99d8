//! `mysqllock run`: the command runs only under the lease, and the lease ends with it.

use std::ffi::OsString;
use std::io;
use std::process::{Command, ExitStatus};
use std::time::{Duration, Instant};

use mysqllock_core::{AcquireOptions, Error, Lease, NativeLocker, DEFAULT_MAX_HOLD};

use crate::{exit, signals};

/// How often a kept-alive run checks whether its lock has run out: a clock read, so
/// it can be frequent; the command's own end is noticed at once regardless.
const WATCH_INTERVAL: Duration = Duration::from_millis(200);

/// What to run under which lock.
pub struct Job<'a> {
    pub name: &'a str,
    pub timeout: f64,
    pub ttl: f64,
    /// Keep-alive, its maximum hold, and "at least".
    pub options: AcquireOptions,
    /// The program and its arguments; never empty (clap requires one).
    pub command: &'a [OsString],
}

/// Acquires the lease, runs the command, releases, and returns the exit code.
pub fn run(locker: &mut NativeLocker, job: &Job<'_>) -> u8 {
    let program = job.command[0].to_string_lossy();
    let lease = match locker.acquire_with(job.name, job.timeout, job.ttl, &job.options) {
        Ok(lease) => lease,
        Err(e) if e.is_timeout() => {
            let waited = if job.timeout > 0.0 { format!(" (waited {} s)", job.timeout) } else { String::new() };
            eprintln!("mysqllock: lock \"{}\" is held elsewhere{waited}; not running {program}", job.name);
            return exit::HELD_ELSEWHERE;
        }
        Err(e) => return exit::report(&e),
    };
    let runs_out = job.options.keep_alive.then(|| RunsOut::after(&lease, &job.options));

    let mut lost = false;
    let code = exit::for_command(&program, execute(job.command, &lease, runs_out.as_ref(), locker, &mut lost));
    if lost {
        // As `run --lease` ends: the command was stopped because the lock is gone (or
        // is about to go), which its own exit code (143) would not tell. Released in
        // case the row is still this session's; an error says nothing new.
        let _ = locker.release(job.name);
        return exit::LOST_AND_TERMINATED;
    }

    match locker.release(job.name) {
        Ok(()) => code,
        Err(Error::NotHeld { loss, .. }) => {
            eprintln!("mysqllock: warning: lock \"{}\" was lost while the command ran ({loss})", job.name);
            // The run may have overlapped with another node's.
            exit::unless_failed(code, exit::LOST_WHILE_RUNNING)
        }
        Err(e) => {
            // Whether the lease stayed ours to the end is unknown; it ends when this
            // process closes its session.
            eprintln!("mysqllock: warning: releasing lock \"{}\" failed: {}", job.name, exit::describe(&e));
            exit::unless_failed(code, exit::for_error(&e))
        }
    }
}

/// When a kept-alive lease ends for good: the keep-alive stops renewing at max-hold
/// after acquisition, and each renewal is capped there, so the lease lasts until then,
/// or until its first TTL if that is longer. A command still running at that moment
/// would go on unguarded (another node may take the lock over), so it is terminated.
struct RunsOut {
    at: Instant,
    /// Whole seconds from acquisition, as the core stores them.
    after: i64,
    max_hold: i64,
}

impl RunsOut {
    /// Counted from now, right after the acquisition: the lease was claimed a moment
    /// ago on the database clock, so this is at most that moment (milliseconds) late.
    fn after(lease: &Lease, options: &AcquireOptions) -> RunsOut {
        // Validated by the core's acquire; rounded up as the core rounds it.
        let max_hold = options.max_hold.unwrap_or(DEFAULT_MAX_HOLD).ceil() as i64;
        let after = lease.ttl.max(max_hold);
        let at = Instant::now() + Duration::from_secs(after.unsigned_abs());
        RunsOut { at, after, max_hold }
    }

    fn has_passed(&self) -> bool {
        Instant::now() >= self.at
    }
}

/// Runs the command to its end with the lease's details in its environment; a command
/// that outlives a kept-alive lease, or whose keep-alive failed, gets SIGTERM, and
/// `lost` says so.
fn execute(
    command: &[OsString],
    lease: &Lease,
    runs_out: Option<&RunsOut>,
    locker: &NativeLocker,
    lost: &mut bool,
) -> io::Result<ExitStatus> {
    let mut cmd = Command::new(&command[0]);
    cmd.args(&command[1..])
        .env("MYSQLLOCK_NAME", &lease.name)
        .env("MYSQLLOCK_CONNECTION_ID", lease.connection_id.to_string());
    // Never an inherited one (a nested run): no token is better than a wrong one.
    match lease.token {
        Some(token) => cmd.env("MYSQLLOCK_TOKEN", token.to_string()),
        None => cmd.env_remove("MYSQLLOCK_TOKEN"),
    };
    let mut child = signals::spawn(&mut cmd)?;
    let Some(runs_out) = runs_out else {
        return signals::wait(&mut child);
    };
    let program = command[0].to_string_lossy();
    signals::wait_watching(&mut child, WATCH_INTERVAL, None, || {
        // Local state only: no statement per poll.
        if locker.renewal_failed(&lease.name) {
            eprintln!(
                "mysqllock: lock \"{}\" is lost: its keep-alive could not renew it; sending SIGTERM to {program}",
                lease.name
            );
            *lost = true;
            return true;
        }
        if !runs_out.has_passed() {
            return false;
        }
        eprintln!(
            "mysqllock: lock \"{}\" runs out: held for {} s, and its keep-alive stopped at --max-hold {} s; \
             sending SIGTERM to {}",
            lease.name, runs_out.after, runs_out.max_hold, program
        );
        *lost = true;
        true
    })
}
