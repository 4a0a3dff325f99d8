//! Passing termination signals on to the guarded command.
//!
//! `mysqllock run` must outlive its command to release the lock, so it cannot simply
//! die when cron, systemd or an operator sends SIGTERM: it forwards the signal, lets
//! the command decide what to do with it, and releases once the command has ended.
//!
//! The handler itself does the forwarding (`kill(2)` is async-signal-safe); the only
//! state it needs, the command's pid, lives in an atomic.
//!
//! `mysqllock` may also end the command itself ([`wait_watching`]): a command that
//! outlives its lock would go on unguarded.

use std::io;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, ExitStatus};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

/// The signals passed on to the command.
const FORWARDED: [libc::c_int; 4] = [libc::SIGHUP, libc::SIGINT, libc::SIGQUIT, libc::SIGTERM];

/// The running command's pid; 0 while there is none to signal.
static CHILD: AtomicI32 = AtomicI32::new(0);

extern "C" fn forward(signal: libc::c_int) {
    let pid = CHILD.load(Ordering::SeqCst);
    if pid > 0 {
        // Cannot fail (and so cannot clobber errno): `wait` keeps the child unreaped
        // until CHILD is reset, so the pid still names our own child.
        // SAFETY: kill(2) is async-signal-safe and takes plain integers.
        unsafe { libc::kill(pid, signal) };
    }
}

/// Starts `command` with the signals above forwarded to it from then on.
///
/// The signals are blocked while the child is being created, so one that arrives in
/// that window is delivered (and forwarded) as soon as the pid is known instead of
/// being lost. The child gets the original mask back before exec (the standard
/// library would pass the blocked one on), and exec resets caught signals to default.
pub fn spawn(command: &mut Command) -> io::Result<Child> {
    // The command inherits mysqllock's environment, but not the password in it.
    crate::argv::scrub_child_env(command);
    let held = Blocked::new()?;
    install()?;
    let original = held.0;
    let parent = std::process::id() as libc::pid_t;
    // SAFETY: the closure runs between fork and exec and only calls pthread_sigmask,
    // prctl, getppid and kill, which are async-signal-safe, on copied values.
    unsafe {
        command.pre_exec(move || {
            // If mysqllock itself dies (kill -9), its session ends and the lock is
            // free: the command must not go on unguarded, so it gets SIGTERM.
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) != 0 {
                return Err(io::Error::last_os_error());
            }
            if libc::getppid() != parent {
                libc::kill(libc::getpid(), libc::SIGTERM);
            }
            match libc::pthread_sigmask(libc::SIG_SETMASK, &original, std::ptr::null_mut()) {
                0 => Ok(()),
                errno => Err(io::Error::from_raw_os_error(errno)),
            }
        });
    }
    let child = command.spawn()?;
    // Lossless: the standard library got this id from a pid_t.
    CHILD.store(child.id() as libc::pid_t, Ordering::SeqCst);
    drop(held);
    Ok(child)
}

/// Waits for `child` to end and reaps it.
pub fn wait(child: &mut Child) -> io::Result<ExitStatus> {
    wait_for_exit(child.id())?;
    reap(child)
}

/// Waits for `child` to end and reaps it, asking `must_stop` every `every` in the
/// meantime; the first time it answers yes, the child gets SIGTERM (once), and waiting
/// goes on until it has ended; with `kill_after`, a child still running that long after
/// the SIGTERM gets SIGKILL.
///
/// A helper thread waits for the exit, so the command's end is seen at once, not at
/// the next tick. Should no thread be available, this waits without watching, as for a
/// run without `--keep-alive`.
pub fn wait_watching(
    child: &mut Child,
    every: Duration,
    kill_after: Option<Duration>,
    mut must_stop: impl FnMut() -> bool,
) -> io::Result<ExitStatus> {
    let pid = child.id();
    let (exit_seen, exited) = mpsc::channel();
    let waiter = thread::Builder::new().name("mysqllock-wait".to_owned()).spawn(move || {
        let _ = exit_seen.send(wait_for_exit(pid));
    });
    if waiter.is_err() {
        return wait(child);
    }
    let signal = |signal| {
        // Lossless: the standard library got this id from a pid_t.
        // SAFETY: plain kill(2); the child is not reaped yet (only `reap` below does
        // that), so the pid still names it.
        unsafe { libc::kill(pid as libc::pid_t, signal) };
    };
    let mut terminated: Option<Instant> = None;
    let mut killed = false;
    loop {
        match exited.recv_timeout(every) {
            Ok(seen) => {
                seen?;
                break;
            }
            Err(mpsc::RecvTimeoutError::Timeout) => match terminated {
                None if must_stop() => {
                    terminated = Some(Instant::now());
                    signal(libc::SIGTERM);
                }
                Some(at) if !killed && kill_after.is_some_and(|grace| at.elapsed() >= grace) => {
                    killed = true;
                    signal(libc::SIGKILL);
                }
                _ => {}
            },
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                return Err(io::Error::other("the thread waiting for the command ended without a word"));
            }
        }
    }
    reap(child)
}

/// Blocks until the process `pid` (our child) has exited, without reaping it: as a
/// zombie its pid stays ours, so forwarding a signal to it cannot hit another process.
fn wait_for_exit(pid: u32) -> io::Result<()> {
    loop {
        // SAFETY: siginfo_t is plain data; zeroed is a valid value to be overwritten.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        // SAFETY: `info` is a valid, writable siginfo_t.
        let rc = unsafe { libc::waitid(libc::P_PID, pid, &mut info, libc::WEXITED | libc::WNOWAIT) };
        if rc == 0 {
            return Ok(());
        }
        let err = io::Error::last_os_error();
        if err.kind() != io::ErrorKind::Interrupted {
            return Err(err);
        }
    }
}

/// Stops forwarding, then reaps the exited child: once reaped, its pid could be reused
/// by an unrelated process that a late signal must not hit.
fn reap(child: &mut Child) -> io::Result<ExitStatus> {
    CHILD.store(0, Ordering::SeqCst);
    child.wait()
}

/// Routes the forwarded signals to [`forward`] for the rest of the process's life.
fn install() -> io::Result<()> {
    for signal in FORWARDED {
        // SAFETY: a zeroed sigaction is valid; the fields that matter are set below.
        let mut action: libc::sigaction = unsafe { std::mem::zeroed() };
        action.sa_sigaction = forward as extern "C" fn(libc::c_int) as libc::sighandler_t;
        // SA_RESTART: the main thread's waitid is restarted rather than interrupted.
        action.sa_flags = libc::SA_RESTART;
        // SAFETY: `action` is initialised and outlives the call; the old action is not
        // wanted.
        if unsafe { libc::sigaction(signal, &action, std::ptr::null_mut()) } != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Blocks the forwarded signals in this thread until dropped.
struct Blocked(libc::sigset_t);

impl Blocked {
    fn new() -> io::Result<Self> {
        // SAFETY: sigset_t values are initialised by sigemptyset before use; both are
        // valid for the mask calls.
        unsafe {
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            for signal in FORWARDED {
                libc::sigaddset(&mut set, signal);
            }
            let mut old: libc::sigset_t = std::mem::zeroed();
            match libc::pthread_sigmask(libc::SIG_BLOCK, &set, &mut old) {
                0 => Ok(Blocked(old)),
                errno => Err(io::Error::from_raw_os_error(errno)),
            }
        }
    }
}

impl Drop for Blocked {
    fn drop(&mut self) {
        // Pending forwarded signals are delivered here, with the pid already known.
        // SAFETY: restores the mask saved in `new`.
        unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &self.0, std::ptr::null_mut()) };
    }
}
