//! Passing termination signals on to the guarded command.
//!
//! `mysqllock run` must outlive its command to release the lock, so it cannot simply
//! die when cron, systemd or an operator sends SIGTERM: it forwards the signal, lets
//! the command decide what to do with it, and releases once the command has ended.
//!
//! The handler itself does the forwarding (`kill(2)` is async-signal-safe); the only
//! state it needs, the command's pid, lives in an atomic.

use std::io;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, ExitStatus};
use std::sync::atomic::{AtomicI32, Ordering};

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
///
/// Forwarding stops before the child is reaped: once reaped, its pid could be reused
/// by an unrelated process that a late signal must not hit.
pub fn wait(child: &mut Child) -> io::Result<ExitStatus> {
    let pid = child.id();
    loop {
        // SAFETY: siginfo_t is plain data; zeroed is a valid value to be overwritten.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        // WNOWAIT: learn that it exited but leave it a zombie, so the pid stays ours.
        // SAFETY: `info` is a valid, writable siginfo_t.
        let rc = unsafe { libc::waitid(libc::P_PID, pid, &mut info, libc::WEXITED | libc::WNOWAIT) };
        if rc == 0 {
            break;
        }
        let err = io::Error::last_os_error();
        if err.kind() != io::ErrorKind::Interrupted {
            return Err(err);
        }
    }
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
