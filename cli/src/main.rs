//! `mysqllock`: a cluster-wide `flock(1)` for crontab lines, backed by the MySQL server
//! the nodes already share.

mod exit;
mod run;
mod signals;
mod status;

use std::ffi::OsString;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use mysqllock_core::{Config, NativeLocker};

const EXIT_CODES: &str = "\
Exit codes:
  0     success (for `run`: the command's own exit code is passed through)
  64    bad arguments or connection URL; nothing was changed
  69    the server is unreachable, refused the login, or dropped the connection
  70    any other database error
  75    run: another node holds the lock; the command was NOT run
  76    run: the command succeeded, but the lock was lost while it ran
        (its TTL passed and another node took it over): the run may have overlapped
  77    the database user lacks a privilege
  78    the lock table does not exist: run `mysqllock init`
  126   run: the command could not be executed
  127   run: the command was not found
  128+N run: the command was killed by signal N

Environment:
  MYSQLLOCK_DSN  the connection URL, instead of --dsn (keeps the password out of `ps`)";

/// Runs a command on exactly one node of a cluster, using a MySQL table as the arbiter.
#[derive(Parser)]
#[command(name = "mysqllock", version, after_help = EXIT_CODES)]
struct Cli {
    /// Connection URL: mysql://user:password@host:port/database?table=shared_locks
    /// (also: quote=ansi, socket=/path, charset=..., connect_timeout=seconds).
    #[arg(long, global = true, env = "MYSQLLOCK_DSN", hide_env_values = true, value_name = "URL")]
    dsn: Option<String>,

    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Creates the lock table (the PHP package's exact schema) unless it exists.
    Init,

    /// Runs COMMAND only if the lock NAME is acquired, then releases it.
    ///
    /// The command gets MYSQLLOCK_NAME and MYSQLLOCK_CONNECTION_ID in its environment.
    /// SIGHUP, SIGINT, SIGQUIT and SIGTERM sent to mysqllock are forwarded to it; the
    /// lock is released when it ends, however it ends.
    #[command(after_help = EXIT_CODES)]
    Run {
        /// The lock name (1 to 64 characters).
        name: String,
        /// Seconds to wait for the lock (fractions allowed); 0 = one try.
        #[arg(long, default_value_t = 0.0, allow_negative_numbers = true, value_name = "SECONDS")]
        timeout: f64,
        /// Seconds the lock lives at most; after that another node may take it over.
        /// Choose it longer than the command can ever run.
        #[arg(long, default_value_t = 3600.0, allow_negative_numbers = true, value_name = "SECONDS")]
        ttl: f64,
        /// The command and its arguments, after `--`.
        #[arg(last = true, required = true, value_name = "COMMAND")]
        command: Vec<OsString>,
    },

    /// Lists the locks in the table: holder, age, remaining TTL, state.
    ///
    /// STATE is "alive" (the holder's session is up), "dead" (it is gone; the next
    /// acquirer reclaims the row) or "pending" (acquisition in progress). A negative
    /// TTL_LEFT_S means the lease expired and may be taken over.
    Status {
        /// Only this lock.
        name: Option<String>,
        /// A JSON array instead of the table.
        #[arg(long)]
        json: bool,
    },
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            // --help and --version end up here too, and are not errors.
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { exit::USAGE } else { 0 });
        }
    };
    let Some(dsn) = cli.dsn else {
        eprintln!("mysqllock: no database: pass --dsn URL or set MYSQLLOCK_DSN");
        return ExitCode::from(exit::USAGE);
    };
    let mut locker = match Config::from_url(&dsn) {
        Ok(config) => NativeLocker::from_config(config),
        Err(e) => return ExitCode::from(exit::report(&e)),
    };
    ExitCode::from(dispatch(&mut locker, &cli.command))
}

/// Runs one subcommand and returns its exit code.
fn dispatch(locker: &mut NativeLocker, command: &Cmd) -> u8 {
    match command {
        Cmd::Init => init(locker),
        Cmd::Run { name, timeout, ttl, command } => {
            run::run(locker, &run::Job { name, timeout: *timeout, ttl: *ttl, command })
        }
        Cmd::Status { name, json } => status(locker, name.as_deref(), *json),
    }
}

fn init(locker: &mut NativeLocker) -> u8 {
    let table = locker.table().display_name();
    match locker.init_table() {
        Ok(true) => println!("created table {table}"),
        Ok(false) => println!("table {table} already exists"),
        Err(e) => return exit::report(&e),
    }
    0
}

fn status(locker: &mut NativeLocker, name: Option<&str>, json: bool) -> u8 {
    match locker.status(name) {
        Ok(rows) if json => print!("{}", status::json(&rows)),
        Ok(rows) => print!("{}", status::table(&rows)),
        Err(e) => return exit::report(&e),
    }
    0
}
