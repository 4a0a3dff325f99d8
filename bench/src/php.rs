//! Running the PHP side: `php -d extension=... bench/php/SCRIPT.php ...`, always with the
//! extension loaded (also for the raw PDO runs, so the only difference is the work).

use std::path::PathBuf;
use std::process::{Command, Stdio};

use crate::lines::Report;
use crate::status::VARS;
use crate::Res;

pub struct Php {
    pub ext: PathBuf,
    pub dir: PathBuf,
    pub dsn: String,
}

impl Php {
    pub fn command(&self, script: &str) -> Command {
        let mut c = Command::new("php");
        c.arg("-d")
            .arg(format!("extension={}", self.ext.display()))
            .arg("-d")
            .arg("display_errors=stderr")
            .arg("-d")
            .arg("memory_limit=1G");
        c.arg(self.dir.join(script))
            .env("MYSQLLOCK_BENCH_DSN", &self.dsn)
            .env("MYSQLLOCK_BENCH_EXT", &self.ext)
            .env("MYSQLLOCK_BENCH_VARS", VARS.join(","));
        c
    }

    /// Runs a script to the end; fails unless it exits 0. Returns its report.
    pub fn run(&self, script: &str, args: &[String]) -> Res<Report> {
        let out = self.command(script).args(args).stderr(Stdio::inherit()).output()?;
        if !out.status.success() {
            return Err(format!("php {script} {} failed ({})", args.join(" "), out.status).into());
        }
        Ok(Report::parse(&String::from_utf8_lossy(&out.stdout)))
    }

    pub fn version(&self) -> Res<String> {
        let out = self.command("version.php").output()?;
        if !out.status.success() {
            return Err(format!(
                "php cannot run with the extension {}: {}",
                self.ext.display(),
                String::from_utf8_lossy(&out.stderr)
            )
            .into());
        }
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
    }
}
