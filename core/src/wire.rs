//! The core's own client for the MySQL wire protocol: a connection over TCP or a Unix
//! socket, in clear or inside TLS ([`crate::tls`]: the SSL request, then rustls on the
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
//!
//! `caching_sha2_password`'s full authentication (the server's cache does not know the
//! account: the first login after a start, a `FLUSH PRIVILEGES` or a password change)
//! sends the password itself: in clear inside TLS or over a Unix socket, which the
//! server counts as secure, and over plain TCP encrypted with the server's RSA key
//! (OAEP), the one place this client uses RSA. Three ways to get there were weighed:
//! - handing such a connection to the `mysql` crate (which can do it): refused, because
//!   the connection abandoned at the server's request for the password counts as a failed
//!   login (measured on MySQL 9.7.4: an account with `FAILED_LOGIN_ATTEMPTS 1` is blocked
//!   by one such hang-up, error 3955), and it would cost every first login a second
//!   connection;
//! - the `rsa` crate (0.9; 0.10 needs Rust 1.87): 18 more crates (num-bigint-dig, rand
//!   0.8, a second getrandom, pkcs1/pkcs8/spki/der, zerocopy...) for one encryption. A
//!   clean `cargo build --release -p mysqllock-core` took 126 s of CPU with it against
//!   102 s without (user + sys, medians of three builds each, 2 cores shared with other
//!   builds, so wall times were not comparable), about a quarter more;
//! - the RSA code the `mysql` crate's own full authentication calls, in `mysql_common`
//!   (the crate it is built on, so already compiled: nothing added). It panics on a key
//!   it cannot parse and on a message too long for the key; the length is checked first
//!   and the call is caught ([`rsa_encrypt`]). Taken.
//!
//! `sha256_password` has no scramble and no cache: every login sends the password, RSA-
//! encrypted the same way ([`Connection::send_sealed`]), over the Unix socket too. Unlike
//! `caching_sha2_password`, its server side takes the password in clear only over TLS
//! (MySQL's `sha256_password_authenticate` asks `my_vio_is_encrypted`, where
//! `caching_sha2_password` asks `my_vio_is_secure`); a clear password over the socket is
//! refused as a wrong one (tried on MySQL 9.7.4).

use std::io::{self, BufReader, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::os::unix::net::UnixStream;
use std::time::Duration;

use sha1::{Digest, Sha1};
use sha2::Sha256;

use crate::config::{Config, SslMode};
use crate::error::SessionError;
use crate::value::{Outcome, Value};

/// A packet of this length continues in the next one.
const MAX_PAYLOAD: usize = 0xFF_FFFF;
/// What the client accepts, told to the server in the handshake. Lock statements and
/// their results are tiny; a status listing of many locks stays far below.
const CLIENT_MAX_PACKET: u32 = 16 * 1024 * 1024;
/// utf8mb4_general_ci: the handshake's character set, for the user and database names
/// it carries. The session's own character set is set by `SET NAMES` afterwards.
const HANDSHAKE_COLLATION: u8 = 45;
const NATIVE_PASSWORD: &str = "mysql_native_password";
const CACHING_SHA2: &str = "caching_sha2_password";
const SHA256_PASSWORD: &str = "sha256_password";
/// MariaDB's ed25519 plugin: the client signs the server's 32-byte nonce with a key
/// derived from the password (the password never travels).
const ED25519: &str = "client_ed25519";

/// `caching_sha2_password`'s steps after the scramble (AuthMoreData, 0x01, then one byte).
const SHA2_FAST_AUTH_SUCCESS: u8 = 0x03;
const SHA2_PERFORM_FULL_AUTH: u8 = 0x04;
/// The client's request for the server's RSA public key during full authentication.
const SHA2_REQUEST_PUBLIC_KEY: u8 = 0x02;
/// `sha256_password`'s first answers: the request for the server's RSA public key, and
/// "no password".
const SHA256_REQUEST_PUBLIC_KEY: u8 = 0x01;
const SHA256_NO_PASSWORD: u8 = 0x00;

const COM_QUIT: u8 = 0x01;
const COM_QUERY: u8 = 0x03;
const COM_STMT_PREPARE: u8 = 0x16;
const COM_STMT_EXECUTE: u8 = 0x17;
const COM_STMT_CLOSE: u8 = 0x19;

/// Column and parameter types of the binary protocol that this client reads or sends
/// specially; every other type travels as a length-encoded string.
const TYPE_TINY: u8 = 0x01;
const TYPE_SHORT: u8 = 0x02;
const TYPE_LONG: u8 = 0x03;
const TYPE_FLOAT: u8 = 0x04;
const TYPE_DOUBLE: u8 = 0x05;
const TYPE_NULL: u8 = 0x06;
const TYPE_TIMESTAMP: u8 = 0x07;
const TYPE_LONGLONG: u8 = 0x08;
const TYPE_INT24: u8 = 0x09;
const TYPE_DATE: u8 = 0x0A;
const TYPE_TIME: u8 = 0x0B;
const TYPE_DATETIME: u8 = 0x0C;
const TYPE_YEAR: u8 = 0x0D;
const TYPE_BLOB: u8 = 0xFC;
const TYPE_VAR_STRING: u8 = 0xFD;
const UNSIGNED_FLAG: u16 = 0x20;

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
/// reports, for [`crate::native::Authentication`].
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

/// The socket under a connection.
enum Plain {
    Tcp(TcpStream),
    Unix(UnixStream),
}

impl Plain {
    fn set_timeouts(&self, timeout: Option<Duration>) -> io::Result<()> {
        match self {
            Plain::Tcp(s) => s.set_read_timeout(timeout).and_then(|()| s.set_write_timeout(timeout)),
            Plain::Unix(s) => s.set_read_timeout(timeout).and_then(|()| s.set_write_timeout(timeout)),
        }
    }

    fn shutdown(&self) {
        let _ = match self {
            Plain::Tcp(s) => s.shutdown(std::net::Shutdown::Both),
            Plain::Unix(s) => s.shutdown(std::net::Shutdown::Both),
        };
    }

    fn set_nonblocking(&self) {
        let _ = match self {
            Plain::Tcp(s) => s.set_nonblocking(true),
            Plain::Unix(s) => s.set_nonblocking(true),
        };
    }
}

impl Read for Plain {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Plain::Tcp(s) => s.read(buf),
            Plain::Unix(s) => s.read(buf),
        }
    }
}

impl Write for Plain {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Plain::Tcp(s) => s.write(buf),
            Plain::Unix(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// What a connection reads and writes: the socket, or TLS over it.
enum Stream {
    Plain(Plain),
    Tls(Box<rustls::StreamOwned<rustls::ClientConnection, Plain>>),
    /// Only while the socket moves under TLS.
    Moving,
}

impl Stream {
    fn socket(&self) -> Option<&Plain> {
        match self {
            Stream::Plain(p) => Some(p),
            Stream::Tls(t) => Some(&t.sock),
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
    pub fn open(
        config: &Config,
        io_timeout: Option<Duration>,
        first: Option<&dyn Fn(&Greeting) -> String>,
    ) -> Result<(Connection, Option<Answer>), OpenError> {
        // Until the session is authenticated, a server that accepted the connection but
        // says nothing counts as not answering the connect.
        let handshake_timeout =
            Some(io_timeout.map_or(config.connect_timeout, |t| t.min(config.connect_timeout))).filter(|t| !t.is_zero());
        let stream = connect_stream(config, handshake_timeout).map_err(|e| OpenError::Failed(lost(&e)))?;
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
        if let Err(e) = conn.set_timeouts(io_timeout) {
            return Err(OpenError::Failed(conn.fail(lost(&e))));
        }
        let answer = first.map(|_| {
            // The query's answer is numbered from its own command's 0.
            conn.seq = 1;
            conn.read_results(false)
        });
        Ok((conn, answer))
    }

    pub fn greeting(&self) -> &Greeting {
        &self.greeting
    }

    pub fn login(&self) -> Login {
        self.login
    }

    /// A login the server refused, with what TLS may have to do with it: MariaDB
    /// answers a plain connection to a server with `require_secure_transport` (or to an
    /// account created `REQUIRE SSL`) with the same "Access denied" as a wrong password,
    /// and an `X509` account without a client certificate too.
    fn explain_refusal(&self, mut e: SessionError, config: &Config, offered: bool) -> SessionError {
        let hint = match e.code {
            // MySQL's ER_SECURE_TRANSPORT_REQUIRED
            Some(3159) => format!(
                "; TLS: the server requires it: connect with ssl-mode=REQUIRED or VERIFY_IDENTITY (now {})",
                config.tls.mode().name()
            ),
            Some(1045) if !self.encrypted() && offered => format!(
                "; TLS: this connection did not use TLS (ssl-mode={}{}), and a server with \
                 require_secure_transport or an account created REQUIRE SSL refuses such logins so: \
                 if the password is right, connect with ssl-mode=REQUIRED or VERIFY_IDENTITY",
                config.tls.mode().name(),
                if config.socket.is_some() { ", over a Unix socket" } else { "" }
            ),
            Some(1045) if self.encrypted() && config.tls.cert.is_none() => {
                "; TLS: if the account was created REQUIRE X509 (or SUBJECT/ISSUER), it needs a client \
                 certificate: set ssl-cert and ssl-key"
                    .to_owned()
            }
            _ => return e,
        };
        e.message.push_str(&hint);
        e
    }

    /// Whether the connection runs over TLS.
    pub fn encrypted(&self) -> bool {
        matches!(self.stream.get_ref(), Stream::Tls(_))
    }

    /// The SSL request (the handshake response's first fields with `CLIENT_SSL`), then
    /// the TLS handshake on the socket; the authentication continues inside TLS.
    fn start_tls(&mut self, config: &Config) -> Result<(), OpenError> {
        let failed = |why: String| OpenError::Failed(SessionError::lost(why));
        let settings = crate::tls::client_config(&config.tls).map_err(failed)?;
        let name = crate::tls::server_name(&config.host).map_err(failed)?;
        let caps = self.capabilities(config) | CLIENT_SSL;
        let mut body = Vec::with_capacity(32);
        body.extend_from_slice(&caps.to_le_bytes());
        body.extend_from_slice(&CLIENT_MAX_PACKET.to_le_bytes());
        body.push(HANDSHAKE_COLLATION);
        body.extend_from_slice(&[0; 23]);
        let mut request = Vec::with_capacity(36);
        self.append_packets(&mut request, &body);
        self.send(&request).map_err(OpenError::Failed)?;
        if !self.stream.buffer().is_empty() {
            return Err(OpenError::Failed(self.malformed("data before the TLS handshake")));
        }
        let Stream::Plain(socket) = std::mem::replace(self.stream.get_mut(), Stream::Moving) else {
            return Err(OpenError::Failed(self.fail(SessionError::lost("TLS started twice"))));
        };
        let session =
            rustls::ClientConnection::new(settings, name).map_err(|e| failed(format!("TLS setup failed: {e}")))?;
        let mut tls = Box::new(rustls::StreamOwned::new(session, socket));
        while tls.conn.is_handshaking() {
            if let Err(e) = tls.conn.complete_io(&mut tls.sock) {
                tls.sock.shutdown();
                self.broken = true;
                return Err(failed(crate::tls::handshake_failure(&e, &config.tls, &config.host)));
            }
        }
        *self.stream.get_mut() = Stream::Tls(tls);
        Ok(())
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

    /// Prepares `sql` on the server (one round trip).
    pub fn prepare(&mut self, sql: &str) -> Result<Prepared, SessionError> {
        if self.broken {
            return Err(SessionError::lost("the connection was lost earlier"));
        }
        self.command(COM_STMT_PREPARE, sql.as_bytes())?;
        let packet = self.read_packet()?;
        if packet.first() == Some(&0xFF) {
            return Err(server_error(&packet));
        }
        let mut c = Cursor::new(&packet);
        let (Some(0x00), Some(id), Some(columns), Some(params)) = (c.u8(), c.u32(), c.u16(), c.u16()) else {
            return Err(self.malformed("a prepare response"));
        };
        for count in [params, columns] {
            if count > 0 {
                for _ in 0..count {
                    self.read_packet()?;
                }
                if !is_eof(&self.read_packet()?) {
                    return Err(self.malformed("the end of a prepared statement's definitions"));
                }
            }
        }
        Ok(Prepared { id, params: usize::from(params) })
    }

    /// Runs a prepared statement with `params` bound (binary protocol).
    pub fn execute(&mut self, statement: &Prepared, params: &[Value]) -> Answer {
        if self.broken {
            return Err(SessionError::lost("the connection was lost earlier"));
        }
        if params.len() != statement.params {
            let message = format!("{} values for {} placeholders", params.len(), statement.params);
            return Err(SessionError::client(message));
        }
        let mut body = Vec::with_capacity(16 + params.len() * 16);
        body.extend_from_slice(&statement.id.to_le_bytes());
        body.push(0); // no cursor
        body.extend_from_slice(&1u32.to_le_bytes()); // iteration count
        if !params.is_empty() {
            let mut nulls = vec![0u8; params.len().div_ceil(8)];
            let mut types = Vec::with_capacity(params.len() * 2);
            let mut values = Vec::new();
            for (i, value) in params.iter().enumerate() {
                let (kind, unsigned) = match value {
                    Value::Null => {
                        nulls[i / 8] |= 1 << (i % 8);
                        (TYPE_NULL, false)
                    }
                    Value::Int(v) => {
                        values.extend_from_slice(&v.to_le_bytes());
                        (TYPE_LONGLONG, false)
                    }
                    Value::UInt(v) => {
                        values.extend_from_slice(&v.to_le_bytes());
                        (TYPE_LONGLONG, true)
                    }
                    Value::Float(v) => {
                        values.extend_from_slice(&v.to_le_bytes());
                        (TYPE_DOUBLE, false)
                    }
                    Value::Text(text) => {
                        put_lenenc_bytes(&mut values, text.as_bytes());
                        (TYPE_VAR_STRING, false)
                    }
                    // A BLOB parameter is a binary string, as a written-in `_binary X'..'`.
                    Value::Bytes(bytes) => {
                        put_lenenc_bytes(&mut values, bytes);
                        (TYPE_BLOB, false)
                    }
                };
                types.extend_from_slice(&[kind, if unsigned { 0x80 } else { 0 }]);
            }
            body.extend_from_slice(&nulls);
            body.push(1); // types follow
            body.extend_from_slice(&types);
            body.extend_from_slice(&values);
        }
        self.command(COM_STMT_EXECUTE, &body)?;
        self.read_results(true)
    }

    /// Frees a prepared statement on the server (no answer comes).
    pub fn close(&mut self, statement: Prepared) -> Result<(), SessionError> {
        if self.broken {
            return Err(SessionError::lost("the connection was lost earlier"));
        }
        self.command(COM_STMT_CLOSE, &statement.id.to_le_bytes())
    }

    /// Sends a command: a new exchange, numbered from 0.
    fn command(&mut self, command: u8, body: &[u8]) -> Result<(), SessionError> {
        let mut request = Vec::with_capacity(body.len() + 5);
        self.seq = frame_command(&mut request, command, body);
        self.send(&request)
    }

    fn set_timeouts(&mut self, timeout: Option<Duration>) -> io::Result<()> {
        match self.stream.get_ref().socket() {
            Some(socket) => socket.set_timeouts(timeout),
            None => Ok(()),
        }
    }

    fn read_greeting(&mut self) -> Result<Greeting, OpenError> {
        let packet = self.read_packet().map_err(OpenError::Failed)?;
        if packet.first() == Some(&0xFF) {
            return Err(OpenError::Failed(server_error(&packet)));
        }
        parse_greeting(&packet).ok_or_else(|| OpenError::Unsupported("a greeting this client cannot read".into()))
    }

    /// The handshake response, answering the greeting's nonce for `plugin`.
    /// The capabilities this client asks the server for (the SSL request adds `CLIENT_SSL`).
    fn capabilities(&self, config: &Config) -> u32 {
        let g = &self.greeting;
        let mut caps = CLIENT_WANTS & (g.capabilities | CLIENT_LONG_PASSWORD);
        if config.database.is_some() {
            caps |= CLIENT_CONNECT_WITH_DB & g.capabilities;
        }
        if self.encrypted() {
            caps |= CLIENT_SSL;
        }
        caps
    }

    fn handshake_response(&mut self, config: &Config, plugin: &str) -> Vec<u8> {
        let caps = self.capabilities(config);
        let g = &self.greeting;
        let mut body = Vec::with_capacity(128);
        body.extend_from_slice(&caps.to_le_bytes());
        body.extend_from_slice(&CLIENT_MAX_PACKET.to_le_bytes());
        body.push(HANDSHAKE_COLLATION);
        body.extend_from_slice(&[0; 23]);
        body.extend_from_slice(config.user.as_bytes());
        body.push(0);
        let auth = scramble(plugin, config.password.as_deref().unwrap_or(""), &g.scramble, self.encrypted());
        body.push(auth.len() as u8); // 0, 1, 20 or 32, or a password over TLS
        body.extend_from_slice(&auth);
        if caps & CLIENT_CONNECT_WITH_DB != 0 {
            body.extend_from_slice(config.database.as_deref().unwrap_or("").as_bytes());
            body.push(0);
        }
        if caps & CLIENT_PLUGIN_AUTH != 0 {
            body.extend_from_slice(plugin.as_bytes());
            body.push(0);
        }
        let mut request = Vec::with_capacity(body.len() + 4);
        self.append_packets(&mut request, &body);
        request
    }

    /// Reads the server's verdict on the handshake response, taking the steps it asks
    /// for: a switch to one of the three plugins (answered for the switch's fresh nonce),
    /// `caching_sha2_password`'s full authentication, and `sha256_password`'s public key
    /// (which the first answer asked for).
    fn finish_auth(&mut self, config: &Config, mut plugin: &'static str, pipelined: bool) -> Result<Login, OpenError> {
        let password = config.password.as_deref().unwrap_or("");
        let mut nonce = self.greeting.scramble.clone();
        let mut login = login_of(plugin);
        // sha256_password: the first answer asked for the server's key, not answered yet.
        // Over TLS the password went in clear instead.
        let secure = self.encrypted();
        let mut key_asked = plugin == SHA256_PASSWORD && !password.is_empty() && !secure;
        loop {
            let packet = self.read_packet().map_err(OpenError::Failed)?;
            match packet.first() {
                Some(0x00) => return Ok(login),
                Some(0xFF) => return Err(OpenError::Failed(server_error(&packet))),
                Some(0xFE) if packet.len() > 1 => {
                    let mut c = Cursor::new(&packet[1..]);
                    let name = c.nul_str().unwrap_or_default();
                    plugin = match name.as_str() {
                        NATIVE_PASSWORD => NATIVE_PASSWORD,
                        CACHING_SHA2 => CACHING_SHA2,
                        SHA256_PASSWORD => SHA256_PASSWORD,
                        ED25519 => ED25519,
                        _ => return Err(OpenError::Unsupported(format!("the account uses {name}"))),
                    };
                    if pipelined {
                        return Err(OpenError::Switched);
                    }
                    login = login_of(plugin);
                    key_asked = plugin == SHA256_PASSWORD && !password.is_empty() && !secure;
                    let data = c.rest();
                    // The scrambles end in a NUL; ed25519's nonce is 32 bytes of any value.
                    nonce = match plugin {
                        ED25519 => data.to_vec(),
                        _ => data.strip_suffix(&[0]).unwrap_or(data).to_vec(),
                    };
                    self.send_auth(&scramble(plugin, password, &nonce, secure))?;
                }
                // AuthMoreData, the verdict on the scramble: fast success (the OK follows)
                // or the full authentication.
                Some(0x01) if plugin == CACHING_SHA2 => match packet[1..] {
                    [SHA2_FAST_AUTH_SUCCESS] => {}
                    [SHA2_PERFORM_FULL_AUTH] => {
                        self.full_auth(password, &nonce)?;
                        login = Login::Sha2Full;
                    }
                    _ => return Err(OpenError::Failed(self.malformed("a caching_sha2_password step"))),
                },
                // AuthMoreData, the public key the first answer asked for.
                Some(0x01) if plugin == SHA256_PASSWORD && key_asked => {
                    key_asked = false;
                    self.send_sealed(&packet[1..], password, &nonce)?;
                }
                Some(0x01) if plugin == SHA256_PASSWORD => {
                    return Err(OpenError::Failed(self.malformed("a sha256_password step")))
                }
                _ if pipelined => return Err(OpenError::Switched),
                _ => {
                    return Err(OpenError::Unsupported(
                        "the server asked for an authentication step this client does not take".into(),
                    ))
                }
            }
        }
    }

    /// `caching_sha2_password`'s full authentication: the password and a NUL, in clear
    /// over TLS or a Unix socket (which the server counts as secure), over plain TCP XORed
    /// with the nonce and encrypted with the server's RSA public key, asked for first (a
    /// round trip more; the key is not kept, as full authentications are rare: one per
    /// account after a server start or a `FLUSH PRIVILEGES`).
    fn full_auth(&mut self, password: &str, nonce: &[u8]) -> Result<(), OpenError> {
        if matches!(self.stream.get_ref(), Stream::Tls(_) | Stream::Plain(Plain::Unix(_))) {
            return self.send_auth(&with_nul(password));
        }
        self.send_auth(&[SHA2_REQUEST_PUBLIC_KEY])?;
        let packet = self.read_packet().map_err(OpenError::Failed)?;
        let key = match packet.split_first() {
            Some((0x01, key)) => key,
            Some((0xFF, _)) => return Err(OpenError::Failed(server_error(&packet))),
            _ => return Err(OpenError::Failed(self.malformed("a public key"))),
        };
        self.send_sealed(key, password, nonce)
    }

    /// The password and a NUL, XORed with the nonce (repeated) and encrypted with the
    /// server's RSA public key `pem`: how `caching_sha2_password`'s full authentication
    /// and `sha256_password` send the password where the server wants it encrypted.
    fn send_sealed(&mut self, pem: &[u8], password: &str, nonce: &[u8]) -> Result<(), OpenError> {
        let mut clear = with_nul(password);
        for (byte, n) in clear.iter_mut().zip(nonce.iter().cycle()) {
            *byte ^= n;
        }
        match rsa_encrypt(pem, &clear) {
            Ok(sealed) => self.send_auth(&sealed),
            Err(why) => Err(OpenError::Failed(self.fail(SessionError::lost(why)))),
        }
    }

    /// Sends one answer of the authentication exchange, continuing its sequence.
    fn send_auth(&mut self, payload: &[u8]) -> Result<(), OpenError> {
        let mut packet = Vec::with_capacity(payload.len() + 4);
        self.append_packets(&mut packet, payload);
        self.send(&packet).map_err(OpenError::Failed)
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
    /// definitions (text rows carry every value as a string, so only binary rows need
    /// their types), an EOF, the rows, an EOF with the status.
    fn read_result_set(&mut self, head: &[u8], binary: bool) -> Result<(Outcome, u16), SessionError> {
        let count = match Cursor::new(head).lenenc() {
            Some(n) if n > 0 && n <= u64::from(u16::MAX) => n as usize,
            _ => return Err(self.malformed("a column count")),
        };
        let mut columns = Vec::with_capacity(if binary { count.min(64) } else { 0 });
        for _ in 0..count {
            let definition = self.read_packet()?;
            if binary {
                columns.push(parse_column(&definition).ok_or_else(|| self.malformed("a column definition"))?);
            }
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
                false => parse_text_row(&packet, count),
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
            let start = payload.len();
            payload.resize(start + len, 0);
            self.read_exact(&mut payload[start..])?;
            if len < MAX_PAYLOAD {
                return Ok(payload);
            }
        }
    }

    fn read_exact(&mut self, buf: &mut [u8]) -> Result<(), SessionError> {
        match self.stream.read_exact(buf) {
            Ok(()) => Ok(()),
            Err(e) => Err(self.fail(lost(&e))),
        }
    }

    fn send(&mut self, bytes: &[u8]) -> Result<(), SessionError> {
        let stream = self.stream.get_mut();
        match stream.write_all(bytes).and_then(|()| stream.flush()) {
            Ok(()) => Ok(()),
            Err(e) => Err(self.fail(lost(&e))),
        }
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

/// A statement prepared on this connection's server session.
#[derive(Debug)]
pub(crate) struct Prepared {
    id: u32,
    params: usize,
}

/// What a binary row needs to know of a column.
struct Column {
    kind: u8,
    unsigned: bool,
    /// Fractional digits of a temporal column (as the text protocol would show them).
    decimals: u8,
}

/// A column definition: six length-encoded strings (catalog, schema, table, original
/// table, name, original name), then the fixed fields.
fn parse_column(packet: &[u8]) -> Option<Column> {
    let mut c = Cursor::new(packet);
    for _ in 0..6 {
        let len = usize::try_from(c.lenenc()?).ok()?;
        c.bytes(len)?;
    }
    c.lenenc()?; // length of the fixed fields
    c.u16()?; // character set
    c.u32()?; // display length
    let kind = c.u8()?;
    let flags = c.u16()?;
    let decimals = c.u8()?;
    Some(Column { kind, unsigned: flags & UNSIGNED_FLAG != 0, decimals })
}

/// A binary-protocol row: a 0x00 header, a NULL bitmap offset by two bits, then each
/// non-NULL value in its type's encoding.
fn parse_binary_row(packet: &[u8], columns: &[Column]) -> Option<Vec<Value>> {
    let mut c = Cursor::new(packet);
    if c.u8()? != 0x00 {
        return None;
    }
    let nulls = c.bytes((columns.len() + 9) / 8)?;
    let mut row = Vec::with_capacity(columns.len());
    for (i, column) in columns.iter().enumerate() {
        let bit = i + 2;
        if nulls[bit / 8] & (1 << (bit % 8)) != 0 {
            row.push(Value::Null);
            continue;
        }
        let int = |c: &mut Cursor, width: usize| -> Option<Value> {
            let b = c.bytes(width)?;
            let raw = b.iter().rev().fold(0u64, |acc, &x| acc << 8 | u64::from(x));
            let shift = 64 - 8 * width as u32;
            Some(match column.unsigned {
                true => Value::UInt(raw),
                false => Value::Int(((raw << shift) as i64) >> shift),
            })
        };
        row.push(match column.kind {
            TYPE_TINY => int(&mut c, 1)?,
            TYPE_SHORT | TYPE_YEAR => int(&mut c, 2)?,
            TYPE_LONG | TYPE_INT24 => int(&mut c, 4)?,
            TYPE_LONGLONG => int(&mut c, 8)?,
            // Through its own shortest text, so 1.1 reads as 1.1 (as in the text protocol),
            // not as the f32's exact value widened.
            TYPE_FLOAT => Value::Float(f32::from_le_bytes(c.bytes(4)?.try_into().ok()?).to_string().parse().ok()?),
            TYPE_DOUBLE => Value::Float(f64::from_le_bytes(c.bytes(8)?.try_into().ok()?)),
            TYPE_DATE => Value::Text(binary_datetime(&mut c, None)?),
            TYPE_DATETIME | TYPE_TIMESTAMP => Value::Text(binary_datetime(&mut c, Some(column.decimals))?),
            TYPE_TIME => Value::Text(binary_time(&mut c, column.decimals)?),
            _ => {
                let len = usize::try_from(c.lenenc()?).ok()?;
                match String::from_utf8(c.bytes(len)?.to_vec()) {
                    Ok(s) => Value::Text(s),
                    Err(e) => Value::Bytes(e.into_bytes()),
                }
            }
        });
    }
    Some(row)
}

/// Microseconds as the text protocol shows them with `decimals` fractional digits
/// (0-6; anything else, such as an expression's "not fixed", shows all six when there is
/// a fraction).
pub(crate) fn fraction(micros: u32, decimals: u8) -> String {
    match decimals {
        0 => String::new(),
        1..=6 => format!(".{micros:06}")[..=usize::from(decimals)].to_owned(),
        _ if micros == 0 => String::new(),
        _ => format!(".{micros:06}"),
    }
}

/// A binary DATE (`decimals` None) or DATETIME/TIMESTAMP as the text protocol shows it.
fn binary_datetime(c: &mut Cursor, decimals: Option<u8>) -> Option<String> {
    let len = usize::from(c.u8()?);
    let b = c.bytes(len)?;
    let (year, month, day) = match len {
        0 => (0, 0, 0),
        _ => (u16::from_le_bytes([b[0], *b.get(1)?]), *b.get(2)?, *b.get(3)?),
    };
    let date = format!("{year:04}-{month:02}-{day:02}");
    let Some(decimals) = decimals else {
        return Some(date);
    };
    let (hour, minute, second) = if len >= 7 { (b[4], b[5], b[6]) } else { (0, 0, 0) };
    let micros = if len >= 11 { u32::from_le_bytes([b[7], b[8], b[9], b[10]]) } else { 0 };
    Some(format!("{date} {hour:02}:{minute:02}:{second:02}{}", fraction(micros, decimals)))
}

/// A binary TIME as the text protocol shows it (hours past 24 included).
fn binary_time(c: &mut Cursor, decimals: u8) -> Option<String> {
    let len = usize::from(c.u8()?);
    let b = c.bytes(len)?;
    if len < 8 {
        return Some(format!("00:00:00{}", fraction(0, decimals)));
    }
    let days = u32::from_le_bytes([b[1], b[2], b[3], b[4]]);
    let hours = days * 24 + u32::from(b[5]);
    let sign = if b[0] == 1 { "-" } else { "" };
    let micros = if len >= 12 { u32::from_le_bytes([b[8], b[9], b[10], b[11]]) } else { 0 };
    Some(format!("{sign}{hours:02}:{:02}:{:02}{}", b[6], b[7], fraction(micros, decimals)))
}

fn put_lenenc_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    let len = bytes.len() as u64;
    match len {
        0..=0xFA => out.push(len as u8),
        0xFB..=0xFFFF => {
            out.push(0xFC);
            out.extend_from_slice(&(len as u16).to_le_bytes());
        }
        0x1_0000..=0xFF_FFFF => {
            out.push(0xFD);
            out.extend_from_slice(&len.to_le_bytes()[..3]);
        }
        _ => {
            out.push(0xFE);
            out.extend_from_slice(&len.to_le_bytes());
        }
    }
    out.extend_from_slice(bytes);
}

fn connect_stream(config: &Config, timeout: Option<Duration>) -> io::Result<Stream> {
    let stream = match &config.socket {
        Some(path) => {
            let s = UnixStream::connect(path)?;
            s.set_read_timeout(timeout)?;
            s.set_write_timeout(timeout)?;
            Stream::Plain(Plain::Unix(s))
        }
        None => {
            let mut last = io::Error::new(io::ErrorKind::NotFound, format!("{} resolves to no address", config.host));
            let mut connected = None;
            for addr in (config.host.as_str(), config.port).to_socket_addrs()? {
                let attempt = match config.connect_timeout.is_zero() {
                    true => TcpStream::connect(addr),
                    false => TcpStream::connect_timeout(&addr, config.connect_timeout),
                };
                match attempt {
                    Ok(s) => {
                        connected = Some(s);
                        break;
                    }
                    Err(e) => last = e,
                }
            }
            let s = connected.ok_or(last)?;
            s.set_nodelay(true)?;
            s.set_read_timeout(timeout)?;
            s.set_write_timeout(timeout)?;
            Stream::Plain(Plain::Tcp(s))
        }
    };
    Ok(stream)
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

fn parse_greeting(packet: &[u8]) -> Option<Greeting> {
    let mut c = Cursor::new(packet);
    if c.u8()? != 10 {
        return None;
    }
    let version = c.nul_str()?;
    let connection_id = c.u32()?;
    let mut scramble = c.bytes(8)?.to_vec();
    c.u8()?; // filler
    let low = u32::from(c.u16()?);
    let mut capabilities = low;
    let mut plugin = String::new();
    if let (Some(_charset), Some(_status), Some(high)) = (c.u8(), c.u16(), c.u16()) {
        capabilities |= u32::from(high) << 16;
        let auth_len = usize::from(c.u8()?);
        c.bytes(10)?; // reserved (MariaDB keeps its extended capabilities here)
        if capabilities & CLIENT_SECURE_CONNECTION != 0 {
            let part = c.bytes(auth_len.saturating_sub(8).max(13))?;
            let part = part.strip_suffix(&[0]).unwrap_or(part);
            scramble.extend_from_slice(part);
        }
        if capabilities & CLIENT_PLUGIN_AUTH != 0 {
            plugin = c.nul_str().unwrap_or_else(|| String::from_utf8_lossy(c.rest()).into_owned());
        }
    }
    Some(Greeting { version, connection_id, capabilities, scramble, plugin })
}

/// The first answer to the server for `plugin`, one of the four this client speaks: a
/// scramble of the nonce, an ed25519 signature of it, or for `sha256_password` (which
/// has neither) the password in clear over TLS (`secure`), else the request for the
/// server's public key, or "no password" (a NUL, as MySQL's own client sends it; the
/// server also takes nothing at all).
fn scramble(plugin: &str, password: &str, nonce: &[u8], secure: bool) -> Vec<u8> {
    match plugin {
        CACHING_SHA2 => sha2_password(password, nonce),
        SHA256_PASSWORD if password.is_empty() => vec![SHA256_NO_PASSWORD],
        SHA256_PASSWORD if secure => with_nul(password),
        SHA256_PASSWORD => vec![SHA256_REQUEST_PUBLIC_KEY],
        ED25519 => mysql_common::scramble::create_response_for_ed25519(password.as_bytes(), nonce).to_vec(),
        _ => native_password(password, nonce),
    }
}

/// What a login with `plugin` is, before the server has said more.
fn login_of(plugin: &str) -> Login {
    match plugin {
        CACHING_SHA2 => Login::Sha2Fast,
        SHA256_PASSWORD => Login::Sha256,
        ED25519 => Login::Ed25519,
        _ => Login::Native,
    }
}

/// The password as the plugins send it itself: its bytes and a NUL.
fn with_nul(password: &str) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(password.len() + 1);
    bytes.extend_from_slice(password.as_bytes());
    bytes.push(0);
    bytes
}

/// `caching_sha2_password`'s scramble: SHA256(password) XOR
/// SHA256(SHA256(SHA256(password)) + nonce), the stored hash before the nonce (as
/// mysql_common has it; MariaDB's protocol page writes the nonce first, and MySQL 9.7.4
/// does not take that: its cache misses and it asks for the full authentication, tried).
/// The password never travels; an empty one is sent as nothing.
fn sha2_password(password: &str, nonce: &[u8]) -> Vec<u8> {
    if password.is_empty() {
        return Vec::new();
    }
    let once = Sha256::digest(password.as_bytes());
    let twice = Sha256::digest(once);
    let mut salted = Sha256::new();
    salted.update(twice);
    salted.update(nonce.get(..20).unwrap_or(nonce));
    once.iter().zip(salted.finalize()).map(|(a, b)| a ^ b).collect()
}

/// RSA encryption (OAEP, SHA-1) of `message` with the PEM public key the server sent,
/// through the RSA code the `mysql` crate's own full authentication uses (see the module
/// documentation). It panics where this returns an error: on a message too long for the
/// key, checked here first, and on a key it cannot parse, caught here (the panic hook
/// still prints its message: only a broken server or proxy gets there).
fn rsa_encrypt(pem: &[u8], message: &[u8]) -> Result<Vec<u8>, String> {
    use mysql_common::crypto::rsa::{GetRandom, Pkcs1OaepPadding, PublicKey};
    std::panic::catch_unwind(|| {
        let key = PublicKey::from_pem(pem);
        // OAEP with SHA-1 carries at most k - 2 * 20 - 2 bytes for a k-byte modulus.
        let room = key.num_octets().saturating_sub(42);
        if message.len() > room {
            return Err(format!(
                "a password of {} bytes is too long for the server's {}-bit RSA key (at most {})",
                message.len().saturating_sub(1),
                key.modulus().bits(),
                room.saturating_sub(1)
            ));
        }
        Ok(key.encrypt_block(message, Pkcs1OaepPadding::new(GetRandom)))
    })
    .unwrap_or_else(|_| Err("the server sent an RSA public key this client cannot read".to_owned()))
}

/// `mysql_native_password`: SHA1(password) XOR SHA1(scramble + SHA1(SHA1(password))).
/// The password never travels; an empty one is sent as nothing.
fn native_password(password: &str, scramble: &[u8]) -> Vec<u8> {
    if password.is_empty() {
        return Vec::new();
    }
    let once = Sha1::digest(password.as_bytes());
    let twice = Sha1::digest(once);
    let mut salted = Sha1::new();
    salted.update(scramble.get(..20).unwrap_or(scramble));
    salted.update(twice);
    once.iter().zip(salted.finalize()).map(|(a, b)| a ^ b).collect()
}

fn is_eof(packet: &[u8]) -> bool {
    packet.first() == Some(&0xFE) && packet.len() < 9
}

/// A text-protocol row: each value a length-encoded string, NULL as 0xFB.
fn parse_text_row(packet: &[u8], columns: usize) -> Option<Vec<Value>> {
    let mut c = Cursor::new(packet);
    let mut row = Vec::with_capacity(columns);
    for _ in 0..columns {
        if c.peek()? == 0xFB {
            c.u8()?;
            row.push(Value::Null);
            continue;
        }
        let len = usize::try_from(c.lenenc()?).ok()?;
        let bytes = c.bytes(len)?.to_vec();
        row.push(match String::from_utf8(bytes) {
            Ok(s) => Value::Text(s),
            Err(e) => Value::Bytes(e.into_bytes()),
        });
    }
    Some(row)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn native_password_matches_the_servers_stored_hash() {
        // The server stores '*' + hex(SHA1(SHA1(password))) (PASSWORD('secret') =
        // *14E65567ABDB5135D0CFD9A70B3032C179A49EE7) and checks
        // SHA1(response XOR SHA1(scramble + stored)) == stored.
        let scramble = b"abcdefghij0123456789";
        let response = native_password("secret", scramble);
        let stored = Sha1::digest(Sha1::digest(b"secret"));
        let mut salted = Sha1::new();
        salted.update(scramble);
        salted.update(stored);
        let once: Vec<u8> = response.iter().zip(salted.finalize()).map(|(a, b)| a ^ b).collect();
        assert_eq!(Sha1::digest(&once), stored);
        let hex: String = stored.iter().map(|b| format!("{b:02X}")).collect();
        assert_eq!(hex, "14E65567ABDB5135D0CFD9A70B3032C179A49EE7");
        assert!(native_password("", scramble).is_empty());
    }

    #[test]
    fn sha2_password_matches_an_independent_computation() {
        // python3 -c "import hashlib; h = lambda b: hashlib.sha256(b).digest(); x = h(b'secret');
        //   print(bytes(a ^ b for a, b in zip(x, h(h(x) + b'abcdefghij0123456789'))).hex())"
        let response = sha2_password("secret", b"abcdefghij0123456789");
        let hex: String = response.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(hex, "bd7d89fc1c297010da753d08822e9e48d3eafbb6e68e1f9b403be12dc5687a40");
        assert!(sha2_password("", b"abcdefghij0123456789").is_empty());
    }

    /// A 2048-bit RSA public key (`openssl genrsa 2048 | openssl rsa -pubout`), as MySQL
    /// sends its own.
    const PUBLIC_KEY: &[u8] = b"-----BEGIN PUBLIC KEY-----\n\
MIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEA8rxrlQ4Sm+e+DBXggPRE\n\
oASF8q1A9/AcCIE2PNR+WkecQ3RsN9EJTzMb3pFjLIvo70guAEygRHNgjX9QTGrj\n\
WCdcBw71aVCUoHCjjbnoudeOScFIB7iZ56XWwodFmf47v1d11P7p9swWw+fCp5Ng\n\
C2sxYYuimhSyW+bJ+zrWhLs8u7d62G/X6P55GDIKX1ih4uX1CIizt5dOsANBF2c5\n\
rwbu0nHplGWeG3IICIjFIpDZ5Ms6T+Csn/ugMT5jKU/OHGXLGfPED2l9RNBrNJpk\n\
27wRWbMYZVDYxi/F/nfPH8lyFofUcStwpXz/cRedeTSqyUoTIPEoRRruhCu+FIHQ\n\
eQIDAQAB\n\
-----END PUBLIC KEY-----";

    #[test]
    fn rsa_encryption_fits_the_key_or_says_why_not() {
        let sealed = rsa_encrypt(PUBLIC_KEY, b"secret\0").unwrap();
        assert_eq!(sealed.len(), 256, "one block of the modulus' size");
        assert_ne!(rsa_encrypt(PUBLIC_KEY, b"secret\0").unwrap(), sealed, "OAEP draws a fresh seed each time");
        // OAEP with SHA-1 carries 256 - 42 bytes in a 2048-bit block.
        assert!(rsa_encrypt(PUBLIC_KEY, &[b'x'; 214]).is_ok());
        let e = rsa_encrypt(PUBLIC_KEY, &[b'x'; 215]).unwrap_err();
        assert!(e.contains("214 bytes is too long for the server's 2048-bit RSA key (at most 213)"), "{e}");
        let e = rsa_encrypt(b"-----BEGIN PUBLIC KEY-----\n!!\n-----END PUBLIC KEY-----", b"x\0").unwrap_err();
        assert!(e.contains("cannot read"), "{e}");
    }

    #[test]
    fn a_payload_filling_a_packet_is_followed_by_an_empty_one() {
        let mut out = Vec::new();
        let next = frame(&mut out, &vec![7u8; MAX_PAYLOAD], 3);
        assert_eq!(next, 5);
        assert_eq!(out.len(), MAX_PAYLOAD + 8);
        assert_eq!(&out[MAX_PAYLOAD + 4..], &[0, 0, 0, 4]);
    }

    #[test]
    fn length_encoded_integers_of_every_width_are_read() {
        let mut c = Cursor::new(&[0xFA, 0xFC, 0x34, 0x12, 0xFD, 1, 2, 3, 0xFE, 1, 0, 0, 0, 0, 0, 0, 0x80]);
        assert_eq!(c.lenenc(), Some(0xFA));
        assert_eq!(c.lenenc(), Some(0x1234));
        assert_eq!(c.lenenc(), Some(0x030201));
        assert_eq!(c.lenenc(), Some(0x8000_0000_0000_0001));
        assert_eq!(c.lenenc(), None);
    }

    #[test]
    fn text_rows_keep_nulls_empty_strings_and_binary_bytes() {
        let packet = [0xFB, 0x00, 0x02, b'4', b'2', 0x01, 0xFF];
        let row = parse_text_row(&packet, 4).unwrap();
        assert_eq!(
            row,
            vec![Value::Null, Value::Text(String::new()), Value::Text("42".into()), Value::Bytes(vec![0xFF])]
        );
        assert!(parse_text_row(&packet, 5).is_none(), "a short row must not read past its packet");
    }

    /// A protocol-10 greeting as servers send it (scramble "abcdefgh" + "ijklmnopqrst").
    fn greeting_packet(version: &[u8], id: u32, caps: u32, plugin: &[u8]) -> Vec<u8> {
        let mut p = vec![10];
        p.extend_from_slice(version);
        p.push(0);
        p.extend_from_slice(&id.to_le_bytes());
        p.extend_from_slice(b"abcdefgh\0");
        p.extend_from_slice(&(caps as u16).to_le_bytes());
        p.push(45);
        p.extend_from_slice(&2u16.to_le_bytes());
        p.extend_from_slice(&((caps >> 16) as u16).to_le_bytes());
        p.push(21);
        p.extend_from_slice(&[0; 10]);
        p.extend_from_slice(b"ijklmnopqrst\0");
        p.extend_from_slice(plugin);
        p
    }

    #[test]
    fn a_mariadb_greeting_gives_its_version_id_scramble_and_plugin() {
        let caps = CLIENT_WANTS | CLIENT_CONNECT_WITH_DB;
        let g =
            parse_greeting(&greeting_packet(b"5.5.5-10.11.19-MariaDB", 77, caps, b"mysql_native_password\0")).unwrap();
        assert_eq!(
            (g.version.as_str(), g.connection_id, g.plugin.as_str()),
            ("5.5.5-10.11.19-MariaDB", 77, NATIVE_PASSWORD)
        );
        assert_eq!(g.scramble, b"abcdefghijklmnopqrst");
        assert_eq!(g.capabilities, caps);
    }

    /// A connection past its handshake, talking to a hand-driven peer.
    fn connected(authenticated: bool) -> (Connection, UnixStream) {
        let (ours, peer) = UnixStream::pair().unwrap();
        // A test that waits for the end of the connection fails instead of hanging.
        peer.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let greeting = Greeting {
            version: "test".into(),
            connection_id: 1,
            capabilities: 0,
            scramble: Vec::new(),
            plugin: String::new(),
        };
        let conn = Connection {
            stream: BufReader::new(Stream::Plain(Plain::Unix(ours))),
            greeting,
            seq: 0,
            broken: false,
            authenticated,
            login: Login::Native,
        };
        (conn, peer)
    }

    #[test]
    fn a_packet_out_of_sequence_loses_the_connection_and_closes_it() {
        let (mut conn, mut peer) = connected(true);
        // The answer to a query must be packet 1; this OK claims to be packet 5.
        peer.write_all(&[7, 0, 0, 5, 0, 0, 0, 2, 0, 0, 0]).unwrap();
        let e = conn.query("SELECT 1").unwrap_err();
        assert!(e.lost && e.message.contains("arrived where 1 was due"), "{e:?}");
        assert!(conn.query("SELECT 1").unwrap_err().lost);
        // The peer sees the query, then the end of the connection (no goodbye either).
        let mut seen = Vec::new();
        peer.read_to_end(&mut seen).unwrap();
        assert_eq!(&seen[..5], &[9, 0, 0, 0, COM_QUERY]);
        assert_eq!(seen.len(), 4 + 9, "nothing after the query: {seen:?}");
    }

    #[test]
    fn an_in_sequence_answer_is_read_and_the_goodbye_follows() {
        let (mut conn, mut peer) = connected(true);
        peer.write_all(&[7, 0, 0, 1, 0, 3, 9, 2, 0, 0, 0]).unwrap();
        let outcomes = conn.query("DELETE FROM t").unwrap();
        assert_eq!((outcomes[0].affected_rows, outcomes[0].last_insert_id), (3, 9));
        drop(conn);
        let mut seen = Vec::new();
        peer.read_to_end(&mut seen).unwrap();
        assert_eq!(&seen[seen.len() - 5..], &[1, 0, 0, 0, COM_QUIT]);
    }

    #[test]
    fn a_packet_of_16_mib_or_more_is_reassembled_from_its_pieces() {
        let (mut conn, peer) = connected(true);
        conn.seq = 1;
        let writer = std::thread::spawn(move || {
            let mut peer = peer;
            let mut bytes = Vec::new();
            let mut payload = vec![b'x'; MAX_PAYLOAD + 3];
            payload[MAX_PAYLOAD] = b'y';
            frame(&mut bytes, &payload, 1);
            peer.write_all(&bytes).unwrap();
            peer
        });
        let packet = conn.read_packet().unwrap();
        assert_eq!(packet.len(), MAX_PAYLOAD + 3);
        assert_eq!(&packet[MAX_PAYLOAD - 1..], b"xyxx");
        assert_eq!(conn.seq, 3, "two packets were read");
        drop(writer.join().unwrap());
    }

    #[test]
    fn a_connection_dropped_during_its_handshake_sends_no_goodbye() {
        let (conn, mut peer) = connected(false);
        drop(conn);
        let mut seen = Vec::new();
        peer.read_to_end(&mut seen).unwrap();
        assert!(seen.is_empty(), "the server would read {seen:?} as a handshake answer");
    }

    /// One packet from a hand-driven peer's side: its sequence number and payload.
    fn read_from_client(peer: &mut UnixStream) -> (u8, Vec<u8>) {
        let mut header = [0u8; 4];
        peer.read_exact(&mut header).unwrap();
        let mut payload = vec![0u8; usize::from(header[0]) | usize::from(header[1]) << 8];
        peer.read_exact(&mut payload).unwrap();
        (header[3], payload)
    }

    /// Logs in with `password` to a hand-driven server that greets with `sha256_password`
    /// (MySQL 8.0 with `default_authentication_plugin=sha256_password`; MySQL 9.7 always
    /// greets with caching_sha2_password, even with `authentication_policy` naming
    /// sha256_password first: tried) and sends its public key when asked. Returns the
    /// login and the client's answers: the handshake response's, then any packet after.
    fn log_in_to_a_sha256_greeting(password: Option<&str>) -> (Login, Vec<Vec<u8>>) {
        let path = std::env::temp_dir().join(format!(
            "mysqllock-wire-sha256-{}-{}.sock",
            std::process::id(),
            password.is_some()
        ));
        let _ = std::fs::remove_file(&path);
        let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
        let server = std::thread::spawn(move || {
            let (mut peer, _) = listener.accept().unwrap();
            peer.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            let send = |peer: &mut UnixStream, payload: &[u8], seq: u8| {
                let mut bytes = Vec::new();
                frame(&mut bytes, payload, seq);
                peer.write_all(&bytes).unwrap();
            };
            send(&mut peer, &greeting_packet(b"8.0.36", 5, CLIENT_WANTS, b"sha256_password\0"), 0);
            let (seq, response) = read_from_client(&mut peer);
            assert_eq!(seq, 1);
            // Past the fixed fields and the user name: the answer, length first, then the
            // plugin it answers for (no database: the greeting did not offer it).
            let user_end = 32 + response[32..].iter().position(|&b| b == 0).unwrap();
            let (len, rest) = response[user_end + 1..].split_first().unwrap();
            let (answer, plugin) = rest.split_at(usize::from(*len));
            assert_eq!(plugin, b"sha256_password\0", "the response names the greeting's plugin");
            let mut answers = vec![answer.to_vec()];
            let mut seq = 2;
            if answers[0] == [SHA256_REQUEST_PUBLIC_KEY] {
                send(&mut peer, &[&[0x01][..], PUBLIC_KEY].concat(), seq);
                let (next, sealed) = read_from_client(&mut peer);
                assert_eq!(next, seq + 1);
                answers.push(sealed);
                seq += 2;
            }
            send(&mut peer, &[0x00, 0, 0, 2, 0, 0, 0], seq);
            answers
        });
        let config = Config {
            socket: Some(path.to_string_lossy().into_owned()),
            user: "u".into(),
            password: password.map(str::to_owned),
            database: None,
            ..Config::default()
        };
        let login = Connection::open(&config, None, None).map(|(conn, _)| conn.login());
        let answers = server.join().unwrap();
        let _ = std::fs::remove_file(&path);
        (login.unwrap_or_else(|e| panic!("{e:?}")), answers)
    }

    #[test]
    fn a_sha256_password_greeting_is_answered_with_a_key_request_then_the_encrypted_password() {
        let (login, answers) = log_in_to_a_sha256_greeting(Some("secret"));
        assert_eq!(login, Login::Sha256);
        assert_eq!(answers[0], [SHA256_REQUEST_PUBLIC_KEY], "no scramble: the key is asked for at once");
        assert_eq!(answers[1].len(), 256, "one RSA block of the 2048-bit key, over the Unix socket too");
        assert_eq!(answers.len(), 2);
    }

    #[test]
    fn a_sha256_password_greeting_is_answered_with_no_password_as_a_nul() {
        let (login, answers) = log_in_to_a_sha256_greeting(None);
        assert_eq!(login, Login::Sha256);
        assert_eq!(answers, [[SHA256_NO_PASSWORD]], "no key asked for, nothing more sent");
    }

    #[test]
    fn a_mysql_8_greeting_names_its_plugin_and_a_plugin_name_may_lack_its_nul() {
        let greeting = |plugin: &[u8]| parse_greeting(&greeting_packet(b"8.0.36", 9, CLIENT_WANTS, plugin)).unwrap();
        let g = greeting(b"caching_sha2_password\0");
        assert_eq!((g.version.as_str(), g.plugin.as_str()), ("8.0.36", "caching_sha2_password"));
        assert_eq!(g.scramble, b"abcdefghijklmnopqrst");
        assert_eq!(greeting(b"mysql_native_password").plugin, NATIVE_PASSWORD);
    }

    #[test]
    fn temporal_values_show_the_columns_fractional_digits() {
        assert_eq!(fraction(500_000, 3), ".500");
        assert_eq!(fraction(0, 6), ".000000");
        assert_eq!(fraction(0, 0), "");
        assert_eq!(fraction(7, 31), ".000007");
        assert_eq!(fraction(0, 31), "");
    }

    #[test]
    fn an_error_packet_gives_code_and_message_without_the_sql_state() {
        let e = server_error(b"\xff\x7a\x04#42S02Table 'x.y' doesn't exist");
        assert_eq!(e.code, Some(1146));
        assert_eq!(e.message, "Table 'x.y' doesn't exist");
        assert!(!e.lost);
    }
}
