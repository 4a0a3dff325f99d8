//! The socket under a connection, and the [`Bound`] every read and write on it takes.
//!
//! The socket offers no read or write without a bound: [`Socket::read`] and
//! [`Socket::write`] take one, and the only `Read`/`Write` it hands out ([`Bounded`], for
//! rustls) is made from one. A path that forgot its bound would not compile.
//!
//! Two kinds of bound. While connecting with a deadline (TCP, TLS, the login and the
//! session's setup), every read and write ends by that deadline: a server that trickles
//! a byte now and then cannot stretch the connect past `connect_timeout`. A statement's
//! reads may each block until the wait it asked the server for ends (a `GET_LOCK` with a
//! timeout), and `read_timeout` more; its writes for `write_timeout`. The bounds are
//! socket options (`SO_RCVTIMEO`, `SO_SNDTIMEO`), set again only when they change, so an
//! ordinary statement costs no extra system call.
//!
//! A held session sits idle while its job runs, with no read outstanding: TCP keepalive
//! (probes after [`KEEPALIVE_IDLE`] of silence) and `TCP_USER_TIMEOUT` make the kernel
//! notice a peer that is gone (a dead host, a dropped route), so the next statement fails
//! at once instead of waiting out its bound.

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::os::unix::net::UnixStream;
use std::time::Duration;

use socket2::SockRef;

use super::During;
use crate::deadline::Deadline;

/// Silence before the first keepalive probe. Short, so that a holder learns of a dead
/// peer within about half a minute; a probe is a 52-byte segment, nothing to the server.
/// With `TCP_USER_TIMEOUT` set (always, here), Linux ends the connection at the first
/// probe once nothing has come from the peer for that long, whatever
/// [`KEEPALIVE_PROBES`] says; the second probe, at 15 s, is the earliest. Measured with
/// every packet dropped (tests/tests/silence.rs): 30.5 s with the default
/// `write_timeout` of 30 s, 15.3 s with 10 s.
pub(crate) const KEEPALIVE_IDLE: Duration = Duration::from_secs(10);
/// Between unanswered probes.
pub(crate) const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(5);
/// Unanswered probes before the kernel gives the connection up, where
/// `TCP_USER_TIMEOUT` is not supported (with it, it decides instead).
pub(crate) const KEEPALIVE_PROBES: u32 = 3;

/// The shortest bound a read or write gets: the kernel reads a zero `SO_RCVTIMEO` as
/// "none".
const SHORTEST: Duration = Duration::from_millis(1);

/// How long each read and write of one exchange with the server may block. Always
/// finite: there is no way to say "unbounded" here.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Bound {
    /// The connect, with its deadline: every read and write ends by it.
    Connect(Deadline),
    /// Each read may block until the server's wait ends (what the statement asked it to
    /// wait for; [`Deadline::now`] for nothing) and `read` more; each write for `write`.
    /// `during` says what for, in messages.
    Each { wait: Deadline, read: Duration, write: Duration, during: During },
}

impl Bound {
    /// The connect's bound: its deadline, or (none: `connect_timeout` 0) each read and
    /// write bounded as a statement's.
    pub fn connect(deadline: Option<Deadline>, read: Duration, write: Duration) -> Bound {
        match deadline {
            Some(deadline) => Bound::Connect(deadline),
            None => Bound::Each { wait: Deadline::now(), read, write, during: During::Connect },
        }
    }

    /// A statement's bound: it asks the server to wait until `wait` (a lock wait), and
    /// may then go unanswered `read` more.
    pub fn statement(wait: Deadline, read: Duration, write: Duration) -> Bound {
        let during = match wait.budget() {
            budget if budget.is_zero() => During::Statement,
            budget => During::Wait(budget),
        };
        Bound::Each { wait, read, write, during }
    }

    /// The connect's deadline, if this is a connect with one.
    pub fn deadline(&self) -> Option<Deadline> {
        match self {
            Bound::Connect(deadline) => Some(*deadline),
            Bound::Each { .. } => None,
        }
    }

    /// How long the next read (`writing` false) or write may block; `TimedOut` once the
    /// connect's deadline has passed.
    pub fn next(&self, writing: bool) -> io::Result<Duration> {
        match *self {
            Bound::Connect(deadline) if deadline.passed() => Err(io::ErrorKind::TimedOut.into()),
            Bound::Connect(deadline) => Ok(deadline.left().max(SHORTEST)),
            Bound::Each { write, .. } if writing => Ok(write.max(SHORTEST)),
            Bound::Each { wait, read, .. } => Ok(wait.left().saturating_add(read).max(SHORTEST)),
        }
    }

    /// How long the server was given, for messages: the connect's whole budget, a
    /// statement's wait plus `read_timeout`, or `write_timeout`: the caller's figures.
    pub fn limit(&self, writing: bool) -> Duration {
        match *self {
            Bound::Connect(deadline) => deadline.budget(),
            Bound::Each { write, .. } if writing => write,
            Bound::Each { wait, read, .. } => wait.budget().saturating_add(read),
        }
    }

    /// What the connection is doing under it, for messages.
    pub fn during(&self) -> During {
        match self {
            Bound::Connect(_) => During::Connect,
            Bound::Each { during, .. } => *during,
        }
    }
}

/// What a socket's bounds are now (`SO_RCVTIMEO`, `SO_SNDTIMEO`): set again only when a
/// bound changes.
#[derive(Debug, Default)]
pub(crate) struct Applied {
    read: Option<Duration>,
    write: Option<Duration>,
}

impl Applied {
    /// Gives `socket` the bound of its next read (`writing` false) or write.
    pub fn apply(&mut self, socket: SockRef<'_>, bound: &Bound, writing: bool) -> io::Result<()> {
        let next = Some(bound.next(writing)?);
        let applied = if writing { &mut self.write } else { &mut self.read };
        if *applied != next {
            match writing {
                true => socket.set_write_timeout(next)?,
                false => socket.set_read_timeout(next)?,
            }
            *applied = next;
        }
        Ok(())
    }
}

/// The socket itself.
pub(super) enum Plain {
    Tcp(TcpStream),
    Unix(UnixStream),
}

/// A socket whose reads and writes each take a [`Bound`].
pub(super) struct Socket {
    plain: Plain,
    applied: Applied,
}

impl Socket {
    /// A TCP socket gets keepalive, and `TCP_USER_TIMEOUT` of `unacknowledged` (the
    /// `write_timeout`): bytes the peer has not acknowledged for that long end the
    /// connection.
    pub fn new(plain: Plain, unacknowledged: Duration) -> Self {
        if let Plain::Tcp(s) = &plain {
            // Best effort: a kernel without these options still has the I/O bounds.
            let _ = keep_alive(s, unacknowledged);
        }
        Socket { plain, applied: Applied::default() }
    }

    /// One read, blocking at most as `bound` allows.
    pub fn read(&mut self, buf: &mut [u8], bound: &Bound) -> io::Result<usize> {
        self.applied.apply(sock_ref(&self.plain), bound, false)?;
        match &mut self.plain {
            Plain::Tcp(s) => s.read(buf),
            Plain::Unix(s) => s.read(buf),
        }
    }

    /// One write, blocking at most as `bound` allows.
    pub fn write(&mut self, buf: &[u8], bound: &Bound) -> io::Result<usize> {
        self.applied.apply(sock_ref(&self.plain), bound, true)?;
        match &mut self.plain {
            Plain::Tcp(s) => s.write(buf),
            Plain::Unix(s) => s.write(buf),
        }
    }

    /// The socket as `Read` and `Write` under `bound`, for what takes those (rustls).
    pub fn bounded(&mut self, bound: Bound) -> Bounded<'_> {
        Bounded { socket: self, bound }
    }

    pub fn is_unix(&self) -> bool {
        matches!(self.plain, Plain::Unix(_))
    }

    pub fn shutdown(&self) {
        let _ = sock_ref(&self.plain).shutdown(std::net::Shutdown::Both);
    }

    pub fn set_nonblocking(&self) {
        let _ = sock_ref(&self.plain).set_nonblocking(true);
    }
}

fn sock_ref(plain: &Plain) -> SockRef<'_> {
    match plain {
        Plain::Tcp(s) => SockRef::from(s),
        Plain::Unix(s) => SockRef::from(s),
    }
}

/// A socket under one bound: `Read` and `Write` for what needs them (rustls), made only
/// from a [`Bound`].
pub(super) struct Bounded<'s> {
    socket: &'s mut Socket,
    bound: Bound,
}

impl Read for Bounded<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.socket.read(buf, &self.bound)
    }
}

impl Write for Bounded<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.socket.write(buf, &self.bound)
    }

    /// The socket holds nothing back.
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// TCP keepalive with short intervals, and `TCP_USER_TIMEOUT`: bytes the peer has not
/// acknowledged within `unacknowledged` end the connection (the kernel then also ends a
/// keepalive that goes unanswered that long).
fn keep_alive(stream: &TcpStream, unacknowledged: Duration) -> io::Result<()> {
    let socket = SockRef::from(stream);
    let params = socket2::TcpKeepalive::new()
        .with_time(KEEPALIVE_IDLE)
        .with_interval(KEEPALIVE_INTERVAL)
        .with_retries(KEEPALIVE_PROBES);
    socket.set_tcp_keepalive(&params)?;
    socket.set_tcp_user_timeout(Some(unacknowledged))
}

/// Whether an I/O error is a bound running out (`SO_RCVTIMEO` reports `EAGAIN`).
pub(crate) fn timed_out(e: &io::Error) -> bool {
    matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut)
}

/// Seconds for a message: `3`, `2.5`, `0.25`.
pub(crate) fn seconds(d: Duration) -> String {
    let text = format!("{:.3}", d.as_secs_f64());
    text.trim_end_matches('0').trim_end_matches('.').to_owned()
}
