//! The core's own client for the MySQL wire protocol, for the one case that matters for
//! speed: a plain connection (TCP or Unix socket, no TLS) authenticated with
//! `mysql_native_password`, running text-protocol queries.
//!
//! Why not the `mysql` crate for everything: it parses the server's greeting with two
//! regular expressions, compiled on the first connection of every process (about 0.6 ms
//! of CPU, measured), and it cannot send a query behind the handshake response, so a
//! short-lived process paid a round trip and the regex before its first lock. This
//! client does neither. Whatever it does not speak (another authentication plugin,
//! a server without the 4.1 protocol) it reports as [`OpenError::Unsupported`], and
//! the caller connects through the `mysql` crate instead: nothing a user could connect
//! with before is refused now.

use std::io::{self, BufReader, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::os::unix::net::UnixStream;
use std::time::Duration;

use sha1::{Digest, Sha1};

use crate::config::Config;
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
    /// this client could take (a fresh scramble): nothing ran; connect again without it.
    Switched,
    /// Connecting failed (refused, timed out, access denied, too many connections).
    Failed(SessionError),
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

enum Stream {
    Tcp(TcpStream),
    Unix(UnixStream),
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.read(buf),
            Stream::Unix(s) => s.read(buf),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.write(buf),
            Stream::Unix(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
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
}

impl Connection {
    /// Connects and authenticates with `mysql_native_password` (also when the server
    /// greets with another default plugin, as MySQL 8 does: the scramble is the same, and
    /// an account on another plugin is answered with a switch, reported as
    /// [`OpenError::Unsupported`]). `first` is a query sent in the same write as the
    /// handshake response, so that its answer arrives with the server's OK: a setup that
    /// costs no round trip of its own. It is only sent when the greeting names
    /// `mysql_native_password`; should the server still ask for another step, it reads
    /// the query as that step's answer, out of sequence, and refuses it (nothing runs):
    /// reported as [`OpenError::Switched`] or [`OpenError::Unsupported`]. The outcome of
    /// `first` is returned when it was sent.
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
        conn.greeting = greeting;
        let mut request = conn.handshake_response(config);
        if let Some(sql) = &first {
            frame_command(&mut request, COM_QUERY, sql.as_bytes());
        }
        conn.send(&request).map_err(OpenError::Failed)?;
        conn.finish_auth(config, first.is_some())?;
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
            return Err(SessionError { code: None, message, lost: false });
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
        match self.stream.get_ref() {
            Stream::Tcp(s) => s.set_read_timeout(timeout).and_then(|()| s.set_write_timeout(timeout)),
            Stream::Unix(s) => s.set_read_timeout(timeout).and_then(|()| s.set_write_timeout(timeout)),
        }
    }

    fn read_greeting(&mut self) -> Result<Greeting, OpenError> {
        let packet = self.read_packet().map_err(OpenError::Failed)?;
        if packet.first() == Some(&0xFF) {
            return Err(OpenError::Failed(server_error(&packet)));
        }
        parse_greeting(&packet).ok_or_else(|| OpenError::Unsupported("a greeting this client cannot read".into()))
    }

    fn handshake_response(&mut self, config: &Config) -> Vec<u8> {
        let g = &self.greeting;
        let mut caps = CLIENT_WANTS & (g.capabilities | CLIENT_LONG_PASSWORD);
        if config.database.is_some() {
            caps |= CLIENT_CONNECT_WITH_DB & g.capabilities;
        }
        let mut body = Vec::with_capacity(128);
        body.extend_from_slice(&caps.to_le_bytes());
        body.extend_from_slice(&CLIENT_MAX_PACKET.to_le_bytes());
        body.push(HANDSHAKE_COLLATION);
        body.extend_from_slice(&[0; 23]);
        body.extend_from_slice(config.user.as_bytes());
        body.push(0);
        let auth = native_password(config.password.as_deref().unwrap_or(""), &g.scramble);
        body.push(auth.len() as u8); // 0 or 20
        body.extend_from_slice(&auth);
        if caps & CLIENT_CONNECT_WITH_DB != 0 {
            body.extend_from_slice(config.database.as_deref().unwrap_or("").as_bytes());
            body.push(0);
        }
        if caps & CLIENT_PLUGIN_AUTH != 0 {
            body.extend_from_slice(NATIVE_PASSWORD.as_bytes());
            body.push(0);
        }
        let mut request = Vec::with_capacity(body.len() + 4);
        self.append_packets(&mut request, &body);
        request
    }

    /// Reads the server's verdict on the handshake response. Only a switch to
    /// `mysql_native_password` itself (with a fresh scramble) is answered here.
    fn finish_auth(&mut self, config: &Config, pipelined: bool) -> Result<(), OpenError> {
        loop {
            let packet = self.read_packet().map_err(OpenError::Failed)?;
            match packet.first() {
                Some(0x00) => return Ok(()),
                Some(0xFF) => return Err(OpenError::Failed(server_error(&packet))),
                Some(0xFE) if packet.len() > 1 => {
                    let mut c = Cursor::new(&packet[1..]);
                    let plugin = c.nul_str().unwrap_or_default();
                    if plugin != NATIVE_PASSWORD {
                        return Err(OpenError::Unsupported(format!("the account uses {plugin}")));
                    }
                    if pipelined {
                        return Err(OpenError::Switched);
                    }
                    let data = c.rest();
                    let scramble = data.strip_suffix(&[0]).unwrap_or(data);
                    let auth = native_password(config.password.as_deref().unwrap_or(""), scramble);
                    let mut reply = Vec::with_capacity(24);
                    self.append_packets(&mut reply, &auth);
                    self.send(&reply).map_err(OpenError::Failed)?;
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
        let _ = match self.stream.get_ref() {
            Stream::Tcp(s) => s.shutdown(std::net::Shutdown::Both),
            Stream::Unix(s) => s.shutdown(std::net::Shutdown::Both),
        };
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
        match self.stream.get_mut().write_all(bytes) {
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
            let _ = match self.stream.get_mut() {
                Stream::Tcp(s) => s.set_nonblocking(true),
                Stream::Unix(s) => s.set_nonblocking(true),
            };
            let _ = self.stream.get_mut().write_all(&quit);
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
            Stream::Unix(s)
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
            Stream::Tcp(s)
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
        let conn =
            Connection { stream: BufReader::new(Stream::Unix(ours)), greeting, seq: 0, broken: false, authenticated };
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
