//! `mysqllock run --session` (plain GET_LOCK session locks, no table) and
//! `status --session`, against a real server, one behaviour per test.
//!
//! The server comes from `MYSQLLOCK_TEST_DSN` (see `scripts/mariadb.sh`); tests that need
//! a server in a known state (no lock-listing plugin) start their own. Who holds a lock is
//! read with a session of the test's own (`IS_USED_LOCK`), not through mysqllock. Names
//! are plain ASCII, so the GET_LOCK name of one is its lowercase form.

mod common;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{
    dsn, dsn_with, finish, first_to_end, mysqllock_on, test_env, test_session, wait_until, OwnServer, Ran, Runs,
    Scratch,
};
use mysqllock_core::{Config, MysqlSession, Session};

/// Exit codes (docs/cli.md, `mysqllock run --help`).
const HELD_ELSEWHERE: i32 = 75;
const LOST_WHILE_RUNNING: i32 = 76;
const NOT_SET_UP: i32 = 78;
const LOST_AND_TERMINATED: i32 = 79;

/// How long any wait for another process may take before the test fails.
const LIMIT: Duration = Duration::from_secs(30);

/// A name no other test (or test run) uses: tag, pid, counter.
fn unique(tag: &str) -> String {
    common::unique_with("session", tag)
}

fn run_on(dsn: &str, args: &[&str]) -> Ran {
    mysqllock_on(dsn, args).output().expect("mysqllock starts").into()
}

fn run(args: &[&str]) -> Ran {
    run_on(&dsn(), args)
}

/// The connection id holding the GET_LOCK `key` on the server of `dsn`, asked by a
/// session of the test's own.
fn holder_on(dsn: &str, key: &str) -> Option<u64> {
    let config = Config::from_url(dsn).expect("DSN parses");
    let mut session = MysqlSession::connect(&config).expect("connects");
    session.execute("SELECT IS_USED_LOCK(?)", &[key.into()]).expect("IS_USED_LOCK runs").first(0).as_u64()
}

fn holder(key: &str) -> Option<u64> {
    holder_on(&dsn(), key)
}

/// A `mysqllock run NAME --session EXTRA` whose command writes its connection id to a
/// file, then runs until the test creates its stop file.
struct Holder {
    child: Option<Child>,
    stop: String,
    id_file: String,
}

impl Holder {
    fn start(name: &str, extra: &[&str], scratch: &Scratch) -> Self {
        Self::start_on(&dsn(), name, extra, "", scratch)
    }

    /// `mysqllock run NAME --session EXTRA -- sh -c 'PRELUDE ...'` on `dsn`.
    fn start_on(dsn: &str, name: &str, extra: &[&str], prelude: &str, scratch: &Scratch) -> Self {
        Self::start_with(mysqllock_on(dsn, &[]), name, extra, prelude, scratch)
    }

    /// The same with `mysqllock` (its environment) prepared by the caller.
    fn start_with(mut mysqllock: Command, name: &str, extra: &[&str], prelude: &str, scratch: &Scratch) -> Self {
        let (stop, id_file) = (scratch.file(&format!("stop-{name}")), scratch.file(&format!("id-{name}")));
        // The command is the holder doing work until told to stop: its `sleep 0.05` is
        // the poll interval of its wait for the stop file.
        let script = format!(
            "{prelude} echo \"$MYSQLLOCK_CONNECTION_ID\" > '{id_file}'; while [ ! -e '{stop}' ]; do sleep 0.05; done"
        );
        let mut args = vec!["run", name, "--session"];
        args.extend_from_slice(extra);
        args.extend_from_slice(&["--", "sh", "-c", &script]);
        let child = mysqllock.args(&args).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("holder starts");
        Holder { child: Some(child), stop, id_file }
    }

    /// The connection id the command was given, once it runs.
    fn connection_id(&self) -> u64 {
        wait_until(LIMIT, "the holder's command runs", || {
            std::fs::read_to_string(&self.id_file).is_ok_and(|id| id.ends_with('\n'))
        });
        let id = std::fs::read_to_string(&self.id_file).expect("id file");
        id.trim().parse().unwrap_or_else(|_| panic!("MYSQLLOCK_CONNECTION_ID is not a number: {id:?}"))
    }

    fn child(&mut self) -> &mut Child {
        self.child.as_mut().expect("not finished yet")
    }

    /// Lets the command end and returns how mysqllock ended.
    fn finish(mut self) -> Ran {
        std::fs::write(&self.stop, b"").expect("stop file");
        finish(self.child.take().expect("not finished yet"), LIMIT)
    }
}

impl Drop for Holder {
    fn drop(&mut self) {
        // A failed assertion must not leave the holder running.
        if let Some(mut child) = self.child.take() {
            let _ = std::fs::write(&self.stop, b"");
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

#[test]
fn exactly_one_of_three_concurrent_runs_runs_the_command() {
    let scratch = Scratch::new();
    let name = unique("three");
    let (work, stop) = (scratch.file("work"), scratch.file("stop"));
    // The work: its run's number in the work file, then running (polling for the stop
    // file) until told to stop, so the lock stays taken while the others try.
    let mut runs = Runs(
        (0..3)
            .map(|i| {
                let script = format!("echo {i} >> '{work}'; while [ ! -e '{stop}' ]; do sleep 0.05; done");
                mysqllock_on(&dsn(), &["run", &name, "--session", "--", "sh", "-c", &script])
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped())
                    .spawn()
                    .expect("mysqllock starts")
            })
            .collect(),
    );

    let losers = first_to_end(&mut runs, 2, LIMIT);
    for loser in &losers {
        assert_eq!(loser.code, Some(HELD_ELSEWHERE), "{loser:?}");
        assert!(
            loser.stderr.contains(&format!("session lock \"{name}\" is held elsewhere; not running sh")),
            "{}",
            loser.stderr
        );
    }
    std::fs::write(&stop, b"").expect("stop file");
    let winner = finish(runs.0.remove(0), LIMIT);
    assert_eq!(winner.code, Some(0), "{winner:?}");
    let lines: Vec<String> = std::fs::read_to_string(&work).expect("work file").lines().map(str::to_owned).collect();
    assert_eq!(lines.len(), 1, "the work ran {} times: {lines:?}", lines.len());
    assert_eq!(holder(&name), None, "the winner did not release its lock");
}

#[test]
fn exit_code_of_the_command_is_passed_through() {
    let out = run(&["run", &unique("exit"), "--session", "--", "sh", "-c", "exit 7"]);
    assert_eq!(out.code, Some(7), "{}", out.stderr);
}

#[test]
fn needs_no_lock_table() {
    let scratch = Scratch::new();
    let table = unique("notable").replace('-', "_");
    let ran = scratch.file("ran");
    let out =
        run_on(&dsn_with(&format!("table={table}")), &["run", &unique("notable"), "--session", "--", "touch", &ran]);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert!(Path::new(&ran).exists(), "the command did not run");
    let tables = test_session()
        .execute(
            "SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ?",
            &[table.as_str().into()],
        )
        .expect("reads information_schema");
    assert_eq!(tables.first(0).as_i64(), Some(0), "a table was created");
}

#[test]
fn command_sees_its_lock_name_and_the_connection_holding_it_and_no_token() {
    let scratch = Scratch::new();
    let name = unique("env");
    let seen = scratch.file("seen");
    let prelude = format!("printf '%s %s' \"$MYSQLLOCK_NAME\" \"${{MYSQLLOCK_TOKEN-unset}}\" > '{seen}';");
    // Never a token inherited from an outer run: a session lock has none.
    let mut mysqllock = mysqllock_on(&dsn(), &[]);
    mysqllock.env("MYSQLLOCK_TOKEN", "999");
    let mut cmd_holder = Holder::start_with(mysqllock, &name, &[], &prelude, &scratch);
    let id = cmd_holder.connection_id();
    assert_eq!(holder(&name), Some(id), "MYSQLLOCK_CONNECTION_ID is not the session holding the lock");
    assert_eq!(std::fs::read_to_string(&seen).expect("seen file"), format!("{name} unset"));
    assert!(cmd_holder.child().try_wait().expect("status").is_none());
    assert_eq!(cmd_holder.finish().code, Some(0));
}

#[test]
fn kill_9_of_mysqllock_frees_the_lock_at_once() {
    let scratch = Scratch::new();
    let name = unique("kill9");
    let mut first = Holder::start(&name, &[], &scratch);
    first.connection_id();

    first.child().kill().expect("kill -9 mysqllock");
    let killed = Instant::now();
    first.child().wait().expect("reaped");
    let ran = scratch.file("ran");
    let out = run(&["run", &name, "--session", "--timeout", "20", "--", "touch", &ran]);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert!(Path::new(&ran).exists(), "the next run did not run its command");
    // Generous: the point is that nothing (no TTL, no timeout) had to pass first.
    assert!(killed.elapsed() < Duration::from_secs(5), "the lock was free {:?} after the kill", killed.elapsed());
}

#[test]
fn names_differing_only_in_case_are_one_lock() {
    let scratch = Scratch::new();
    let name = unique("Case");
    let first = Holder::start(&name.to_uppercase(), &[], &scratch);
    let id = first.connection_id();
    assert_eq!(holder(&name.to_lowercase()), Some(id), "the lock is not taken under the lowercase name");

    let ran = scratch.file("ran");
    let out = run(&["run", &name, "--session", "--", "touch", &ran]);
    assert_eq!(out.code, Some(HELD_ELSEWHERE), "{}", out.stderr);
    assert!(!Path::new(&ran).exists(), "a case variant ran while the lock was held");
    assert_eq!(first.finish().code, Some(0));
}

#[test]
fn options_of_the_table_lock_and_the_lease_are_refused() {
    let scratch = Scratch::new();
    let ran = scratch.file("ran");
    let name = unique("refused");
    for option in [&["--ttl", "60"][..], &["--lease"], &["--keep-alive"], &["--at-least", "5"], &["--max-hold", "1h"]] {
        let mut args = vec!["run", &name, "--session"];
        args.extend_from_slice(option);
        args.extend_from_slice(&["--", "touch", &ran]);
        let out = run(&args);
        assert_eq!(out.code, Some(64), "{option:?} accepted: {}", out.stderr);
        assert!(
            out.stderr.contains("'--session' cannot be used with") && out.stderr.contains(option[0]),
            "{option:?}: {}",
            out.stderr
        );
    }
    assert!(!Path::new(&ran).exists(), "the command ran despite bad options");
}

#[test]
fn sigterm_is_forwarded_to_the_command_and_the_lock_released() {
    let scratch = Scratch::new();
    let name = unique("sigterm");
    let ready = scratch.file("ready");
    // The marker is written once the trap is set, so the signal cannot come too early.
    // `sleep 30` is the command's work, which the signal interrupts.
    let script = format!("trap 'kill $p; exit 42' TERM; sleep 30 & p=$!; touch '{ready}'; wait");
    let child = mysqllock_on(&dsn(), &["run", &name, "--session", "--", "sh", "-c", &script])
        .stderr(Stdio::piped())
        .spawn()
        .expect("starts");
    wait_until(LIMIT, "the command has set its trap", || Path::new(&ready).exists());
    assert!(holder(&name).is_some(), "the lock is not held while the command runs");

    let pid = i32::try_from(child.id()).expect("pid fits");
    // SAFETY: plain kill(2) on the child this test started and has not reaped.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
    assert_eq!(finish(child, LIMIT).code, Some(42), "the command did not get the SIGTERM");
    assert_eq!(holder(&name), None, "the lock was not released");
}

/// Ends the session `id` from a session of the test's own.
fn kill_session(id: u64) {
    test_session().kill(id).expect("KILL the holder's session");
}

#[test]
fn lost_session_terminates_the_command_and_exits_79() {
    let scratch = Scratch::new();
    let name = unique("lost");
    let termed = scratch.file("termed");
    let prelude = format!("trap 'touch {termed}; exit 143' TERM;");
    let mut lost =
        Holder::start_on(&dsn(), &name, &["--ping-every", "200ms", "--kill-after", "20"], &prelude, &scratch);
    kill_session(lost.connection_id());

    let child = lost.child.take().expect("running");
    let out = finish(child, LIMIT);
    assert!(Path::new(&termed).exists(), "the command did not get SIGTERM: {out:?}");
    assert_eq!(out.code, Some(LOST_AND_TERMINATED), "{out:?}");
    assert!(
        out.stderr.contains(&format!("mysqllock: session lock \"{name}\" is lost (its session ended"))
            && out.stderr.contains("sending SIGTERM to sh"),
        "{}",
        out.stderr
    );
}

#[test]
fn session_lost_after_the_last_check_is_reported_at_release_with_76() {
    let scratch = Scratch::new();
    let name = unique("lostlate");
    // No check before the command ends: only the release can tell.
    let holder = Holder::start(&name, &["--ping-every", "1h"], &scratch);
    kill_session(holder.connection_id());

    let out = holder.finish();
    assert_eq!(out.code, Some(LOST_WHILE_RUNNING), "{out:?}");
    assert!(
        out.stderr.contains(&format!("mysqllock: warning: session lock \"{name}\" was lost while the command ran")),
        "{}",
        out.stderr
    );
}

#[test]
fn status_names_the_holder_of_a_session_lock_without_any_plugin() {
    // Its own server: no lock-listing plugin, whatever other tests install.
    let server = OwnServer::start("holder");
    let scratch = Scratch::new();
    let name = unique("status");
    let holder = Holder::start_on(&server.dsn, &name, &[], "", &scratch);
    let id = holder.connection_id();

    let out = run_on(&server.dsn, &["status", "--session", &name]);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(lines.len(), 2, "a header and one row expected:\n{}", out.stdout);
    assert_eq!(
        lines[0].split_whitespace().collect::<Vec<_>>(),
        ["NAME", "HOLDER", "USER", "HOST", "COMMAND", "TIME_S"]
    );
    let cells: Vec<&str> = lines[1].split_whitespace().collect();
    let config = Config::from_url(&server.dsn).expect("DSN parses");
    assert_eq!(
        (cells[0], cells[1], cells[2]),
        (name.as_str(), id.to_string().as_str(), config.user.as_str()),
        "{}",
        out.stdout
    );
    assert_eq!(holder.finish().code, Some(0));
    let free = run_on(&server.dsn, &["status", "--session", &name]);
    assert_eq!(free.stdout.trim(), format!("session lock \"{name}\" is free"));
}

#[test]
fn status_shows_the_get_lock_name_a_name_folds_to() {
    let scratch = Scratch::new();
    let name = unique("Fold");
    let holder = Holder::start(&name, &[], &scratch);
    let id = holder.connection_id();

    let out = run(&["status", "--session", &name, "--json"]);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let rows: serde_json::Value = serde_json::from_str(&out.stdout).expect("JSON");
    assert_eq!((rows[0]["name"].as_str(), rows[0]["key"].as_str()), (Some(name.as_str()), Some(&*name.to_lowercase())));
    assert_eq!(rows[0]["connection_id"], id);
    let table = run(&["status", "--session", &name]).stdout;
    let lines: Vec<Vec<&str>> = table.lines().map(|l| l.split_whitespace().collect()).collect();
    assert_eq!(lines[0][..3], ["NAME", "KEY", "HOLDER"], "{table}");
    assert_eq!(lines[1][..2], [name.as_str(), &*name.to_lowercase()], "{table}");
    assert_eq!(holder.finish().code, Some(0));
}

/// Installs MariaDB's metadata_lock_info plugin on the test server as root (the test
/// user may not); another test or suite doing the same at the moment is no failure.
/// MySQL has no such plugin: there performance_schema shows the locks, on by default.
fn install_lock_listing_plugin() {
    if common::on_mysql() {
        return;
    }
    let socket = test_env("MYSQLLOCK_TEST_SOCKET");
    let out: Ran = Command::new("mariadb")
        .args(["--no-defaults", "-uroot", &format!("--socket={socket}"), "-e", "INSTALL SONAME 'metadata_lock_info'"])
        .stdin(Stdio::null())
        .output()
        .expect("the mariadb client runs (apt-get install mariadb-client)")
        .into();
    assert!(out.code == Some(0) || out.stderr.contains("already"), "INSTALL SONAME failed: {}", out.stderr);
}

#[test]
fn status_lists_every_session_lock_where_the_server_shows_them() {
    install_lock_listing_plugin();
    let scratch = Scratch::new();
    let names = [unique("list"), unique("list")];
    let holders: Vec<Holder> = names.iter().map(|name| Holder::start(name, &[], &scratch)).collect();
    let ids: Vec<u64> = holders.iter().map(Holder::connection_id).collect();

    let out = run(&["status", "--session"]);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert!(out.stdout.starts_with("NAME"), "{}", out.stdout);
    // Other tests' locks may be listed too.
    for (name, id) in names.iter().zip(&ids) {
        let row = out.stdout.lines().find(|l| l.split_whitespace().next() == Some(name.as_str()));
        let cells: Vec<&str> =
            row.unwrap_or_else(|| panic!("{name} not listed:\n{}", out.stdout)).split_whitespace().collect();
        assert_eq!(cells[1], id.to_string(), "{}", out.stdout);
    }
    for holder in holders {
        assert_eq!(holder.finish().code, Some(0));
    }
    let after = run(&["status", "--session"]);
    assert!(names.iter().all(|name| !after.stdout.contains(name.as_str())), "released locks listed:\n{}", after.stdout);
}

#[test]
fn status_says_what_is_missing_where_session_locks_are_not_visible() {
    // Its own server: no plugin installed, performance_schema off (MariaDB's default).
    // MySQL has performance_schema on: there the user may not read it.
    let server = OwnServer::start("hidden");
    if common::on_mysql() {
        server.root_sql("REVOKE SELECT ON performance_schema.* FROM 'locker'@'127.0.0.1'");
    }
    let out = run_on(&server.dsn, &["status", "--session", "--json"]);
    assert_eq!(out.code, Some(NOT_SET_UP), "{out:?}");
    assert_eq!(out.stdout, "", "a listing printed although nothing is visible");
    assert_eq!(out.stderr.lines().count(), 1, "{}", out.stderr);
    if common::on_mysql() {
        assert!(
            out.stderr.contains("session locks of other clients are not visible")
                && out.stderr.contains("GRANT SELECT ON performance_schema.*")
                && !out.stderr.contains("INSTALL SONAME"),
            "{}",
            out.stderr
        );
        return;
    }
    assert!(
        out.stderr.contains("session locks of other clients are not visible")
            && out.stderr.contains("INSTALL SONAME 'metadata_lock_info'")
            && out.stderr.contains("performance_schema is OFF"),
        "{}",
        out.stderr
    );
}
