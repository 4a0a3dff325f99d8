//! `mysqllock run --session`: the command runs under a plain `GET_LOCK` session lock (no
//! table, no TTL), held as long as mysqllock's database session. That session is
//! checked while the command runs; if it is lost, the command is terminated, as under a
//! lost lease.

use std::ffi::OsString;
use std::io;
use std::process::{Command, ExitStatus};
use std::time::{Duration, Instant};

use mysqllock_core::{limits, session_lock, Error, NativeLocker, Session};

use crate::{exit, signals};

/// How often the session is checked by default (one statement per check); less often
/// than half the session's `wait_timeout` is never chosen, so the server does not end
/// it as idle.
pub const DEFAULT_PING_EVERY: f64 = 30.0;

/// How often the main thread looks at the clock for the next check: the command's own
/// end is noticed at once regardless.
const TICK: Duration = Duration::from_millis(100);

/// What to run under which session lock.
pub struct SessionJob<'a> {
    pub name: &'a str,
    /// How long to wait while another session holds it; 0 = one try.
    pub timeout: f64,
    /// Seconds between checks of the session while the command runs.
    pub ping_every: f64,
    /// How long a command that got SIGTERM after the lock was lost may take to end
    /// before it gets SIGKILL.
    pub kill_after: f64,
    /// The program and its arguments; never empty (clap requires one).
    pub command: &'a [OsString],
}

/// Takes the session lock, runs the command while checking the session, releases, and
/// returns the exit code.
pub fn run(locker: &mut NativeLocker, job: &SessionJob<'_>) -> u8 {
    let program = job.command[0].to_string_lossy();
    // Checked before anything is acquired.
    let checked = limits::duration("kill-after", job.kill_after)
        .and_then(|kill_after| Ok((kill_after, ping_every(job.ping_every)?)));
    let (kill_after, ping_every) = match checked {
        Ok(checked) => checked,
        Err(e) => return exit::report(&e),
    };
    match locker.lock_session(job.name, job.timeout) {
        Ok(()) => {}
        Err(e) if e.is_timeout() => {
            let waited = if job.timeout > 0.0 { format!(" (waited {} s)", job.timeout) } else { String::new() };
            eprintln!("mysqllock: session lock \"{}\" is held elsewhere{waited}; not running {program}", job.name);
            return exit::HELD_ELSEWHERE;
        }
        Err(e) => return exit::report(&e),
    }
    let every = match check_interval(locker, ping_every) {
        Ok(every) => every,
        Err(e) => {
            // Not started: the lock ends with this process's session anyway.
            let _ = locker.unlock_session(job.name);
            return exit::report(&e);
        }
    };

    let mut lost = false;
    let ran = execute(job, locker, every, kill_after, &mut lost);
    let code = exit::for_command(&program, ran);
    if lost {
        // The session is gone, and the lock with it: nothing to release.
        return exit::LOST_AND_TERMINATED;
    }
    match locker.unlock_session(job.name) {
        Ok(()) => code,
        Err(Error::NotHeld { loss, .. }) => {
            eprintln!("mysqllock: warning: session lock \"{}\" was lost while the command ran ({loss})", job.name);
            // The run may have overlapped with another's.
            exit::unless_failed(code, exit::LOST_WHILE_RUNNING)
        }
        Err(e) => {
            // The lock ends when this process closes its session, a moment from now.
            eprintln!("mysqllock: warning: releasing session lock \"{}\" failed: {}", job.name, exit::describe(&e));
            exit::unless_failed(code, exit::for_error(&e))
        }
    }
}

/// `--ping-every`: a positive duration.
fn ping_every(secs: f64) -> Result<Duration, Error> {
    let every = limits::duration("ping-every", secs)?;
    if every.is_zero() {
        return Err(Error::InvalidArgument { what: "ping-every", reason: "0 would check without pause".into() });
    }
    Ok(every)
}

/// The time between checks: `ping_every`, or half the session's `wait_timeout` if that
/// is shorter, so an idle session is never ended by the server while the command runs.
/// The session learned its `wait_timeout` while connecting; asked only if it did not.
fn check_interval(locker: &mut NativeLocker, ping_every: Duration) -> Result<Duration, Error> {
    let wait_timeout = session_lock::wait_timeout(locker)?.filter(|t| *t > 0.0);
    Ok(wait_timeout.map_or(ping_every, |t| ping_every.min(Duration::from_secs_f64(t / 2.0))))
}

/// Runs the command to its end with the lock's details in its environment, checking
/// every `every` that the session still holds the lock; once it does not, the command
/// gets SIGTERM, then SIGKILL after `kill_after`, and `lost` is set.
fn execute(
    job: &SessionJob<'_>,
    locker: &mut NativeLocker,
    every: Duration,
    kill_after: Duration,
    lost: &mut bool,
) -> io::Result<ExitStatus> {
    let connection_id = locker.session().map(|s| s.connection_id()).unwrap_or_default();
    let mut cmd = Command::new(&job.command[0]);
    cmd.args(&job.command[1..])
        .env("MYSQLLOCK_NAME", job.name)
        .env("MYSQLLOCK_CONNECTION_ID", connection_id.to_string())
        // A session lock has neither: never inherited ones from an outer run.
        .env_remove("MYSQLLOCK_TOKEN")
        .env_remove("MYSQLLOCK_OWNER");
    let mut child = signals::spawn(&mut cmd)?;
    let program = job.command[0].to_string_lossy();
    let mut next = Instant::now() + every;
    let mut warned = false;
    signals::wait_watching(&mut child, TICK, Some(kill_after), || {
        if Instant::now() < next {
            return false;
        }
        next = Instant::now() + every;
        let why = match locker.holds_session_lock(job.name) {
            Ok(true) => return false,
            // The check found the session gone (the locker let go of it).
            Ok(false) if !locker.is_connected() => {
                "its session ended (killed, connection dropped, or the server restarted)".to_owned()
            }
            Ok(false) => "its session no longer holds it".to_owned(),
            Err(e @ Error::ConnectionLost { .. }) => exit::describe(&e),
            Err(e) => {
                // The server answered, so the session, and the lock with it, is alive.
                if !warned {
                    warned = true;
                    eprintln!("mysqllock: warning: cannot check session lock \"{}\": {}", job.name, exit::describe(&e));
                }
                return false;
            }
        };
        eprintln!(
            "mysqllock: session lock \"{}\" is lost ({why}); sending SIGTERM to {program} (SIGKILL after {} s)",
            job.name, job.kill_after
        );
        *lost = true;
        true
    })
}
