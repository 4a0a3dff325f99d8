//! Credentials the way the `mysql` client takes them: option files (`~/.my.cnf`,
//! `--defaults-file`, `--defaults-extra-file`), layered under `MYSQLLOCK_DSN` and
//! `--dsn`, and a password given in `--dsn` hidden from `ps`.
//!
//! Every run gets a HOME of the test's own (or none), so the `~/.my.cnf` of whoever runs
//! the tests never counts. Which source won is seen in whether the login succeeds: the
//! losing sources carry a wrong password (or host).

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::{dsn, finish, first_to_end, test_env, wait_until, Ran, Runs, Scratch, BIN};
use mysqllock_core::Config;

const USAGE: i32 = 64;
const UNAVAILABLE: i32 = 69;
const HELD_ELSEWHERE: i32 = 75;
/// How long a run may take at most before a test gives up on it.
const LIMIT: Duration = Duration::from_secs(30);
const WRONG_PASSWORD: &str = "Wr0ng-passw0rd-77";

fn unique(tag: &str) -> String {
    common::unique_with("cred", tag)
}

/// The test server's account and place, from MYSQLLOCK_TEST_DSN.
fn server() -> Config {
    Config::from_url(&dsn()).expect("the test DSN parses")
}

fn password() -> String {
    server().password.expect("the test DSN has a password")
}

/// `[client]` lines naming the test server's account and place, with `password`.
fn client_lines(password: &str) -> String {
    let c = server();
    format!(
        "user = {}\npassword = \"{password}\"\nhost = {}\nport = {}\ndatabase = {}\n",
        c.user,
        c.host,
        c.port,
        c.database.unwrap_or_default()
    )
}

/// The test server's URL with `password` (none if empty).
fn url_with(password: &str) -> String {
    let c = server();
    let userinfo = if password.is_empty() { c.user } else { format!("{}:{password}", c.user) };
    format!("mysql://{userinfo}@{}:{}/{}", c.host, c.port, c.database.unwrap_or_default())
}

/// A test's home directory and option files.
struct Home {
    scratch: Scratch,
}

impl Home {
    /// An empty home directory (no `.my.cnf` yet).
    fn new() -> Self {
        let scratch = Scratch::new();
        std::fs::create_dir_all(scratch.path("home")).expect("home dir");
        Home { scratch }
    }

    /// Writes `home/.my.cnf` (mode 600).
    fn my_cnf(&self, text: &str) -> String {
        self.file("home/.my.cnf", text)
    }

    /// Writes an option file `name` (mode 600) and returns its path.
    fn file(&self, name: &str, text: &str) -> String {
        let path = self.scratch.path(name);
        std::fs::write(&path, text).expect("writes the option file");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).expect("chmod 600");
        path.to_str().expect("utf-8 temp dir").to_owned()
    }

    /// `mysqllock ARGS` with this HOME, and neither MYSQLLOCK_DSN nor an inherited token.
    fn mysqllock(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(BIN);
        cmd.args(args)
            .env("HOME", self.scratch.path("home"))
            .env_remove("MYSQLLOCK_DSN")
            .env_remove("MYSQLLOCK_TOKEN")
            .stdin(Stdio::null());
        cmd
    }

    /// `mysqllock GLOBAL run --session NAME -- true`: logs in and takes a lock, no table
    /// needed; `env_dsn` as MYSQLLOCK_DSN.
    fn login(&self, global: &[&str], env_dsn: Option<&str>) -> Ran {
        let name = unique("login");
        let mut args = global.to_vec();
        args.extend_from_slice(&["run", "--session", &name, "--", "true"]);
        let mut cmd = self.mysqllock(&args);
        if let Some(env_dsn) = env_dsn {
            cmd.env("MYSQLLOCK_DSN", env_dsn);
        }
        let out: Ran = cmd.output().expect("mysqllock starts").into();
        for shown in [password(), WRONG_PASSWORD.to_owned()] {
            assert!(!out.stdout.contains(&shown) && !out.stderr.contains(&shown), "a password was shown: {out:?}");
        }
        out
    }
}

fn assert_logged_in(out: &Ran) {
    assert_eq!(out.code, Some(0), "the login failed: {}", out.stderr);
}

fn assert_login_refused(out: &Ran) {
    assert_eq!(out.code, Some(UNAVAILABLE), "{}", out.stderr);
    assert!(out.stderr.contains("cannot connect"), "{}", out.stderr);
}

#[test]
fn a_crontab_line_with_the_password_only_in_an_option_file_runs_the_job_once() {
    let home = Home::new();
    let file = home.file("job.cnf", &format!("[client]\n{}", client_lines(&password())));
    let extra = format!("--defaults-extra-file={file}");
    let init: Ran = home.mysqllock(&[&extra, "init"]).output().expect("init runs").into();
    assert_eq!(init.code, Some(0), "{}", init.stderr);

    let name = unique("cron");
    let (work, stop) = (home.scratch.file("work"), home.scratch.file("stop"));
    // The job: one line in the work file per run, then working (polling for the stop
    // file) until told to stop, so the lock stays taken while the others try.
    let script = format!("echo ran >> '{work}'; while [ ! -e '{stop}' ]; do sleep 0.05; done");
    let mut runs = Runs(
        (0..3)
            .map(|_| {
                home.mysqllock(&[&extra, "run", &name, "--", "sh", "-c", &script])
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
        assert!(loser.stderr.contains(&format!("lock \"{name}\" is held elsewhere")), "{}", loser.stderr);
    }
    let cmdline = std::fs::read(format!("/proc/{}/cmdline", runs.0[0].id())).expect("the winner's cmdline");
    assert!(!String::from_utf8_lossy(&cmdline).contains(&password()), "the password is in the command line");
    std::fs::write(&stop, b"").expect("stop file");
    let winner = finish(runs.0.remove(0), LIMIT);
    assert_eq!(winner.code, Some(0), "{winner:?}");
    let lines = std::fs::read_to_string(&work).expect("work file").lines().count();
    assert_eq!(lines, 1, "the job ran {lines} times");
}

#[test]
fn user_and_password_come_from_the_file_and_host_port_database_from_the_dsn() {
    let home = Home::new();
    // The file's place is wrong; only the DSN's can work.
    let user = server().user;
    let pw = password();
    home.my_cnf(&format!("[client]\nuser={user}\npassword={pw}\nhost=nowhere.invalid\nport=1\ndatabase=nodb\n"));
    let c = server();
    let place = format!("mysql://{}:{}/{}", c.host, c.port, c.database.unwrap_or_default());
    assert_logged_in(&home.login(&["--dsn", &place], None));
    // Without the file's user and password, the same DSN cannot log in.
    assert_login_refused(&home.login(&["--no-defaults", "--dsn", &place], None));
}

#[test]
fn the_mysqllock_group_beats_client_wherever_it_is() {
    let home = Home::new();
    let right = password();
    let client = format!("[client]\n{}", client_lines(WRONG_PASSWORD));
    home.my_cnf(&client);
    assert_login_refused(&home.login(&[], None));
    home.my_cnf(&format!("[mysqllock]\npassword = '{right}'\n{client}"));
    assert_logged_in(&home.login(&[], None));
}

#[test]
fn mysqllock_dsn_beats_the_option_file() {
    let home = Home::new();
    home.my_cnf(&format!("[client]\n{}", client_lines(WRONG_PASSWORD)));
    assert_logged_in(&home.login(&[], Some(&url_with(&password()))));
    home.my_cnf(&format!("[client]\n{}", client_lines(&password())));
    assert_login_refused(&home.login(&[], Some(&url_with(WRONG_PASSWORD))));
    // A MYSQLLOCK_DSN without a password keeps the file's.
    assert_logged_in(&home.login(&[], Some(&url_with(""))));
}

#[test]
fn dsn_beats_mysqllock_dsn() {
    let home = Home::new();
    assert_logged_in(&home.login(&["--dsn", &url_with(&password())], Some(&url_with(WRONG_PASSWORD))));
    assert_login_refused(&home.login(&["--dsn", &url_with(WRONG_PASSWORD)], Some(&url_with(&password()))));
}

#[test]
fn no_defaults_ignores_the_home_option_file() {
    let home = Home::new();
    home.my_cnf(&format!("[client]\n{}", client_lines(&password())));
    assert_logged_in(&home.login(&[], None));
    let out = home.login(&["--no-defaults"], None);
    assert_eq!(out.code, Some(USAGE), "{}", out.stderr);
    assert!(out.stderr.contains("no database"), "{}", out.stderr);
    assert_login_refused(&home.login(&["--no-defaults"], Some(&url_with(""))));
}

#[test]
fn defaults_file_reads_only_its_file_and_the_home_file_overrides_an_extra_file() {
    let home = Home::new();
    home.my_cnf(&format!("[client]\npassword={WRONG_PASSWORD}\n"));
    let file = home.file("right.cnf", &format!("[client]\n{}", client_lines(&password())));
    assert_logged_in(&home.login(&[&format!("--defaults-file={file}")], None));
    assert_login_refused(&home.login(&["--defaults-extra-file", &file], None));
}

#[test]
fn a_files_socket_is_used_without_a_host_or_with_localhost_only() {
    let home = Home::new();
    let c = server();
    let account = format!("user={}\npassword={}\ndatabase={}\n", c.user, password(), c.database.unwrap_or_default());
    let socket = test_env("MYSQLLOCK_TEST_SOCKET");
    home.my_cnf(&format!("[client]\n{account}socket={socket}\n"));
    assert_logged_in(&home.login(&[], None));
    // A TCP host: the socket (here a wrong one) does not count.
    home.my_cnf(&format!("[client]\n{account}host={}\nport={}\nsocket=/nonexistent/mysqld.sock\n", c.host, c.port));
    assert_logged_in(&home.login(&[], None));
    // localhost: the socket counts, and there is none.
    home.my_cnf(&format!("[client]\n{account}host=localhost\nport={}\nsocket=/nonexistent/mysqld.sock\n", c.port));
    assert_login_refused(&home.login(&[], None));
}

#[test]
fn a_missing_defaults_file_is_an_error_naming_it() {
    let home = Home::new();
    for option in ["--defaults-file", "--defaults-extra-file"] {
        let out = home.login(&[&format!("{option}=/nonexistent/mysqllock.cnf")], Some(&url_with(&password())));
        assert_eq!(out.code, Some(USAGE), "{}", out.stderr);
        assert!(out.stderr.contains("option file /nonexistent/mysqllock.cnf: "), "{}", out.stderr);
    }
}

#[test]
fn an_unknown_key_in_the_mysqllock_group_is_an_error_naming_file_and_line() {
    let home = Home::new();
    let file = home.file(
        "bad.cnf",
        &format!("[client]\n{}default-character-set=utf8mb4\n\n[mysqllock]\nuser_name=x\n", client_lines(&password())),
    );
    let out = home.login(&["--defaults-file", &file], None);
    assert_eq!(out.code, Some(USAGE), "{}", out.stderr);
    assert!(out.stderr.contains(&format!("option file {file}:10: unknown option \"user-name\"")), "{}", out.stderr);
}

#[test]
fn a_password_without_a_value_is_an_error_not_a_prompt() {
    let home = Home::new();
    let ran = home.scratch.file("ran");
    home.my_cnf(&format!("[client]\n{}[mysqllock]\npassword\n", client_lines(&password())));
    let out: Ran =
        home.mysqllock(&["run", "--session", &unique("prompt"), "--", "touch", &ran]).output().expect("runs").into();
    assert_eq!(out.code, Some(USAGE), "{}", out.stderr);
    assert!(out.stderr.contains(".my.cnf:8: password without a value"), "{}", out.stderr);
    assert!(!Path::new(&ran).exists(), "the command ran");
}

#[test]
fn a_world_writable_option_file_is_ignored_with_a_warning() {
    let home = Home::new();
    let file = home.my_cnf(&format!("[client]\n{}", client_lines(&password())));
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o666)).expect("chmod 666");
    // The file holds the only password.
    let out = home.login(&[], Some(&url_with("")));
    assert_login_refused(&out);
    let warning = format!("mysqllock: warning: option file {file} is ignored: it is world-writable");
    assert!(out.stderr.contains(&warning), "{}", out.stderr);
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).expect("chmod 600");
    let out = home.login(&[], Some(&url_with("")));
    assert_logged_in(&out);
    assert!(!out.stderr.contains("warning"), "{}", out.stderr);
}

#[test]
fn a_bad_ssl_mode_option_is_a_usage_error() {
    let out = Home::new().login(&["--ssl-mode", "sometimes"], Some(&url_with(&password())));
    assert_eq!(out.code, Some(USAGE), "{}", out.stderr);
    assert!(out.stderr.contains("--ssl-mode: ") && out.stderr.contains("VERIFY_IDENTITY"), "{}", out.stderr);
}

/// Runs `mysqllock DSN_ARGS run --session NAME -- wait-for-the-stop-file` and checks, while
/// it runs, that its command line shows `dsn_args` with the password as `x`s.
fn password_is_hidden_while_the_job_runs(dsn_args: impl Fn(&str) -> Vec<String>) {
    let home = Home::new();
    let (ready, stop) = (home.scratch.file("ready"), home.scratch.file("stop"));
    // The job: says it runs, then works (polling for the stop file) until told to stop.
    let script = format!("touch '{ready}'; while [ ! -e '{stop}' ]; do sleep 0.05; done");
    let pw = password();
    let mut args = dsn_args(&url_with(&pw));
    let name = unique("argv");
    args.extend(["run", "--session", &name, "--", "sh", "-c", &script].map(str::to_owned));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let child = home.mysqllock(&args).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("starts");
    let mut runs = Runs(vec![child]);
    wait_until(LIMIT, "the job runs", || Path::new(&ready).exists());

    let cmdline = std::fs::read(format!("/proc/{}/cmdline", runs.0[0].id())).expect("reads the cmdline");
    let shown: Vec<String> =
        cmdline.split(|&b| b == 0).filter(|a| !a.is_empty()).map(|a| String::from_utf8_lossy(a).into_owned()).collect();
    let mut expected = vec![BIN.to_owned()];
    expected.extend(dsn_args(&url_with(&"x".repeat(pw.len()))));
    assert_eq!(shown[..expected.len()], expected[..], "the command line shows {shown:?}");
    assert!(!shown.iter().any(|arg| arg.contains(&pw)), "the password is in {shown:?}");

    std::fs::write(&stop, b"").expect("stop file");
    let out = finish(runs.0.remove(0), LIMIT);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert_eq!(out.stderr.matches("warning: the password in --dsn").count(), 1, "{}", out.stderr);
    assert!(out.stderr.contains("~/.my.cnf") && out.stderr.contains("MYSQLLOCK_DSN"), "{}", out.stderr);
    assert!(!out.stderr.contains(&pw) && !out.stdout.contains(&pw), "{out:?}");
}

#[test]
fn a_password_in_dsn_is_hidden_from_the_command_line() {
    password_is_hidden_while_the_job_runs(|url| vec!["--dsn".to_owned(), url.to_owned()]);
}

#[test]
fn a_password_in_dsn_equals_is_hidden_from_the_command_line() {
    password_is_hidden_while_the_job_runs(|url| vec![format!("--dsn={url}")]);
}

#[test]
fn a_wrong_password_is_never_shown() {
    let home = Home::new();
    // `login` checks that neither password appears in the output.
    let out = home.login(&["--dsn", &url_with(WRONG_PASSWORD)], None);
    assert_login_refused(&out);
    assert!(out.stderr.contains("warning: the password in --dsn"), "{}", out.stderr);
    home.my_cnf(&format!("[client]\n{}", client_lines(WRONG_PASSWORD)));
    assert_login_refused(&home.login(&[], None));
}
