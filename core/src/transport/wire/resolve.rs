//! Host names looked up within the connect's bound.
//!
//! The system's resolver (`getaddrinfo`) takes no deadline: with a name server that
//! drops queries it retries on its own clock (`resolv.conf`'s timeout × attempts × name
//! servers, easily 30 s and more), and the connect would wait that long before its
//! `connect_timeout` even starts to count. So a name is looked up on a thread of its own
//! and waited for no longer than what is left of `connect_timeout`. A lookup that runs
//! out is abandoned, not cancelled (the resolver cannot be interrupted): its thread ends
//! when the resolver gives up, and its answer goes nowhere.
//!
//! An address written as such (`127.0.0.1`, `::1`) needs no lookup and no thread.

use std::io;
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use crate::deadline::Deadline;

/// How a lookup ended without addresses.
#[derive(Debug)]
pub(super) enum Unresolved {
    /// The resolver's own error (no such name, no network).
    Failed(io::Error),
    /// No answer by the deadline made from this span.
    TimedOut(Duration),
}

/// The addresses of `host:port`, by `deadline` (none: as long as the resolver takes).
pub(super) fn resolve(host: &str, port: u16, deadline: Option<Deadline>) -> Result<Vec<SocketAddr>, Unresolved> {
    if let Ok(ip) = host.parse::<IpAddr>() {
        return Ok(vec![SocketAddr::new(ip, port)]);
    }
    let host = host.to_owned();
    let lookup = move || (host.as_str(), port).to_socket_addrs().map(Iterator::collect);
    match deadline {
        None => lookup().map_err(Unresolved::Failed),
        Some(deadline) => within(deadline, lookup),
    }
}

/// Runs `lookup` on a thread of its own and waits for its answer until `deadline`.
fn within(
    deadline: Deadline,
    lookup: impl FnOnce() -> io::Result<Vec<SocketAddr>> + Send + 'static,
) -> Result<Vec<SocketAddr>, Unresolved> {
    let (answer, answered) = mpsc::sync_channel(1);
    thread::Builder::new()
        .name("mysqllock-resolve".into())
        // The answer is dropped when nobody waits for it any more.
        .spawn(move || drop(answer.send(lookup())))
        .map_err(|e| Unresolved::Failed(io::Error::new(e.kind(), format!("starting the host name lookup: {e}"))))?;
    match answered.recv_timeout(deadline.left()) {
        Ok(addresses) => addresses.map_err(Unresolved::Failed),
        Err(mpsc::RecvTimeoutError::Timeout) => Err(Unresolved::TimedOut(deadline.budget())),
        Err(mpsc::RecvTimeoutError::Disconnected) => {
            Err(Unresolved::Failed(io::Error::other("the host name lookup ended without an answer")))
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use super::*;

    #[test]
    fn an_address_is_taken_as_written() {
        let addresses = resolve("127.0.0.1", 3306, Some(Deadline::now())).unwrap();
        assert_eq!(addresses, vec!["127.0.0.1:3306".parse().unwrap()]);
        assert_eq!(resolve("::1", 1, Some(Deadline::now())).unwrap(), vec!["[::1]:1".parse().unwrap()]);
    }

    #[test]
    fn a_lookup_that_never_answers_is_given_up_at_the_limit() {
        // A resolver stuck on a silent name server, as far as the caller can tell: it
        // answers (no addresses) only after 10 s, so a wait past the limit shows as Ok.
        let (_never, stuck) = mpsc::channel::<()>();
        let started = Instant::now();
        let outcome = within(Deadline::after(Duration::from_millis(200)), move || {
            let _ = stuck.recv_timeout(Duration::from_secs(10));
            Ok(Vec::new())
        });
        assert!(
            matches!(outcome, Err(Unresolved::TimedOut(limit)) if limit == Duration::from_millis(200)),
            "{outcome:?}"
        );
        assert!(started.elapsed() < Duration::from_secs(5), "waited {:?}", started.elapsed());
    }

    #[test]
    fn a_lookup_within_the_limit_gives_its_addresses() {
        let addresses = resolve("localhost", 3306, Some(Deadline::after(Duration::from_secs(20)))).unwrap();
        assert!(addresses.iter().all(|a| a.ip().is_loopback() && a.port() == 3306), "{addresses:?}");
        assert!(!addresses.is_empty());
    }

    #[test]
    fn the_resolvers_own_error_is_passed_on() {
        let outcome = within(Deadline::after(Duration::from_secs(20)), || {
            Err(io::Error::new(io::ErrorKind::NotFound, "no such host"))
        });
        match outcome {
            Err(Unresolved::Failed(e)) => assert_eq!(e.to_string(), "no such host"),
            other => panic!("expected the resolver's error, got {other:?}"),
        }
    }
}
