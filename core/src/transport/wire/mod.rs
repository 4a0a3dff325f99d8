//! The core's own client for the MySQL wire protocol: a connection over TCP or a Unix
//! socket, in clear or inside TLS ([`super::tls`]: the SSL request, then rustls on the
//! socket), authenticated with `mysql_native_password` (MariaDB, older MySQL),
//! `caching_sha2_password` (MySQL's default since 8.0), `sha256_password` (deprecated,
//! still in MySQL 9) or MariaDB's `ed25519` (through mysql_common's signature), running
//! text-protocol queries and prepared statements.
//!
//! Why not the `mysql` crate: it parses the server's greeting with two regular
//! expressions, compiled on the first connection of every process (about 0.6 ms of CPU,
//! measured), and it cannot send a query behind the handshake response, so a
//! short-lived process paid a round trip and the regex before its first lock. This
//! client does neither. Whatever it does not speak (another authentication plugin, a
//! server without the 4.1 protocol or its pluggable authentication) it reports as
//! [`OpenError::Unsupported`], and the connect ends with that (the crate, the fallback
//! for it until 2026-12, spoke no more plugins as the core configured it).

use std::fmt;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::ops::{Deref, DerefMut};
use std::os::unix::net::UnixStream;
use std::time::Duration;

use crate::config::{Config, SslMode};
use crate::deadline::Deadline;
use crate::error::SessionError;
use crate::value::{Outcome, Value};

mod auth;
mod binary;
mod resolve;
mod rsa_key;
mod socket;
#[cfg(test)]
mod tests;

use auth::*;
pub(crate) use binary::Prepared;
use binary::*;
use resolve::{resolve, Unresolved};
pub(crate) use socket::{seconds, timed_out, Bound};
use socket::{Plain, Socket};

/// A packet of this length continues in the next one.
const MAX_PAYLOAD: usize = 0xFF_FFFF;
/// The longest logical packet (pieces reassembled) this client reads: four times what it
/// tells the server it accepts. Lock results are tiny; a server streaming continuation
/// pieces past this is refused before it fills the memory.
const MAX_PACKET: usize = 4 * CLIENT_MAX_PACKET as usize;
/// What the client accepts, told to the server in the handshake. Lock statements and
/// their results are tiny; a status listing of many locks stays far below.
const CLIENT_MAX_PACKET: u32 = 16 * 1024 * 1024;
/// utf8mb4_general_ci: the handshake's character set, for the user and database names
/// it carries. The session's own character set is set by `SET NAMES` afterwards.
const HANDSHAKE_COLLATION: u8 = 45;

const COM_QUIT: u8 = 0x01;
const COM_QUERY: u8 = 0x03;
const COM_STMT_PREPARE: u8 = 0x16;
const COM_STMT_EXECUTE: u8 = 0x17;
const COM_STMT_CLOSE: u8 = 0x19;

const CLIENT_LONG_PASSWORD: u32 = 0x1;
const CLIENT_LONG_FLAG: u32 = 0x4;
const CLIENT_CONNECT_WITH_DB: u32 = 0x8;
const CLIENT_PROTOCOL_41: u32 = 0x200;
/// Sent in the SSL request, and again in the handshake response that follows it
/// inside TLS.
const CLIENT_SSL: u32 = 0x800;
const CLIENT_TRANSACTIONS: u32 = 0x2000;
const CLIENT_SECURE_CONNECTION: u32 = 0x8000;
const CLIENT_MULTI_STATEMENTS: u32 = 0x1_0000;
const CLIENT_MULTI_RESULTS: u32 = 0x2_0000;
const CLIENT_PS_MULTI_RESULTS: u32 = 0x4_0000;
const CLIENT_PLUGIN_AUTH: u32 = 0x8_0000;
/// What this client asks for. Not CLIENT_FOUND_ROWS: the protocol reads an UPDATE's
/// affected rows as rows changed. Not CLIENT_INTERACTIVE: an idle holder's session is
/// governed by `wait_timeout`, which the setup raises. Not CLIENT_DEPRECATE_EOF: result
/// sets end with the classic EOF packet, which every server sends.
const CLIENT_WANTS: u32 = CLIENT_LONG_PASSWORD
    | CLIENT_LONG_FLAG
    | CLIENT_PROTOCOL_41
    | CLIENT_TRANSACTIONS
    | CLIENT_SECURE_CONNECTION
    | CLIENT_MULTI_STATEMENTS
    | CLIENT_MULTI_RESULTS
    | CLIENT_PS_MULTI_RESULTS
    | CLIENT_PLUGIN_AUTH;

const SERVER_MORE_RESULTS_EXISTS: u16 = 0x8;

/// What a query produced: one outcome per statement, or the first failing one's error.
pub(crate) type Answer = Result<Vec<Outcome>, SessionError>;

/// Why [`Connection::open`] did not produce a connection.
#[derive(Debug)]
pub(crate) enum OpenError {
    /// The server wants something this client does not speak; the text says what.
    Unsupported(String),
    /// The query sent behind the handshake response met a further authentication step
    /// this client could take (a switch to `mysql_native_password` with a fresh scramble,
    /// or to `caching_sha2_password` or `sha256_password`): nothing ran; connect again
    /// without it.
    Switched,
    /// Connecting failed (refused, timed out, access denied, too many connections).
    Failed(SessionError),
}

/// How the handshake went beyond the handshake response: what [`Connection::open`]
/// reports, for [`crate::Authentication`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Login {
    /// `mysql_native_password`: a scramble.
    Native,
    /// `caching_sha2_password`, a scramble the server's cache accepted (or an account
    /// without a password).
    Sha2Fast,
    /// `caching_sha2_password`'s full authentication: the password itself travelled.
    Sha2Full,
    /// `sha256_password`: the password itself travelled, RSA-encrypted (in clear over
    /// TLS; for an account without one, a "no password").
    Sha256,
    /// MariaDB's `ed25519`: a signature of the nonce.
    Ed25519,
}

/// What the server said about itself in its greeting.
#[derive(Debug, Clone)]
pub(crate) struct Greeting {
    pub version: String,
    pub connection_id: u32,
    capabilities: u32,
    scramble: Vec<u8>,
    plugin: String,
}

/// What a connection reads and writes: the socket, in clear or inside TLS. Every read
/// and write takes a [`Bound`], as the socket's own do.
struct Stream {
    socket: Socket,
    /// Once TLS is up.
    tls: Option<Box<rustls::ClientConnection>>,
}

impl Stream {
    fn read(&mut self, buf: &mut [u8], bound: Bound) -> io::Result<usize> {
        match &mut self.tls {
            None => self.socket.read(buf, &bound),
            Some(tls) => rustls::Stream::new(&mut **tls, &mut self.socket.bounded(bound)).read(buf),
        }
    }

    /// All of `bytes`, flushed (TLS holds written records until then).
    fn write_all(&mut self, bytes: &[u8], bound: Bound) -> io::Result<()> {
        let mut socket = self.socket.bounded(bound);
        match &mut self.tls {
            None => socket.write_all(bytes),
            Some(tls) => {
                let mut tls = rustls::Stream::new(&mut **tls, &mut socket);
                tls.write_all(bytes).and_then(|()| tls.flush())
            }
        }
    }
}

/// Bytes read from the stream and not yet taken: a result arrives as many small packets
/// in one segment, read with one system call.
struct Inbox {
    bytes: Box<[u8]>,
    start: usize,
    end: usize,
}

impl Inbox {
    fn new() -> Inbox {
        Inbox { bytes: vec![0; 16 * 1024].into_boxed_slice(), start: 0, end: 0 }
    }

    fn is_empty(&self) -> bool {
        self.start == self.end
    }

    /// Copies as many bytes as fit to `out`; returns how many.
    fn copy_to(&mut self, out: &mut [u8]) -> usize {
        let n = out.len().min(self.end - self.start);
        out[..n].copy_from_slice(&self.bytes[self.start..self.start + n]);
        self.start += n;
        n
    }

    /// Moves up to `want` bytes to `out`; returns how many.
    fn take(&mut self, out: &mut Vec<u8>, want: usize) -> usize {
        let n = want.min(self.end - self.start);
        out.extend_from_slice(&self.bytes[self.start..self.start + n]);
        self.start += n;
        n
    }
}

/// One authenticated session. Never reconnects; after an I/O or protocol failure every
/// further call reports the session lost.
pub(crate) struct Connection {
    stream: Stream,
    /// Reads are buffered; writes go straight to the socket, each request in one write.
    inbox: Inbox,
    greeting: Greeting,
    /// The sequence number of the next packet, read or written: one count per exchange,
    /// shared by both directions. A packet out of order means the connection is out of
    /// step with the server, and is treated as lost.
    seq: u8,
    broken: bool,
    /// Past the handshake: only then does closing say goodbye (COM_QUIT); during the
    /// handshake the server would read it as an answer.
    authenticated: bool,
    login: Login,
    /// `host:port` or the socket's path, for messages.
    peer: String,
    /// `read_timeout`: how long a statement may go unanswered beyond its own wait.
    read_timeout: Duration,
    /// `write_timeout`: how long a write may stay stuck.
    write_timeout: Duration,
}

/// What a connection was doing when the server stopped answering.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum During {
    /// TCP, TLS, the login and the session's setup.
    Connect,
    /// A statement that should be answered at once.
    Statement,
    /// A statement the server may keep waiting this long (a `GET_LOCK` with a timeout).
    Wait(Duration),
}

impl fmt::Display for During {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            During::Connect => f.write_str("the connect (TCP, TLS, login and session setup)"),
            During::Statement => f.write_str("a statement"),
            During::Wait(wait) => write!(f, "a lock wait of {} s", seconds(*wait)),
        }
    }
}

/// One exchange with the server (the handshake, or a command and its answer): every read
/// and write in it under one [`Bound`], given when the exchange starts and gone with it.
pub(super) struct Exchange<'c> {
    conn: &'c mut Connection,
    bound: Bound,
}

impl Deref for Exchange<'_> {
    type Target = Connection;
    fn deref(&self) -> &Connection {
        self.conn
    }
}

impl DerefMut for Exchange<'_> {
    fn deref_mut(&mut self) -> &mut Connection {
        self.conn
    }
}

impl Connection {
    /// Connects and authenticates with the plugin the greeting names when it is
    /// `caching_sha2_password` (MySQL 8 and later) or `sha256_password`, with
    /// `mysql_native_password` otherwise; a switch to any of the three is followed, a
    /// switch to any other plugin is reported as [`OpenError::Unsupported`].
    ///
    /// `first` is a query sent in the same write as the handshake response, so that its
    /// answer arrives with the server's OK: a setup that costs no round trip of its own.
    /// It is only sent when the greeting names `mysql_native_password`, whose accounts
    /// take no further step. Should the server still ask for one (an account on another
    /// plugin), it reads the query as that step's answer, out of sequence, and refuses it
    /// (nothing runs): reported as [`OpenError::Switched`] or [`OpenError::Unsupported`].
    ///
    /// Never behind a `caching_sha2_password` response: whether the server then asks for
    /// the full authentication depends on its cache, which the client cannot see and
    /// which any `FLUSH PRIVILEGES`, restart or password change empties. The server would
    /// read the query as the password ("Got packets out of order"), and that is a failed
    /// login: on MySQL 9.7.4 an account with `FAILED_LOGIN_ATTEMPTS 1` is then blocked
    /// (error 3955; measured with a raw client). Remembering
    /// a fast login per target would not make it safe (the cache may be emptied since),
    /// and would not help the short-lived processes the pipelining is for: a process's
    /// first connection has nothing to remember. On MySQL the setup costs its own round
    /// trip. The outcome of `first` is returned when it was sent.
    ///
    /// Everything here (the host name's lookup, TCP, TLS, the login, the answer to
    /// `first`) runs under `bound`, the connect's ([`Bound::connect`]); the caller runs
    /// the rest of the session's setup under it too.
    pub fn open(
        config: &Config,
        bound: Bound,
        first: Option<&dyn Fn(&Greeting) -> String>,
    ) -> Result<(Connection, Option<Answer>), OpenError> {
        let peer = config.server();
        let socket = connect_socket(config, bound).map_err(OpenError::Failed)?;
        let mut conn = Connection {
            stream: Stream { socket, tls: None },
            inbox: Inbox::new(),
            greeting: Greeting {
                version: String::new(),
                connection_id: 0,
                capabilities: 0,
                scramble: Vec::new(),
                plugin: String::new(),
            },
            seq: 0,
            broken: false,
            authenticated: false,
            login: Login::Native,
            peer,
            read_timeout: config.read_timeout,
            write_timeout: config.write_timeout,
        };
        let mut x = conn.exchange(bound);
        let greeting = x.read_greeting()?;
        if greeting.capabilities & (CLIENT_PROTOCOL_41 | CLIENT_SECURE_CONNECTION)
            != CLIENT_PROTOCOL_41 | CLIENT_SECURE_CONNECTION
        {
            return Err(OpenError::Unsupported(format!("server {} lacks the 4.1 protocol", greeting.version)));
        }
        if greeting.capabilities & CLIENT_PLUGIN_AUTH == 0 {
            return Err(OpenError::Unsupported(format!("server {} names no authentication plugin", greeting.version)));
        }
        let first = first.filter(|_| greeting.plugin == NATIVE_PASSWORD).map(|build| build(&greeting));
        let offered = greeting.capabilities & CLIENT_SSL != 0;
        let encrypt = match config.tls.mode() {
            SslMode::Disabled => false,
            // A Unix socket is local, and the server counts it as secure.
            SslMode::Preferred => offered && config.socket.is_none(),
            _ => true,
        };
        if encrypt && !offered {
            return Err(OpenError::Failed(SessionError::lost(format!(
                "TLS: the server ({}) does not offer TLS, and ssl-mode={} requires it",
                greeting.version,
                config.tls.mode().name()
            ))));
        }
        let plugin = match greeting.plugin.as_str() {
            CACHING_SHA2 => CACHING_SHA2,
            SHA256_PASSWORD => SHA256_PASSWORD,
            _ => NATIVE_PASSWORD,
        };
        x.greeting = greeting;
        if encrypt {
            x.start_tls(config)?;
        }
        let mut request = x.handshake_response(config, plugin);
        if let Some(sql) = &first {
            frame_command(&mut request, COM_QUERY, sql.as_bytes());
        }
        x.send(&request).map_err(OpenError::Failed)?;
        x.login = match x.finish_auth(config, plugin, first.is_some()) {
            Err(OpenError::Failed(e)) => return Err(OpenError::Failed(x.explain_refusal(e, config, offered))),
            other => other?,
        };
        x.authenticated = true;
        let answer = first.map(|_| {
            // The query's answer is numbered from its own command's 0.
            x.seq = 1;
            x.read_results(false)
        });
        Ok((conn, answer))
    }

    /// The bound of a statement that asks the server to wait until `wait` (a `GET_LOCK`
    /// with a timeout; [`Deadline::now`] for none): its reads may each block until then
    /// and `read_timeout` more, its writes for `write_timeout`.
    pub fn bound(&self, wait: Deadline) -> Bound {
        Bound::statement(wait, self.read_timeout, self.write_timeout)
    }

    /// An exchange under `bound`.
    fn exchange(&mut self, bound: Bound) -> Exchange<'_> {
        Exchange { conn: self, bound }
    }

    /// An exchange under `bound` on a connection not lost before.
    fn start(&mut self, bound: Bound) -> Result<Exchange<'_>, SessionError> {
        match self.broken {
            true => Err(SessionError::lost("the connection was lost earlier")),
            false => Ok(self.exchange(bound)),
        }
    }

    pub fn greeting(&self) -> &Greeting {
        &self.greeting
    }

    pub fn login(&self) -> Login {
        self.login
    }

    /// Whether the connection runs over TLS.
    pub fn encrypted(&self) -> bool {
        self.stream.tls.is_some()
    }

    /// Runs a text-protocol query (several `;`-separated statements allowed) under
    /// `bound` and returns one outcome per statement. The first failing statement ends
    /// the query and its error is returned: the server runs nothing after it.
    pub fn query(&mut self, sql: &str, bound: Bound) -> Answer {
        let mut x = self.start(bound)?;
        x.command(COM_QUERY, sql.as_bytes())?;
        x.read_results(false)
    }

    fn malformed(&mut self, what: &str) -> SessionError {
        self.fail(SessionError::lost(format!(
            "the server sent {what} this client cannot read; the connection is closed"
        )))
    }

    /// The connection is out of step or gone: closed at once (so the server ends the
    /// session and its locks now, not when this object is dropped), and every later call
    /// reports it lost.
    fn fail(&mut self, e: SessionError) -> SessionError {
        self.broken = true;
        self.stream.socket.shutdown();
        e
    }
}

impl Exchange<'_> {
    /// Sends a command: a new exchange, numbered from 0.
    fn command(&mut self, command: u8, body: &[u8]) -> Result<(), SessionError> {
        let mut request = Vec::with_capacity(body.len() + 5);
        self.seq = frame_command(&mut request, command, body);
        self.send(&request)
    }

    /// Reads every result of one query; `binary`: of a prepared statement.
    fn read_results(&mut self, binary: bool) -> Answer {
        let mut outcomes = Vec::new();
        loop {
            let packet = self.read_packet()?;
            let (outcome, status) = match packet.first() {
                Some(0x00) => self.parse_ok(&packet)?,
                Some(0xFF) => return Err(server_error(&packet)),
                Some(_) => self.read_result_set(&packet, binary)?,
                None => return Err(self.malformed("an empty packet")),
            };
            outcomes.push(outcome);
            if status & SERVER_MORE_RESULTS_EXISTS == 0 {
                return Ok(outcomes);
            }
        }
    }

    fn parse_ok(&mut self, packet: &[u8]) -> Result<(Outcome, u16), SessionError> {
        let mut c = Cursor::new(&packet[1..]);
        match (c.lenenc(), c.lenenc(), c.u16()) {
            (Some(affected_rows), Some(last_insert_id), Some(status)) => {
                Ok((Outcome { rows: Vec::new(), affected_rows, last_insert_id, columns: 0 }, status))
            }
            _ => Err(self.malformed("an OK packet")),
        }
    }

    /// A result set whose first packet (the column count) is `head`: the column
    /// definitions (binary rows need their types, and both kinds their character sets),
    /// an EOF, the rows, an EOF with the status.
    fn read_result_set(&mut self, head: &[u8], binary: bool) -> Result<(Outcome, u16), SessionError> {
        let count = match Cursor::new(head).lenenc() {
            Some(n) if n > 0 && n <= u64::from(u16::MAX) => n as usize,
            _ => return Err(self.malformed("a column count")),
        };
        let mut columns = Vec::with_capacity(count.min(64));
        for _ in 0..count {
            let definition = self.read_packet()?;
            columns.push(parse_column(&definition).ok_or_else(|| self.malformed("a column definition"))?);
        }
        let eof = self.read_packet()?;
        if !is_eof(&eof) {
            return Err(self.malformed("the end of the column definitions"));
        }
        let mut rows = Vec::new();
        loop {
            let packet = self.read_packet()?;
            if is_eof(&packet) {
                let status = Cursor::new(&packet[1..]).skip(2).and_then(|mut c| c.u16()).unwrap_or(0);
                return Ok((Outcome { rows, affected_rows: 0, last_insert_id: 0, columns: count }, status));
            }
            if packet.first() == Some(&0xFF) {
                return Err(server_error(&packet));
            }
            let row = match binary {
                true => parse_binary_row(&packet, &columns),
                false => parse_text_row(&packet, &columns),
            };
            rows.push(row.ok_or_else(|| self.malformed("a row"))?);
        }
    }

    /// One logical packet, reassembled from 16 MiB pieces.
    fn read_packet(&mut self) -> Result<Vec<u8>, SessionError> {
        let mut payload = Vec::new();
        loop {
            let header = self.read_header()?;
            let len = usize::from(header[0]) | usize::from(header[1]) << 8 | usize::from(header[2]) << 16;
            if header[3] != self.seq {
                let message = format!("packet {} arrived where {} was due", header[3], self.seq);
                return Err(self.fail(SessionError::lost(message)));
            }
            self.seq = self.seq.wrapping_add(1);
            if payload.len() + len > MAX_PACKET {
                return Err(self.malformed(&format!("a packet of more than {MAX_PACKET} bytes")));
            }
            self.read_into(&mut payload, len)?;
            if len < MAX_PAYLOAD {
                return Ok(payload);
            }
        }
    }

    fn read_header(&mut self) -> Result<[u8; 4], SessionError> {
        let mut header = [0u8; 4];
        let mut got = 0;
        while got < header.len() {
            if self.inbox.is_empty() {
                self.fill()?;
            }
            got += self.conn.inbox.copy_to(&mut header[got..]);
        }
        Ok(header)
    }

    /// Appends `len` bytes to `out`, read as they arrive: a header's length is only a
    /// claim, and memory is never set aside for bytes that have not come.
    fn read_into(&mut self, out: &mut Vec<u8>, len: usize) -> Result<(), SessionError> {
        let mut missing = len;
        while missing > 0 {
            if self.inbox.is_empty() {
                self.fill()?;
            }
            missing -= self.conn.inbox.take(out, missing);
        }
        Ok(())
    }

    /// Reads what the stream has into the empty inbox, waiting as the bound allows.
    fn fill(&mut self) -> Result<(), SessionError> {
        let Connection { stream, inbox, .. } = &mut *self.conn;
        let read = loop {
            match stream.read(&mut inbox.bytes, self.bound) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                other => break other,
            }
        };
        match read {
            Ok(0) => Err(self.fail(lost(&io::ErrorKind::UnexpectedEof.into()))),
            Ok(n) => {
                (self.inbox.start, self.inbox.end) = (0, n);
                Ok(())
            }
            Err(e) => Err(self.io_failed(&e, false)),
        }
    }

    fn send(&mut self, bytes: &[u8]) -> Result<(), SessionError> {
        match self.conn.stream.write_all(bytes, self.bound) {
            Ok(()) => Ok(()),
            Err(e) => Err(self.io_failed(&e, true)),
        }
    }

    /// A read or write failed: a bound that ran out says how long the server was silent
    /// and during what, in the caller's figures; the connection is closed either way.
    fn io_failed(&mut self, e: &io::Error, writing: bool) -> SessionError {
        let error = match timed_out(e) {
            true => stalled(&self.peer, self.bound.limit(writing), self.bound.during()),
            false => lost(e),
        };
        self.fail(error)
    }

    /// Frames `payload` as packets continuing this exchange's sequence.
    fn append_packets(&mut self, out: &mut Vec<u8>, payload: &[u8]) {
        self.seq = frame(out, payload, self.seq);
    }
}

impl Drop for Connection {
    /// Says goodbye, so the server does not count an aborted connection. Best effort,
    /// and never blocking (a full send buffer just loses the goodbye): the socket closes
    /// either way.
    fn drop(&mut self) {
        if self.authenticated && !self.broken {
            let mut quit = Vec::with_capacity(5);
            frame_command(&mut quit, COM_QUIT, &[]);
            self.stream.socket.set_nonblocking();
            let bound = self.bound(Deadline::now());
            let _ = self.stream.write_all(&quit, bound);
        }
    }
}

/// Connects the socket under the connect's `bound` (its deadline, if it has one), the
/// host name's lookup included.
fn connect_socket(config: &Config, bound: Bound) -> Result<Socket, SessionError> {
    let deadline = bound.deadline();
    let failed = |e: io::Error| match timed_out(&e) {
        true => stalled(&config.server(), bound.limit(false), During::Connect),
        false => lost(&e),
    };
    let plain = match &config.socket {
        Some(path) => Plain::Unix(UnixStream::connect(path).map_err(failed)?),
        None => {
            let addresses = addresses(config, deadline)?;
            let mut last = io::Error::new(io::ErrorKind::NotFound, format!("{} resolves to no address", config.host));
            let mut connected = None;
            for addr in addresses {
                let attempt = match deadline {
                    None => TcpStream::connect(addr),
                    Some(deadline) if deadline.passed() => Err(io::ErrorKind::TimedOut.into()),
                    Some(deadline) => TcpStream::connect_timeout(&addr, deadline.left()),
                };
                match attempt {
                    Ok(s) => {
                        connected = Some(s);
                        break;
                    }
                    Err(e) => last = e,
                }
            }
            let s = connected.ok_or(last).map_err(failed)?;
            s.set_nodelay(true).map_err(|e| lost(&e))?;
            Plain::Tcp(s)
        }
    };
    Ok(Socket::new(plain, config.write_timeout))
}

/// The addresses of the configured host, looked up by the connect's `deadline` (none:
/// as long as the resolver takes).
pub(crate) fn addresses(config: &Config, deadline: Option<Deadline>) -> Result<Vec<SocketAddr>, SessionError> {
    resolve(&config.host, config.port, deadline).map_err(|e| match e {
        Unresolved::Failed(e) => lost(&e),
        Unresolved::TimedOut(limit) => SessionError::stalled(format!(
            "looking up the host name {} gave no answer within {} s (connect_timeout)",
            config.host,
            seconds(limit)
        )),
    })
}

/// Appends a command: a new exchange, numbered from 0. Returns the next number.
fn frame_command(out: &mut Vec<u8>, command: u8, body: &[u8]) -> u8 {
    let mut payload = Vec::with_capacity(body.len() + 1);
    payload.push(command);
    payload.extend_from_slice(body);
    frame(out, &payload, 0)
}

/// Appends `payload` as packets numbered from `seq`; returns the next number. A payload
/// that fills a packet exactly is followed by an empty one, as the protocol says.
fn frame(out: &mut Vec<u8>, payload: &[u8], mut seq: u8) -> u8 {
    let mut rest = payload;
    loop {
        let len = rest.len().min(MAX_PAYLOAD);
        out.extend_from_slice(&(len as u32).to_le_bytes()[..3]);
        out.push(seq);
        out.extend_from_slice(&rest[..len]);
        seq = seq.wrapping_add(1);
        rest = &rest[len..];
        if len < MAX_PAYLOAD {
            return seq;
        }
    }
}

fn is_eof(packet: &[u8]) -> bool {
    packet.first() == Some(&0xFE) && packet.len() < 9
}

/// A text-protocol row: each value a length-encoded string, NULL as 0xFB, exactly one
/// per column and nothing after them. More values than columns, or bytes that are not
/// UTF-8 in a column whose character set is, mean the conversation is out of step (or
/// mangled on the way): refused, never read as something else.
fn parse_text_row(packet: &[u8], columns: &[Column]) -> Option<Vec<Value>> {
    let mut c = Cursor::new(packet);
    let mut row = Vec::with_capacity(columns.len());
    for column in columns {
        if c.peek()? == 0xFB {
            c.u8()?;
            row.push(Value::Null);
            continue;
        }
        let len = usize::try_from(c.lenenc()?).ok()?;
        row.push(string_value(c.bytes(len)?, column)?);
    }
    c.rest().is_empty().then_some(row)
}

/// An ERR packet: code, `#` and the SQL state (protocol 4.1), message.
fn server_error(packet: &[u8]) -> SessionError {
    let code = packet.get(1..3).map_or(0, |b| u16::from_le_bytes([b[0], b[1]]));
    let mut message = packet.get(3..).unwrap_or_default();
    if message.first() == Some(&b'#') && message.len() >= 6 {
        message = &message[6..];
    }
    SessionError::server(code, String::from_utf8_lossy(message).into_owned())
}

fn lost(e: &io::Error) -> SessionError {
    SessionError::lost(e.to_string())
}

/// The server at `peer` said nothing for `limit` while the connection was `during`
/// something. Public for the connections a boundary makes itself (the PHP extension's
/// PDO), so that a bound running out reads the same on every surface.
pub fn stalled(peer: &str, limit: Duration, during: During) -> SessionError {
    SessionError::stalled(format!("the server at {peer} stopped answering for {} s during {during}", seconds(limit)))
}

/// Reads little-endian protocol fields; `None` past the end.
struct Cursor<'a> {
    buf: &'a [u8],
}

impl<'a> Cursor<'a> {
    fn new(buf: &'a [u8]) -> Self {
        Cursor { buf }
    }

    fn skip(mut self, n: usize) -> Option<Self> {
        self.bytes(n)?;
        Some(self)
    }

    fn peek(&self) -> Option<u8> {
        self.buf.first().copied()
    }

    fn bytes(&mut self, n: usize) -> Option<&'a [u8]> {
        if n > self.buf.len() {
            return None;
        }
        let (head, tail) = self.buf.split_at(n);
        self.buf = tail;
        Some(head)
    }

    fn rest(&mut self) -> &'a [u8] {
        std::mem::take(&mut self.buf)
    }

    fn u8(&mut self) -> Option<u8> {
        Some(self.bytes(1)?[0])
    }

    fn u16(&mut self) -> Option<u16> {
        let b = self.bytes(2)?;
        Some(u16::from_le_bytes([b[0], b[1]]))
    }

    fn u32(&mut self) -> Option<u32> {
        let b = self.bytes(4)?;
        Some(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// A length-encoded integer (0xFB, NULL, is not one).
    fn lenenc(&mut self) -> Option<u64> {
        let wide = |b: &[u8]| b.iter().rev().fold(0u64, |acc, &x| acc << 8 | u64::from(x));
        match self.u8()? {
            n @ 0..=0xFA => Some(u64::from(n)),
            0xFC => Some(wide(self.bytes(2)?)),
            0xFD => Some(wide(self.bytes(3)?)),
            0xFE => Some(wide(self.bytes(8)?)),
            _ => None,
        }
    }

    fn nul_str(&mut self) -> Option<String> {
        let end = self.buf.iter().position(|&b| b == 0)?;
        let s = String::from_utf8_lossy(&self.buf[..end]).into_owned();
        self.buf = &self.buf[end + 1..];
        Some(s)
    }
}
