//! A server restart: every session and GET_LOCK is gone, the MyISAM rows stay, and
//! connection ids start again from the bottom. Runs its own server, since it restarts it.

#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use mysqllock_tests::{unique, Holder};

const LOCKCTL: &str = env!("CARGO_BIN_EXE_lockctl");

/// The test server's own script (scripts/mariadb.sh or scripts/mysql.sh): a server of the
/// test's own is of the same kind.
fn script() -> String {
    std::env::var("MYSQLLOCK_SERVER_SCRIPT")
        .expect("MYSQLLOCK_SERVER_SCRIPT is not set: export the test server's DIR/env")
}

struct OwnServer {
    dir: PathBuf,
    dsn: String,
}

impl OwnServer {
    fn start() -> OwnServer {
        // Under /tmp whatever TMPDIR says: the MariaDB 11.8 server runs in a chroot that
        // shares only /tmp with the host (scripts/mariadb.sh refuses any other DIR).
        let dir = PathBuf::from("/tmp").join(unique("mysqllock-restart"));
        let status =
            Command::new("bash").arg(script()).arg("start").arg(&dir).status().expect("running the server script");
        assert!(status.success(), "{} start failed", script());
        let env = std::fs::read_to_string(dir.join("env")).expect("reading the server's env file");
        let dsn = env
            .lines()
            .find_map(|l| l.strip_prefix("MYSQLLOCK_TEST_DSN="))
            .expect("MYSQLLOCK_TEST_DSN in env file")
            .to_owned();
        OwnServer { dir, dsn }
    }

    fn script(&self, cmd: &str) {
        let status = Command::new("bash").arg(script()).arg(cmd).arg(&self.dir).status().unwrap();
        assert!(status.success(), "{} {cmd} failed", script());
    }
}

impl Drop for OwnServer {
    fn drop(&mut self) {
        self.script("stop");
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[test]
fn lock_held_across_a_server_restart_is_free_at_once_and_its_holder_learns_the_loss() {
    let server = OwnServer::start();
    let mut init = mysqllock_core::NativeLocker::from_config(mysqllock_core::Config::from_url(&server.dsn).unwrap());
    init.init_table().unwrap();
    drop(init);
    let name = unique("restart");
    let mut a = Holder::spawn(LOCKCTL, &server.dsn);
    assert!(a.ask(&format!("acquire {name} 0 300")).starts_with("ok"));

    server.script("restart");

    let mut b = Holder::spawn(LOCKCTL, &server.dsn);
    let start = Instant::now();
    let answer = b.ask(&format!("acquire {name} 5 60"));
    assert!(answer.starts_with("ok"), "{answer}");
    assert!(start.elapsed() < Duration::from_secs(2), "waited {:?} though the TTL was 300 s", start.elapsed());
    let release = a.ask(&format!("release {name}"));
    assert!(release.starts_with("err not-held"), "{release}");
    // the old holder can work again on a fresh session, and still cannot steal the lock
    let again = a.ask(&format!("acquire {name} 0.3 60"));
    assert!(again.starts_with("err timeout"), "{again}");
}

#[test]
fn tokens_keep_growing_across_a_restart_and_a_server_crash() {
    let server = OwnServer::start();
    let config = mysqllock_core::Config::from_url(&server.dsn).unwrap();
    mysqllock_core::NativeLocker::from_config(config.clone()).upgrade_table().unwrap();
    let name = unique("token-restart");
    // Released rows are deleted: only the table's counter remembers the last token.
    let cycle = || {
        let mut l = mysqllock_core::NativeLocker::from_config(config.clone());
        let token = l.acquire(&name, 5.0, 60.0).unwrap().token.expect("a token");
        l.release(&name).unwrap();
        token
    };
    let first = cycle();

    server.script("restart");
    let after_restart = cycle();
    assert!(after_restart > first, "{after_restart} after {first}");

    let pid = std::fs::read_to_string(server.dir.join("mysqld.pid")).unwrap();
    let killed = Command::new("kill").args(["-9", pid.trim()]).status().unwrap();
    assert!(killed.success());
    server.script("restart");
    let after_crash = cycle();
    assert!(after_crash > after_restart, "{after_crash} after {after_restart}");
}
