//! The socket under a connection, and how long each of its reads and writes may block.
//!
//! Two regimes. While connecting (TCP, TLS, the login and the session's setup), one
//! deadline covers everything: a server that trickles a byte now and then cannot stretch
//! the connect past `connect_timeout`. Afterwards each read may block for what the
//! statement can need (`read_timeout`, plus the wait a `GET_LOCK` asked the server for)
//! and each write for `write_timeout`. The bounds are socket options (`SO_RCVTIMEO`,
//! `SO_SNDTIMEO`), set again only when they change, so an ordinary statement costs no
//! extra system call.
//!
//! A held session sits idle while its job runs, with no read outstanding: TCP keepalive
//! (probes after [`KEEPALIVE_IDLE`] of silence) and `TCP_USER_TIMEOUT` make the kernel
//! notice a peer that is gone (a dead host, a dropped route), so the next statement fails
//! at once instead of waiting out its bound.

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

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

/// The socket itself.
pub(super) enum Plain {
    Tcp(TcpStream),
    Unix(UnixStream),
}

/// A socket with its bounds.
pub(super) struct Socket {
    plain: Plain,
    /// While connecting: every read and write ends by this instant.
    deadline: Option<Instant>,
    /// The whole connect's length, for messages.
    connect_timeout: Duration,
    /// After connecting: how long one read may block.
    read: Duration,
    /// How long one write may block.
    write: Duration,
    /// What the socket has now (`SO_RCVTIMEO`, `SO_SNDTIMEO`).
    applied: (Option<Duration>, Option<Duration>),
}

impl Socket {
    /// `connect_timeout` zero: the connect has no deadline of its own, and each read and
    /// write during it is bounded like a statement's.
    pub fn new(plain: Plain, connect_timeout: Duration, started: Instant, read: Duration, write: Duration) -> Self {
        if let Plain::Tcp(s) = &plain {
            // Best effort: a kernel without these options still has the I/O bounds.
            let _ = keep_alive(s, write);
        }
        let deadline = (!connect_timeout.is_zero()).then(|| started + connect_timeout);
        Socket { plain, deadline, connect_timeout, read, write, applied: (None, None) }
    }

    /// The connect is over: from now on each read and write has its own bound.
    pub fn connected(&mut self) {
        self.deadline = None;
    }

    /// How long the next reads may block: `read_timeout` plus `wait`.
    pub fn expect(&mut self, read: Duration) {
        self.read = read;
    }

    /// How long a read (`writing` false) or write may block now, for messages: the whole
    /// connect's length while connecting.
    pub fn limit(&self, writing: bool) -> Duration {
        match (self.deadline, writing) {
            (Some(_), _) => self.connect_timeout,
            (None, false) => self.read,
            (None, true) => self.write,
        }
    }

    /// The bound of the next read or write: what is left of the connect, or `per_call`.
    fn bound(&self, per_call: Duration) -> io::Result<Duration> {
        match self.deadline {
            None => Ok(per_call),
            Some(deadline) => match deadline.saturating_duration_since(Instant::now()) {
                left if left.is_zero() => Err(io::ErrorKind::TimedOut.into()),
                left => Ok(left),
            },
        }
    }

    fn apply_read(&mut self) -> io::Result<()> {
        let bound = Some(self.bound(self.read)?);
        if self.applied.0 != bound {
            match &self.plain {
                Plain::Tcp(s) => s.set_read_timeout(bound)?,
                Plain::Unix(s) => s.set_read_timeout(bound)?,
            }
            self.applied.0 = bound;
        }
        Ok(())
    }

    fn apply_write(&mut self) -> io::Result<()> {
        let bound = Some(self.bound(self.write)?);
        if self.applied.1 != bound {
            match &self.plain {
                Plain::Tcp(s) => s.set_write_timeout(bound)?,
                Plain::Unix(s) => s.set_write_timeout(bound)?,
            }
            self.applied.1 = bound;
        }
        Ok(())
    }

    pub fn is_unix(&self) -> bool {
        matches!(self.plain, Plain::Unix(_))
    }

    pub fn shutdown(&self) {
        let _ = match &self.plain {
            Plain::Tcp(s) => s.shutdown(std::net::Shutdown::Both),
            Plain::Unix(s) => s.shutdown(std::net::Shutdown::Both),
        };
    }

    pub fn set_nonblocking(&self) {
        let _ = match &self.plain {
            Plain::Tcp(s) => s.set_nonblocking(true),
            Plain::Unix(s) => s.set_nonblocking(true),
        };
    }
}

/// TCP keepalive with short intervals, and `TCP_USER_TIMEOUT`: bytes the peer has not
/// acknowledged within `unacknowledged` end the connection (the kernel then also ends a
/// keepalive that goes unanswered that long).
fn keep_alive(stream: &TcpStream, unacknowledged: Duration) -> io::Result<()> {
    let socket = socket2::SockRef::from(stream);
    let params = socket2::TcpKeepalive::new()
        .with_time(KEEPALIVE_IDLE)
        .with_interval(KEEPALIVE_INTERVAL)
        .with_retries(KEEPALIVE_PROBES);
    socket.set_tcp_keepalive(&params)?;
    socket.set_tcp_user_timeout(Some(unacknowledged))
}

/// Whether an I/O error is a bound running out (`SO_RCVTIMEO` reports `EAGAIN`).
pub(super) fn timed_out(e: &io::Error) -> bool {
    matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut)
}

impl Read for Socket {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.apply_read()?;
        match &mut self.plain {
            Plain::Tcp(s) => s.read(buf),
            Plain::Unix(s) => s.read(buf),
        }
    }
}

impl Write for Socket {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.apply_write()?;
        match &mut self.plain {
            Plain::Tcp(s) => s.write(buf),
            Plain::Unix(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Seconds for a message: `3`, `2.5`, `0.25`.
pub(crate) fn seconds(d: Duration) -> String {
    let text = format!("{:.3}", d.as_secs_f64());
    text.trim_end_matches('0').trim_end_matches('.').to_owned()
}
