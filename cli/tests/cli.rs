//! The `mysqllock` binary against a real server, one behaviour per test.
//!
//! The server comes from `MYSQLLOCK_TEST_DSN` (see `scripts/mariadb.sh`). Every test
//! uses its own lock names and scratch directory, so the tests run in parallel.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{dsn, dsn_with, mysqllock_on, test_session, wait_until, OwnTable as ScratchTable, Ran, Scratch, BIN};
use mysqllock_core::{Config, MysqlSession, Session};

/// A name no other test (or test run) uses: tag, pid, counter.
fn unique(tag: &str) -> String {
    common::unique_with("cli", tag)
}

/// `mysqllock ARGS` connected to the test server through the environment.
fn mysqllock(args: &[&str]) -> Command {
    mysqllock_on(&dsn(), args)
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
    status_json_on(&dsn(), name)
}

fn status_json_on(dsn: &str, name: &str) -> Vec<serde_json::Value> {
    let out: Ran = mysqllock_on(dsn, &["status", name, "--json"]).output().expect("status runs").into();
    assert_eq!(out.code, Some(0), "status failed: {}", out.stderr);
    serde_json::from_str(&out.stdout).unwrap_or_else(|e| panic!("status --json is not JSON ({e}): {}", out.stdout))
}

/// Polls `status NAME` until the lock is held by a live session.
fn wait_until_held(name: &str) {
    wait_until_held_on(&dsn(), name);
}

fn wait_until_held_on(dsn: &str, name: &str) {
    wait_until(Duration::from_secs(20), &format!("lock {name:?} shows up as held"), || {
        status_json_on(dsn, name).iter().any(|row| row["state"] == "alive")
    });
}

/// Waits until some session waits in a GET_LOCK on `name` (the server's process list
/// shows the waiter's statement, in which a queued name is a hex literal).
fn wait_until_queued(name: &str) {
    let mut admin = test_session();
    let hex: String = name.bytes().map(|b| format!("{b:02X}")).collect();
    wait_until(Duration::from_secs(20), &format!("a session queues for {name:?}"), || {
        let out = admin
            .execute(
                "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE STATE = 'User lock' AND INFO LIKE ?",
                &[format!("%{hex}%").as_str().into()],
            )
            .expect("reads the process list");
        out.first(0).as_i64() == Some(1)
    });
}

/// A locks' table of the test's own (`table=` in the DSN).
impl ScratchTable {
    /// A name for a table that does not exist yet.
    fn missing(tag: &str) -> Self {
        Self::named("table", &unique(tag))
    }

    /// A table made by `mysqllock INIT_ARGS` (`init`, or `init --upgrade`).
    fn created(tag: &str, init_args: &[&str]) -> Self {
        Self::missing(tag).created_by(init_args)
    }
}

/// The host name mysqllock records for its locks on an upgraded table.
fn this_host() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname").expect("host name").trim().to_owned()
}

fn wait_for_file(path: &Path) {
    wait_until(Duration::from_secs(20), &format!("{} appears", path.display()), || path.exists());
}

/// A `mysqllock run NAME` whose command runs until the test creates its stop file.
struct Holder {
    child: Option<Child>,
    stop: PathBuf,
}

impl Holder {
    fn start(name: &str, extra: &[&str], scratch: &Scratch) -> Self {
        Self::start_on(&dsn(), name, extra, "", scratch)
    }

    /// `mysqllock run NAME EXTRA -- sh -c 'PRELUDE wait-for-the-stop-file'` on `dsn`.
    fn start_on(dsn: &str, name: &str, extra: &[&str], prelude: &str, scratch: &Scratch) -> Self {
        let stop = scratch.path(&format!("stop-{name}"));
        // The command is the holder doing work until told to stop: its `sleep 0.05` is
        // the poll interval of its wait for the stop file.
        let script = format!("{prelude} while [ ! -e '{}' ]; do sleep 0.05; done", stop.display());
        let mut args = vec!["run", name];
        args.extend_from_slice(extra);
        args.extend_from_slice(&["--", "sh", "-c", &script]);
        let child =
            mysqllock_on(dsn, &args).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("holder starts");
        Holder { child: Some(child), stop }
    }

    /// The process id of the `mysqllock run` process.
    fn pid(&self) -> u32 {
        self.child.as_ref().expect("not finished yet").id()
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
    let mut waiter = mysqllock(&["run", &name, "--timeout", "20", "--", "touch", &ran]).spawn().expect("waiter starts");
    wait_until_queued(&name);
    assert!(waiter.try_wait().expect("waiter status").is_none(), "the waiter gave up while the lock was held");
    assert!(!Path::new(&ran).exists(), "the waiter ran while the lock was held");

    assert_eq!(holder.finish().code, Some(0));
    let released = Instant::now();
    assert_eq!(waiter.wait().expect("waiter ends").code(), Some(0));
    let waited = released.elapsed();
    assert!(Path::new(&ran).exists(), "the waiter did not run after the release");
    // Generous: the point is that it acquired at the release, not at its 20 s timeout.
    assert!(waited < Duration::from_secs(5), "the waiter ran {waited:?} after the release");
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
    // The holder's work: polling (`sleep 0.05`) for the stop file.
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
    // `sleep 30` is the command's work, which the signal interrupts.
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
    // `sleep 30` is the command's work, which the signal interrupts.
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
fn missing_dsn_is_a_usage_error_naming_the_three_ways_to_give_one() {
    let out: Ran = Command::new(BIN)
        .args(["status"])
        .env_remove("MYSQLLOCK_DSN")
        .env("HOME", common::NO_HOME)
        .output()
        .expect("runs")
        .into();
    assert_eq!(out.code, Some(64), "{}", out.stderr);
    for way in ["--dsn", "MYSQLLOCK_DSN", "host=", "[client]", "~/.my.cnf"] {
        assert!(out.stderr.contains(way), "{way} not named: {}", out.stderr);
    }
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
    assert_eq!(name.chars().count(), 65);
    assert_refused(&name, &[], "has 65 characters; at most 64 fit the table");
    // Characters, not bytes: 65 two-byte characters are refused, 64 of them are taken.
    let wide = format!("{}-", unique("é")).repeat(20).chars().take(65).collect::<String>();
    assert!(wide.len() > 65 && wide.chars().count() == 65);
    assert_refused(&wide, &[], "has 65 characters; at most 64 fit the table");
    let scratch = Scratch::new();
    for fits in [name.chars().take(64).collect::<String>(), wide.chars().take(64).collect::<String>()] {
        let ran = scratch.file("ran");
        let out = run(&["run", &fits, "--", "touch", &ran]);
        assert_eq!(out.code, Some(0), "a name of 64 characters was refused: {}", out.stderr);
        assert!(Path::new(&ran).exists(), "the command did not run under a 64-character name");
        std::fs::remove_file(&ran).unwrap();
    }
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

const UPGRADE_COLUMNS: [&str; 3] = ["token", "holder_host", "holder_pid"];
const ORIGINAL_COLUMNS: [&str; 5] = ["name", "connection_id", "created", "ttl", "lock_acquired"];

#[test]
fn init_upgrade_adds_the_token_and_holder_columns_once() {
    let table = ScratchTable::created("upgrade", &["init"]);
    assert_eq!(table.columns(), ORIGINAL_COLUMNS);

    let first = table.run(&["init", "--upgrade"]);
    assert_eq!(first.code, Some(0), "{}", first.stderr);
    assert_eq!(first.stdout.trim(), format!("upgraded table {}: added token, holder_host, holder_pid", table.name));
    let upgraded: Vec<&str> = ORIGINAL_COLUMNS.iter().chain(&UPGRADE_COLUMNS).copied().collect();
    assert_eq!(table.columns(), upgraded);

    let second = table.run(&["init", "--upgrade"]);
    assert_eq!(second.code, Some(0), "{}", second.stderr);
    assert_eq!(second.stdout.trim(), format!("table {} is already upgraded", table.name));
    assert_eq!(table.columns(), upgraded);
}

#[test]
fn init_upgrade_creates_a_missing_table_upgraded() {
    let table = ScratchTable::missing("upgradenew");
    let out = table.run(&["init", "--upgrade"]);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let expected =
        format!("created table {t}\nupgraded table {t}: added token, holder_host, holder_pid", t = table.name);
    assert_eq!(out.stdout.trim(), expected);
    assert_eq!(table.columns()[5..], UPGRADE_COLUMNS);
}

#[test]
fn command_gets_a_fencing_token_that_grows_with_every_run() {
    let table = ScratchTable::created("tokens", &["init", "--upgrade"]);
    let name = unique("token");
    let token = || {
        let out = table.run(&["run", &name, "--", "sh", "-c", "printf %s \"$MYSQLLOCK_TOKEN\""]);
        assert_eq!(out.code, Some(0), "{}", out.stderr);
        out.stdout.parse::<u64>().unwrap_or_else(|_| panic!("MYSQLLOCK_TOKEN is not a number: {:?}", out.stdout))
    };
    let first = token();
    let second = token();
    assert!(second > first, "the second run's token {second} is not greater than the first's {first}");
}

#[test]
fn command_gets_no_token_on_a_table_that_is_not_upgraded() {
    let table = ScratchTable::created("notoken", &["init"]);
    // An inherited token (a nested run) must not pass for this lock's.
    let out: Ran = table
        .command(&["run", &unique("notoken"), "--", "sh", "-c", "printf %s \"${MYSQLLOCK_TOKEN-unset}\""])
        .env("MYSQLLOCK_TOKEN", "999")
        .output()
        .expect("runs")
        .into();
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert_eq!(out.stdout, "unset");
}

#[test]
fn keep_alive_holds_the_lock_past_its_ttl_while_the_command_runs() {
    init();
    let name = unique("keepalive");
    let started = Instant::now();
    // The behaviour under test: the command works (`sleep 5`) well past the 2 s TTL;
    // only renewals keep the lock.
    let holder = mysqllock(&["run", &name, "--keep-alive", "--ttl", "2", "--", "sleep", "5"])
        .stderr(Stdio::piped())
        .spawn()
        .expect("holder starts");
    wait_until_held(&name);

    let mut last_try = Duration::ZERO;
    // The command cannot end before `started` + 5 s, so every try here meets it running.
    while started.elapsed() < Duration::from_millis(4500) {
        last_try = started.elapsed();
        let out = run(&["run", &name, "--timeout", "0", "--", "true"]);
        assert_eq!(out.code, Some(75), "another run got the lock after {last_try:?}: {}", out.stderr);
        // The behaviour under test: time passes while the command works; this paces the tries.
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(last_try > Duration::from_millis(3500), "no try after the TTL had passed ({last_try:?})");
    let out: Ran = holder.wait_with_output().expect("holder ends").into();
    assert_eq!(out.code, Some(0), "{}", out.stderr);
}

#[test]
fn at_least_keeps_the_lock_taken_after_a_short_command() {
    init();
    let scratch = Scratch::new();
    let name = unique("atleast");
    let started = Instant::now();
    assert_eq!(run(&["run", &name, "--at-least", "3", "--", "true"]).code, Some(0));

    let ran = scratch.file("ran");
    let right_after = run(&["run", &name, "--timeout", "0", "--", "touch", &ran]);
    assert_eq!(right_after.code, Some(75), "{}", right_after.stderr);
    assert!(!Path::new(&ran).exists(), "the job ran twice within --at-least");

    // The lease is whole seconds on the database clock: wait until it has run out there.
    let mut admin = test_session();
    wait_until(Duration::from_secs(20), "the --at-least row runs out", || {
        let out = admin
            .execute(
                "SELECT COUNT(*) FROM shared_locks WHERE name = ? AND created + ttl >= UNIX_TIMESTAMP()",
                &[name.as_str().into()],
            )
            .expect("reads the table");
        out.first(0).as_i64() == Some(0)
    });
    assert!(started.elapsed() >= Duration::from_secs(2), "the --at-least row ran out after {:?}", started.elapsed());
    let later = run(&["run", &name, "--timeout", "1.5", "--", "touch", &ran]);
    assert_eq!(later.code, Some(0), "{}", later.stderr);
    assert!(Path::new(&ran).exists(), "the job did not run once --at-least had passed");
}

#[test]
fn max_hold_stops_the_renewal_so_another_run_takes_over() {
    init();
    let scratch = Scratch::new();
    let name = unique("maxhold");
    // The command ignores the SIGTERM it gets at max-hold, and runs on.
    let extra = ["--keep-alive", "--ttl", "1", "--max-hold", "2"];
    let holder = Holder::start_on(&dsn(), &name, &extra, "trap '' TERM;", &scratch);
    wait_until_held(&name);
    let started = Instant::now();

    let taker = run(&["run", &name, "--timeout", "20", "--", "true"]);
    assert_eq!(taker.code, Some(0), "{}", taker.stderr);
    assert!(started.elapsed() > Duration::from_millis(1500), "taken over before max-hold: {:?}", started.elapsed());

    // The holder's command only ends now (stop file): the takeover happened under it,
    // after mysqllock had told it to stop: the lost-lock code, as `--lease` ends.
    let out = holder.finish();
    assert_eq!(out.code, Some(79), "{}", out.stderr);
    assert!(out.stderr.contains(&format!("lock \"{name}\" runs out")), "{}", out.stderr);
}

#[test]
fn command_still_running_at_max_hold_gets_sigterm() {
    init();
    let name = unique("maxholdterm");
    let started = Instant::now();
    // `sleep 30`: the command's work, which max-hold cuts short.
    let out = run(&["run", &name, "--keep-alive", "--ttl", "1", "--max-hold", "2", "--", "sleep", "30"]);
    assert_eq!(out.code, Some(79), "the lost-lock code, not the command's 143: {}", out.stderr);
    assert!(started.elapsed() < Duration::from_secs(15), "the command ran on for {:?}", started.elapsed());
    assert!(
        out.stderr.contains(&format!("lock \"{name}\" runs out")) && out.stderr.contains("SIGTERM"),
        "{}",
        out.stderr
    );
    assert!(status_json(&name).is_empty(), "the lock was not released");
}

/// A holder on an upgraded table that wrote its token to a file, and that token.
fn upgraded_holder(table: &ScratchTable, name: &str, scratch: &Scratch) -> (Holder, String) {
    let token_file = scratch.file("token");
    let prelude = format!("echo $MYSQLLOCK_TOKEN > '{token_file}';");
    let holder = Holder::start_on(&table.dsn, name, &["--ttl", "120"], &prelude, scratch);
    wait_until_held_on(&table.dsn, name);
    wait_for_file(Path::new(&token_file));
    let token = std::fs::read_to_string(&token_file).expect("token file").trim().to_owned();
    assert!(token.parse::<u64>().is_ok(), "no token: {token:?}");
    (holder, token)
}

#[test]
fn status_shows_the_token_host_name_and_pid_of_the_holder() {
    let table = ScratchTable::created("statusup", &["init", "--upgrade"]);
    let scratch = Scratch::new();
    let name = unique("statusup");
    let (holder, token) = upgraded_holder(&table, &name, &scratch);

    let out = table.run(&["status", &name]);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let lines: Vec<&str> = out.stdout.lines().collect();
    let header: Vec<&str> = lines[0].split_whitespace().collect();
    assert_eq!(header, ["NAME", "HOLDER", "TOKEN", "HOST", "PID", "ACQUIRED", "EXPIRES", "TTL_LEFT_S", "STATE"]);
    let cells: Vec<&str> = lines[1].split_whitespace().collect();
    let pid = holder.pid().to_string();
    assert_eq!((cells[2], cells[3], cells[4]), (token.as_str(), this_host().as_str(), pid.as_str()), "{}", out.stdout);
    assert_eq!(holder.finish().code, Some(0));
}

#[test]
fn status_json_has_token_host_name_pid_and_times() {
    let table = ScratchTable::created("statusjson", &["init", "--upgrade"]);
    let scratch = Scratch::new();
    let name = unique("statusjson");
    let (holder, token) = upgraded_holder(&table, &name, &scratch);

    let rows = status_json_on(&table.dsn, &name);
    let row = &rows[0];
    assert_eq!(row["token"].to_string(), token, "{row}");
    assert_eq!(row["hostname"], this_host().as_str(), "{row}");
    assert_eq!(row["pid"], holder.pid(), "{row}");
    let (acquired_at, expires_at) = (row["acquired_at"].as_i64(), row["expires_at"].as_i64());
    assert_eq!(acquired_at, row["created"].as_i64(), "{row}");
    assert_eq!(expires_at, acquired_at.map(|t| t + 120), "{row}");
    assert_eq!(holder.finish().code, Some(0));
}

#[test]
fn ttl_with_a_unit_is_understood() {
    init();
    let scratch = Scratch::new();
    let name = unique("ttlunit");
    let holder = Holder::start(&name, &["--ttl", "2m"], &scratch);
    wait_until_held(&name);
    assert_eq!(status_json(&name)[0]["ttl"], 120);
    assert_eq!(holder.finish().code, Some(0));
}

#[test]
fn malformed_duration_is_refused() {
    assert_refused(&unique("baddur"), &["--at-least", "5x"], "\"5x\" is not a duration");
}

#[test]
fn a_bad_timeout_is_refused_in_the_cores_words_from_an_option_and_from_a_url() {
    // One parser (the core's Config::set) behind every surface: the same value gets the
    // same words, with where it came from in front; php.ini's are in IniSettingsTest.php.
    let says = "invalid read_timeout: must be more than 0 seconds (every read and write has a bound)";
    let option: Ran = mysqllock_on(&dsn(), &["--read-timeout", "0", "status"]).output().unwrap().into();
    let url: Ran = mysqllock_on(&format!("{}?read_timeout=0", dsn()), &["status"]).output().unwrap().into();
    for (out, source) in [(option, "--read-timeout"), (url, "MYSQLLOCK_DSN")] {
        assert_eq!(out.code, Some(64), "{out:?}");
        assert!(out.stderr.contains(&format!("mysqllock: {source}: {says}")), "{}", out.stderr);
    }
    // And the same units: a URL's timeout is read as an option's is (status needs the
    // table, which a test run before this one may or may not have made).
    init();
    let units: Ran = mysqllock_on(&format!("{}?connect_timeout=500ms", dsn()), &["status"]).output().unwrap().into();
    assert_eq!(units.code, Some(0), "{units:?}");
}

#[test]
fn negative_at_least_is_refused() {
    assert_refused(&unique("negatleast"), &["--at-least", "-1"], "invalid at_least: -1 is negative");
}

#[test]
fn zero_max_hold_is_refused() {
    assert_refused(&unique("zeromaxhold"), &["--keep-alive", "--max-hold", "0"], "invalid max_hold");
}

#[test]
fn max_hold_without_keep_alive_is_refused() {
    assert_refused(&unique("maxholdalone"), &["--max-hold", "1h"], "--keep-alive");
}

#[test]
fn failed_renewal_terminates_the_command_and_reports_the_lost_lock() {
    let table = ScratchTable::created("renewfail", &["init"]);
    let scratch = Scratch::new();
    let name = unique("renewfail");
    let termed = scratch.file("termed");
    let prelude = format!("trap 'touch {termed}; exit 143' TERM;");
    let holder = Holder::start_on(&table.dsn, &name, &["--keep-alive", "--ttl", "2"], &prelude, &scratch);
    wait_until_held_on(&table.dsn, &name);

    // Table locked: every renewal waits, and the holder counts the lease lost from its
    // clock before the 2 s lease can run out unrenewed; then the command gets SIGTERM.
    let mut blocker = test_session();
    blocker.execute(&format!("LOCK TABLES `{}` WRITE", table.name), &[]).expect("locks the table");
    wait_for_file(Path::new(&termed));
    blocker.execute("UNLOCK TABLES", &[]).expect("unlocks the table");

    let out = holder.finish();
    // The command got SIGTERM (it touched the file); the run ends with the lost-lock
    // code, as `--lease` does, not with the command's 143.
    assert_eq!(out.code, Some(79), "{}", out.stderr);
    assert!(
        out.stderr
            .contains(&format!("lock \"{name}\" is lost: its keep-alive could not renew it; sending SIGTERM to sh")),
        "{}",
        out.stderr
    );
}

#[test]
fn run_repairs_a_crashed_lock_table_and_runs_the_command() {
    let table = ScratchTable::created("crashed", &["init"]);
    let config = Config::from_url(&table.dsn).expect("test DSN parses");
    let database = config.database.expect("the test DSN names a database");
    common::server_sh(&["crash-table", &common::test_env("MYSQLLOCK_TEST_DIR"), &database, &table.name]);
    let count = format!("SELECT COUNT(*) FROM `{}`", table.name);
    let crashed = test_session().execute(&count, &[]).expect_err("the table is not marked as crashed");
    assert_eq!(crashed.code, Some(145), "{crashed}");

    let scratch = Scratch::new();
    let ran = scratch.file("ran");
    let out = table.run(&["run", &unique("crashed"), "--", "touch", &ran]);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert!(Path::new(&ran).exists(), "the command did not run");
    let rows = test_session().execute(&count, &[]).expect("the repaired table can be read");
    assert_eq!(rows.first(0).as_i64(), Some(0), "the released lock left a row");
}
