//! `mysqllock run --lease`: the command runs under a table-only lease (the lease mode,
//! safe on replicated clusters), renewed while it runs, and is terminated if the lease
//! is lost.

use std::ffi::OsString;
use std::io;
use std::process::{Command, ExitStatus};
use std::time::Duration;

use mysqllock_core::{limits, Config, DistributedLock, Grant, LeaseKeeper};

use crate::{exit, signals};

/// How often the lease's state is looked at while the command runs: a clock read and a
/// mutex, no statement (the keeper renews on its own session).
const WATCH_INTERVAL: Duration = Duration::from_millis(100);

/// What to run under which lease.
pub struct LeaseJob<'a> {
    pub name: &'a str,
    /// `None`: host:pid:random, unique to this run.
    pub owner: Option<&'a str>,
    /// How long to keep trying while another owner holds it; 0 = one try.
    pub timeout: f64,
    pub ttl: f64,
    /// How long a command that got SIGTERM after the lease was lost may take to end
    /// before it gets SIGKILL.
    pub kill_after: f64,
    /// The program and its arguments; never empty (clap requires one).
    pub command: &'a [OsString],
}

/// Acquires the lease, runs the command while renewing it, releases, and returns the
/// exit code.
pub fn run(config: &Config, job: &LeaseJob<'_>) -> u8 {
    let program = job.command[0].to_string_lossy();
    // Checked before anything is acquired.
    let kill_after = match limits::duration("kill-after", job.kill_after) {
        Ok(d) => d,
        Err(e) => return exit::report(&e),
    };
    let owner = job.owner.map_or_else(mysqllock_core::unique_owner, str::to_owned);
    let mut lock = DistributedLock::native(config.clone());
    let grant = match lock.acquire_waiting(job.name, &owner, job.ttl, job.timeout) {
        Ok(Some(grant)) => grant,
        Ok(None) => {
            let waited = if job.timeout > 0.0 { format!(" (waited {} s)", job.timeout) } else { String::new() };
            eprintln!("mysqllock: lease \"{}\" is held by another owner{waited}; not running {program}", job.name);
            return exit::HELD_ELSEWHERE;
        }
        Err(e) => return exit::report(&e),
    };
    let keeper = match LeaseKeeper::start(config.clone(), job.name, &owner, job.ttl, grant) {
        Ok(keeper) => keeper,
        Err(e) => {
            let _ = lock.release(job.name, &owner);
            return exit::report(&e);
        }
    };

    let mut lost = false;
    let code = exit::for_command(&program, execute(job, &owner, &grant, &keeper, kill_after, &mut lost));
    // No renewal after the release: stop the keeper first.
    let lost_at_end = keeper.lost();
    keeper.stop();
    if lost {
        // The row is another owner's now, or will be: nothing to release.
        return exit::LOST_AND_TERMINATED;
    }
    match lock.release(job.name, &owner) {
        Ok(true) => code,
        Ok(false) => {
            let why = lost_at_end.unwrap_or_else(|| "it expired or another owner took it".into());
            eprintln!("mysqllock: warning: lease \"{}\" was lost while the command ran ({why})", job.name);
            // The run may have overlapped with another node's.
            exit::unless_failed(code, exit::LOST_WHILE_RUNNING)
        }
        Err(e) => {
            // The lease ends at its TTL anyway.
            eprintln!("mysqllock: warning: releasing lease \"{}\" failed: {}", job.name, exit::describe(&e));
            exit::unless_failed(code, exit::for_error(&e))
        }
    }
}

/// Runs the command to its end with the lease's details in its environment; once the
/// keeper reports the lease lost, the command gets SIGTERM, then SIGKILL after the grace.
fn execute(
    job: &LeaseJob<'_>,
    owner: &str,
    grant: &Grant,
    keeper: &LeaseKeeper,
    kill_after: Duration,
    lost: &mut bool,
) -> io::Result<ExitStatus> {
    let mut cmd = Command::new(&job.command[0]);
    cmd.args(&job.command[1..])
        .env("MYSQLLOCK_NAME", job.name)
        .env("MYSQLLOCK_OWNER", owner)
        // A lease has no session: never an inherited id from an outer run.
        .env_remove("MYSQLLOCK_CONNECTION_ID");
    match grant.token {
        Some(token) => cmd.env("MYSQLLOCK_TOKEN", token.to_string()),
        None => cmd.env_remove("MYSQLLOCK_TOKEN"),
    };
    let mut child = signals::spawn(&mut cmd)?;
    let program = job.command[0].to_string_lossy();
    signals::wait_watching(&mut child, WATCH_INTERVAL, Some(kill_after), || {
        let Some(why) = keeper.lost() else { return false };
        eprintln!(
            "mysqllock: lease \"{}\" is lost ({why}); sending SIGTERM to {program} (SIGKILL after {} s)",
            job.name, job.kill_after
        );
        *lost = true;
        true
    })
}
