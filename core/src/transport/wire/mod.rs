//! The core's own client for the MySQL wire protocol: a connection over TCP or a Unix
//! socket, in clear or inside TLS ([`super::tls`]: the SSL request, then rustls on the
//! socket), authenticated with `mysql_native_password` (MariaDB, older MySQL),
//! `caching_sha2_password` (MySQL's default since 8.0), `sha256_password` (deprecated,
//! still in MySQL 9, and not spoken by the `mysql` crate) or MariaDB's `ed25519`
//! (through mysql_common's signature, already compiled), running text-protocol queries
//! and prepared statements.
//!
//! Why not the `mysql` crate for everything: it parses the server's greeting with two
//! regular expressions, compiled on the first connection of every process (about 0.6 ms
//! of CPU, measured), and it cannot send a query behind the handshake response, so a
//! short-lived process paid a round trip and the regex before its first lock. This
//! client does neither. Whatever it does not speak (another authentication plugin,
//! a server without the 4.1 protocol) it reports as [`OpenError::Unsupported`], and
//! the caller connects through the `mysql` crate instead: nothing a user could connect
//! with before is refused now.

use std::fmt;
use std::io::{self, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use crate::config::{Config, SslMode};
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
use binary::*;
pub(crate) use binary::{fraction, Prepared};
use resolve::{resolve, Unresolved};
pub(crate) use socket::{seconds, KEEPALIVE_IDLE, KEEPALIVE_INTERVAL, KEEPALIVE_PROBES};
use socket::{timed_out, Plain, Socket};

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
    /// The server wants something this client does not speak; the text says what. The
    /// caller connects another way.
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

/// What a connection reads and writes: the socket, or TLS over it.
enum Stream {
    Plain(Socket),
    Tls(Box<rustls::StreamOwned<rustls::ClientConnection, Socket>>),
    /// Only while the socket moves under TLS.
    Moving,
}

impl Stream {
    fn socket(&self) -> Option<&Socket> {
        match self {
            Stream::Plain(p) => Some(p),
            Stream::Tls(t) => Some(&t.sock),
            Stream::Moving => None,
        }
    }

    fn socket_mut(&mut self) -> Option<&mut Socket> {
        match self {
            Stream::Plain(p) => Some(p),
            Stream::Tls(t) => Some(&mut t.sock),
            Stream::Moving => None,
        }
    }
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Plain(p) => p.read(buf),
            Stream::Tls(t) => t.read(buf),
            Stream::Moving => Err(io::ErrorKind::NotConnected.into()),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Plain(p) => p.write(buf),
            Stream::Tls(t) => t.write(buf),
            Stream::Moving => Err(io::ErrorKind::NotConnected.into()),
        }
    }

    /// TLS holds written records until flushed; the socket itself holds nothing.
    fn flush(&mut self) -> io::Result<()> {
        match self {
            Stream::Tls(t) => t.flush(),
            _ => Ok(()),
        }
    }
}

/// One authenticated session. Never reconnects; after an I/O or protocol failure every
/// further call reports the session lost.
pub(crate) struct Connection {
    /// Reads are buffered (a result arrives as many small packets in one segment);
    /// writes go straight to the socket, each request in one `write`.
    stream: BufReader<Stream>,
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
    /// What the connection is doing, for the message when a bound runs out.
    during: During,
    /// `read_timeout`: how long a statement may go unanswered beyond its own wait.
    read_timeout: Duration,
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
    /// Everything until [`connected`](Self::connected), the session's setup included,
    /// ends within `config.connect_timeout` of `started`.
    pub fn open(
        config: &Config,
        started: Instant,
        first: Option<&dyn Fn(&Greeting) -> String>,
    ) -> Result<(Connection, Option<Answer>), OpenError> {
        let peer = config.server();
        let stream = connect_stream(config, started).map_err(OpenError::Failed)?;
        let mut conn = Connection {
            stream: BufReader::with_capacity(16 * 1024, stream),
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
            during: During::Connect,
            read_timeout: config.read_timeout,
        };
        let greeting = conn.read_greeting()?;
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
        conn.greeting = greeting;
        if encrypt {
            conn.start_tls(config)?;
        }
        let mut request = conn.handshake_response(config, plugin);
        if let Some(sql) = &first {
            frame_command(&mut request, COM_QUERY, sql.as_bytes());
        }
        conn.send(&request).map_err(OpenError::Failed)?;
        conn.login = match conn.finish_auth(config, plugin, first.is_some()) {
            Err(OpenError::Failed(e)) => return Err(OpenError::Failed(conn.explain_refusal(e, config, offered))),
            other => other?,
        };
        conn.authenticated = true;
        let answer = first.map(|_| {
            // The query's answer is numbered from its own command's 0.
            conn.seq = 1;
            conn.read_results(false)
        });
        Ok((conn, answer))
    }

    /// The connect (with the session's setup) is over: from now on each statement has
    /// its own bound ([`expect`](Self::expect)).
    pub fn connected(&mut self) {
        self.during = During::Statement;
        if let Some(socket) = self.stream.get_mut().socket_mut() {
            socket.connected();
        }
    }

    /// The next statements may keep the server waiting up to `wait` (a `GET_LOCK` with
    /// that timeout): their reads may block for `read_timeout` more than that. Zero for
    /// a statement that should be answered at once.
    pub fn expect(&mut self, wait: Duration) {
        if self.during == During::Connect {
            return;
        }
        self.during = if wait.is_zero() { During::Statement } else { During::Wait(wait) };
        let read = self.read_timeout.saturating_add(wait);
        if let Some(socket) = self.stream.get_mut().socket_mut() {
            socket.expect(read);
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
        matches!(self.stream.get_ref(), Stream::Tls(_))
    }

    /// Runs a text-protocol query (several `;`-separated statements allowed) and
    /// returns one outcome per statement. The first failing statement ends the query
    /// and its error is returned: the server runs nothing after it.
    pub fn query(&mut self, sql: &str) -> Answer {
        if self.broken {
            return Err(SessionError::lost("the connection was lost earlier"));
        }
        self.command(COM_QUERY, sql.as_bytes())?;
        self.read_results(false)
    }

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
                Ok((Outcome { rows: Vec::new(), affected_rows, last_insert_id }, status))
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
                return Ok((Outcome { rows, affected_rows: 0, last_insert_id: 0 }, status));
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
        if let Some(socket) = self.stream.get_ref().socket() {
            socket.shutdown();
        }
        e
    }

    /// One logical packet, reassembled from 16 MiB pieces.
    fn read_packet(&mut self) -> Result<Vec<u8>, SessionError> {
        let mut payload = Vec::new();
        loop {
            let mut header = [0u8; 4];
            self.read_exact(&mut header)?;
            let len = usize::from(header[0]) | usize::from(header[1]) << 8 | usize::from(header[2]) << 16;
            if header[3] != self.seq {
                let message = format!("packet {} arrived where {} was due", header[3], self.seq);
                return Err(self.fail(SessionError::lost(message)));
            }
            self.seq = self.seq.wrapping_add(1);
            if payload.len() + len > MAX_PACKET {
                return Err(self.malformed(&format!("a packet of more than {MAX_PACKET} bytes")));
            }
            // Read as the bytes arrive: a header's length is only a claim, and memory is
            // never set aside for bytes that have not come.
            match (&mut self.stream).take(len as u64).read_to_end(&mut payload) {
                Ok(got) if got == len => {}
                Ok(_) => return Err(self.fail(lost(&io::ErrorKind::UnexpectedEof.into()))),
                Err(e) => return Err(self.io_failed(&e, false)),
            }
            if len < MAX_PAYLOAD {
                return Ok(payload);
            }
        }
    }

    fn read_exact(&mut self, buf: &mut [u8]) -> Result<(), SessionError> {
        match self.stream.read_exact(buf) {
            Ok(()) => Ok(()),
            Err(e) => Err(self.io_failed(&e, false)),
        }
    }

    fn send(&mut self, bytes: &[u8]) -> Result<(), SessionError> {
        let stream = self.stream.get_mut();
        match stream.write_all(bytes).and_then(|()| stream.flush()) {
            Ok(()) => Ok(()),
            Err(e) => Err(self.io_failed(&e, true)),
        }
    }

    /// A read or write failed: a bound that ran out says how long the server was silent
    /// and during what; the connection is closed either way.
    fn io_failed(&mut self, e: &io::Error, writing: bool) -> SessionError {
        let limit = self.stream.get_ref().socket().filter(|_| timed_out(e)).map(|s| s.limit(writing));
        let error = match limit {
            Some(limit) => stalled(&self.peer, limit, self.during),
            None => lost(e),
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
            if let Some(socket) = self.stream.get_ref().socket() {
                socket.set_nonblocking();
            }
            let stream = self.stream.get_mut();
            let _ = stream.write_all(&quit).and_then(|()| stream.flush());
        }
    }
}

/// Connects the socket within what is left of `connect_timeout` (none when it is 0),
/// the host name's lookup included.
fn connect_stream(config: &Config, started: Instant) -> Result<Stream, SessionError> {
    let bounded = !config.connect_timeout.is_zero();
    let left = || config.connect_timeout.saturating_sub(started.elapsed());
    let failed = |e: io::Error| match timed_out(&e) {
        true => stalled(&config.server(), config.connect_timeout, During::Connect),
        false => lost(&e),
    };
    let plain = match &config.socket {
        Some(path) => Plain::Unix(UnixStream::connect(path).map_err(failed)?),
        None => {
            let addresses = addresses(config, started)?;
            let mut last = io::Error::new(io::ErrorKind::NotFound, format!("{} resolves to no address", config.host));
            let mut connected = None;
            for addr in addresses {
                let attempt = match bounded {
                    false => TcpStream::connect(addr),
                    true if left().is_zero() => Err(io::ErrorKind::TimedOut.into()),
                    true => TcpStream::connect_timeout(&addr, left()),
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
    Ok(Stream::Plain(Socket::new(plain, config.connect_timeout, started, config.read_timeout, config.write_timeout)))
}

/// The addresses of the configured host, looked up within what is left of
/// `connect_timeout` (none when it is 0).
pub(crate) fn addresses(config: &Config, started: Instant) -> Result<Vec<SocketAddr>, SessionError> {
    let left = (!config.connect_timeout.is_zero()).then(|| config.connect_timeout.saturating_sub(started.elapsed()));
    resolve(&config.host, config.port, left).map_err(|e| match e {
        Unresolved::Failed(e) => lost(&e),
        Unresolved::TimedOut => SessionError::stalled(format!(
            "looking up the host name {} gave no answer within {} s (connect_timeout)",
            config.host,
            seconds(config.connect_timeout)
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
