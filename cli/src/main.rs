//! `mysqllock`: a cluster-wide `flock(1)` for crontab lines, backed by the MySQL server
//! the nodes already share.

mod argv;
mod connection;
mod duration;
mod exit;
mod lease;
mod option_files;
mod run;
mod session;
mod signals;
mod status;

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{ArgGroup, Parser, Subcommand};
use mysqllock_core::{
    session_lock, AcquireOptions, Config, DistributedLock, Error, LeaseRow, LockStatus, NativeLocker,
};

const EXIT_CODES: &str = "\
Connection settings, each source overriding single parts of the ones before:
  1. option files in the mysql client's syntax, groups [client] then [mysqllock]
     (which wins): --defaults-extra-file, then ~/.my.cnf; --defaults-file reads only
     its file, --no-defaults none. Keys: user, password, host, port, socket, database,
     ssl-mode, ssl-ca, ssl-cert, ssl-key. A world-writable file is ignored. A socket
     from a file is used only if the host is unset or localhost.
  2. MYSQLLOCK_DSN
  3. --dsn (a password in it is hidden from `ps` once mysqllock runs, with a warning)
  4. --ssl-mode, --ssl-ca, --ssl-cert, --ssl-key, --connect-timeout,
     --read-timeout, --write-timeout
  A crontab line keeps the password out of `ps` with ~/.my.cnf (mode 600):
    [client]
    user=app
    password=...
    host=db.example
    database=prod

Exit codes:
  0     success (for `run`: the command's own exit code is passed through)
  64    bad arguments, option file or connection URL; nothing was changed
  69    the server is unreachable, refused the login, dropped the connection or
        stopped answering (--connect-timeout; --read-timeout beyond the lock
        wait), or cannot take the statement now (a cluster node outside its primary
        component or majority, a read-only Group Replication secondary)
  70    any other database error
  75    run: another node holds the lock; the command was NOT run
  76    run: the command succeeded, but the lock was lost while it ran
        (its TTL passed and another node took it over, or, with --session, its
        session ended after the last check): the run may have overlapped
  77    the database user lacks a privilege
  78    the lock table does not exist: run `mysqllock init` (or `init --upgrade`,
        `init --lease`), or the lease table cannot be used (not InnoDB), or
        `status --session` cannot list session locks: the server does not show them
  79    run --lease, --keep-alive, --session: the lock was lost while the command
        ran (a renewal was refused, or none succeeded before the local deadline;
        --max-hold ended it; the session holding a session lock ended); the command
        got SIGTERM (and SIGKILL after --kill-after, with --lease and --session)
  80    the server is a replicated cluster node (Galera, Group Replication), where
        GET_LOCK is per node: use `run --lease`, or --allow-cluster if every lock
        client talks to this one node
  126   run: the command could not be executed
  127   run: the command was not found
  128+N run: the command was killed by signal N

Environment:
  MYSQLLOCK_DSN  a connection URL as for --dsn, which overrides it part by part (keeps
                 the password out of `ps`); the command of `run` sees it without
                 its password
  HOME           where ~/.my.cnf is looked for";

/// The heading of the connection options in `--help`, apart from each command's own.
const CONNECTION: &str = "Connection";

/// Runs a command on exactly one node of a cluster, using a MySQL table as the arbiter.
#[derive(Parser)]
#[command(name = "mysqllock", version, after_help = EXIT_CODES)]
struct Cli {
    /// Connection URL: mysql://user:password@host:port/database?table=shared_locks
    /// (also: lease_table=distributed_locks, quote=ansi, socket=/path, charset=...,
    /// connect_timeout=seconds, read_timeout=seconds, write_timeout=seconds,
    /// allow_cluster=1, ssl-mode=..., ssl-ca=/path,
    /// ssl-cert=/path, ssl-key=/path). Overrides the option files and MYSQLLOCK_DSN part
    /// by part: mysql://otherhost/db keeps their user and password. Not needed when an
    /// option file or MYSQLLOCK_DSN names the server. A password here is visible in `ps`
    /// until mysqllock hides it: prefer ~/.my.cnf or MYSQLLOCK_DSN.
    #[arg(long, global = true, help_heading = CONNECTION, value_name = "URL")]
    dsn: Option<String>,

    /// Read only this option file (my.cnf syntax, groups `[client]` and `[mysqllock]`),
    /// not ~/.my.cnf.
    #[arg(long, global = true, help_heading = CONNECTION, value_name = "FILE", conflicts_with_all = ["defaults_extra_file", "no_defaults"])]
    defaults_file: Option<PathBuf>,

    /// Read this option file before ~/.my.cnf, whose settings override it.
    #[arg(long, global = true, help_heading = CONNECTION, value_name = "FILE", conflicts_with = "no_defaults")]
    defaults_extra_file: Option<PathBuf>,

    /// Read no option file, not even ~/.my.cnf.
    #[arg(long, global = true, help_heading = CONNECTION)]
    no_defaults: bool,

    /// TLS: DISABLED, PREFERRED, REQUIRED, VERIFY_CA or VERIFY_IDENTITY
    /// [default: PREFERRED; VERIFY_CA with --ssl-ca].
    #[arg(long, global = true, help_heading = CONNECTION, value_name = "MODE")]
    ssl_mode: Option<String>,

    /// The CA certificates (PEM) to check the server's certificate against, instead of
    /// the system's.
    #[arg(long, global = true, help_heading = CONNECTION, value_name = "FILE")]
    ssl_ca: Option<String>,

    /// A client certificate (PEM), with --ssl-key, for accounts that require one.
    #[arg(long, global = true, help_heading = CONNECTION, value_name = "FILE")]
    ssl_cert: Option<String>,

    /// The client certificate's private key (PEM).
    #[arg(long, global = true, help_heading = CONNECTION, value_name = "FILE")]
    ssl_key: Option<String>,

    /// The whole connect: TCP, TLS, the login and the session's setup [default: 10s].
    /// The same as connect_timeout= in the URL.
    #[arg(long, global = true, help_heading = CONNECTION, value_parser = duration::seconds, value_name = "DURATION")]
    connect_timeout: Option<f64>,

    /// How long a statement may go unanswered beyond the lock wait it asks the server
    /// for; then the server counts as gone (exit 69) [default: 30s]. The same as
    /// read_timeout= in the URL.
    #[arg(long, global = true, help_heading = CONNECTION, value_parser = duration::seconds, value_name = "DURATION")]
    read_timeout: Option<f64>,

    /// How long sending to the server may stay stuck; then it counts as gone (exit 69)
    /// [default: 30s]. The same as write_timeout= in the URL.
    #[arg(long, global = true, help_heading = CONNECTION, value_parser = duration::seconds, value_name = "DURATION")]
    write_timeout: Option<f64>,

    /// Allow the GET_LOCK-based locks (run without --lease) on a replicated cluster node
    /// (Galera, Group Replication), where they are refused (exit 80) because GET_LOCK
    /// and KILL act on one node only. Only if every lock client talks to this one node;
    /// otherwise use --lease. The same as allow_cluster=1 in the URL.
    #[arg(long, global = true)]
    allow_cluster: bool,

    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Creates the lock table (the PHP package's exact schema) unless it exists.
    ///
    /// With --upgrade, also adds the columns for fencing tokens and for recording who
    /// holds a lock (token, holder_host, holder_pid). Processes running the PHP package
    /// keep working on the upgraded table. Running it again is harmless.
    ///
    /// With --lease, creates the lease mode's table instead (distributed_locks, or the
    /// URL's lease_table=; InnoDB), as Nene\Kit\DistributedLock documents it; with
    /// --lease --upgrade, also adds a fencing token column and microsecond times.
    Init {
        /// Also add the token, holder_host and holder_pid columns if they are missing
        /// (with --lease: the token column and microsecond times).
        #[arg(long)]
        upgrade: bool,
        /// The lease mode's table rather than shared_locks.
        #[arg(long)]
        lease: bool,
    },

    /// Runs COMMAND only if the lock NAME is acquired, then releases it.
    ///
    /// The command gets in its environment: MYSQLLOCK_NAME, MYSQLLOCK_CONNECTION_ID, and
    /// MYSQLLOCK_TOKEN, the fencing token of this acquisition, greater than that of every
    /// earlier one. Make the write the lock protects check it, so that a run that lost
    /// the lock unawares cannot overwrite a newer one's work:
    ///
    ///   UPDATE t SET ..., fence = $MYSQLLOCK_TOKEN WHERE id = ... AND fence < $MYSQLLOCK_TOKEN
    ///
    /// MYSQLLOCK_TOKEN is unset while the table has no token column: run
    /// `mysqllock init --upgrade` once.
    ///
    /// SIGHUP, SIGINT, SIGQUIT and SIGTERM sent to mysqllock are forwarded to it; the
    /// lock is released when it ends, however it ends.
    ///
    /// With --lease, the lock is a table-only lease (the lease mode: no GET_LOCK, safe on
    /// replicated clusters) owned by --owner, renewed every third of --ttl while the
    /// command runs. If it is lost (a renewal refused, or none succeeded before the local
    /// deadline), the command gets SIGTERM, SIGKILL after --kill-after, and the run exits
    /// 79. The command gets MYSQLLOCK_NAME, MYSQLLOCK_OWNER and, on an upgraded lease
    /// table (`init --lease --upgrade`), MYSQLLOCK_TOKEN. If mysqllock itself is killed,
    /// the lease stays until its TTL passes.
    ///
    /// With --session, the lock is a plain GET_LOCK session lock: no table (no `init`),
    /// no TTL; it is held as long as mysqllock's database session, and ends with it,
    /// also when mysqllock is killed (kill -9). Names that differ only in case or accents
    /// are one lock (the GET_LOCK name is the folded name; a lowercase ASCII name is its
    /// own, the lock `SELECT GET_LOCK('name', 0)` takes). While the command runs, the
    /// session is checked every --ping-every, which also keeps it from being ended as
    /// idle (wait_timeout). If it is lost (killed, server restarted), the command gets
    /// SIGTERM, SIGKILL after --kill-after, and the run exits 79. The command gets
    /// MYSQLLOCK_NAME and MYSQLLOCK_CONNECTION_ID (no token). It cannot be combined with
    /// the options of the table lock or the lease (--ttl, --lease, --owner, --keep-alive,
    /// --max-hold, --at-least). A session lock is free again the moment its holder ends:
    /// a job shorter than the clock skew between the nodes whose cron starts it may run
    /// once per node; use --at-least (without --session) to prevent that.
    ///
    /// DURATION: seconds (90, 1.5) or a number with a unit: 500ms, 90s, 5m, 2h, 1d.
    #[command(after_help = EXIT_CODES, group = ArgGroup::new("terminates").args(["lease", "session"]))]
    Run {
        /// The lock name (1 to 64 characters).
        name: String,
        /// How long to wait for the lock; 0 = one try.
        #[arg(long, default_value = "0", value_parser = duration::seconds, allow_negative_numbers = true, value_name = "DURATION")]
        timeout: f64,
        /// How long the lock lives at most; after that another node may take it over.
        /// Without --keep-alive, choose it longer than the command can ever run.
        /// [default: 3600; with --lease: 60, renewed while the command runs]
        #[arg(long, value_parser = duration::seconds, allow_negative_numbers = true, value_name = "DURATION")]
        ttl: Option<f64>,
        /// Use the lease mode (table-only, for replicated clusters) instead of GET_LOCK.
        #[arg(long, conflicts_with_all = ["keep_alive", "max_hold", "at_least"])]
        lease: bool,
        /// Use a plain GET_LOCK session lock (no table, no TTL) instead of the table's
        /// lock: held as long as mysqllock's session.
        #[arg(long, conflicts_with_all = ["ttl", "lease", "owner", "keep_alive", "max_hold", "at_least"])]
        session: bool,
        /// With --session: how often the session is checked while the command runs (one
        /// statement each time); a lost session is noticed at the next check.
        /// [default: 30s, or half the session's wait_timeout if that is shorter]
        #[arg(long, requires = "session", value_parser = duration::seconds, allow_negative_numbers = true, value_name = "DURATION")]
        ping_every: Option<f64>,
        /// With --lease: the lease's owner [default: host:pid:random, unique per run].
        #[arg(long, requires = "lease", value_name = "STRING")]
        owner: Option<String>,
        /// With --lease or --session: how long the command may take to end after the
        /// SIGTERM sent when the lock was lost, before it gets SIGKILL.
        #[arg(long, requires = "terminates", default_value = "5", value_parser = duration::seconds, allow_negative_numbers = true, value_name = "DURATION")]
        kill_after: f64,
        /// Renew the lock in the background (every third of --ttl) while the command
        /// runs, up to --max-hold. Use a short --ttl with it (e.g. 60): a node that
        /// crashes or freezes then blocks the others for --ttl only. If a renewal fails,
        /// the lock counts as lost: the command gets SIGTERM (it would run unguarded),
        /// and the run ends with its exit code, or 76 if it still succeeds.
        #[arg(long)]
        keep_alive: bool,
        /// With --keep-alive: stop renewing this long after acquisition [default: 1h].
        /// The lock then runs out (at --max-hold or --ttl after acquisition, whichever
        /// is later), and a command still running at that moment gets SIGTERM.
        #[arg(long, requires = "keep_alive", value_parser = duration::seconds, allow_negative_numbers = true, value_name = "DURATION")]
        max_hold: Option<f64>,
        /// Keep the lock taken until this long after acquisition, even if the command
        /// ends sooner, so a node whose cron fires a little later skips the job (exit
        /// 75) instead of running it again. 0 = released when the command ends.
        #[arg(long, default_value = "0", value_parser = duration::seconds, allow_negative_numbers = true, value_name = "DURATION")]
        at_least: f64,
        /// The command and its arguments, after `--`.
        #[arg(last = true, required = true, value_name = "COMMAND")]
        command: Vec<OsString>,
    },

    /// Lists the locks in the table: holder, token, host, times, state.
    ///
    /// HOLDER is the MySQL connection id holding the lock (MYSQLLOCK_CONNECTION_ID),
    /// TOKEN its fencing token, HOST the holder's machine name (recorded on an upgraded
    /// table) or else its client address from the process list ("-" if not visible:
    /// needs PROCESS), PID the holder's process id (for `run`: mysqllock's own).
    /// ACQUIRED and EXPIRES are UTC times from the database clock; a negative
    /// TTL_LEFT_S means the lease expired and may be taken over. "-" = unknown
    /// (the table is not upgraded, or the holder does not record it).
    ///
    /// STATE is "alive" (the holder's session holds the lock), "dead" (the session is
    /// gone; the next acquirer reclaims the row) or "pending" (the row is taken but its
    /// holder does not hold the GET_LOCK: an acquisition in progress, or a finished
    /// `run --at-least` whose lock stays taken until EXPIRES).
    ///
    /// Leases of the lease mode follow after a blank line under their own header:
    /// RESOURCE, OWNER, TOKEN ("-" without the upgrade), ACQUIRED and EXPIRES (UTC),
    /// TTL_LEFT_S, and STATE "held" or "expired". A table that does not exist is left
    /// out; --json lists both kinds, each object with its "kind" ("lock" or "lease").
    ///
    /// With --session, session locks (GET_LOCKs, as `run --session` takes) instead of
    /// the tables: NAME, KEY (the GET_LOCK name, shown when NAME folds to another),
    /// HOLDER (the connection id of the session holding it), and that session's USER,
    /// HOST, COMMAND ("Sleep" = idle) and TIME_S (seconds in that command) from the
    /// process list ("-" if not visible: needs PROCESS, or the same user). With a NAME,
    /// the holder of that lock, on any server ("is free" if none). Without a NAME, every
    /// GET_LOCK held on the server, by any client, including the ones `run` without
    /// --session takes beside its row; the server shows those only through
    /// information_schema.METADATA_LOCK_INFO (MariaDB: INSTALL SONAME
    /// 'metadata_lock_info') or performance_schema.metadata_locks (performance_schema=ON;
    /// on MariaDB also the instrument wait/lock/metadata/sql/mdl), whichever it has;
    /// without either it says what is missing and exits 78. A listing shows GET_LOCK
    /// names, not the spellings the locks were taken under. --json: one object per lock
    /// with "kind": "session", "name", "key", "connection_id", "user", "host", "command"
    /// and "time" (null where not visible).
    Status {
        /// Only this lock.
        name: Option<String>,
        /// A JSON array instead of the table.
        #[arg(long)]
        json: bool,
        /// Session locks (GET_LOCK) instead of the tables' locks and leases.
        #[arg(long)]
        session: bool,
    },
}

fn main() -> ExitCode {
    // The copy clap parses, taken before the passwords in the process's own arguments are
    // overwritten (the standard library reads those anew on every call).
    let args: Vec<OsString> = std::env::args_os().collect();
    if let Some(warning) = argv::hide_dsn_passwords(&args).warning() {
        eprintln!("mysqllock: {warning}");
    }
    let cli = match Cli::try_parse_from(&args) {
        Ok(cli) => cli,
        Err(e) => {
            // --help and --version end up here too, and are not errors.
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { exit::USAGE } else { 0 });
        }
    };
    match connect_config(&cli) {
        Ok(config) => ExitCode::from(dispatch(&config, &cli.command)),
        Err(code) => ExitCode::from(code),
    }
}

/// The connection from the option files, `MYSQLLOCK_DSN` and the options (see
/// [`connection`]); on failure, says why on stderr and returns the exit code.
fn connect_config(cli: &Cli) -> Result<Config, u8> {
    let home = std::env::var_os("HOME").filter(|home| !home.is_empty()).map(PathBuf::from);
    let files = match (&cli.defaults_file, cli.no_defaults) {
        (_, true) => option_files::Files::None,
        (Some(only), false) => option_files::Files::Only(only),
        (None, false) => option_files::Files::Defaults {
            extra: cli.defaults_extra_file.as_deref(),
            home: home.as_deref().map(Path::new),
        },
    };
    let read = option_files::read(files).map_err(|e| {
        eprintln!("mysqllock: {e}");
        exit::USAGE
    })?;
    for warning in &read.warnings {
        eprintln!("mysqllock: {warning}");
    }
    let env_dsn = match std::env::var("MYSQLLOCK_DSN") {
        Ok(dsn) => Some(dsn).filter(|dsn| !dsn.is_empty()),
        Err(std::env::VarError::NotPresent) => None,
        Err(std::env::VarError::NotUnicode(_)) => {
            eprintln!("mysqllock: MYSQLLOCK_DSN is not UTF-8");
            return Err(exit::USAGE);
        }
    };
    let timeouts: Vec<(&'static str, String)> = [
        ("connect_timeout", cli.connect_timeout),
        ("read_timeout", cli.read_timeout),
        ("write_timeout", cli.write_timeout),
    ]
    .into_iter()
    .filter_map(|(key, seconds)| Some((key, seconds?.to_string())))
    .collect();
    let options: Vec<(&'static str, &str)> =
        [("ssl-mode", &cli.ssl_mode), ("ssl-ca", &cli.ssl_ca), ("ssl-cert", &cli.ssl_cert), ("ssl-key", &cli.ssl_key)]
            .into_iter()
            .filter_map(|(key, value)| Some((key, value.as_deref()?)))
            .chain(timeouts.iter().map(|(key, value)| (*key, value.as_str())))
            .collect();
    let sources = connection::Sources {
        files: &read.settings,
        env_dsn: env_dsn.as_deref(),
        dsn: cli.dsn.as_deref(),
        options: &options,
        allow_cluster: cli.allow_cluster,
    };
    connection::config(&sources).map_err(|refused| {
        eprintln!("mysqllock: {}", refused.message);
        refused.code
    })
}

/// The lease mode's default TTL for `run --lease`: renewed every third of it, so a
/// killed run blocks the others for this long at most.
const DEFAULT_LEASE_TTL: f64 = 60.0;
/// The default TTL without --lease.
const DEFAULT_TTL: f64 = 3600.0;

/// Runs one subcommand and returns its exit code.
fn dispatch(config: &Config, command: &Cmd) -> u8 {
    let mut locker = NativeLocker::from_config(config.clone());
    match command {
        Cmd::Init { upgrade, lease: true } => init_lease(config, *upgrade),
        Cmd::Init { upgrade, lease: false } => init(&mut locker, *upgrade),
        Cmd::Run { name, timeout, session: true, ping_every, kill_after, command, .. } => {
            let job = session::SessionJob {
                name,
                timeout: *timeout,
                ping_every: ping_every.unwrap_or(session::DEFAULT_PING_EVERY),
                kill_after: *kill_after,
                command,
            };
            session::run(&mut locker, &job)
        }
        Cmd::Run { name, timeout, ttl, lease: true, owner, kill_after, command, .. } => {
            let ttl = ttl.unwrap_or(DEFAULT_LEASE_TTL);
            let job = lease::LeaseJob {
                name,
                owner: owner.as_deref(),
                timeout: *timeout,
                ttl,
                kill_after: *kill_after,
                command,
            };
            lease::run(config, &job)
        }
        Cmd::Run { name, timeout, ttl, keep_alive, max_hold, at_least, command, .. } => {
            let options = AcquireOptions { keep_alive: *keep_alive, max_hold: *max_hold, at_least: *at_least };
            let ttl = ttl.unwrap_or(DEFAULT_TTL);
            run::run(&mut locker, &run::Job { name, timeout: *timeout, ttl, options, command })
        }
        Cmd::Status { name, json, session: true } => session_status(&mut locker, name.as_deref(), *json),
        Cmd::Status { name, json, session: false } => status(config, &mut locker, name.as_deref(), *json),
    }
}

/// `init --lease [--upgrade]`: the lease table, one line per step.
fn init_lease(config: &Config, upgrade: bool) -> u8 {
    let mut lock = DistributedLock::native(config.clone());
    let table = lock.table().display_name();
    match lock.create_table() {
        Ok(true) => println!("created lease table {table}"),
        Ok(false) if !upgrade => println!("lease table {table} already exists"),
        Ok(false) => {}
        Err(e) => return exit::report(&e),
    }
    if upgrade {
        match lock.upgrade_table() {
            Ok(true) => println!("upgraded lease table {table}: added token, microsecond times"),
            Ok(false) => println!("lease table {table} is already upgraded"),
            Err(e) => return exit::report(&e),
        }
    }
    0
}

/// Creates the table if it is missing and, with `upgrade`, adds the upgrade's columns;
/// says what it did in one line per step.
fn init(locker: &mut NativeLocker, upgrade: bool) -> u8 {
    let table = locker.table().display_name();
    match locker.init_table() {
        Ok(true) => println!("created table {table}"),
        Ok(false) if !upgrade => println!("table {table} already exists"),
        Ok(false) => {}
        Err(e) => return exit::report(&e),
    }
    if upgrade {
        match locker.upgrade_table() {
            Ok(true) => println!("upgraded table {table}: added token, holder_host, holder_pid"),
            Ok(false) => println!("table {table} is already upgraded"),
            Err(e) => return exit::report(&e),
        }
    }
    0
}

/// Both tables' rows; a table that does not exist (or, for the GET_LOCK locks, a cluster
/// node where they are refused) is left out, unless neither can be read.
fn status(config: &Config, locker: &mut NativeLocker, name: Option<&str>, json: bool) -> u8 {
    let locks = locker.status(name);
    let mut lease = DistributedLock::native(config.clone());
    let leases: Result<Vec<LeaseRow>, Error> = match name {
        Some(name) => lease.holder(name).map(|row| row.into_iter().collect()),
        None => lease.rows(),
    };
    let absent = |e: &Error| matches!(e, Error::MissingTable { .. }) || e.is_cluster_node();
    let leases = match leases {
        // A name the lease table cannot hold has no lease.
        Err(e) if e.is_invalid_argument() && name.is_some() => Ok(Vec::new()),
        Err(e @ Error::UnusableTable { .. }) => {
            eprintln!("mysqllock: warning: leases not shown: {}", exit::describe(&e));
            Ok(Vec::new())
        }
        other => other,
    };
    let (locks, leases): (Vec<LockStatus>, Vec<LeaseRow>) = match (locks, leases) {
        (Err(e), _) if !absent(&e) => return exit::report(&e),
        (_, Err(e)) if !absent(&e) => return exit::report(&e),
        (Err(e), Err(_)) => return exit::report(&e),
        (locks, leases) => (locks.unwrap_or_default(), leases.unwrap_or_default()),
    };
    if json {
        print!("{}", status::json(&locks, &leases));
    } else {
        print!("{}", status::tables(&locks, &leases));
    }
    0
}

/// `status --session [NAME]`: one session lock's holder, or every session lock where the
/// server shows them (exit 78 with what is missing where it does not).
fn session_status(locker: &mut NativeLocker, name: Option<&str>, json: bool) -> u8 {
    let (locks, empty) = match name {
        Some(name) => match session_lock::holder(locker, name) {
            Ok(holder) => (holder.into_iter().collect(), free_message(name)),
            Err(e) => return exit::report(&e),
        },
        None => match session_lock::list(locker) {
            Ok(session_lock::Listing::Visible(locks)) => (locks, "no session locks held".to_owned()),
            Ok(session_lock::Listing::Hidden(why)) => {
                eprintln!("mysqllock: {why}");
                return exit::NOT_SET_UP;
            }
            Err(e) => return exit::report(&e),
        },
    };
    if json {
        print!("{}", status::session_json(&locks));
    } else {
        print!("{}", status::session_table(&locks, &empty));
    }
    0
}

/// `session lock "NAME" is free`, with its GET_LOCK name when that differs.
fn free_message(name: &str) -> String {
    match mysqllock_core::name::session_key(name) {
        Ok(key) if key != name => format!("session lock \"{name}\" (GET_LOCK name \"{key}\") is free"),
        _ => format!("session lock \"{name}\" is free"),
    }
}
