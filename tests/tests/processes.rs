//! Scenarios with several OS processes holding, waiting, dying and hanging.

#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

use std::time::{Duration, Instant};

use mysqllock_core::{Config, MysqlSession, NativeLocker, Session};
use mysqllock_tests::{dsn, eventually, queued_on_get_lock, unique, Holder};

const LOCKCTL: &str = env!("CARGO_BIN_EXE_lockctl");

fn holder() -> Holder {
    Holder::spawn(LOCKCTL, &dsn())
}

fn inspector() -> MysqlSession {
    MysqlSession::connect(&Config::from_url(&dsn()).unwrap()).unwrap()
}

fn init() {
    NativeLocker::from_config(Config::from_url(&dsn()).unwrap()).init_table().unwrap();
}

fn session_exists(id: &str) -> bool {
    let out = inspector()
        .execute(
            "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = ?",
            &[id.parse::<u64>().unwrap().into()],
        )
        .unwrap();
    out.first(0).as_i64() == Some(1)
}

#[test]
fn process_blocked_in_acquire_gets_the_lock_within_milliseconds_of_release() {
    init();
    let name = unique("p-handoff");
    let (mut a, mut b) = (holder(), holder());
    assert!(a.ask(&format!("acquire {name} 0 60")).starts_with("ok"));
    let b_id = b.ask("id").trim_start_matches("ok ").parse::<u64>().unwrap();
    b.send(&format!("acquire {name} 30 60"));
    assert!(eventually(Duration::from_secs(20), || queued_on_get_lock(b_id)), "b never queued for the lock");
    assert_eq!(a.ask(&format!("release {name}")), "ok");
    let released = Instant::now();
    let answer = b.answer();
    let handoff = released.elapsed();
    assert!(answer.starts_with("ok"), "{answer}");
    assert!(handoff < Duration::from_millis(300), "hand-off took {handoff:?}");
}

#[test]
fn holder_killed_with_sigkill_is_replaced_at_once() {
    init();
    let name = unique("p-kill9");
    let (mut a, mut b) = (holder(), holder());
    let a_id = a.ask(&format!("acquire {name} 0 300"));
    assert!(a_id.starts_with("ok"), "{a_id}");
    a.signal(libc::SIGKILL);
    let id = a_id.trim_start_matches("ok ").to_owned();
    assert!(eventually(Duration::from_secs(20), || !session_exists(&id)), "server did not notice the death");
    let start = Instant::now();
    let answer = b.ask(&format!("acquire {name} 0 60"));
    assert!(answer.starts_with("ok"), "{answer}");
    assert!(start.elapsed() < Duration::from_secs(1), "waited {:?} (TTL was 300 s)", start.elapsed());
}

#[test]
fn holder_stopped_past_its_ttl_loses_the_lock_and_learns_it_on_resume() {
    init();
    let name = unique("p-sigstop");
    let (mut a, mut b) = (holder(), holder());
    let a_id = a.ask(&format!("acquire {name} 0 2"));
    assert!(a_id.starts_with("ok"), "{a_id}");
    let a_id = a_id.trim_start_matches("ok ").to_owned();
    a.signal(libc::SIGSTOP);
    let start = Instant::now();
    let answer = b.ask(&format!("acquire {name} 15 60"));
    let waited = start.elapsed();
    assert!(answer.starts_with("ok"), "{answer}");
    assert!(waited >= Duration::from_millis(1500), "taken before the TTL passed: {waited:?}");
    assert!(waited < Duration::from_secs(2 + 4), "took {waited:?}");
    assert!(eventually(Duration::from_secs(20), || !session_exists(&a_id)), "stopped holder's session was not killed");
    a.signal(libc::SIGCONT);
    let assert = a.ask(&format!("assert {name} 0"));
    assert!(assert.starts_with("err not-held"), "{assert}");
    let release = a.ask(&format!("release {name}"));
    assert!(release.starts_with("err not-held"), "{release}");
    assert_eq!(b.ask(&format!("assert {name} 30")).split(' ').next(), Some("ok"), "the new holder keeps it");
}

#[test]
fn dropped_connection_frees_the_lock_at_once() {
    init();
    let name = unique("p-drop");
    let (mut a, mut b) = (holder(), holder());
    let a_id = a.ask(&format!("acquire {name} 0 300"));
    let id: u64 = a_id.trim_start_matches("ok ").parse().unwrap();
    inspector().kill(id).unwrap();
    let answer = b.ask(&format!("acquire {name} 2 60"));
    assert!(answer.starts_with("ok"), "{answer}");
    let release = a.ask(&format!("release {name}"));
    assert!(release.starts_with("err not-held"), "{release}");
}

#[test]
fn case_and_trailing_space_variants_never_have_two_holders() {
    init();
    let name = unique("p-Case");
    let (mut a, mut b) = (holder(), holder());
    assert!(a.ask(&format!("acquire {name} 0 60")).starts_with("ok"));
    for variant in [name.to_lowercase(), name.to_uppercase(), format!("{name}%20")] {
        let answer = b.ask(&format!("acquire {variant} 0.3 60"));
        assert!(answer.starts_with("err timeout"), "{variant:?}: {answer}");
    }
    assert!(a.ask(&format!("assert {name} 50")).starts_with("ok"), "the holder must keep its lock");
    assert_eq!(a.ask(&format!("release {name}")), "ok");
    assert!(b.ask(&format!("acquire {} 0 60", name.to_lowercase())).starts_with("ok"));
    let answer = a.ask(&format!("acquire {name} 0.3 60"));
    assert!(answer.starts_with("err timeout"), "{answer}");
}

/// Several processes hammer one name; each records when it believed it held the lock.
/// No two intervals may overlap.
#[test]
fn contending_processes_never_overlap() {
    init();
    let name = unique("p-contend");
    let workers: Vec<_> = (0..4)
        .map(|_| {
            let name = name.clone();
            std::thread::spawn(move || {
                let mut h = holder();
                let mut intervals = Vec::new();
                let end = Instant::now() + Duration::from_secs(4);
                while Instant::now() < end {
                    if h.ask(&format!("acquire {name} 5 30")).starts_with("ok") {
                        let start = std::time::SystemTime::now();
                        // The behaviour under test: the holder works 5 ms inside its section.
                        std::thread::sleep(Duration::from_millis(5));
                        let stop = std::time::SystemTime::now();
                        assert_eq!(h.ask(&format!("release {name}")), "ok");
                        intervals.push((start, stop));
                    }
                }
                intervals
            })
        })
        .collect();
    let mut all: Vec<_> = workers.into_iter().flat_map(|w| w.join().unwrap()).collect();
    all.sort();
    eprintln!("4 processes, 4 s: {} acquisitions", all.len());
    assert!(all.len() >= 20, "too little progress: {} acquisitions", all.len());
    for pair in all.windows(2) {
        assert!(pair[0].1 <= pair[1].0, "two holders overlapped: {pair:?}");
    }
}
