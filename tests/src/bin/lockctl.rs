//! A lock holder driven over stdin, so scenario tests can script several OS processes
//! (and stop, kill or resume them) while they hold locks.
//!
//! Commands, one per line: `acquire NAME TIMEOUT TTL`, `release NAME`,
//! `assert NAME MIN`, `remaining NAME`, `id`, `exit`. Every command answers one line:
//! `ok [value]` or `err <kind> <message>`, where kind is timeout, not-held,
//! ttl-too-short, already-held, invalid, connection, other.

use std::io::{BufRead, Write};

use mysqllock_core::{Config, Error, NativeLocker};

fn kind(e: &Error) -> &'static str {
    match e {
        e if e.is_timeout() => "timeout",
        e if e.is_not_held() => "not-held",
        e if e.is_ttl_too_short() => "ttl-too-short",
        e if e.is_already_held() => "already-held",
        e if e.is_invalid_argument() => "invalid",
        e if e.is_connection() => "connection",
        _ => "other",
    }
}

fn main() {
    let dsn = std::env::var("MYSQLLOCK_TEST_DSN").expect("MYSQLLOCK_TEST_DSN must be set");
    let mut locker = NativeLocker::from_config(Config::from_url(&dsn).expect("bad MYSQLLOCK_TEST_DSN"));
    let stdin = std::io::stdin();
    let mut out = std::io::stdout();
    for line in stdin.lock().lines() {
        let Ok(line) = line else { break };
        let words: Vec<&str> = line.split(' ').collect();
        let num = |i: usize| words.get(i).and_then(|w| w.parse::<f64>().ok()).unwrap_or(f64::NAN);
        let name = words.get(1).map(|n| n.replace("%20", " ")).unwrap_or_default();
        let reply = match words[0] {
            "acquire" => locker.acquire(&name, num(2), num(3)).map(|l| l.connection_id.to_string()),
            "release" => locker.release(&name).map(|()| String::new()),
            "assert" => locker.assert_ttl(&name, num(2)).map(|r| format!("{r:.3}")),
            "remaining" => locker.remaining_ttl(&name).map(|r| format!("{r:.3}")),
            "id" => locker.connection_id().map(|id| id.to_string()),
            "exit" => break,
            other => Ok(format!("unknown command {other}")),
        };
        let text = match reply {
            Ok(v) => format!("ok {v}"),
            Err(e) => format!("err {} {}", kind(&e), e),
        };
        if writeln!(out, "{}", text.trim_end()).and_then(|()| out.flush()).is_err() {
            break;
        }
    }
}
