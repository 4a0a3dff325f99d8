//! The `mysql` crate, for what the own wire client does not speak (an account on
//! another authentication plugin, a server without the 4.1 protocol): connecting, and
//! turning its results, values and errors into the core's. Built without TLS (a second
//! TLS stack and an older webpki for a path no test server's account takes any more), so
//! a mode that requires TLS is refused here rather than quietly weakened.
//!
//! The crate takes its read and write timeouts once, when it connects, but they are the
//! kernel's socket options: [`Bounds::apply`] sets them again on the crate's socket
//! before each statement, from the statement's [`Bound`], as the own client does before
//! each read. So a statement here is bounded as there (its wait plus `read_timeout`),
//! and the connect is bounded by its deadline: TCP by what is left of it, each read of
//! the crate's handshake by what is left of it when the crate starts, and the session's
//! setup, which the core sends once the crate is connected, by the deadline itself.

use std::os::fd::{AsRawFd, BorrowedFd};
use std::time::Duration;

use mysql::{Conn, OptsBuilder};
use mysql_common::proto::codec::error::PacketCodecError;

use super::wire::{self, timed_out, Applied, Bound};
use crate::config::Config;
use crate::deadline::Deadline;
use crate::error::SessionError;
use crate::value::{Outcome, Value};

/// The largest packet this client sends or accepts: far above any lock statement.
const CLIENT_MAX_PACKET: usize = 4 * 1024 * 1024;

/// A crate connection's timeouts, and what its socket has now.
pub(super) struct Bounds {
    peer: String,
    read: Duration,
    write: Duration,
    applied: Applied,
}

impl Bounds {
    /// The bound of a statement that asks the server to wait until `wait`.
    pub fn statement(&self, wait: Deadline) -> Bound {
        Bound::statement(wait, self.read, self.write)
    }

    /// Gives the crate's socket the bound of what it reads and writes next.
    pub fn apply(&mut self, conn: &Conn, bound: &Bound) -> Result<(), SessionError> {
        // SAFETY: the descriptor is the crate's open socket, borrowed for this call only,
        // while `conn` (and with it the socket) lives.
        let socket = unsafe { BorrowedFd::borrow_raw(conn.as_raw_fd()) };
        for writing in [false, true] {
            if let Err(e) = self.applied.apply(socket2::SockRef::from(&socket), bound, writing) {
                return Err(match timed_out(&e) {
                    true => wire::stalled(&self.peer, bound.limit(writing), bound.during()),
                    false => SessionError::lost(e.to_string()),
                });
            }
        }
        Ok(())
    }

    /// `answer`, with a bound that ran out said as the own client says it.
    pub fn answer<T>(&self, answer: Result<T, SessionError>, bound: &Bound) -> Result<T, SessionError> {
        answer.map_err(|e| explain(e, &self.peer, bound))
    }
}

/// A bound that ran out, in the caller's figures.
fn explain(e: SessionError, peer: &str, bound: &Bound) -> SessionError {
    if !e.stalled {
        return e;
    }
    // The crate's error does not say whether it was reading or writing.
    let writing = e.message.contains("write");
    wire::stalled(peer, bound.limit(writing), bound.during())
}

/// Connects through the crate, because of `why` (said in its errors), under the
/// connect's `bound`.
pub(super) fn connect(config: &Config, bound: Bound, why: &str) -> Result<(Conn, Bounds), SessionError> {
    if config.tls.mode().requires_tls() {
        return Err(SessionError::lost(format!(
            "TLS: ssl-mode={} requires TLS, but {why}, and only the plain fallback client speaks that; \
                 move the account to caching_sha2_password, mysql_native_password or ed25519",
            config.tls.mode().name()
        )));
    }
    let peer = config.server();
    let stalled = |writing| wire::stalled(&peer, bound.limit(writing), bound.during());
    let mut opts = OptsBuilder::new()
        .user(Some(config.user.clone()))
        .pass(config.password.clone())
        .db_name(config.database.clone())
        .prefer_socket(false)
        // Known here, so connecting does not ask the server for it (a round trip
        // every short-lived process would pay). Lock statements are tiny.
        .max_allowed_packet(Some(CLIENT_MAX_PACKET))
        .tcp_keepalive_time_ms(Some(keepalive_ms(wire::KEEPALIVE_IDLE)))
        .tcp_keepalive_probe_interval_secs(Some(wire::KEEPALIVE_INTERVAL.as_secs() as u32))
        .tcp_keepalive_probe_count(Some(wire::KEEPALIVE_PROBES))
        .tcp_user_timeout_ms(Some(keepalive_ms(config.write_timeout)));
    opts = match &config.socket {
        Some(path) => opts.socket(Some(path.clone())),
        // Looked up here, within the connect's bound, for the crate's own lookup has none.
        // This path never speaks TLS, so no certificate needs the name.
        None => {
            let address = wire::addresses(config, bound.deadline())?
                .into_iter()
                .next()
                .ok_or_else(|| SessionError::lost(format!("{} resolves to no address", config.host)))?;
            opts.ip_or_hostname(Some(address.ip().to_string())).tcp_port(address.port())
        }
    };
    // What is left of the connect, for TCP and for each read and write of the handshake.
    let (read, write) = match (bound.next(false), bound.next(true)) {
        (Ok(read), Ok(write)) => (read, write),
        _ => return Err(stalled(false)),
    };
    opts = opts.tcp_connect_timeout(bound.deadline().map(|_| read)).read_timeout(Some(read)).write_timeout(Some(write));
    let conn = Conn::new(opts).map_err(|e| {
        let e = explain(session_error(e), &peer, &bound);
        SessionError { message: format!("{} (connecting through the mysql crate because {why})", e.message), ..e }
    })?;
    let bounds = Bounds { peer, read: config.read_timeout, write: config.write_timeout, applied: Applied::default() };
    Ok((conn, bounds))
}

fn keepalive_ms(d: Duration) -> u32 {
    u32::try_from(d.as_millis()).unwrap_or(u32::MAX)
}

/// Every result of a query run through the `mysql` crate.
pub(super) fn outcomes<P: mysql::prelude::Protocol>(mut result: mysql::QueryResult<'_, '_, '_, P>) -> wire::Answer {
    let mut outcomes = Vec::new();
    while let Some(mut set) = result.iter() {
        // A statement without rows has its OK packet now; reading the (absent) rows
        // moves past it.
        let (affected_rows, last_insert_id) = (set.affected_rows(), set.last_insert_id().unwrap_or(0));
        let columns = set.columns().as_ref().len();
        let rows = set
            .by_ref()
            .map(|row| {
                let row = row.map_err(session_error)?;
                let columns = row.columns();
                Ok(row.unwrap().into_iter().zip(columns.iter()).map(|(v, c)| from_mysql(v, c)).collect())
            })
            .collect::<Result<_, SessionError>>()?;
        outcomes.push(Outcome { rows, affected_rows, last_insert_id, columns });
    }
    Ok(outcomes)
}

pub(super) fn to_mysql(v: &Value) -> mysql::Value {
    match v {
        Value::Null => mysql::Value::NULL,
        Value::Int(i) => mysql::Value::Int(*i),
        Value::UInt(u) => mysql::Value::UInt(*u),
        Value::Float(f) => mysql::Value::Double(*f),
        Value::Text(s) => mysql::Value::Bytes(s.as_bytes().to_vec()),
        Value::Bytes(b) => mysql::Value::Bytes(b.clone()),
    }
}

/// A value of the crate's, as the own client reads it: temporal values as the text
/// protocol shows them (the column says DATE or DATETIME and how many fractional digits).
pub(super) fn from_mysql(v: mysql::Value, column: &mysql::Column) -> Value {
    use mysql::consts::ColumnType;
    match v {
        mysql::Value::NULL => Value::Null,
        mysql::Value::Int(i) => Value::Int(i),
        mysql::Value::UInt(u) => Value::UInt(u),
        mysql::Value::Float(f) => Value::Float(f64::from(f)),
        mysql::Value::Double(f) => Value::Float(f),
        mysql::Value::Bytes(b) => match String::from_utf8(b) {
            Ok(s) => Value::Text(s),
            Err(e) => Value::Bytes(e.into_bytes()),
        },
        mysql::Value::Date(year, month, day, hour, minute, second, micros) => {
            let date = format!("{year:04}-{month:02}-{day:02}");
            Value::Text(match column.column_type() {
                ColumnType::MYSQL_TYPE_DATE | ColumnType::MYSQL_TYPE_NEWDATE => date,
                _ => format!("{date} {hour:02}:{minute:02}:{second:02}{}", wire::fraction(micros, column.decimals())),
            })
        }
        mysql::Value::Time(negative, days, hours, minutes, seconds, micros) => {
            let sign = if negative { "-" } else { "" };
            let hours = days * 24 + u32::from(hours);
            Value::Text(format!(
                "{sign}{hours:02}:{minutes:02}:{seconds:02}{}",
                wire::fraction(micros, column.decimals())
            ))
        }
    }
}

/// The one mapping from the `mysql` crate's errors: server errors keep their number,
/// everything about the transport means the session is gone.
pub(super) fn session_error(e: mysql::Error) -> SessionError {
    match e {
        mysql::Error::MySqlError(m) => SessionError::server(m.code, m.message),
        mysql::Error::UrlError(u) => SessionError::client(u.to_string()),
        mysql::Error::DriverError(d) => SessionError::lost(d.to_string()),
        mysql::Error::IoError(io) | mysql::Error::CodecError(PacketCodecError::Io(io)) if timed_out(&io) => {
            SessionError::stalled(io.to_string())
        }
        mysql::Error::IoError(io) => SessionError::lost(io.to_string()),
        other => SessionError::lost(other.to_string()),
    }
}
