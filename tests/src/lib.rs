//! Helpers for the cross-process scenario tests: lock-holding child processes that a
//! test drives line by line, stops, resumes and kills.

pub mod silence;

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

pub fn dsn() -> String {
    std::env::var("MYSQLLOCK_TEST_DSN").expect(
        "MYSQLLOCK_TEST_DSN is not set: run through scripts/test.sh or export it from scripts/mariadb.sh's env file",
    )
}

/// Whether session `id` of the test server waits in a GET_LOCK (the server's process list
/// says so, read on a session of its own).
pub fn queued_on_get_lock(id: u64) -> bool {
    use mysqllock_core::{Config, MysqlSession, Session};
    let mut inspector = MysqlSession::connect(&Config::from_url(&dsn()).expect("the test server's URL"))
        .expect("a session on the test server");
    let out = inspector
        .execute(
            "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = ? AND STATE = 'User lock'",
            &[id.into()],
        )
        .expect("the process list");
    out.first(0).as_i64() == Some(1)
}

/// A lock name no other test uses.
pub fn unique(label: &str) -> String {
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    format!("{label}-{}-{}", std::process::id(), COUNTER.fetch_add(1, Ordering::Relaxed))
}

/// One `lockctl` process.
pub struct Holder {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl Holder {
    pub fn spawn(lockctl: &str, dsn: &str) -> Holder {
        let mut child = Command::new(lockctl)
            .env("MYSQLLOCK_TEST_DSN", dsn)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("spawning lockctl");
        let stdin = child.stdin.take().expect("stdin");
        let stdout = BufReader::new(child.stdout.take().expect("stdout"));
        Holder { child, stdin, stdout }
    }

    /// Sends a command without waiting for its answer (for a blocking acquire).
    pub fn send(&mut self, command: &str) {
        writeln!(self.stdin, "{command}").and_then(|()| self.stdin.flush()).expect("writing to lockctl");
    }

    /// The next answer line.
    pub fn answer(&mut self) -> String {
        let mut line = String::new();
        self.stdout.read_line(&mut line).expect("reading from lockctl");
        line.trim_end().to_owned()
    }

    pub fn ask(&mut self, command: &str) -> String {
        self.send(command);
        self.answer()
    }

    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    pub fn signal(&self, sig: i32) {
        // SAFETY: plain kill(2) on our own child's pid.
        unsafe {
            libc::kill(self.pid(), sig);
        }
    }
}

impl Drop for Holder {
    fn drop(&mut self) {
        self.signal(libc::SIGCONT);
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Polls `f` until it is true or `limit` passes.
pub fn eventually(limit: Duration, mut f: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + limit;
    while Instant::now() < end {
        if f() {
            return true;
        }
        // The poll interval of this wait helper.
        std::thread::sleep(Duration::from_millis(20));
    }
    f()
}
