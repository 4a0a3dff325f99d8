//! The `mysqllock` binary against a real server, one behaviour per test.
//!
//! The server comes from `MYSQLLOCK_TEST_DSN` (see `scripts/mariadb.sh`). Every test
//! uses its own lock names and scratch directory, so the tests run in parallel.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use mysqllock_core::{Config, MysqlSession, Session};

const BIN: &str = env!("CARGO_BIN_EXE_mysqllock");

fn dsn() -> String {
    std::env::var("MYSQLLOCK_TEST_DSN").unwrap_or_else(|_| {
        panic!(
            "MYSQLLOCK_TEST_DSN is not set: these tests need a MariaDB server. Start one with \
             `bash scripts/mariadb.sh start /tmp/db && set -a && . /tmp/db/env && set +a`"
        )
    })
}

/// The test DSN with `param` added to its query string.
fn dsn_with(param: &str) -> String {
    let dsn = dsn();
    let sep = if dsn.contains('?') { '&' } else { '?' };
    format!("{dsn}{sep}{param}")
}

/// A name no other test (or test run) uses: tag, pid, counter.
fn unique(tag: &str) -> String {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    format!("cli-{tag}-{}-{}", std::process::id(), NEXT.fetch_add(1, Ordering::SeqCst))
}

/// `mysqllock ARGS` connected to the test server through the environment.
fn mysqllock(args: &[&str]) -> Command {
    let mut cmd = Command::new(BIN);
    cmd.args(args).env("MYSQLLOCK_DSN", dsn()).stdin(Stdio::null());
    cmd
}

/// Exit code, stdout, stderr of a finished run.
struct Ran {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

impl From<Output> for Ran {
    fn from(o: Output) -> Self {
        Ran {
            code: o.status.code(),
            stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
        }
    }
}

fn run(args: &[&str]) -> Ran {
    mysqllock(args).output().expect("mysqllock starts").into()
}

/// Creates the lock table if needed; every test starts with it.
fn init() {
    let out = run(&["init"]);
    assert_eq!(out.code, Some(0), "init failed: {}", out.stderr);
}

fn status_json(name: &str) -> Vec<serde_json::Value> {
    let out = run(&["status", name, "--json"]);
    assert_eq!(out.code, Some(0), "status failed: {}", out.stderr);
    serde_json::from_str(&out.stdout).unwrap_or_else(|e| panic!("status --json is not JSON ({e}): {}", out.stdout))
}

/// Polls `status NAME` until the lock is held by a live session.
fn wait_until_held(name: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        if status_json(name).iter().any(|row| row["state"] == "alive") {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("lock {name:?} never showed up as held");
}

fn wait_for_file(path: &Path) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !path.exists() {
        assert!(Instant::now() < deadline, "{} never appeared", path.display());
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A per-test directory for marker files, removed at the end.
struct Scratch(PathBuf);

impl Scratch {
    fn new() -> Self {
        let dir = std::env::temp_dir().join(unique("scratch"));
        std::fs::create_dir_all(&dir).expect("scratch dir");
        Scratch(dir)
    }

    fn path(&self, file: &str) -> PathBuf {
        self.0.join(file)
    }

    /// The path as a `&str` for shell scripts.
    fn file(&self, file: &str) -> String {
        self.path(file).to_str().expect("utf-8 temp dir").to_owned()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A `mysqllock run NAME` whose command runs until the test creates its stop file.
struct Holder {
    child: Option<Child>,
    stop: PathBuf,
}

impl Holder {
    fn start(name: &str, extra: &[&str], scratch: &Scratch) -> Self {
        let stop = scratch.path(&format!("stop-{name}"));
        let script = format!("while [ ! -e '{}' ]; do sleep 0.05; done", stop.display());
        let mut args = vec!["run", name];
        args.extend_from_slice(extra);
        args.extend_from_slice(&["--", "sh", "-c", &script]);
        let child = mysqllock(&args).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("holder starts");
        Holder { child: Some(child), stop }
    }

    /// Lets the command end and returns how mysqllock ended.
    fn finish(mut self) -> Ran {
        std::fs::write(&self.stop, b"").expect("stop file");
        let child = self.child.take().expect("not finished yet");
        child.wait_with_output().expect("holder ends").into()
    }
}

impl Drop for Holder {
    fn drop(&mut self) {
        // A failed assertion must not leave the holder running.
        if let Some(mut child) = self.child.take() {
            let _ = std::fs::write(&self.stop, b"");
            let _ = child.wait();
        }
    }
}

#[test]
fn exit_code_of_the_command_is_passed_through() {
    init();
    let scratch = Scratch::new();
    let ran = scratch.file("ran");
    let out = run(&["run", &unique("exit"), "--", "sh", "-c", &format!("touch '{ran}'; exit 7")]);
    assert_eq!(out.code, Some(7), "{}", out.stderr);
    assert!(Path::new(&ran).exists(), "the command did not run");
}

#[test]
fn command_is_not_run_while_another_process_holds_the_lock() {
    init();
    let scratch = Scratch::new();
    let name = unique("held");
    let holder = Holder::start(&name, &[], &scratch);
    wait_until_held(&name);

    let ran = scratch.file("ran");
    let out = run(&["run", &name, "--timeout", "0", "--", "touch", &ran]);
    assert_eq!(out.code, Some(75), "{}", out.stderr);
    assert!(
        out.stderr.contains(&format!("mysqllock: lock \"{name}\" is held elsewhere; not running touch")),
        "unexpected message: {}",
        out.stderr
    );
    assert!(!Path::new(&ran).exists(), "the command ran without the lock");
    assert_eq!(holder.finish().code, Some(0));
}

#[test]
fn waits_up_to_the_timeout_and_acquires_once_the_holder_finishes() {
    init();
    let scratch = Scratch::new();
    let name = unique("wait");
    let holder = Holder::start(&name, &[], &scratch);
    wait_until_held(&name);

    let ran = scratch.file("ran");
    let mut waiter = mysqllock(&["run", &name, "--timeout", "2", "--", "touch", &ran]).spawn().expect("waiter starts");
    std::thread::sleep(Duration::from_millis(300));
    assert!(waiter.try_wait().expect("waiter status").is_none(), "the waiter gave up while the lock was held");
    assert!(!Path::new(&ran).exists(), "the waiter ran while the lock was held");

    assert_eq!(holder.finish().code, Some(0));
    assert_eq!(waiter.wait().expect("waiter ends").code(), Some(0));
    assert!(Path::new(&ran).exists(), "the waiter did not run after the release");
}

#[test]
fn lock_is_released_after_a_failing_command() {
    init();
    let name = unique("fail");
    assert_eq!(run(&["run", &name, "--", "sh", "-c", "exit 3"]).code, Some(3));
    let again = run(&["run", &name, "--timeout", "0", "--", "true"]);
    assert_eq!(again.code, Some(0), "the lock was not released: {}", again.stderr);
}

#[test]
fn missing_command_exits_127_and_releases_the_lock() {
    init();
    let name = unique("nocmd");
    let out = run(&["run", &name, "--", "/nonexistent/mysqllock-test-command"]);
    assert_eq!(out.code, Some(127), "{}", out.stderr);
    assert!(out.stderr.contains("cannot run /nonexistent/mysqllock-test-command"), "{}", out.stderr);
    assert!(status_json(&name).is_empty(), "the lock was not released");
}

#[test]
fn command_killed_by_a_signal_exits_128_plus_the_signal() {
    init();
    let out = run(&["run", &unique("killed"), "--", "sh", "-c", "kill -9 $$"]);
    assert_eq!(out.code, Some(128 + 9), "{}", out.stderr);
}

#[test]
fn init_is_idempotent() {
    let table = unique("init").replace('-', "_");
    let dsn = dsn_with(&format!("table={table}"));
    let init = || mysqllock(&["init"]).env("MYSQLLOCK_DSN", &dsn).output().map(Ran::from).expect("init runs");

    let first = init();
    assert_eq!(
        (first.code, first.stdout.trim()),
        (Some(0), format!("created table {table}").as_str()),
        "{}",
        first.stderr
    );
    let second = init();
    assert_eq!(
        (second.code, second.stdout.trim()),
        (Some(0), format!("table {table} already exists").as_str()),
        "{}",
        second.stderr
    );

    let config = Config::from_url(&dsn).expect("test DSN parses");
    let mut session = MysqlSession::connect(&config).expect("connects");
    session.execute(&format!("DROP TABLE `{table}`"), &[]).expect("drops the test table");
}

#[test]
fn status_shows_the_holder_and_is_empty_after_release() {
    init();
    let scratch = Scratch::new();
    let name = unique("status");
    let id_file = scratch.file("id");
    let stop = scratch.file("stop");
    let script = format!("echo $MYSQLLOCK_CONNECTION_ID > '{id_file}'; while [ ! -e '{stop}' ]; do sleep 0.05; done");
    let mut holder = mysqllock(&["run", &name, "--", "sh", "-c", &script]).spawn().expect("holder starts");
    wait_until_held(&name);
    wait_for_file(Path::new(&id_file));
    let id = std::fs::read_to_string(&id_file).expect("id file").trim().to_owned();

    let out = run(&["status", &name]);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(lines.len(), 2, "a header and one row expected:\n{}", out.stdout);
    assert!(lines[0].starts_with("NAME"), "no header:\n{}", out.stdout);
    let cells: Vec<&str> = lines[1].split_whitespace().collect();
    assert_eq!((cells[0], cells[1], cells[cells.len() - 1]), (name.as_str(), id.as_str(), "alive"), "{}", out.stdout);

    std::fs::write(&stop, b"").expect("stop file");
    assert_eq!(holder.wait().expect("holder ends").code(), Some(0));
    assert_eq!(run(&["status", &name]).stdout.trim(), "no locks held");
}

#[test]
fn status_json_describes_the_held_lock() {
    init();
    let scratch = Scratch::new();
    let name = unique("json");
    let holder = Holder::start(&name, &["--ttl", "120"], &scratch);
    wait_until_held(&name);

    let rows = status_json(&name);
    assert_eq!(rows.len(), 1, "{rows:?}");
    let row = &rows[0];
    assert_eq!(row["name"], name.as_str());
    assert_eq!(row["ttl"], 120);
    assert_eq!(row["state"], "alive");
    assert!(row["connection_id"].as_u64().is_some_and(|id| id > 0), "{row}");
    assert!(row["remaining_ttl"].as_f64().is_some_and(|t| t > 0.0 && t <= 121.0), "{row}");
    assert!(row["host"].is_string(), "the holder's host is visible to this user: {row}");

    assert_eq!(holder.finish().code, Some(0));
    assert_eq!(run(&["status", &name, "--json"]).stdout.trim(), "[]");
}

#[test]
fn sigterm_is_forwarded_to_the_command_and_the_lock_released() {
    init();
    let scratch = Scratch::new();
    let name = unique("sigterm");
    let ready = scratch.file("ready");
    // The marker is written once the trap is set, so the signal cannot come too early.
    let script = format!("trap 'kill $p; exit 42' TERM; sleep 30 & p=$!; touch '{ready}'; wait");
    let mut child = mysqllock(&["run", &name, "--", "sh", "-c", &script]).spawn().expect("starts");
    wait_for_file(Path::new(&ready));

    let pid = i32::try_from(child.id()).expect("pid fits");
    // SAFETY: plain kill(2) on the child this test started and has not reaped.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
    assert_eq!(child.wait().expect("ends").code(), Some(42), "the command did not get the SIGTERM");
    assert!(status_json(&name).is_empty(), "the lock was not released");
}

#[test]
fn command_is_terminated_when_mysqllock_itself_is_killed() {
    init();
    let scratch = Scratch::new();
    let name = unique("pdeathsig");
    let ready = scratch.file("ready");
    let got_term = scratch.file("got-term");
    let script = format!("trap 'touch {got_term}; exit 0' TERM; sleep 30 & p=$!; touch '{ready}'; wait $p");
    let mut child = mysqllock(&["run", &name, "--", "sh", "-c", &script]).spawn().expect("starts");
    wait_for_file(Path::new(&ready));
    child.kill().expect("kill -9 mysqllock");
    child.wait().expect("reaped");
    wait_for_file(Path::new(&got_term));
}

#[test]
fn command_starts_with_no_signal_blocked() {
    init();
    let out = run(&["run", &unique("sigmask"), "--", "grep", "^SigBlk:", "/proc/self/status"]);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert!(out.stdout.trim().trim_start_matches("SigBlk:").trim().chars().all(|c| c == '0'), "{}", out.stdout);
}

#[test]
fn lost_lease_is_reported_and_a_successful_command_exits_76() {
    init();
    let scratch = Scratch::new();
    let name = unique("lost");
    let holder = Holder::start(&name, &["--ttl", "1"], &scratch);
    wait_until_held(&name);

    // Once the 1 s TTL has passed, this one takes the lock over and ends the holder's
    // session.
    let taker = run(&["run", &name, "--timeout", "20", "--", "true"]);
    assert_eq!(taker.code, Some(0), "{}", taker.stderr);

    let out = holder.finish();
    assert_eq!(out.code, Some(76), "{}", out.stderr);
    assert!(
        out.stderr.contains(&format!("mysqllock: warning: lock \"{name}\" was lost while the command ran (")),
        "{}",
        out.stderr
    );
}

#[test]
fn wrong_password_exits_69_without_showing_it() {
    let config = Config::from_url(&dsn()).expect("test DSN parses");
    let password = "not-the-Password-42";
    let bad = format!(
        "mysql://{}:{password}@{}:{}/{}",
        config.user,
        config.host,
        config.port,
        config.database.unwrap_or_default()
    );
    let out = mysqllock(&["status"]).env("MYSQLLOCK_DSN", bad).output().map(Ran::from).expect("runs");
    assert_eq!(out.code, Some(69), "{}", out.stderr);
    assert!(out.stderr.contains("cannot connect"), "{}", out.stderr);
    assert!(!out.stderr.contains(password) && !out.stdout.contains(password), "password shown: {}", out.stderr);
}

#[test]
fn missing_table_exits_78_and_points_to_init() {
    let out = mysqllock(&["run", &unique("notable"), "--", "true"])
        .env("MYSQLLOCK_DSN", dsn_with("table=no_such_table_x"))
        .output()
        .map(Ran::from)
        .expect("runs");
    assert_eq!(out.code, Some(78), "{}", out.stderr);
    assert!(out.stderr.contains("mysqllock init"), "{}", out.stderr);
}

#[test]
fn missing_dsn_is_a_usage_error() {
    let out: Ran = Command::new(BIN).args(["status"]).env_remove("MYSQLLOCK_DSN").output().expect("runs").into();
    assert_eq!(out.code, Some(64), "{}", out.stderr);
    assert!(out.stderr.contains("MYSQLLOCK_DSN"), "{}", out.stderr);
}

/// Runs `mysqllock run` with bad input and checks it exits 64 with `message`, without
/// running the command or touching the lock.
fn assert_refused(name: &str, options: &[&str], message: &str) {
    init();
    let scratch = Scratch::new();
    let ran = scratch.file("ran");
    let before = run(&["status", name]).stdout;
    let mut args = vec!["run", name];
    args.extend_from_slice(options);
    args.extend_from_slice(&["--", "touch", &ran]);
    let out = run(&args);
    assert_eq!(out.code, Some(64), "{}", out.stderr);
    assert!(out.stderr.contains(message), "expected {message:?} in: {}", out.stderr);
    assert!(!Path::new(&ran).exists(), "the command ran despite bad input");
    assert_eq!(run(&["status", name]).stdout, before, "the table changed");
}

#[test]
fn empty_name_is_refused() {
    assert_refused("", &[], "invalid lock name: it is empty");
}

#[test]
fn name_of_65_characters_is_refused() {
    let name = format!("{}-", unique("long")).repeat(10).chars().take(65).collect::<String>();
    assert_refused(&name, &[], "at most 64");
}

#[test]
fn negative_timeout_is_refused() {
    assert_refused(&unique("negtimeout"), &["--timeout", "-1"], "invalid timeout: -1 is negative");
}

#[test]
fn nan_ttl_is_refused() {
    assert_refused(&unique("nanttl"), &["--ttl", "NaN"], "invalid ttl: NaN is not a finite number");
}

#[test]
fn command_sees_its_lock_name_and_connection_id() {
    init();
    let name = unique("env");
    let out = run(&["run", &name, "--", "sh", "-c", "printf '%s %s' \"$MYSQLLOCK_NAME\" \"$MYSQLLOCK_CONNECTION_ID\""]);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let (seen_name, id) = out.stdout.split_once(' ').expect("two words");
    assert_eq!(seen_name, name);
    assert!(id.parse::<u64>().is_ok_and(|id| id > 0), "connection id {id:?}");
}
