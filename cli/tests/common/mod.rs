//! What the CLI's test files share: the test server (and servers of a test's own),
//! unique names, a finished run's output, scratch directories and tables of a test's
//! own, and waiting with a deadline.
#![allow(dead_code)] // each test file uses its own part

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use mysqllock_core::{Config, MysqlSession, Session};

pub const BIN: &str = env!("CARGO_BIN_EXE_mysqllock");

pub fn dsn() -> String {
    std::env::var("MYSQLLOCK_TEST_DSN").unwrap_or_else(|_| {
        panic!(
            "MYSQLLOCK_TEST_DSN is not set: these tests need a MariaDB server. Start one with \
             `bash scripts/mariadb.sh start /tmp/db && set -a && . /tmp/db/env && set +a`"
        )
    })
}

/// The test DSN with `param` added to its query string.
pub fn dsn_with(param: &str) -> String {
    let dsn = dsn();
    let sep = if dsn.contains('?') { '&' } else { '?' };
    format!("{dsn}{sep}{param}")
}

/// A name no other test (or test run) uses: `prefix-tag-pid-counter`.
pub fn unique_with(prefix: &str, tag: &str) -> String {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    format!("{prefix}-{tag}-{}-{}", std::process::id(), NEXT.fetch_add(1, Ordering::SeqCst))
}

/// A session of the test's own on the test server, to look at what mysqllock did.
pub fn test_session() -> MysqlSession {
    let config = Config::from_url(&dsn()).expect("test DSN parses");
    MysqlSession::connect(&config).expect("connects")
}

/// A home directory that does not exist: no `~/.my.cnf` of the machine's user is read.
pub const NO_HOME: &str = "/nonexistent/mysqllock-tests";

/// `mysqllock ARGS` with `dsn` in the environment.
pub fn mysqllock_on(dsn: &str, args: &[&str]) -> Command {
    let mut cmd = Command::new(BIN);
    // Never a token inherited from an outer run, nor the settings of whoever runs the tests.
    cmd.args(args).env("MYSQLLOCK_DSN", dsn).env("HOME", NO_HOME).env_remove("MYSQLLOCK_TOKEN").stdin(Stdio::null());
    cmd
}

/// Exit code, stdout, stderr of a finished run.
#[derive(Debug)]
pub struct Ran {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
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

/// Polls `condition` until it holds; panics with `what` after `limit`.
pub fn wait_until(limit: Duration, what: &str, mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !condition() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        // The poll interval of this wait helper.
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits for a background run to end, killing it if it does not within `limit`.
pub fn finish(mut child: Child, limit: Duration) -> Ran {
    let deadline = Instant::now() + limit;
    while child.try_wait().expect("child status").is_none() {
        if Instant::now() >= deadline {
            let _ = child.kill();
            let out: Ran = child.wait_with_output().expect("collects output").into();
            panic!("mysqllock did not end within {limit:?}: {out:?}");
        }
        // The poll interval of this wait.
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().expect("collects output").into()
}

/// Background runs, killed (with their commands: PR_SET_PDEATHSIG) if a test fails
/// while they still run.
pub struct Runs(pub Vec<Child>);

impl Drop for Runs {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Waits until `count` of `runs` have ended (within `limit`), takes them out of `runs`
/// and returns how they ended.
pub fn first_to_end(runs: &mut Runs, count: usize, limit: Duration) -> Vec<Ran> {
    let runs = &mut runs.0;
    let mut ended: Vec<Ran> = Vec::new();
    wait_until(limit, &format!("{count} runs end"), || {
        let mut i = 0;
        while i < runs.len() {
            if runs[i].try_wait().expect("status").is_some() {
                ended.push(runs.remove(i).wait_with_output().expect("output").into());
            } else {
                i += 1;
            }
        }
        ended.len() >= count
    });
    ended
}

/// The repository's root (scripts/ lives there): MYSQLLOCK_ROOT, as the suites set it,
/// else the workspace this crate is in.
pub fn repo_root() -> PathBuf {
    std::env::var_os("MYSQLLOCK_ROOT")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join(".."))
}

/// An environment variable the test server's `env` file sets; panics naming it if unset.
pub fn test_env(var: &str) -> String {
    std::env::var(var).unwrap_or_else(|_| {
        panic!("{var} is not set: load the test server's env file (`set -a && . /tmp/db/env && set +a`)")
    })
}

/// Whether the test server is MySQL rather than MariaDB (its env file says which).
pub fn on_mysql() -> bool {
    match test_env("MYSQLLOCK_TEST_SERVER").as_str() {
        "mysql" => true,
        "mariadb" => false,
        other => panic!("MYSQLLOCK_TEST_SERVER is {other:?}, neither mariadb nor mysql"),
    }
}

/// The test server's own script (scripts/mariadb.sh or scripts/mysql.sh, from its env
/// file): a server of a test's own is of the same kind.
pub fn server_script() -> String {
    test_env("MYSQLLOCK_SERVER_SCRIPT")
}

/// `bash SERVER_SCRIPT ARGS`; panics with its output if it fails.
pub fn server_sh(args: &[&str]) {
    let out: Ran =
        Command::new("bash").arg(server_script()).args(args).stdin(Stdio::null()).output().expect("bash runs").into();
    assert_eq!(out.code, Some(0), "{} {args:?} failed: {}{}", server_script(), out.stdout, out.stderr);
}

/// A server of the test's own (of the test server's kind), for a test that needs one
/// in a known state whatever other tests do to the shared one. Stopped and removed at
/// the end.
pub struct OwnServer {
    dir: PathBuf,
    /// The DSN of its ordinary test user.
    pub dsn: String,
}

impl OwnServer {
    /// Runs SQL as root on this server (scripts/mysql.sh's `sql` command; MariaDB's root
    /// is reached through its socket with the mariadb client).
    pub fn root_sql(&self, sql: &str) {
        let dir = self.dir.to_str().expect("utf-8 temp dir");
        let mut command = match on_mysql() {
            true => {
                let mut c = Command::new("bash");
                c.args([&server_script(), "sql", dir, "-e", sql]);
                c
            }
            false => {
                let mut c = Command::new("mariadb");
                c.args(["--no-defaults", "-uroot", &format!("--socket={dir}/mysqld.sock"), "-e", sql]);
                c
            }
        };
        let out: Ran = command.stdin(Stdio::null()).output().expect("the SQL client runs").into();
        assert_eq!(out.code, Some(0), "{sql} as root failed: {}", out.stderr);
    }
}

impl OwnServer {
    pub fn start(tag: &str) -> Self {
        // Under /tmp whatever TMPDIR says: the MariaDB 11.8 server runs in a chroot that
        // shares only /tmp with the host (scripts/mariadb.sh refuses any other DIR).
        let dir = PathBuf::from("/tmp").join(unique_with("server", tag));
        let path = dir.to_str().expect("utf-8 temp dir").to_owned();
        // Stopped by Drop from here on, even if starting fails halfway.
        let mut server = OwnServer { dir, dsn: String::new() };
        server_sh(&["start", &path]);
        let env = std::fs::read_to_string(server.dir.join("env")).expect("the server's env file");
        server.dsn = env
            .lines()
            .find_map(|line| line.strip_prefix("MYSQLLOCK_TEST_DSN="))
            .expect("MYSQLLOCK_TEST_DSN in the env file")
            .to_owned();
        server
    }
}

impl Drop for OwnServer {
    fn drop(&mut self) {
        if let Some(path) = self.dir.to_str() {
            let _ = Command::new("bash").arg(server_script()).args(["stop", path]).status();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A per-test directory for marker files, removed at the end.
pub struct Scratch(PathBuf);

impl Scratch {
    pub fn new() -> Self {
        let dir = std::env::temp_dir().join(unique_with("scratch", env!("CARGO_CRATE_NAME")));
        std::fs::create_dir_all(&dir).expect("scratch dir");
        Scratch(dir)
    }

    pub fn path(&self, file: &str) -> PathBuf {
        self.0.join(file)
    }

    /// The path as a `&str` for shell scripts.
    pub fn file(&self, file: &str) -> String {
        self.path(file).to_str().expect("utf-8 temp dir").to_owned()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A table of the test's own (the locks' table or the lease table, named by the DSN
/// parameter it is passed in), so tests can upgrade it or leave it out whatever other
/// tests and suites do to the default one. Dropped at the end.
pub struct OwnTable {
    pub name: String,
    /// The test DSN naming this table.
    pub dsn: String,
}

impl OwnTable {
    /// A table that does not exist yet, named `name` (with `_` for `-`) as `param`
    /// (`table`, `lease_table`) in the DSN.
    pub fn named(param: &str, name: &str) -> Self {
        let name = name.replace('-', "_");
        let dsn = dsn_with(&format!("{param}={name}"));
        OwnTable { name, dsn }
    }

    /// The table, made by `mysqllock INIT_ARGS`.
    pub fn created_by(self, init_args: &[&str]) -> Self {
        let out = self.run(init_args);
        assert_eq!(out.code, Some(0), "{init_args:?} failed: {}", out.stderr);
        self
    }

    pub fn command(&self, args: &[&str]) -> Command {
        mysqllock_on(&self.dsn, args)
    }

    pub fn run(&self, args: &[&str]) -> Ran {
        self.command(args).output().expect("mysqllock starts").into()
    }

    /// The table's columns, in order, from information_schema.
    pub fn columns(&self) -> Vec<String> {
        let sql = "SELECT COLUMN_NAME FROM information_schema.COLUMNS \
                   WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ? ORDER BY ORDINAL_POSITION";
        let out = test_session().execute(sql, &[self.name.as_str().into()]).expect("reads information_schema");
        out.rows.iter().map(|row| row[0].as_text().expect("a column name")).collect()
    }
}

impl Drop for OwnTable {
    fn drop(&mut self) {
        let _ = test_session().execute(&format!("DROP TABLE IF EXISTS `{}`", self.name), &[]);
    }
}
