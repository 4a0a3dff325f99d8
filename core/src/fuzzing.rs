//! What the fuzz targets in `fuzz/` drive, and the regression tests replay: the own wire
//! client's whole conversation (login, the setup, a query, a prepared statement run
//! twice) against a fake server that answers with given bytes, over a real Unix socket.
//!
//! Built with the cargo feature `fuzzing` (and in the core's own tests); not part of
//! the API. The conversation drives the wire client's `Connection` itself rather
//! than a [`crate::MysqlSession`]: the session remembers per target which accounts take
//! their setup apart from the login, state that would make one input change how the next
//! is read.

use std::io::Write;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::config::Config;
use crate::deadline::Deadline;
use crate::transport::wire::{Bound, Connection, Greeting, OpenError};
use crate::value::Value;

/// The setup query, sent behind the handshake response to a server whose greeting
/// names `mysql_native_password`, on its own otherwise (as the sessions do).
pub const SETUP: &str = "SET NAMES utf8mb4; SELECT @@version, @@session.wait_timeout";
/// A text-protocol query: integers, NULL, an empty string, binary bytes.
pub const QUERY: &str = "SELECT IS_USED_LOCK('fuzz'), GET_LOCK('fuzz', 0), RELEASE_LOCK('fuzz'), NULL, '', \
                         _binary X'00FF'";
/// A prepared statement whose binary rows carry every type the client reads specially.
pub const PREPARED: &str = "SELECT ?, ? + 0, CAST(? AS DATETIME(3)), CAST(? AS TIME(6)), CAST(? AS DATE), \
                            CAST(? AS DOUBLE), CAST(? AS FLOAT), ?, CAST(7 AS UNSIGNED), NULL";

/// The values bound to [`PREPARED`].
pub fn prepared_params() -> Vec<Value> {
    vec![
        Value::from("fuzz"),
        Value::Int(-5),
        Value::from("2024-02-29 12:34:56.789"),
        Value::from("-838:59:59.5"),
        Value::from("2024-02-29"),
        Value::Float(1.5),
        Value::Float(0.25),
        Value::Bytes(vec![0, 0xFF]),
    ]
}

/// How far a conversation got before it ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Reached {
    Nothing,
    LoggedIn,
    SetUp,
    Queried,
    Prepared,
    Executed,
    Done,
}

/// The conversation with the server `config` names, each read and write bounded by
/// `timeout`: how far it got, and the error that ended it early.
pub fn converse(config: &Config, timeout: Duration) -> (Reached, Option<String>) {
    let mut reached = Reached::Nothing;
    // The connection's own bounds: connect_timeout for the connect as a whole, read and
    // write timeouts for every statement after it.
    let bounded = Config { connect_timeout: timeout, read_timeout: timeout, write_timeout: timeout, ..config.clone() };
    let error = steps(&bounded, &mut reached).err();
    (reached, error)
}

fn steps(config: &Config, reached: &mut Reached) -> Result<(), String> {
    let setup = |_: &Greeting| SETUP.to_owned();
    // As the sessions do: the connect and the setup by one deadline, every statement
    // after under its own bound.
    let connect = Bound::connect(config.connect_deadline(), config.read_timeout, config.write_timeout);
    // As the sessions do: a server that answers the pipelined setup with a further
    // authentication step is connected to again without it.
    let mut first: Option<&dyn Fn(&Greeting) -> String> = Some(&setup);
    let (mut conn, answer) = loop {
        match Connection::open(config, connect, first) {
            Ok(opened) => break opened,
            Err(OpenError::Switched) if first.is_some() => first = None,
            Err(OpenError::Failed(e)) => return Err(e.to_string()),
            Err(e) => return Err(format!("{e:?}")),
        }
    };
    *reached = Reached::LoggedIn;
    match answer {
        Some(answer) => answer,
        None => conn.query(SETUP, connect),
    }
    .map_err(|e| e.to_string())?;
    *reached = Reached::SetUp;
    let at_once = || conn_bound(config);
    conn.query(QUERY, at_once()).map_err(|e| e.to_string())?;
    *reached = Reached::Queried;
    let statement = conn.prepare(PREPARED, at_once()).map_err(|e| e.to_string())?;
    *reached = Reached::Prepared;
    let params = prepared_params();
    for _ in 0..2 {
        conn.execute(&statement, &params, at_once()).map_err(|e| e.to_string())?;
    }
    *reached = Reached::Executed;
    conn.close(statement, at_once()).map_err(|e| e.to_string())?;
    conn.query("DO 1", at_once()).map_err(|e| e.to_string())?;
    *reached = Reached::Done;
    Ok(())
}

/// The bound of a statement answered at once.
fn conn_bound(config: &Config) -> Bound {
    Bound::statement(Deadline::now(), config.read_timeout, config.write_timeout)
}

/// The conversation against a fake server that sends `server` (whatever the client
/// writes), then ends its side of the connection, and reads until the client closes:
/// every read of the client ends, at the latest at that end of the bytes.
pub fn replay(server: &[u8]) -> (Reached, Option<String>) {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let path: PathBuf = std::env::temp_dir().join(format!("mysqllock-fuzz-{}-{n}.sock", std::process::id()));
    let _ = std::fs::remove_file(&path);
    let listener = match UnixListener::bind(&path) {
        Ok(listener) => listener,
        Err(e) => return (Reached::Nothing, Some(format!("the fake server cannot listen: {e}"))),
    };
    let stop = Arc::new(AtomicBool::new(false));
    let bytes = server.to_vec();
    // Every connection (a second one follows a switch refused behind the pipelined
    // setup) is sent the same bytes.
    let server = {
        let stop = Arc::clone(&stop);
        std::thread::spawn(move || {
            while let Ok((mut peer, _)) = listener.accept() {
                if stop.load(Ordering::SeqCst) {
                    return;
                }
                let _ = peer.write_all(&bytes);
                let _ = peer.shutdown(std::net::Shutdown::Write);
                let _ = std::io::copy(&mut peer, &mut std::io::sink());
            }
        })
    };
    let config = Config {
        socket: Some(path.to_string_lossy().into_owned()),
        user: "fuzz".into(),
        password: Some("fuzz-secret".into()),
        database: Some("fuzz".into()),
        connect_timeout: Duration::from_secs(5),
        ..Config::default()
    };
    let outcome = converse(&config, Duration::from_secs(5));
    // Wakes the fake server's accept, to end.
    stop.store(true, Ordering::SeqCst);
    let _ = UnixStream::connect(&path);
    let _ = server.join();
    let _ = std::fs::remove_file(&path);
    outcome
}

/// A MariaDB 10.11 greeting naming `mysql_native_password` (packet 0) and the OK to the
/// handshake response (packet 2): what the `wire_results` target puts before its input.
pub fn mariadb_login() -> Vec<u8> {
    const CAPABILITIES: u32 = 0x1 | 0x4 | 0x8 | 0x200 | 0x2000 | 0x8000 | 0x1_0000 | 0x2_0000 | 0x4_0000 | 0x8_0000;
    let mut greeting = vec![10];
    greeting.extend_from_slice(b"5.5.5-10.11.6-MariaDB-0+deb12u1\0");
    greeting.extend_from_slice(&7u32.to_le_bytes());
    greeting.extend_from_slice(b"abcdefgh\0");
    greeting.extend_from_slice(&(CAPABILITIES as u16).to_le_bytes());
    greeting.push(45);
    greeting.extend_from_slice(&2u16.to_le_bytes());
    greeting.extend_from_slice(&((CAPABILITIES >> 16) as u16).to_le_bytes());
    greeting.push(21);
    greeting.extend_from_slice(&[0; 10]);
    greeting.extend_from_slice(b"ijklmnopqrst\0mysql_native_password\0");
    let mut out = Vec::new();
    packet(&mut out, 0, &greeting);
    packet(&mut out, 2, &[0, 0, 0, 2, 0, 0, 0]);
    out
}

/// Appends `payload` as one packet numbered `seq`.
pub fn packet(out: &mut Vec<u8>, seq: u8, payload: &[u8]) {
    out.extend_from_slice(&(payload.len() as u32).to_le_bytes()[..3]);
    out.push(seq);
    out.extend_from_slice(payload);
}

/// Every check a lock name passes before it reaches SQL, as a caller's name meets them.
pub fn lock_name(name: &str) {
    let _ = crate::name::validate_shape(name);
    let _ = crate::name::session_key(name);
    let _ = crate::name::is_portable(name);
    for charset in ["latin1", "ascii", "utf8mb3", "utf8mb4", "koi8r"] {
        let _ = crate::name::validate_for(name, &crate::name::Charset::from_mysql_name(charset));
    }
}

#[cfg(test)]
#[path = "fuzzing_tests.rs"]
mod tests;
