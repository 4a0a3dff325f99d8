//! Hostile bytes from a real server: a TCP relay between the client and the test server
//! that mangles what the server sends (a flipped bit, a stream cut short, bytes
//! repeated, dropped or inserted), seeded, hundreds of runs. Each run connects, takes
//! and releases a session lock and a lease (twice, so statements also run prepared), and
//! must end with a result or an error: never a panic, never an allocation sized by a
//! length the server claimed, and never later than its bound.
//!
//! The client runs with 1 s connect, read and write timeouts. A run it does not end by
//! itself within the relay's bound is ended by the relay closing the connection (as a
//! dead peer would), the client must then return at once, and the run fails the test: a
//! wait the client did not bound.
#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use mysqllock_core::{Config, NativeLocker, SslMode};

/// The largest single allocation made while the test runs.
struct Measured;

static LARGEST: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call is passed on to the system allocator unchanged.
unsafe impl GlobalAlloc for Measured {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LARGEST.fetch_max(layout.size(), Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LARGEST.fetch_max(new_size, Ordering::Relaxed);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Measured = Measured;

const RUNS: u64 = 300;
/// Runs at a time.
const PARALLEL: u64 = 4;
/// How long a run may take before the relay ends it: the client's own bounds (1 s to
/// connect, 1 s a read or write beyond the 0.5 s lock waits; a session lost once is
/// connected again) fit with room, so a run the relay has to end is a wait the client
/// failed to bound: a hang, which fails the test as a crash does.
const RUN_BOUND: Duration = Duration::from_secs(10);
/// How soon a client must return once the relay closed its connection.
const AFTER_CLOSE: Duration = Duration::from_secs(2);
/// No allocation of the client may approach what a mangled length claims (up to 16 MiB
/// a packet, 2^64 a length-encoded integer); the real answers are a few KiB. The ceiling
/// was set above the `mysql` crate's fixed 4 MiB read buffer, the largest allocation of a
/// clean run while the crate was the core's fallback (measured with a backtrace); without
/// it the ceiling could come down, once measured again.
const LARGEST_ALLOWED: usize = 8 * 1024 * 1024;

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

/// What happens to the server's bytes at one offset of its stream.
#[derive(Debug, Clone, Copy)]
enum Mangle {
    /// The clean run that measures the stream.
    Nothing,
    FlipBit {
        at: u64,
        bit: u8,
    },
    CutAt {
        at: u64,
    },
    Repeat {
        at: u64,
        len: u64,
    },
    Drop {
        at: u64,
        len: u64,
    },
    Insert {
        at: u64,
        len: u64,
    },
    SetByte {
        at: u64,
        value: u8,
    },
}

impl Mangle {
    fn pick(rng: &mut Rng, span: u64) -> Mangle {
        let at = rng.below(span);
        match rng.below(6) {
            0 => Mangle::FlipBit { at, bit: rng.below(8) as u8 },
            1 => Mangle::CutAt { at },
            2 => Mangle::Repeat { at, len: 1 + rng.below(64) },
            3 => Mangle::Drop { at, len: 1 + rng.below(8) },
            4 => Mangle::Insert { at, len: 1 + rng.below(16) },
            // 0xFB (NULL), 0xFC-0xFE (long lengths), 0xFF (error), 0x00 (OK), or any.
            _ => Mangle::SetByte {
                at,
                value: [0xFB, 0xFC, 0xFD, 0xFE, 0xFF, 0x00, rng.below(256) as u8][rng.below(7) as usize],
            },
        }
    }
}

/// Passes `server`'s bytes to `client` with `mangle` applied at its offset (counted
/// over the whole stream). Returns when either side ends.
fn pump_mangled(mut server: TcpStream, mut client: TcpStream, mangle: Mangle, rng: &mut Rng, passed: &AtomicU64) {
    let mut offset = 0u64;
    let mut buf = [0u8; 8192];
    loop {
        let n = match server.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let mut chunk = buf[..n].to_vec();
        let end = offset + n as u64;
        let mut cut = false;
        let inside = |at: u64| at >= offset && at < end;
        match mangle {
            Mangle::FlipBit { at, bit } if inside(at) => chunk[(at - offset) as usize] ^= 1 << bit,
            Mangle::SetByte { at, value } if inside(at) => chunk[(at - offset) as usize] = value,
            Mangle::CutAt { at } if inside(at) => {
                chunk.truncate((at - offset) as usize);
                cut = true;
            }
            Mangle::Repeat { at, len } if inside(at) => {
                let from = (at - offset) as usize;
                let copy = chunk[from..(from + len as usize).min(n)].to_vec();
                chunk.splice(from..from, copy);
            }
            Mangle::Drop { at, len } if inside(at) => {
                let from = (at - offset) as usize;
                chunk.drain(from..(from + len as usize).min(n));
            }
            Mangle::Insert { at, len } if inside(at) => {
                let from = (at - offset) as usize;
                let noise: Vec<u8> = (0..len).map(|_| rng.below(256) as u8).collect();
                chunk.splice(from..from, noise);
            }
            _ => {}
        }
        offset = end;
        passed.fetch_add(chunk.len() as u64, Ordering::Relaxed);
        if client.write_all(&chunk).is_err() || cut {
            break;
        }
    }
    let _ = client.shutdown(Shutdown::Both);
    let _ = server.shutdown(Shutdown::Both);
}

/// A relay on a free local port to `server`, mangling each connection's server bytes
/// as `seed` says (none when `span` is 0), counting them in `passed`, until `stop`; it
/// closes every connection when `stop` is set.
fn start_relay(
    server: String,
    seed: u64,
    span: u64,
    stop: Arc<AtomicBool>,
    passed: Arc<AtomicU64>,
) -> (u16, std::thread::JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let handle = std::thread::spawn(move || {
        let mut rng = Rng::new(seed);
        let mut open: Vec<TcpStream> = Vec::new();
        let mut pumps = Vec::new();
        while !stop.load(Ordering::SeqCst) {
            match listener.accept() {
                Ok((client, _)) => {
                    client.set_nonblocking(false).unwrap();
                    let Ok(upstream) = TcpStream::connect(&server) else { break };
                    let mangle = if span == 0 { Mangle::Nothing } else { Mangle::pick(&mut rng, span) };
                    let passed = Arc::clone(&passed);
                    let mut pump_rng = Rng::new(rng.next());
                    open.push(client.try_clone().unwrap());
                    open.push(upstream.try_clone().unwrap());
                    let (mut c2s_from, mut c2s_to) = (client.try_clone().unwrap(), upstream.try_clone().unwrap());
                    pumps.push(std::thread::spawn(move || {
                        let _ = std::io::copy(&mut c2s_from, &mut c2s_to);
                        let _ = c2s_to.shutdown(Shutdown::Write);
                    }));
                    pumps.push(std::thread::spawn(move || {
                        pump_mangled(upstream, client, mangle, &mut pump_rng, &passed)
                    }));
                }
                // The relay's own poll for connections and for its stop.
                Err(_) => std::thread::sleep(Duration::from_millis(1)),
            }
        }
        for stream in open {
            let _ = stream.shutdown(Shutdown::Both);
        }
        for pump in pumps {
            let _ = pump.join();
        }
    });
    (port, handle)
}

/// What the client does in one run: connect, a session lock, a lease, each taken,
/// looked at and released twice (the second time prepared).
fn lock_calls(config: Config, name: &str) -> Result<(), mysqllock_core::Error> {
    let mut locker = NativeLocker::from_config(config);
    for _ in 0..2 {
        locker.lock_session(name, 0.5)?;
        locker.session_lock_holder(name)?;
        locker.unlock_session(name)?;
        locker.acquire(name, 0.5, 30.0)?;
        locker.remaining_ttl(name)?;
        locker.release(name)?;
    }
    Ok(())
}

#[derive(Debug, Default)]
struct Tally {
    succeeded: u64,
    refused: u64,
    hung: u64,
    hung_seeds: Vec<u64>,
}

/// One run: the client against the relay, bounded: whether the lock calls succeeded,
/// `None` when the relay had to end the run. Err: what must fail the test.
fn run(seed: u64, server: &str, base: &Config, span: u64, passed: Arc<AtomicU64>) -> Result<Option<bool>, String> {
    let stop = Arc::new(AtomicBool::new(false));
    let (port, relay) = start_relay(server.to_owned(), seed, span, Arc::clone(&stop), passed);
    let mut config = base.clone();
    config.host = "127.0.0.1".into();
    config.port = port;
    let name = common::unique("relay");
    let (done, ended) = mpsc::channel();
    let client = std::thread::spawn(move || {
        let outcome = std::panic::catch_unwind(|| lock_calls(config, &name).is_ok());
        let _ = done.send(outcome.is_ok());
        outcome
    });
    let started = Instant::now();
    let verdict = match ended.recv_timeout(RUN_BOUND) {
        Ok(_) => None,
        Err(_) => {
            stop.store(true, Ordering::SeqCst);
            match ended.recv_timeout(AFTER_CLOSE) {
                Ok(_) => Some("hung"),
                Err(_) => {
                    return Err(format!(
                        "seed {seed}: the client did not return {AFTER_CLOSE:?} after its connection was closed"
                    ))
                }
            }
        }
    };
    stop.store(true, Ordering::SeqCst);
    relay.join().map_err(|_| format!("seed {seed}: the relay panicked"))?;
    let succeeded = match client.join() {
        Ok(Ok(succeeded)) => succeeded,
        _ => return Err(format!("seed {seed}: the client panicked ({:?} in)", started.elapsed())),
    };
    Ok(match verdict {
        Some(_) => None,
        None => Some(succeeded),
    })
}

#[test]
fn mangled_server_bytes_end_every_run_with_a_result_or_an_error() {
    let mut base = common::config();
    // The protocol's own bytes, not TLS records (which rustls checks before the client sees them).
    base.tls.mode = Some(SslMode::Disabled);
    base.connect_timeout = Duration::from_secs(1);
    // Every later read and write bounded too: a run the mangling silences ends on the
    // client's own bound, well inside the relay's.
    base.read_timeout = Duration::from_secs(1);
    base.write_timeout = Duration::from_secs(1);
    common::locker(); // the lease table exists before the relay mangles anything
    let server = format!("{}:{}", base.host, base.port);
    // The span the mangling lands in: the server's bytes of one clean run (handshake,
    // setup, each lock call's answer), measured through a relay that changes nothing.
    let clean = Arc::new(AtomicU64::new(0));
    assert_eq!(run(0, &server, &base, 0, Arc::clone(&clean)), Ok(Some(true)), "a clean run through the relay");
    let span = clean.load(Ordering::Relaxed);
    assert!(span > 100, "a clean run passed {span} bytes");
    let started = Instant::now();
    let tally = Arc::new(parking_lot::Mutex::new(Tally::default()));
    let failures = Arc::new(parking_lot::Mutex::new(Vec::<String>::new()));
    let workers: Vec<_> = (0..PARALLEL)
        .map(|worker| {
            let (tally, failures, base, server) =
                (Arc::clone(&tally), Arc::clone(&failures), base.clone(), server.clone());
            std::thread::spawn(move || {
                for seed in (worker..RUNS).step_by(PARALLEL as usize) {
                    match run(seed, &server, &base, span, Arc::default()) {
                        Ok(Some(true)) => tally.lock().succeeded += 1,
                        Ok(Some(false)) => tally.lock().refused += 1,
                        Ok(None) => {
                            let mut t = tally.lock();
                            t.hung += 1;
                            t.hung_seeds.push(seed);
                        }
                        Err(failure) => failures.lock().push(failure),
                    }
                }
            })
        })
        .collect();
    for worker in workers {
        worker.join().unwrap();
    }
    let tally = tally.lock();
    let largest = LARGEST.load(Ordering::Relaxed);
    println!(
        "relay: {RUNS} runs over {span} server bytes in {:.1} s: {} succeeded, {} ended with an error, {} hung until the relay closed \
         (seeds {:?}); largest allocation {largest} bytes",
        started.elapsed().as_secs_f64(),
        tally.succeeded,
        tally.refused,
        tally.hung,
        tally.hung_seeds
    );
    let failures = failures.lock();
    assert!(failures.is_empty(), "{failures:#?}");
    assert_eq!(tally.succeeded + tally.refused + tally.hung, RUNS);
    assert_eq!(tally.hung, 0, "runs the client did not end within its own bounds: seeds {:?}", tally.hung_seeds);
    assert!(largest < LARGEST_ALLOWED, "an allocation of {largest} bytes");
}
