//! The `mysql` crate, for what the own wire client does not speak (an account on
//! another authentication plugin, a server without the 4.1 protocol): connecting, and
//! turning its results, values and errors into the core's. Built without TLS (a second
//! TLS stack and an older webpki for a path no test server's account takes any more), so
//! a mode that requires TLS is refused here rather than quietly weakened.
//!
//! The crate sets a connection's read and write timeouts once, when it connects, and
//! offers no way to change them afterwards. So every read may block for
//! [`Config::read_bound_set_once`]: `read_timeout` plus
//! [`LONGEST_WAIT_PER_STATEMENT`](crate::LONGEST_WAIT_PER_STATEMENT), the
//! longest wait one statement may ask the server for here (a longer lock wait is split
//! into several statements), and the connect is bounded by
//! `connect_timeout` for TCP and by that same bound for each read of the handshake.

use std::time::{Duration, Instant};

use mysql::{Conn, OptsBuilder};

use super::wire::{self, During};
use crate::config::Config;
use crate::error::SessionError;
use crate::value::{Outcome, Value};

/// The largest packet this client sends or accepts: far above any lock statement.
const CLIENT_MAX_PACKET: usize = 4 * 1024 * 1024;

/// A crate connection's bounds, and what it is doing, for the message when one runs out.
pub(super) struct Bounds {
    peer: String,
    read: Duration,
    write: Duration,
    during: During,
}

impl Bounds {
    pub fn connected(&mut self) {
        self.during = During::Statement;
    }

    pub fn expect(&mut self, wait: Duration) {
        if self.during != During::Connect {
            self.during = if wait.is_zero() { During::Statement } else { During::Wait(wait) };
        }
    }

    /// `answer`, with a bound that ran out said as the own client says it.
    pub fn answer<T>(&self, answer: Result<T, SessionError>) -> Result<T, SessionError> {
        answer.map_err(|e| self.explain(e))
    }

    fn explain(&self, e: SessionError) -> SessionError {
        if !e.stalled {
            return e;
        }
        // The crate's error does not say whether it was reading or writing.
        let limit = if e.message.contains("write") { self.write } else { self.read };
        wire::stalled(&self.peer, limit, self.during)
    }
}

/// Connects through the crate, because of `why` (said in its errors).
pub(super) fn connect(config: &Config, started: Instant, why: &str) -> Result<(Conn, Bounds), SessionError> {
    if config.tls.mode().requires_tls() {
        return Err(SessionError::lost(format!(
            "TLS: ssl-mode={} requires TLS, but {why}, and only the plain fallback client speaks that; \
                 move the account to caching_sha2_password, mysql_native_password or ed25519",
            config.tls.mode().name()
        )));
    }
    let bounds = Bounds {
        peer: config.server(),
        read: config.read_bound_set_once(),
        write: config.write_timeout,
        during: During::Connect,
    };
    let mut opts = OptsBuilder::new()
        .user(Some(config.user.clone()))
        .pass(config.password.clone())
        .db_name(config.database.clone())
        .tcp_connect_timeout(
            Some(config.connect_timeout.saturating_sub(started.elapsed()))
                .filter(|_| !config.connect_timeout.is_zero())
                .map(|left| left.max(Duration::from_millis(1))),
        )
        .prefer_socket(false)
        // Known here, so connecting does not ask the server for it (a round trip
        // every short-lived process would pay). Lock statements are tiny.
        .max_allowed_packet(Some(CLIENT_MAX_PACKET))
        .read_timeout(Some(bounds.read))
        .write_timeout(Some(bounds.write))
        .tcp_keepalive_time_ms(Some(keepalive_ms(wire::KEEPALIVE_IDLE)))
        .tcp_keepalive_probe_interval_secs(Some(wire::KEEPALIVE_INTERVAL.as_secs() as u32))
        .tcp_keepalive_probe_count(Some(wire::KEEPALIVE_PROBES))
        .tcp_user_timeout_ms(Some(keepalive_ms(bounds.write)));
    opts = match &config.socket {
        Some(path) => opts.socket(Some(path.clone())),
        // Looked up here, within the connect's bound, for the crate's own lookup has none.
        // This path never speaks TLS, so no certificate needs the name.
        None => {
            let address = wire::addresses(config, started)?
                .into_iter()
                .next()
                .ok_or_else(|| SessionError::lost(format!("{} resolves to no address", config.host)))?;
            opts.ip_or_hostname(Some(address.ip().to_string())).tcp_port(address.port())
        }
    };
    let conn = Conn::new(opts).map_err(|e| {
        let e = bounds.explain(session_error(e));
        SessionError { message: format!("{} (connecting through the mysql crate because {why})", e.message), ..e }
    })?;
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
        let rows = set
            .by_ref()
            .map(|row| {
                let row = row.map_err(session_error)?;
                let columns = row.columns();
                Ok(row.unwrap().into_iter().zip(columns.iter()).map(|(v, c)| from_mysql(v, c)).collect())
            })
            .collect::<Result<_, SessionError>>()?;
        outcomes.push(Outcome { rows, affected_rows, last_insert_id });
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
        mysql::Error::IoError(io)
            if matches!(io.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) =>
        {
            SessionError::stalled(io.to_string())
        }
        mysql::Error::IoError(io) => SessionError::lost(io.to_string()),
        other => SessionError::lost(other.to_string()),
    }
}
