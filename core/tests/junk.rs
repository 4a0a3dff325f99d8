//! Junk servers that fall silent: seeded fake servers whose greeting has a few bytes
//! altered (the auth plugin's name, the auth data length), that accept whatever login the
//! client sends and then say nothing more, with the socket open. Every connect must end,
//! with an error, within its own bounds: a run past its deadline is a hang, and fails the
//! test as a crash would.
//!
//! Issue 35 found 2 of 200 such servers hanging `mysqllock status` (the altered greeting
//! sent the core to the `mysql` crate, whose setup read waited `read_timeout` + 10 s per
//! read, not the connect's deadline; the crate is no fallback any more, and a greeting the
//! core's own client cannot read now ends the connect at once). No database needed: each
//! run has a server of its own.
#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use mysqllock_core::{Config, MysqlSession, Session};

const SEEDS: u64 = 200;
/// Runs at a time.
const PARALLEL: u64 = 8;
/// The client's `connect_timeout`, `read_timeout` and `write_timeout`.
const BOUND: Duration = Duration::from_millis(400);
/// How long a run may take: the connect's bound and a statement's (a greeting the
/// client reads may let the login through; the statement after it then waits its own
/// bound), and scheduling on a loaded two-core machine.
const RUN_DEADLINE: Duration = Duration::from_secs(4);

/// A small deterministic generator (xorshift64*), so a failing seed can be rerun.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

const PLUGIN: &[u8] = b"mysql_native_password";

/// A MariaDB 10.11 greeting with `seed`'s alterations: the auth data length set to any
/// byte or nudged by a few, and one to three bytes of the plugin's name replaced.
fn junk_greeting(seed: u64) -> Vec<u8> {
    let mut rng = Rng::new(seed);
    // LONG_PASSWORD, LONG_FLAG, CONNECT_WITH_DB, PROTOCOL_41, TRANSACTIONS,
    // SECURE_CONNECTION, MULTI_STATEMENTS, MULTI_RESULTS, PS_MULTI_RESULTS, PLUGIN_AUTH.
    let caps: u32 = 0x1 | 0x4 | 0x8 | 0x200 | 0x2000 | 0x8000 | 0x1_0000 | 0x2_0000 | 0x4_0000 | 0x8_0000;
    let mut g = vec![10];
    g.extend_from_slice(b"5.5.5-10.11.6-MariaDB\0");
    g.extend_from_slice(&7u32.to_le_bytes());
    g.extend_from_slice(b"abcdefgh\0");
    g.extend_from_slice(&(caps as u16).to_le_bytes());
    g.push(45);
    g.extend_from_slice(&2u16.to_le_bytes());
    g.extend_from_slice(&((caps >> 16) as u16).to_le_bytes());
    g.push(match rng.below(2) {
        0 => rng.below(256) as u8,
        _ => (21 + rng.below(7) as i64 - 3) as u8,
    });
    g.extend_from_slice(&[0; 10]);
    g.extend_from_slice(b"ijklmnopqrst\0");
    let plugin = g.len();
    g.extend_from_slice(PLUGIN);
    g.push(0);
    for _ in 0..1 + rng.below(3) {
        let at = plugin + rng.below(PLUGIN.len() as u64) as usize;
        g[at] = rng.below(256) as u8;
    }
    g
}

fn packet(seq: u8, payload: &[u8]) -> Vec<u8> {
    let mut out = (payload.len() as u32).to_le_bytes()[..3].to_vec();
    out.push(seq);
    out.extend_from_slice(payload);
    out
}

/// One packet from the client: its sequence number.
fn read_packet(stream: &mut TcpStream) -> Option<u8> {
    let mut header = [0u8; 4];
    stream.read_exact(&mut header).ok()?;
    let len = usize::from(header[0]) | usize::from(header[1]) << 8 | usize::from(header[2]) << 16;
    let mut payload = vec![0; len];
    stream.read_exact(&mut payload).ok()?;
    Some(header[3])
}

/// The junk server of one seed on 127.0.0.1: greets, answers each packet of a login
/// with OK, and from the first command on says nothing, keeping every connection open
/// until dropped.
struct JunkServer {
    port: u16,
    closing: Arc<AtomicBool>,
    open: Arc<Mutex<Vec<TcpStream>>>,
}

impl JunkServer {
    fn start(seed: u64) -> JunkServer {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let closing = Arc::new(AtomicBool::new(false));
        let open = Arc::new(Mutex::new(Vec::new()));
        let (c, o) = (closing.clone(), open.clone());
        let greeting = junk_greeting(seed);
        thread::spawn(move || {
            for client in listener.incoming() {
                if c.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(mut client) = client else { continue };
                if let Ok(clone) = client.try_clone() {
                    o.lock().unwrap().push(clone);
                }
                let greeting = greeting.clone();
                thread::spawn(move || {
                    let _ = client.write_all(&packet(0, &greeting));
                    while let Some(seq) = read_packet(&mut client) {
                        // OK: no rows affected, no insert id, autocommit, no warnings.
                        if seq == 0 || client.write_all(&packet(seq.wrapping_add(1), &[0, 0, 0, 2, 0, 0, 0])).is_err() {
                            break;
                        }
                    }
                    let mut sink = [0u8; 4096];
                    while matches!(client.read(&mut sink), Ok(n) if n > 0) {}
                });
            }
        });
        JunkServer { port, closing, open }
    }
}

impl Drop for JunkServer {
    /// Ends every connection (a client still waiting on one returns) and the accepting
    /// thread (woken by a connection of its own).
    fn drop(&mut self) {
        self.closing.store(true, Ordering::SeqCst);
        for stream in self.open.lock().unwrap().drain(..) {
            let _ = stream.shutdown(Shutdown::Both);
        }
        let _ = TcpStream::connect(("127.0.0.1", self.port));
    }
}

/// How one run ended.
#[derive(Debug)]
enum Run {
    /// An error within the run's deadline, after this long.
    Ended(Duration),
    /// Connected and ran a statement: a junk server cannot answer one.
    Answered,
    /// Still waiting at the deadline.
    Hung,
}

/// Connects to the junk server of `seed` and runs a statement.
fn run(seed: u64) -> Run {
    let server = JunkServer::start(seed);
    let config = Config {
        host: "127.0.0.1".into(),
        port: server.port,
        user: "u".into(),
        password: Some("p".into()),
        database: Some("db".into()),
        connect_timeout: BOUND,
        read_timeout: BOUND,
        write_timeout: BOUND,
        ..Config::default()
    };
    let (done, ended) = mpsc::channel();
    let started = Instant::now();
    let client = thread::spawn(move || {
        let outcome = MysqlSession::connect(&config)
            .map_err(|e| e.to_string())
            .and_then(|mut session| session.execute("SELECT 1", &[]).map(|_| ()).map_err(|e| e.to_string()));
        let _ = done.send(outcome);
    });
    let verdict = match ended.recv_timeout(RUN_DEADLINE) {
        Ok(Ok(())) => Run::Answered,
        Ok(Err(_)) => Run::Ended(started.elapsed()),
        Err(_) => Run::Hung,
    };
    // Ends a hung client's wait: its connection closes under it.
    drop(server);
    if !matches!(verdict, Run::Hung) {
        client.join().unwrap();
    }
    verdict
}

#[test]
fn every_junk_server_that_falls_silent_ends_the_connect_within_its_bounds() {
    let started = Instant::now();
    let runs: Arc<Mutex<Vec<(u64, Run)>>> = Arc::default();
    let workers: Vec<_> = (0..PARALLEL)
        .map(|worker| {
            let runs = runs.clone();
            thread::spawn(move || {
                for seed in (worker..SEEDS).step_by(PARALLEL as usize) {
                    let outcome = run(seed);
                    runs.lock().unwrap().push((seed, outcome));
                }
            })
        })
        .collect();
    for worker in workers {
        worker.join().unwrap();
    }
    let runs = runs.lock().unwrap();
    let hung: Vec<u64> = runs.iter().filter(|(_, r)| matches!(r, Run::Hung)).map(|(s, _)| *s).collect();
    let answered: Vec<u64> = runs.iter().filter(|(_, r)| matches!(r, Run::Answered)).map(|(s, _)| *s).collect();
    let longest = runs.iter().filter_map(|(_, r)| if let Run::Ended(d) = r { Some(*d) } else { None }).max();
    println!(
        "junk servers: {SEEDS} seeds in {:.1} s, bounds {BOUND:?}: {} ended with an error (the longest after {longest:?}), \
         {} hung past {RUN_DEADLINE:?} (seeds {hung:?})",
        started.elapsed().as_secs_f64(),
        runs.len() - hung.len() - answered.len(),
        hung.len()
    );
    assert_eq!(runs.len() as u64, SEEDS);
    assert!(answered.is_empty(), "a junk server answered a statement: seeds {answered:?}");
    assert!(hung.is_empty(), "connects that did not end within their bounds: seeds {hung:?}");
}
