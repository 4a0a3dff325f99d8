//! `mysqllock` on a silent network or against a stalled server: every run ends within
//! its bound with exit 69 and says the server stopped answering; a kept-alive run whose
//! network falls silent stops its command before the TTL and exits 79, as `--lease`
//! does. And the command never sees the password.

#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

mod common;

use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::*;
use mysqllock_core::Session;
use mysqllock_tests::silence::{server_of, FreezeProxy, Stall, StalledServer};

/// `connect_timeout`, `read_timeout` and `write_timeout` of the runs under test.
const TIMEOUTS: &str = "connect_timeout=2&read_timeout=2&write_timeout=2";
/// On top of every bound: scheduling on a loaded two-core machine.
const SLACK: Duration = Duration::from_secs(3);

fn unique(tag: &str) -> String {
    unique_with("silence", tag)
}

fn init() {
    let out: Ran = mysqllock_on(&dsn(), &["init"]).output().unwrap().into();
    assert_eq!(out.code, Some(0), "init failed: {}", out.stderr);
}

/// A run that holds `name` (straight to the server) until it is dropped.
fn hold(name: &str) -> Runs {
    let mut holder = mysqllock_on(&dsn(), &["run", name, "--", "sleep", "60"]).stdout(Stdio::null()).spawn().unwrap();
    wait_until(Duration::from_secs(20), "the holder holds the lock", || {
        let out: Ran = mysqllock_on(&dsn(), &["status", name, "--json"]).output().unwrap().into();
        holder.try_wait().unwrap().is_none() && out.stdout.contains("alive")
    });
    Runs(vec![holder])
}

fn silenced(out: &Ran, took: Duration, bound: Duration, during: &str) {
    assert_eq!(out.code, Some(69), "{out:?}");
    assert!(took < bound + SLACK, "took {took:?}, bound {bound:?}: {out:?}");
    assert!(out.stderr.contains("stopped answering for") && out.stderr.contains(during), "{}", out.stderr);
}

#[test]
fn a_run_waiting_for_a_lock_on_a_frozen_network_exits_69_within_the_wait_plus_read_timeout() {
    init();
    let name = unique("wait");
    let _holder = hold(&name);
    let proxy = FreezeProxy::to(&server_of(&dsn()));
    let started = Instant::now();
    let waiter = mysqllock_on(&proxy.dsn(&dsn(), TIMEOUTS), &["run", &name, "--timeout", "5", "--", "true"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Frozen once the waiter sits in its GET_LOCK (its statement shows in the process list).
    let mut admin = test_session();
    let hex: String = name.bytes().map(|b| format!("{b:02X}")).collect();
    let sql = format!(
        "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE STATE = 'User lock' AND INFO LIKE '%{hex}%'"
    );
    wait_until(Duration::from_secs(20), "the run queues for the lock", || {
        admin.execute(&sql, &[]).unwrap().first(0).as_i64() == Some(1)
    });
    proxy.freeze();
    let out = finish(waiter, Duration::from_secs(30));
    silenced(&out, started.elapsed(), Duration::from_secs(5 + 2), "during a lock wait");
}

#[test]
fn a_run_against_a_server_that_stalls_after_the_login_exits_69_within_connect_timeout() {
    for stall in [Stall::BeforeGreeting, Stall::AfterLogin] {
        let server = StalledServer::start(stall);
        let started = Instant::now();
        let run = mysqllock_on(&server.dsn(TIMEOUTS), &["run", &unique("stall"), "--timeout", "2", "--", "true"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let out = finish(run, Duration::from_secs(30));
        silenced(&out, started.elapsed(), Duration::from_secs(2), "during the connect");
    }
}

#[test]
fn status_against_a_server_whose_greeting_it_cannot_read_exits_69_at_once_saying_so() {
    // The junk server of issue 35: the mysql crate, the core's fallback then, read its
    // greeting and waited on the silent setup; the core's own client refuses it at once.
    // A connect_timeout far above the slack: only a refusal at once ends within it.
    let server = StalledServer::start(Stall::UnknownPlugin);
    let started = Instant::now();
    let dsn = server.dsn("connect_timeout=30&read_timeout=30&write_timeout=30");
    let run = mysqllock_on(&dsn, &["status"]).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let out = finish(run, Duration::from_secs(60));
    let took = started.elapsed();
    assert_eq!(out.code, Some(69), "{out:?}");
    assert!(took < SLACK, "took {took:?}: waited on the silent server: {out:?}");
    assert!(out.stderr.contains("a greeting this client cannot read"), "{}", out.stderr);
}

#[test]
fn the_timeouts_are_options_too() {
    let server = StalledServer::start(Stall::AfterGreeting);
    let started = Instant::now();
    let args = ["--connect-timeout", "1500ms", "status"];
    let run = mysqllock_on(&server.dsn(""), &args).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let out = finish(run, Duration::from_secs(30));
    silenced(&out, started.elapsed(), Duration::from_millis(1500), "stopped answering for 1.5 s during the connect");
    let refused: Ran = mysqllock_on(&dsn(), &["--read-timeout", "0", "status"]).output().unwrap().into();
    assert_eq!(refused.code, Some(64), "{refused:?}");
    assert!(refused.stderr.contains("read_timeout"), "{}", refused.stderr);
}

#[test]
fn a_kept_alive_run_on_a_frozen_network_stops_its_command_before_the_ttl_and_exits_79() {
    init();
    let name = unique("keepalive");
    let proxy = FreezeProxy::to(&server_of(&dsn()));
    let ttl = 9;
    let mut run = mysqllock_on(
        &proxy.dsn(&dsn(), TIMEOUTS),
        // The job: a command that would outlive the TTL (`sleep 60` is its work, not a wait
        // of the test), which run must stop with SIGTERM once the lease is lost.
        &["run", &name, "--keep-alive", "--ttl", &ttl.to_string(), "--", "sh", "-c", "echo started; exec sleep 60"],
    )
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    let mut line = String::new();
    BufReader::new(run.stdout.as_mut().unwrap()).read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "started");
    proxy.freeze();
    let frozen = Instant::now();
    let out = finish(run, Duration::from_secs(60));
    assert_eq!(out.code, Some(79), "{out:?}");
    assert!(out.stderr.contains("SIGTERM"), "{}", out.stderr);
    // The command was stopped before the TTL ran out on the server, so no other node
    // could have taken the lock over while it still ran.
    assert!(frozen.elapsed() < Duration::from_secs(ttl) + SLACK, "ended {:?} after the freeze", frozen.elapsed());
}

#[test]
fn the_command_sees_the_dsn_without_its_password() {
    init();
    let dsn = dsn();
    // Nothing else in the environment carries the password (the test's own variables do).
    let out: Ran = mysqllock_on(&dsn, &["run", &unique("env"), "--", "env"])
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", NO_HOME)
        .env("MYSQLLOCK_DSN", &dsn)
        .output()
        .unwrap()
        .into();
    assert_eq!(out.code, Some(0), "{out:?}");
    let seen = out.stdout.lines().find_map(|l| l.strip_prefix("MYSQLLOCK_DSN=")).expect("MYSQLLOCK_DSN is passed on");
    let config = mysqllock_core::Config::from_url(&dsn).unwrap();
    let password = config.password.clone().filter(|p| !p.is_empty()).expect("the test DSN carries a password");
    assert!(!out.stdout.contains(&password), "the password reached the command: {seen}");
    let passed_on = mysqllock_core::Config::from_url(seen).unwrap();
    assert_eq!((passed_on.user, passed_on.host, passed_on.port), (config.user, config.host, config.port));
    assert_eq!(passed_on.password, None);
}
