//! `mysqllock run --lease`, `init --lease` and the leases in `status`, against a real
//! server, one behaviour per test.
//!
//! The server comes from `MYSQLLOCK_TEST_DSN` (see `scripts/mariadb.sh`). Every test uses
//! a lease table of its own (dropped at the end) and its own names, so the tests run in
//! parallel. What the lease table holds is read with a session of the test's own, not
//! through the lease code.

mod common;

use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use common::{finish, first_to_end, test_session, wait_until, OwnTable as LeaseTable, Ran, Runs, Scratch};
use mysqllock_core::{MysqlSession, Session, Value};

/// Exit codes of the lease mode (docs/cli.md, `mysqllock run --help`).
const HELD_ELSEWHERE: i32 = 75;
const LEASE_LOST: i32 = 79;

/// A name no other test (or test run) uses: tag, pid, counter.
fn unique(tag: &str) -> String {
    common::unique_with("lease", tag)
}

/// A lease table of the test's own (`lease_table=` in the DSN), to look at and tamper
/// with directly.
impl LeaseTable {
    /// A name for a table that does not exist yet.
    fn missing(tag: &str) -> Self {
        Self::named("lease_table", &unique(tag))
    }

    /// A table made by `mysqllock init --lease`.
    fn created(tag: &str) -> Self {
        Self::missing(tag).created_by(&["init", "--lease"])
    }

    /// `mysqllock run NAME EXTRA -- sh -c SCRIPT`, started in the background.
    fn spawn_run(&self, name: &str, extra: &[&str], script: &str) -> Child {
        let mut args = vec!["run", name, "--lease"];
        args.extend_from_slice(extra);
        args.extend_from_slice(&["--", "sh", "-c", script]);
        self.command(&args).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("mysqllock starts")
    }

    fn query(&self, sql: &str, params: &[Value]) -> Vec<Vec<Value>> {
        test_session().execute(&sql.replace("{t}", &format!("`{}`", self.name)), params).expect("query runs").rows
    }

    /// The owner of `resource`'s row, live or not.
    fn owner(&self, resource: &str) -> Option<String> {
        let rows = self.query("SELECT owner FROM {t} WHERE resource = ?", &[resource.into()]);
        rows.first().and_then(|row| row[0].as_text())
    }

    /// Whether an unexpired row for `resource` exists, by the database's UTC clock.
    fn is_held(&self, resource: &str) -> bool {
        let rows = self
            .query("SELECT COUNT(*) FROM {t} WHERE resource = ? AND expires_at >= UTC_TIMESTAMP()", &[resource.into()]);
        rows.first().and_then(|row| row[0].as_i64()) == Some(1)
    }
}

/// The id of the statement the server session of process `pid` runs or ran last
/// (MariaDB: information_schema.PROCESSLIST.QUERY_ID; MySQL, which has no such column:
/// the statement event's EVENT_ID in performance_schema), if it has one. The session is found by the
/// client ports of the process's TCP sockets: the server shows its client as
/// `HOST:PORT`.
fn last_statement_of(admin: &mut MysqlSession, pid: u32) -> Option<i64> {
    let sockets: Vec<String> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .into_iter()
        .flatten()
        .filter_map(|fd| std::fs::read_link(fd.ok()?.path()).ok())
        .filter_map(|link| Some(link.to_str()?.strip_prefix("socket:[")?.strip_suffix(']')?.to_owned()))
        .collect();
    // /proc/PID/net/tcp*: "sl local_address rem_address st ... uid timeout inode".
    let ports: Vec<String> = ["tcp", "tcp6"]
        .iter()
        .filter_map(|file| std::fs::read_to_string(format!("/proc/{pid}/net/{file}")).ok())
        .flat_map(|table| {
            table
                .lines()
                .skip(1)
                .filter_map(|line| {
                    let fields: Vec<&str> = line.split_whitespace().collect();
                    sockets.iter().any(|s| fields.get(9) == Some(&s.as_str())).then_some(())?;
                    let port = u16::from_str_radix(fields.get(1)?.rsplit(':').next()?, 16).ok()?;
                    Some(port.to_string())
                })
                .collect::<Vec<_>>()
        })
        .collect();
    let sql = match common::on_mysql() {
        false => "SELECT QUERY_ID FROM information_schema.PROCESSLIST WHERE SUBSTRING_INDEX(HOST, ':', -1) = ?",
        true => {
            "SELECT e.EVENT_ID FROM performance_schema.processlist p \
             JOIN performance_schema.threads t ON t.PROCESSLIST_ID = p.ID \
             JOIN performance_schema.events_statements_current e ON e.THREAD_ID = t.THREAD_ID \
             WHERE SUBSTRING_INDEX(p.HOST, ':', -1) = ?"
        }
    };
    ports.iter().find_map(|port| {
        let out = admin.execute(sql, &[port.as_str().into()]).expect("reads the process list");
        out.rows.first().and_then(|row| row[0].as_i64())
    })
}

/// A shell loop that runs until `stop` exists, after creating `started`: the command's
/// work, its `sleep 0.05` the poll interval of its wait for the stop file.
fn hold_until(started: &str, stop: &str) -> String {
    format!("touch '{started}'; while [ ! -e '{stop}' ]; do sleep 0.05; done")
}

#[test]
fn init_lease_creates_the_lease_table_as_innodb_and_is_idempotent() {
    let table = LeaseTable::missing("init");
    let first = table.run(&["init", "--lease"]);
    assert_eq!(
        (first.code, first.stdout.trim()),
        (Some(0), format!("created lease table {}", table.name).as_str()),
        "{}",
        first.stderr
    );
    assert_eq!(table.columns(), ["resource", "owner", "expires_at", "acquired_at"]);
    let engine = test_session()
        .execute(
            "SELECT ENGINE FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ?",
            &[table.name.as_str().into()],
        )
        .expect("reads information_schema")
        .rows[0][0]
        .as_text();
    assert_eq!(engine.as_deref(), Some("InnoDB"));

    let second = table.run(&["init", "--lease"]);
    assert_eq!(
        (second.code, second.stdout.trim()),
        (Some(0), format!("lease table {} already exists", table.name).as_str())
    );
}

#[test]
fn init_lease_upgrade_adds_the_token_column() {
    let table = LeaseTable::created("upgrade");
    let out = table.run(&["init", "--lease", "--upgrade"]);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert!(out.stdout.contains("upgraded lease table"), "{}", out.stdout);
    assert!(table.columns().contains(&"token".to_owned()), "{:?}", table.columns());
    let again = table.run(&["init", "--lease", "--upgrade"]);
    assert_eq!(again.stdout.trim(), format!("lease table {} is already upgraded", table.name));
}

#[test]
fn exactly_one_of_three_concurrent_runs_does_the_work() {
    let table = LeaseTable::created("three");
    let scratch = Scratch::new();
    let name = unique("three");
    let (work, stop) = (scratch.file("work"), scratch.file("stop"));
    // The work: a line in the work file, then running (polling for the stop file) until told to stop.
    let script = format!("echo \"$MYSQLLOCK_OWNER\" >> '{work}'; while [ ! -e '{stop}' ]; do sleep 0.05; done");
    let mut runs = Runs((0..3).map(|_| table.spawn_run(&name, &[], &script)).collect());

    // The two that lose exit at once; the winner works until the stop file appears.
    let ended = first_to_end(&mut runs, 2, Duration::from_secs(30));
    for loser in &ended {
        assert_eq!(loser.code, Some(HELD_ELSEWHERE), "{loser:?}");
        assert!(loser.stderr.contains("is held by another owner"), "{}", loser.stderr);
    }
    std::fs::write(&stop, b"").expect("stop file");
    let winner = finish(runs.0.remove(0), Duration::from_secs(30));
    assert_eq!(winner.code, Some(0), "{winner:?}");
    let lines: Vec<String> = std::fs::read_to_string(&work).expect("work file").lines().map(str::to_owned).collect();
    assert_eq!(lines.len(), 1, "the work ran {} times: {lines:?}", lines.len());
    assert!(!table.is_held(&name), "the winner did not release its lease");
}

#[test]
fn exit_code_of_the_command_is_passed_through_and_the_lease_released() {
    let table = LeaseTable::created("exit");
    let name = unique("exit");
    let out = table.run(&["run", &name, "--lease", "--", "sh", "-c", "exit 7"]);
    assert_eq!(out.code, Some(7), "{}", out.stderr);
    assert_eq!(table.owner(&name), None, "the row is still there after the run");
}

#[test]
fn a_waiting_run_gets_the_lease_once_the_holder_finishes() {
    let table = LeaseTable::created("wait");
    let scratch = Scratch::new();
    let name = unique("wait");
    let (started, stop, ran) = (scratch.file("started"), scratch.file("stop"), scratch.file("ran"));
    let holder = table.spawn_run(&name, &[], &hold_until(&started, &stop));
    wait_until(Duration::from_secs(20), "the holder runs", || Path::new(&started).exists());

    let mut waiter =
        table.command(&["run", &name, "--lease", "--timeout", "30", "--", "touch", &ran]).spawn().expect("starts");
    // The waiter keeps trying while the lease is held: its session sends statement after
    // statement. Five different ones are at least two tries after the first (connecting
    // and the first try take at most three).
    let (mut admin, mut seen) = (test_session(), std::collections::HashSet::new());
    wait_until(Duration::from_secs(20), "the waiter has tried again and again", || {
        assert!(waiter.try_wait().expect("status").is_none(), "the waiter gave up while the lease was held");
        seen.extend(last_statement_of(&mut admin, waiter.id()));
        seen.len() >= 5
    });
    assert!(!Path::new(&ran).exists(), "the waiter ran while the lease was held");

    std::fs::write(&stop, b"").expect("stop file");
    assert_eq!(finish(holder, Duration::from_secs(30)).code, Some(0));
    let released = Instant::now();
    assert_eq!(waiter.wait().expect("waiter ends").code(), Some(0));
    // Generous: the point is that it acquired at the release, not at its 30 s timeout.
    assert!(released.elapsed() < Duration::from_secs(5), "the waiter ran {:?} after the release", released.elapsed());
    assert!(Path::new(&ran).exists(), "the waiter did not run after the release");
}

#[test]
fn status_shows_the_lease_row_with_its_owner_apart_from_the_locks() {
    let table = LeaseTable::created("status");
    let scratch = Scratch::new();
    let name = unique("status");
    let owner = unique("owner");
    let (started, stop) = (scratch.file("started"), scratch.file("stop"));
    let holder = table.spawn_run(&name, &["--owner", &owner, "--ttl", "30"], &hold_until(&started, &stop));
    wait_until(Duration::from_secs(20), "the holder runs", || Path::new(&started).exists());

    let out = table.run(&["status", &name]);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let lines: Vec<Vec<&str>> = out.stdout.lines().map(|l| l.split_whitespace().collect()).collect();
    assert_eq!(lines.len(), 2, "a lease header and one row expected:\n{}", out.stdout);
    assert_eq!(lines[0], ["RESOURCE", "OWNER", "TOKEN", "ACQUIRED", "EXPIRES", "TTL_LEFT_S", "STATE"]);
    assert_eq!((lines[1][0], lines[1][1], lines[1][6]), (name.as_str(), owner.as_str(), "held"), "{}", out.stdout);
    let left: i64 = lines[1][5].parse().expect("TTL_LEFT_S is a number");
    assert!((20..=31).contains(&left), "TTL_LEFT_S {left}");

    let json = table.run(&["status", &name, "--json"]);
    let rows: serde_json::Value = serde_json::from_str(&json.stdout).expect("status --json is JSON");
    assert_eq!((rows[0]["kind"].as_str(), rows[0]["owner"].as_str()), (Some("lease"), Some(owner.as_str())), "{rows}");

    std::fs::write(&stop, b"").expect("stop file");
    assert_eq!(finish(holder, Duration::from_secs(30)).code, Some(0));
    assert_eq!(table.run(&["status", &name]).stdout.trim(), "no locks held");
}

#[test]
fn status_works_without_the_lease_table_and_without_the_locks_table() {
    let no_leases = LeaseTable::missing("nolease");
    let out = no_leases.run(&["status"]);
    assert_eq!(out.code, Some(0), "status fails without a lease table: {}", out.stderr);

    let table = LeaseTable::created("nolocks");
    let name = unique("nolocks");
    let owner = unique("owner");
    let dsn = format!("{}&table=no_such_locks_table", table.dsn);
    let scratch = Scratch::new();
    let (started, stop) = (scratch.file("started"), scratch.file("stop"));
    let holder = table.spawn_run(&name, &["--owner", &owner], &hold_until(&started, &stop));
    wait_until(Duration::from_secs(20), "the holder runs", || Path::new(&started).exists());
    let out: Ran = table.command(&["status"]).env("MYSQLLOCK_DSN", &dsn).output().expect("runs").into();
    assert_eq!(out.code, Some(0), "status fails without a locks table: {}", out.stderr);
    assert!(out.stdout.starts_with("RESOURCE") && out.stdout.contains(&owner), "{}", out.stdout);
    std::fs::write(&stop, b"").expect("stop file");
    assert_eq!(finish(holder, Duration::from_secs(30)).code, Some(0));
}

#[test]
fn a_lease_taken_over_behind_its_back_terminates_the_command_and_exits_79() {
    let table = LeaseTable::created("stolen");
    let scratch = Scratch::new();
    let name = unique("stolen");
    let (started, terminated) = (scratch.file("started"), scratch.file("terminated"));
    // Renewed every second; the command works (`sleep 0.05` in a loop) until the SIGTERM,
    // which it notes before it ends.
    let script =
        format!("trap 'touch \"{terminated}\"; exit 0' TERM; touch '{started}'; while true; do sleep 0.05; done");
    let run = table.spawn_run(&name, &["--ttl", "3"], &script);
    wait_until(Duration::from_secs(20), "the command runs", || Path::new(&started).exists());

    let stolen = test_session()
        .execute(&format!("UPDATE `{}` SET owner = 'thief' WHERE resource = ?", table.name), &[name.as_str().into()])
        .expect("update runs");
    assert_eq!(stolen.affected_rows, 1, "the row to steal is not there");

    let out = finish(run, Duration::from_secs(30));
    assert_eq!(out.code, Some(LEASE_LOST), "{out:?}");
    assert!(Path::new(&terminated).exists(), "the command did not get SIGTERM");
    assert!(out.stderr.contains("is lost"), "{}", out.stderr);
    assert_eq!(table.owner(&name).as_deref(), Some("thief"), "the new owner's row was touched");
}

#[test]
fn a_command_that_ignores_sigterm_gets_sigkill_after_kill_after() {
    let table = LeaseTable::created("sigkill");
    let scratch = Scratch::new();
    let name = unique("sigkill");
    let (started, ended) = (scratch.file("started"), scratch.file("ended"));
    // The command ignores SIGTERM and works (`sleep 0.05` in a loop) until killed.
    let script = format!("trap '' TERM; touch '{started}'; while true; do sleep 0.05; done; touch '{ended}'");
    let run = table.spawn_run(&name, &["--ttl", "3", "--kill-after", "1"], &script);
    wait_until(Duration::from_secs(20), "the command runs", || Path::new(&started).exists());

    // Expired behind its back: the next renewal is refused.
    test_session()
        .execute(
            &format!(
                "UPDATE `{}` SET expires_at = UTC_TIMESTAMP() - INTERVAL 10 SECOND WHERE resource = ?",
                table.name
            ),
            &[name.as_str().into()],
        )
        .expect("update runs");
    let out = finish(run, Duration::from_secs(30));
    assert_eq!(out.code, Some(LEASE_LOST), "{out:?}");
    assert!(out.stderr.contains("SIGKILL after 1 s"), "{}", out.stderr);
    assert!(!Path::new(&ended).exists(), "the command ended on its own");
}

#[test]
fn kill_9_of_the_tool_leaves_the_lease_until_its_ttl_passes() {
    let table = LeaseTable::created("kill9");
    let scratch = Scratch::new();
    let name = unique("kill9");
    let (started, stop) = (scratch.file("started"), scratch.file("stop"));
    let mut run = table.spawn_run(&name, &["--ttl", "3", "--owner", "doomed"], &hold_until(&started, &stop));
    wait_until(Duration::from_secs(20), "the command runs", || Path::new(&started).exists());

    run.kill().expect("kill -9");
    run.wait().expect("reaped");
    let killed = Instant::now();
    // Lease mode has no session to end: the row stays, live, until its TTL passes.
    assert_eq!(table.owner(&name).as_deref(), Some("doomed"));
    assert!(table.is_held(&name), "the lease ended with the tool");
    let other = table.run(&["run", &name, "--lease", "--", "true"]);
    assert_eq!(other.code, Some(HELD_ELSEWHERE), "another run got the lease at once: {other:?}");

    wait_until(Duration::from_secs(15), "the lease expires", || !table.is_held(&name));
    let held_for = killed.elapsed();
    assert!(held_for >= Duration::from_secs(1), "freed {held_for:?} after the kill, before its TTL");
    let after = table.run(&["run", &name, "--lease", "--", "true"]);
    assert_eq!(after.code, Some(0), "the expired lease was not taken: {after:?}");
    std::fs::write(&stop, b"").expect("stop file");
}

#[test]
fn the_token_is_in_the_environment_and_grows_on_an_upgraded_table() {
    let table = LeaseTable::created("token");
    assert_eq!(table.run(&["init", "--lease", "--upgrade"]).code, Some(0));
    let name = unique("token");
    let token = || {
        let out = table.run(&["run", &name, "--lease", "--", "sh", "-c", "echo \"$MYSQLLOCK_TOKEN\""]);
        assert_eq!(out.code, Some(0), "{}", out.stderr);
        out.stdout.trim().parse::<u64>().unwrap_or_else(|_| panic!("MYSQLLOCK_TOKEN is not a number: {:?}", out.stdout))
    };
    let (first, second) = (token(), token());
    assert!(second > first, "tokens {first} then {second}");

    let plain = LeaseTable::created("notoken");
    let out = plain.run(&["run", &name, "--lease", "--", "sh", "-c", "echo \"${MYSQLLOCK_TOKEN-unset}\""]);
    assert_eq!(out.stdout.trim(), "unset", "a token without the token column");
}

#[test]
fn bad_input_exits_64_and_writes_nothing() {
    let table = LeaseTable::created("bad");
    let scratch = Scratch::new();
    let ran = scratch.file("ran");
    let name = unique("bad");
    for (args, message) in [
        (vec!["--ttl", "0"], "invalid ttl"),
        (vec!["--owner", ""], "invalid owner"),
        (vec!["--timeout", "-1"], "invalid wait"),
        (vec!["--kill-after", "-1"], "invalid kill-after"),
    ] {
        let mut full = vec!["run", name.as_str(), "--lease"];
        full.extend_from_slice(&args);
        full.extend_from_slice(&["--", "touch", &ran]);
        let out = table.run(&full);
        assert_eq!(out.code, Some(64), "{args:?}: {out:?}");
        assert!(out.stderr.contains(message), "{args:?}: expected {message:?} in {}", out.stderr);
    }
    assert!(!Path::new(&ran).exists(), "the command ran despite bad input");
    assert_eq!(table.owner(&name), None, "a row was written");
    let keep_alive = table.run(&["run", &name, "--lease", "--keep-alive", "--", "true"]);
    assert_eq!(keep_alive.code, Some(64), "--lease with --keep-alive: {keep_alive:?}");
}

#[test]
fn missing_lease_table_exits_78_and_points_to_init_lease() {
    let table = LeaseTable::missing("absent");
    let out = table.run(&["run", &unique("absent"), "--lease", "--", "true"]);
    assert_eq!(out.code, Some(78), "{out:?}");
    assert!(out.stderr.contains("mysqllock init --lease"), "{}", out.stderr);
}

#[test]
fn allow_cluster_is_accepted_as_a_flag_and_in_the_url() {
    let table = LeaseTable::missing("allow");
    let init = table.run(&["--allow-cluster", "init"]);
    assert_eq!(init.code, Some(0), "{}", init.stderr);
    let name = unique("allow");
    let out = table.run(&["run", &name, "--allow-cluster", "--", "sh", "-c", "exit 3"]);
    assert_eq!(out.code, Some(3), "{}", out.stderr);
    let url: Ran = table
        .command(&["run", &name, "--", "sh", "-c", "exit 4"])
        .env("MYSQLLOCK_DSN", format!("{}&allow_cluster=1", table.dsn))
        .output()
        .expect("runs")
        .into();
    assert_eq!(url.code, Some(4), "{}", url.stderr);
}
