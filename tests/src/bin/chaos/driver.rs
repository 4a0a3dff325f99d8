//! `chaos drive`: runs the workers for a bounded time, injects faults into whoever holds
//! a lock at that moment, and journals each fault once it saw it land
//! (`DIR/driver.journal`, format in `journal`).
//!
//! Workers are commands: `PROGRAM ARGS... JOURNAL NAME DSN`, the driver appending the
//! slot's journal path (`DIR/journals/LABEL.journal`), the lock name and the server's
//! URL; the rest of their settings come from `CHAOS_*` variables (see `spawn`). Each runs
//! in a process group of its own and dies with the driver.
//!
//! Holders are found the way an operator would: through the lock table of an upgraded
//! table (`holder_pid`, `connection_id`, `token`), filtered to processes of our own
//! worker process groups so nothing else on the machine is ever signalled. For a CLI
//! worker the recorded pid is the `mysqllock run` process; PHP and C workers are the
//! holding process themselves.
//!
//! `--table original` runs on the original package's table (5 columns: no token, no
//! holder pid; the driver checks the table's shape at the start either way, and
//! `--table upgraded` is the default). A holder is then the process of our worker groups
//! that has the row's session open: `connection_id` → the process list's HOST (the
//! client's port) → the socket's inode → the process (see `procfs`). Sections have no
//! tokens: the driver journals `phase no-tokens`, sets `CHAOS_TOKENS=0` for the workers
//! (they journal section identities and leave the fenced guard alone, see `journal`),
//! and names a stopped or killed section by NAME and PID. The faults are the same.
//!
//! Fault kinds (`--faults`, default all; each time the driver tries the kinds that
//! landed least so far first, so every kind lands about equally often):
//! - `kill9`: SIGKILL of a holder process (a PHP/C worker is respawned; a CLI worker's
//!   loop goes on, and `mysqllock`'s death sends SIGTERM to its command). Landed when
//!   the process is gone (a zombie or no /proc entry). Ends the pid's sections.
//! - `stop` (PHP, C), `stop-group` and `stop-mysqllock` (CLI): SIGSTOP of a holder for
//!   3–4 s, longer than the 2 s TTL, then SIGCONT. Stopping a CLI worker's whole group
//!   is a frozen machine; stopping only `mysqllock` freezes its keep-alive while the
//!   command goes on. Landed when /proc shows the holder in state `T`; the driver then
//!   journals the stopped lease's deadline as the table shows it (`lease` lines: a
//!   keep-alive renews invisibly to the checker until it is frozen).
//! - `kill-session`: `KILL <connection_id>` of a holder's session. Landed when the
//!   session is gone from the process list. Ends that section.
//! - `stop-any`: SIGSTOP of any worker's process group, holder or not, so waiters are
//!   frozen halfway through an acquisition too.
//! - `kill-query`: `KILL QUERY ID` (MariaDB) of a GET_LOCK statement waiting in the
//!   process list, or `KILL QUERY` of its session (MySQL, which has no query ids).
//!   Landed when that statement is no longer running (on MariaDB one that had returned
//!   before the kill is refused by the server: no landing).
//! - `restart` and `crash` (scheduled, `--restarts` in all, alternating): a clean restart
//!   of the server, and a SIGKILL of it followed by a start on the same port and data.
//!   Landed when the server answers again with an uptime no longer than the time since
//!   the fault was sent. Ends every section.
//!
//! `--min-faults N` (default 0): when the time is up and a kind of `--faults` has landed
//! fewer than N times (one needs a CLI holder at the moment it is tried, which a short run
//! can miss), the chaos goes on for at most `MIN_FAULTS_GRACE` more, injecting only the
//! kinds still short (a restart or node operation already due still runs), and ends once
//! none is short and every stopped holder has had its full stop: the checker's
//! `--require` then judges the exclusion under every kind instead of failing the run for
//! the schedule's luck. An injection under way when the grace ends finishes first.
//!
//! Once the time is up and the last node operation or restart has landed, the chaos goes
//! on without new faults until some worker acquired after the last fault landed (at most
//! `PROGRESS_WAIT`): the checker asks for an acquisition after every fault, and one that
//! lands in the run's last moments must not leave that to the wind-down's speed.
//!
//! Lease mode on a cluster (`--lease`, `--node-dsns DSN1,DSN2,DSN3`, the cluster's
//! directory as `--db-dir` and its script as `--cluster-script`, alias `--mariadb-script`:
//! `scripts/galera.sh`, or `scripts/group-replication.sh`, which has the same commands):
//! workers take table-only leases (`CHAOS_LEASE=1`), each bound to one node (a worker's
//! mode is `nodeK`: the driver passes node K's URL). Holders are found in the lease table
//! (`distributed_locks`, read on the first node that answers); the owner's second
//! `:`-field is the holder's pid (the workers' `LABEL:PID:N`, `mysqllock run`'s default
//! `host:pid:random`). Only `kill9`, `stop` and `stop-group` apply; a stopped holder's
//! lease deadline is journaled from the row's `expires_at` (a takeover needs
//! `expires_at < UTC_TIMESTAMP(6)`). `--node-faults N` schedules N node kills (`galera.sh
//! kill`, 2 s down, `restart`) and N isolations (`isolate`, 3 s apart, `rejoin`), in a
//! thread while the worker faults go on: journaled as `node-kill` (landed when the
//! process is gone), `node-restart`, `node-isolate` (landed when the script returned:
//! the node is out of the Primary component, or the group expelled the member) and
//! `node-rejoin` (restart and rejoin landed when the script's `wait` saw every node
//! Primary and Synced, or every member ONLINE, again). They end no section: a lease
//! lives in the replicated table, not in a node or a session, so it ends at its
//! deadline. The nodes hit take turns through `--kill-nodes` (default 2,3) and
//! `--isolate-nodes` (default 3,1): a single-primary group's suite aims both at the
//! members that are primary at the time.
//!
//! `--final-probe`: once every worker has ended, the driver itself locks each name once
//! (waiting up to `PROBE_TIMEOUT`, the run's TTL) and releases it, journaling the section
//! as worker `probe-0` (`journals/probe-0.journal`, kind `probe`): a name left wedged by
//! the last faults fails the run there (the checker's per-name progress, `--progress-within`,
//! counts the probe for faults too close to the end for the workers to show it).
//!
//! `--victims KIND,...` restricts the faults aimed at workers to workers of those kinds
//! (the self-test aims them at the one worker it broke); `kill-query`, whose target is a
//! statement that names no worker, cannot be aimed so and is refused with it.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use mysqllock_core::{Config, NativeLocker, Session, Value};

use crate::journal::{self, Ends, Fault, Line};
use crate::procfs::{pgid_of, process_gone, process_state, session_holder};
use crate::rng::Rng;

/// The lease every worker takes, and how long it waits for it.
const TTL_SECONDS: &str = "2";
const ACQUIRE_TIMEOUT_SECONDS: &str = "3";
/// How long a stopped holder stays stopped: past its TTL, so it is taken over.
const STOP_SECONDS: (f64, f64) = (3.0, 4.0);
/// Time between faults, unless `--fault-gap` says otherwise.
const FAULT_GAP_SECONDS: (f64, f64) = (1.0, 3.0);
/// At most this many holders are stopped at once (the others must make progress).
const MAX_STOPPED: usize = 2;
/// How long the workers get to finish their section after the stop file appears.
const WIND_DOWN: Duration = Duration::from_secs(12);
/// How much longer the chaos may go on for a kind short of `--min-faults`.
const MIN_FAULTS_GRACE: Duration = Duration::from_secs(30);
const TICK: Duration = Duration::from_millis(50);
/// How often and how long the driver looks for a fault to land.
const LANDING_POLL: Duration = Duration::from_millis(2);
const LANDING_WAIT: Duration = Duration::from_secs(5);
const SERVER_BACK_WAIT: Duration = Duration::from_secs(60);
/// How long `--final-probe` waits for each name.
const PROBE_TIMEOUT: f64 = 20.0;
/// How long the chaos goes on, past its time, for some worker to acquire after the last
/// fault landed (`Driver::await_progress`).
const PROGRESS_WAIT: Duration = Duration::from_secs(20);
/// For `Driver::await_gone`: whether session `?` is there (both servers).
const SESSION: &str = "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = ?";

/// A statement waiting in GET_LOCK, how to interrupt it, and whether it still runs,
/// per server. MariaDB names statements by query id: `KILL QUERY ID` of a statement
/// that returned meanwhile is refused rather than hitting whatever its session runs
/// next (an idle session keeps its last query's id, hence INFO IS NOT NULL). MySQL has
/// no `KILL QUERY ID`, only `KILL QUERY <session>`, and names the statement by its
/// performance_schema event (thread id, event id); a GET_LOCK that returned between the
/// look and the kill leaves the kill to the statement its session runs then (an idle
/// session's is dropped by the server), which interrupts the same acquisition or
/// release a step later.
struct KillQuery {
    /// Rows (kill target, statement key...) of other sessions running a statement whose
    /// text matches `?`.
    waiters: &'static str,
    kill: &'static str,
    /// The number of such statements still running, for the key (bound in order).
    running: &'static str,
}

const MARIADB_KILL_QUERY: KillQuery = KillQuery {
    waiters:
        "SELECT QUERY_ID, QUERY_ID FROM information_schema.PROCESSLIST WHERE INFO LIKE ? AND ID <> CONNECTION_ID()",
    kill: "KILL QUERY ID",
    running: "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE QUERY_ID = ? AND INFO IS NOT NULL",
};

const MYSQL_KILL_QUERY: KillQuery = KillQuery {
    waiters: "SELECT t.PROCESSLIST_ID, s.THREAD_ID, s.EVENT_ID FROM performance_schema.events_statements_current AS s \
              JOIN performance_schema.threads AS t ON t.THREAD_ID = s.THREAD_ID \
              WHERE t.PROCESSLIST_INFO LIKE ? AND s.END_EVENT_ID IS NULL AND s.NESTING_EVENT_ID IS NULL \
              AND t.PROCESSLIST_ID <> CONNECTION_ID()",
    kill: "KILL QUERY",
    running: "SELECT COUNT(*) FROM performance_schema.events_statements_current \
              WHERE THREAD_ID = ? AND EVENT_ID = ? AND END_EVENT_ID IS NULL",
};

/// The faults aimed at workers (restart and crash are scheduled apart).
const HOLDER_FAULTS: [&str; 7] =
    ["kill9", "stop", "stop-group", "stop-mysqllock", "kill-session", "stop-any", "kill-query"];

/// One worker of the plan: `KIND NAME keep-alive|plain PROGRAM ARGS...`.
#[derive(Debug, Clone)]
struct Spec {
    kind: String,
    name: String,
    keep_alive: bool,
    /// Lease mode: the node (0-based) whose URL the worker gets.
    node: Option<usize>,
    argv: Vec<String>,
}

impl Spec {
    fn parse(text: &str) -> Result<Spec, String> {
        let w: Vec<&str> = text.split_whitespace().collect();
        match w.as_slice() {
            [kind, name, mode, argv @ ..]
                if !argv.is_empty() && ["keep-alive", "plain", "node1", "node2", "node3"].contains(mode) =>
            {
                Ok(Spec {
                    kind: (*kind).to_owned(),
                    name: (*name).to_owned(),
                    keep_alive: *mode == "keep-alive",
                    node: mode.strip_prefix("node").and_then(|k| k.parse::<usize>().ok()).map(|k| k - 1),
                    argv: argv.iter().map(|a| (*a).to_owned()).collect(),
                })
            }
            _ => Err(format!("--worker {text:?}: expected \"KIND NAME keep-alive|plain|nodeK PROGRAM ARGS...\"")),
        }
    }
}

/// A worker slot: its plan and its current process (a process group of its own).
struct Worker {
    spec: Spec,
    label: String,
    child: Option<Child>,
    spawns: u32,
    /// When a worker that ended is started again.
    respawn_at: Option<Instant>,
}

impl Worker {
    fn pgid(&self) -> Option<i32> {
        self.child.as_ref().map(|c| c.id() as i32)
    }
}

/// What `chaos drive` was asked.
struct Options {
    dir: PathBuf,
    db_dir: PathBuf,
    mariadb_script: PathBuf,
    dsn: String,
    seconds: f64,
    seed: u64,
    restarts: u32,
    /// Seconds between faults: at random between the two.
    fault_gap: (f64, f64),
    faults: Vec<String>,
    /// Worker kinds that faults may hit (empty: all).
    victims: Vec<String>,
    specs: Vec<Spec>,
    lease: bool,
    node_dsns: Vec<String>,
    node_faults: u32,
    /// The nodes (1-based) that node kills and isolations hit, in turn.
    kill_nodes: Vec<u32>,
    isolate_nodes: Vec<u32>,
    ttl: String,
    stop_seconds: (f64, f64),
    /// Landings of each kind of `faults` the chaos goes on for (within MIN_FAULTS_GRACE).
    min_faults: u32,
    /// `--table original`: the original package's table, without tokens or holder pids.
    original_table: bool,
    /// `--final-probe`: lock every name once after the workers ended.
    final_probe: bool,
}

fn options(args: &[String]) -> Result<Options, String> {
    let mut o = Options {
        dir: PathBuf::new(),
        db_dir: PathBuf::new(),
        mariadb_script: PathBuf::new(),
        dsn: String::new(),
        seconds: 60.0,
        seed: 1,
        restarts: 2,
        fault_gap: FAULT_GAP_SECONDS,
        faults: HOLDER_FAULTS.map(str::to_owned).to_vec(),
        victims: Vec::new(),
        specs: Vec::new(),
        lease: false,
        node_dsns: Vec::new(),
        node_faults: 0,
        kill_nodes: vec![2, 3],
        isolate_nodes: vec![3, 1],
        ttl: TTL_SECONDS.to_owned(),
        stop_seconds: STOP_SECONDS,
        min_faults: 0,
        original_table: false,
        final_probe: false,
    };
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        if flag == "--lease" {
            o.lease = true;
            continue;
        }
        if flag == "--final-probe" {
            o.final_probe = true;
            continue;
        }
        let value = it.next().ok_or_else(|| format!("{flag} needs a value"))?;
        let number = |v: &str| v.parse::<f64>().map_err(|_| format!("{flag} {v}: not a number"));
        let list = || value.split(',').filter(|k| !k.is_empty() && *k != "none").map(str::to_owned).collect();
        match flag.as_str() {
            "--dir" => o.dir = value.into(),
            "--db-dir" => o.db_dir = value.into(),
            "--mariadb-script" | "--cluster-script" => o.mariadb_script = value.into(),
            "--dsn" => o.dsn = value.clone(),
            "--seconds" => o.seconds = number(value)?,
            "--seed" => o.seed = value.parse().map_err(|_| format!("--seed {value}: not an integer"))?,
            "--restarts" => o.restarts = value.parse().map_err(|_| format!("--restarts {value}: not an integer"))?,
            "--min-faults" => {
                o.min_faults = value.parse().map_err(|_| format!("--min-faults {value}: not an integer"))?;
            }
            "--fault-gap" => {
                let (low, high) =
                    value.split_once(',').ok_or_else(|| format!("--fault-gap {value}: expected LOW,HIGH"))?;
                o.fault_gap = (number(low)?, number(high)?);
            }
            "--faults" => {
                o.faults = list();
                if let Some(bad) = o.faults.iter().find(|f| !HOLDER_FAULTS.contains(&f.as_str())) {
                    return Err(format!("--faults: unknown fault {bad} (known: {})", HOLDER_FAULTS.join(",")));
                }
            }
            "--victims" => o.victims = list(),
            "--node-dsns" => o.node_dsns = value.split(',').map(str::to_owned).collect(),
            "--node-faults" => {
                o.node_faults = value.parse().map_err(|_| format!("--node-faults {value}: not an integer"))?;
            }
            "--kill-nodes" | "--isolate-nodes" => {
                let nodes = value
                    .split(',')
                    .map(|k| k.parse::<u32>().ok().filter(|k| *k >= 1))
                    .collect::<Option<Vec<u32>>>()
                    .filter(|nodes| !nodes.is_empty())
                    .ok_or_else(|| format!("{flag} {value}: expected node numbers K,... (1-based)"))?;
                if flag == "--kill-nodes" {
                    o.kill_nodes = nodes;
                } else {
                    o.isolate_nodes = nodes;
                }
            }
            "--ttl" => o.ttl = value.clone(),
            "--table" => {
                o.original_table = match value.as_str() {
                    "original" => true,
                    "upgraded" => false,
                    _ => return Err(format!("--table {value}: expected original or upgraded")),
                };
            }
            "--stop-seconds" => {
                let (low, high) =
                    value.split_once(',').ok_or_else(|| format!("--stop-seconds {value}: expected LOW,HIGH"))?;
                o.stop_seconds = (number(low)?, number(high)?);
            }
            "--worker" => o.specs.push(Spec::parse(value)?),
            _ => return Err(format!("unknown option {flag}")),
        }
    }
    if !o.victims.is_empty() && o.faults.iter().any(|f| f == "kill-query") {
        // Its target is a statement in the process list, which names no worker.
        return Err("--victims cannot aim kill-query: leave it out of --faults".to_owned());
    }
    if o.node_faults > 0 {
        if let Some(bad) = o.kill_nodes.iter().chain(&o.isolate_nodes).find(|k| **k as usize > o.node_dsns.len()) {
            return Err(format!("node {bad} in --kill-nodes/--isolate-nodes: no such node in --node-dsns"));
        }
    }
    if let Some(bad) = o.specs.iter().find(|s| s.node.is_some_and(|k| k >= o.node_dsns.len())) {
        return Err(format!("worker {} {}: no such node in --node-dsns", bad.kind, bad.name));
    }
    if o.lease && (o.original_table || o.final_probe) {
        return Err("--table original and --final-probe are for the GET_LOCK protocol, not --lease".to_owned());
    }
    if o.dir.as_os_str().is_empty() || o.db_dir.as_os_str().is_empty() || o.dsn.is_empty() || o.specs.is_empty() {
        return Err("usage: chaos drive --dir DIR --db-dir DIR --mariadb-script PATH --dsn URL [--seconds N] \
                    [--seed N] [--restarts N] [--min-faults N] [--fault-gap LOW,HIGH] [--faults KIND,...|none] [--victims KIND,...] \
                    [--table original|upgraded] [--final-probe] \
                    --worker \"KIND NAME keep-alive|plain PROGRAM ARGS...\"..."
            .to_owned());
    }
    Ok(o)
}

/// A process to continue later.
struct Stopped {
    worker: usize,
    /// A pid, or a negative process group id.
    target: i32,
    until: Instant,
}

/// A lock holder found in the table that belongs to one of our workers.
#[derive(Debug, Clone)]
struct Holder {
    worker: usize,
    pid: i32,
    name: String,
    token: u64,
    connection_id: u64,
}

/// A fault that landed, to be journaled.
struct Landed {
    sent: u64,
    landed: u64,
    kind: &'static str,
    ends: Ends,
    target: Option<(String, u64, i32)>,
}

/// What a node fault did: (sent, landed, kind) per step that landed.
type NodeSteps = Vec<(u64, u64, &'static str)>;

/// A cluster fault (node kill + restart, or isolate + rejoin) under way.
struct NodeOp {
    thread: JoinHandle<Result<NodeSteps, String>>,
}

/// A lease row: resource, owner, token, microseconds until `expires_at`.
type LeaseRow = (String, String, u64, i64);

/// A server restart under way.
struct Restart {
    kind: &'static str,
    sent: u64,
    thread: JoinHandle<Result<(), String>>,
}

struct Driver {
    o: Options,
    rng: Rng,
    locker: NativeLocker,
    /// The server's port: the remote port of every worker's session socket.
    server_port: u16,
    workers: Vec<Worker>,
    stopped: Vec<Stopped>,
    restart: Option<Restart>,
    node_op: Option<NodeOp>,
    node_ops_started: u32,
    /// This very binary, as it was at the start (a rebuild during the run replaces the
    /// file, and /proc/self/exe would then name a deleted one): the workers' guard and
    /// clock.
    chaos_path: PathBuf,
    /// Restarts begun so far: every second one is a crash.
    restarts_started: u32,
    /// Landed faults per kind, in HOLDER_FAULTS order.
    landed: [u32; HOLDER_FAULTS.len()],
    log: File,
    journal: PathBuf,
    start: Instant,
    /// When the latest fault landed (monotonic ns, 0 before the first).
    last_landed: u64,
    winding_down: bool,
}

/// `chaos drive ...`: exit 0 when the run went through (the checker judges it), 2 on bad
/// usage or when the run itself could not be carried out.
pub fn main(args: &[String]) -> i32 {
    let o = match options(args) {
        Ok(o) => o,
        Err(message) => {
            eprintln!("chaos drive: {message}");
            return 2;
        }
    };
    match Driver::new(o).and_then(|mut d| d.run()) {
        Ok(()) => 0,
        Err(message) => {
            eprintln!("chaos drive: {message}");
            2
        }
    }
}

impl Driver {
    fn new(o: Options) -> Result<Driver, String> {
        fs::create_dir_all(o.dir.join("journals")).map_err(|e| format!("{}: {e}", o.dir.display()))?;
        fs::create_dir_all(o.dir.join("workers")).map_err(|e| format!("{}: {e}", o.dir.display()))?;
        let config = Config::from_url(&o.dsn).map_err(|e| e.chain())?;
        let server_port = config.port;
        let log = File::create(o.dir.join("driver.log")).map_err(|e| format!("driver.log: {e}"))?;
        let chaos_path = std::env::current_exe().map_err(|e| format!("locating the chaos binary: {e}"))?;
        let workers = o
            .specs
            .iter()
            .enumerate()
            .map(|(i, spec)| Worker {
                spec: spec.clone(),
                label: format!("{}-{}", spec.kind, i + 1),
                child: None,
                spawns: 0,
                respawn_at: Some(Instant::now()),
            })
            .collect();
        Ok(Driver {
            rng: Rng::new(o.seed),
            locker: NativeLocker::from_config(config),
            server_port,
            journal: o.dir.join("driver.journal"),
            o,
            workers,
            stopped: Vec::new(),
            restart: None,
            node_op: None,
            node_ops_started: 0,
            chaos_path,
            restarts_started: 0,
            landed: [0; HOLDER_FAULTS.len()],
            log,
            start: Instant::now(),
            last_landed: 0,
            winding_down: false,
        })
    }

    fn note(&mut self, text: &str) {
        let _ = writeln!(self.log, "+{:7.3}s {text}", self.start.elapsed().as_secs_f64());
    }

    fn write(&self, line: &Line) -> Result<(), String> {
        journal::append(&self.journal, &line.to_string()).map_err(|e| format!("writing the driver journal: {e}"))
    }

    fn write_fault(&mut self, f: &Landed) -> Result<(), String> {
        let (name, token, pid) = match &f.target {
            Some((name, token, pid)) => (Some(name.clone()), Some(*token).filter(|t| *t > 0), u32::try_from(*pid).ok()),
            None => (None, None, None),
        };
        let line = Line::Fault(Fault {
            sent: f.sent,
            landed: f.landed,
            kind: f.kind.to_owned(),
            ends: f.ends,
            name,
            token,
            pid,
        });
        self.note(&format!("landed after {:.1} ms: {line}", (f.landed - f.sent) as f64 / 1e6));
        if let Some(i) = HOLDER_FAULTS.iter().position(|k| *k == f.kind) {
            self.landed[i] += 1;
        }
        self.last_landed = self.last_landed.max(f.landed);
        self.write(&line)
    }

    /// The chaos, then the wind-down, which also runs when the chaos failed: no worker
    /// outlives the driver.
    fn run(&mut self) -> Result<(), String> {
        let chaos = self.chaos();
        let wound_down = self.wind_down();
        chaos.and(wound_down)
    }

    fn chaos(&mut self) -> Result<(), String> {
        for w in &self.workers {
            let mode = if w.spec.keep_alive { "keep-alive" } else { "plain" };
            println!("chaos: worker {} on {} ({mode}): {}", w.label, w.spec.name, w.spec.argv.join(" "));
        }
        if !self.o.lease {
            self.check_table()?;
        }
        if self.o.original_table {
            self.write(&Line::Phase { at: journal::monotonic_ns(), phase: "no-tokens".into() })?;
        }
        self.start = Instant::now();
        self.write(&Line::Phase { at: journal::monotonic_ns(), phase: "chaos-start".into() })?;
        let seconds = Duration::from_secs_f64(self.o.seconds);
        let end = self.start + seconds;
        let mut restarts: Vec<Instant> = (1..=self.o.restarts)
            .map(|i| self.start + seconds.mul_f64(f64::from(i) / f64::from(self.o.restarts + 1)))
            .collect();
        let ops = 2 * self.o.node_faults;
        let mut node_ops: Vec<Instant> =
            (1..=ops).map(|i| self.start + seconds.mul_f64(f64::from(i) / f64::from(ops + 1) * 0.85)).collect();
        let mut next_fault = self.start + self.fault_gap();
        let mut extended = false;
        loop {
            let now = Instant::now();
            if now >= end {
                let short: Vec<&str> = self.kinds(true).into_iter().map(|(_, k)| k).collect();
                // A stop that landed during the extension keeps its holder stopped past the
                // TTL, as any other: the wind-down would let it go at once.
                let done = short.is_empty() && (!extended || self.stopped.is_empty());
                if done || now >= end + MIN_FAULTS_GRACE {
                    break;
                }
                if !extended {
                    extended = true;
                    println!(
                        "chaos: time is up with {} landed fewer than {} times: going on (at most {} s) with only those",
                        short.join(", "),
                        self.o.min_faults,
                        MIN_FAULTS_GRACE.as_secs()
                    );
                }
            }
            if self.node_op.as_ref().is_some_and(|op| op.thread.is_finished()) {
                self.finish_node_op()?;
            }
            if self.node_op.is_none() && node_ops.first().is_some_and(|at| Instant::now() >= *at) {
                node_ops.remove(0);
                self.start_node_op();
            }
            self.tend_workers()?;
            self.continue_due();
            let now = Instant::now();
            let restarting = self.restart.as_ref().is_some_and(|r| !r.thread.is_finished());
            if !restarting {
                if let Some(r) = self.restart.take() {
                    self.finish_restart(r)?;
                }
            }
            if !restarting && restarts.first().is_some_and(|at| now >= *at) {
                restarts.remove(0);
                self.start_restart();
            } else if !restarting && now >= next_fault && !self.o.faults.is_empty() {
                next_fault =
                    if self.inject(extended)? { now + self.fault_gap() } else { now + Duration::from_millis(200) };
            }
            std::thread::sleep(TICK);
        }
        Ok(())
    }

    /// The kinds of `--faults` (with their place in HOLDER_FAULTS), or with `only_short`
    /// those of them that landed fewer than `--min-faults` times so far.
    fn kinds(&self, only_short: bool) -> Vec<(usize, &'static str)> {
        HOLDER_FAULTS
            .iter()
            .enumerate()
            .filter(|(i, k)| {
                self.o.faults.iter().any(|f| f == *k) && (!only_short || self.landed[*i] < self.o.min_faults)
            })
            .map(|(i, k)| (i, *k))
            .collect()
    }

    fn fault_gap(&mut self) -> Duration {
        Duration::from_secs_f64(self.rng.between(self.o.fault_gap.0, self.o.fault_gap.1))
    }

    /// Reaps workers that ended and starts them again (unless the run is ending).
    fn tend_workers(&mut self) -> Result<(), String> {
        for i in 0..self.workers.len() {
            let ended = match self.workers[i].child.as_mut().map(Child::try_wait) {
                Some(Ok(Some(status))) => Some(status),
                Some(Err(e)) => return Err(format!("waiting for {}: {e}", self.workers[i].label)),
                _ => None,
            };
            if let Some(status) = ended {
                self.workers[i].child = None;
                self.stopped.retain(|s| s.worker != i);
                let label = self.workers[i].label.clone();
                self.note(&format!("worker {label} ended: {}", describe(status)));
                // A worker that ends by itself (not killed) is not restarted in a tight loop.
                let pause = if status.code().is_some() { Duration::from_millis(500) } else { Duration::ZERO };
                self.workers[i].respawn_at = Some(Instant::now() + pause);
            }
            let due = self.workers[i].respawn_at.is_some_and(|at| Instant::now() >= at);
            if due && !self.winding_down {
                self.spawn(i)?;
            }
        }
        Ok(())
    }

    /// Starts worker `i`: `PROGRAM ARGS... JOURNAL NAME DSN`, with the settings in
    /// `CHAOS_*`: CHAOS_BIN (this binary: `guard`, `now`, `deadline`, `journal`),
    /// CHAOS_DIR (the guard's directory), CHAOS_KIND, CHAOS_WORKER (its label), CHAOS_TOKENS
    /// (0 on the original table: journal section identities, no guard; else 1),
    /// CHAOS_KEEP_ALIVE (1 or 0), CHAOS_SEED, CHAOS_TTL, CHAOS_TIMEOUT (seconds) and
    /// CHAOS_STOP (a file whose existence asks the worker to finish its section and end).
    fn spawn(&mut self, i: usize) -> Result<(), String> {
        let chaos_path = self.chaos_path.clone();
        let stop_file = self.o.dir.join("stop");
        let w = &mut self.workers[i];
        let log_path = self.o.dir.join("workers").join(format!("{}.log", w.label));
        let journal = self.o.dir.join("journals").join(format!("{}.journal", w.label));
        let log = OpenOptions::new().create(true).append(true).open(&log_path).map_err(|e| format!("{e}"))?;
        let err = log.try_clone().map_err(|e| format!("{e}"))?;
        let seed = self.o.seed.wrapping_mul(1000).wrapping_add(i as u64 * 100 + u64::from(w.spawns));
        let mut command = Command::new(&w.spec.argv[0]);
        command
            .args(&w.spec.argv[1..])
            .arg(&journal)
            .arg(&w.spec.name)
            .arg(w.spec.node.map_or(&self.o.dsn, |k| &self.o.node_dsns[k]))
            .env("CHAOS_LEASE", if self.o.lease { "1" } else { "0" })
            .env("CHAOS_TOKENS", if self.o.original_table { "0" } else { "1" })
            .env("CHAOS_BIN", &chaos_path)
            .env("CHAOS_DIR", &self.o.dir)
            .env("CHAOS_KIND", &w.spec.kind)
            .env("CHAOS_KEEP_ALIVE", if w.spec.keep_alive { "1" } else { "0" })
            .env("CHAOS_SEED", seed.to_string())
            .env("CHAOS_WORKER", &w.label)
            .env("CHAOS_TTL", &self.o.ttl)
            .env("CHAOS_TIMEOUT", ACQUIRE_TIMEOUT_SECONDS)
            .env("CHAOS_STOP", &stop_file)
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(err)
            .process_group(0);
        die_with_driver(&mut command);
        let child = command.spawn().map_err(|e| format!("starting worker {} ({}): {e}", w.label, w.spec.argv[0]))?;
        w.spawns += 1;
        w.respawn_at = None;
        let text = format!("worker {} started: pid {} (start {})", w.label, child.id(), w.spawns);
        w.child = Some(child);
        self.note(&text);
        Ok(())
    }

    /// SIGCONT for every stop whose time has come.
    fn continue_due(&mut self) {
        let now = Instant::now();
        let (due, later): (Vec<Stopped>, Vec<Stopped>) = self.stopped.drain(..).partition(|s| now >= s.until);
        self.stopped = later;
        for s in due {
            self.resume(&s);
        }
    }

    fn resume(&mut self, s: &Stopped) {
        // Only while the stopped process still belongs to the same live worker group.
        let group = self.workers[s.worker].pgid();
        let ours = match group {
            Some(g) if s.target < 0 => -s.target == g,
            Some(g) => pgid_of(s.target) == Some(g),
            None => false,
        };
        if ours {
            signal(s.target, libc::SIGCONT);
            let text = format!("SIGCONT {} ({})", s.target, self.workers[s.worker].label);
            self.note(&text);
        }
    }

    fn victim(&self, worker: usize) -> bool {
        self.o.victims.is_empty() || self.o.victims.contains(&self.workers[worker].spec.kind)
    }

    /// The live holders that are processes of our own workers (victims only), not
    /// stopped already.
    fn holders(&mut self) -> Vec<Holder> {
        if self.o.lease {
            return self.lease_holders();
        }
        let rows = match self.locker.status(None) {
            Ok(rows) => rows,
            Err(e) => {
                self.note(&format!("cannot read the lock table: {}", e.chain()));
                return Vec::new();
            }
        };
        let names: Vec<&str> = self.workers.iter().map(|w| w.spec.name.as_str()).collect();
        rows.into_iter()
            .filter(|r| r.holder_alive && names.contains(&r.name.as_str()))
            .filter_map(|r| {
                let pid = self.holder_pid(&r)?;
                let group = pgid_of(pid)?;
                let worker = self.workers.iter().position(|w| w.pgid() == Some(group))?;
                if self.stopped.iter().any(|s| s.worker == worker) || !self.victim(worker) {
                    return None;
                }
                Some(Holder { worker, pid, name: r.name, token: r.token.unwrap_or(0), connection_id: r.connection_id })
            })
            .collect()
    }

    /// The process of a row's holder: its `holder_pid` on an upgraded table, else (the
    /// original table) the process of our worker groups that has its session's socket
    /// open (see `procfs`).
    fn holder_pid(&self, row: &mysqllock_core::LockStatus) -> Option<i32> {
        if !self.o.original_table {
            return i32::try_from(row.pid?).ok();
        }
        let groups: Vec<i32> = self.workers.iter().filter_map(Worker::pgid).collect();
        session_holder(row.host.as_deref()?, self.server_port, &groups)
    }

    /// Refuses a lock table whose shape is not the one `--table` names: an upgraded run
    /// on the original table would find no holders, an original run on an upgraded one
    /// would test the wrong path.
    fn check_table(&mut self) -> Result<(), String> {
        const UPGRADE: &str = "SELECT COUNT(*) FROM information_schema.COLUMNS \
                               WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'shared_locks' \
                               AND COLUMN_NAME IN ('token', 'holder_host', 'holder_pid')";
        let upgrade_columns = self
            .locker
            .session()
            .map_err(|e| e.chain())
            .and_then(|s| s.execute(UPGRADE, &[]).map_err(|e| e.to_string()))
            .map_err(|e| format!("cannot read the lock table's columns: {e}"))?
            .rows
            .first()
            .and_then(|r| r.first())
            .and_then(Value::as_u64);
        match (self.o.original_table, upgrade_columns) {
            (true, Some(0)) | (false, Some(3)) => Ok(()),
            (true, n) => Err(format!("--table original: shared_locks has {n:?} of the upgrade's 3 columns, not 0")),
            (false, n) => Err(format!(
                "shared_locks has {n:?} of the upgrade's 3 columns, not 3: run mysqllock init --upgrade, or pass --table original"
            )),
        }
    }

    /// The unexpired rows of the lease table, read on the first node that answers
    /// (a fresh session each time: nodes die and come back under the driver).
    fn lease_rows(&mut self) -> Option<Vec<LeaseRow>> {
        const ROWS: &str = "SELECT resource, owner, COALESCE(token, 0), \
                            TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), expires_at) \
                            FROM distributed_locks WHERE expires_at > UTC_TIMESTAMP(6)";
        let mut errors = Vec::new();
        for dsn in self.o.node_dsns.clone() {
            let sep = if dsn.contains('?') { '&' } else { '?' };
            let url = format!("{dsn}{sep}allow_cluster=1&connect_timeout=2");
            let config = match Config::from_url(&url) {
                Ok(c) => c,
                Err(e) => {
                    errors.push(e.chain());
                    continue;
                }
            };
            let mut locker = NativeLocker::from_config(config);
            let out =
                locker.session().map_err(|e| e.chain()).and_then(|s| s.execute(ROWS, &[]).map_err(|e| e.to_string()));
            match out {
                Ok(out) => {
                    return Some(
                        out.rows
                            .iter()
                            .filter_map(|r| {
                                Some((
                                    r.first()?.as_text()?,
                                    r.get(1)?.as_text()?,
                                    r.get(2)?.as_u64()?,
                                    r.get(3)?.as_i64()?,
                                ))
                            })
                            .collect(),
                    )
                }
                Err(e) => errors.push(e),
            }
        }
        self.note(&format!("cannot read the lease table on any node: {}", errors.join("; ")));
        None
    }

    /// The pid in a lease owner `X:PID:...`.
    fn owner_pid(owner: &str) -> Option<i32> {
        owner.split(':').nth(1)?.parse().ok()
    }

    fn lease_holders(&mut self) -> Vec<Holder> {
        let Some(rows) = self.lease_rows() else { return Vec::new() };
        let names: Vec<&str> = self.workers.iter().map(|w| w.spec.name.as_str()).collect();
        rows.into_iter()
            .filter(|r| names.contains(&r.0.as_str()))
            .filter_map(|(name, owner, token, _)| {
                let pid = Self::owner_pid(&owner)?;
                let group = pgid_of(pid)?;
                let worker = self.workers.iter().position(|w| w.pgid() == Some(group))?;
                if self.stopped.iter().any(|s| s.worker == worker) || !self.victim(worker) {
                    return None;
                }
                Some(Holder { worker, pid, name, token, connection_id: 0 })
            })
            .collect()
    }

    /// Starts the next cluster fault in a thread: node kills and isolations alternate.
    fn start_node_op(&mut self) {
        let i = self.node_ops_started;
        self.node_ops_started += 1;
        let isolate = i % 2 == 1;
        // Each kind takes its nodes in turn (by default kills: 2, 3, 2, ...; isolations:
        // 3, 1, 3, ...).
        let nodes = if isolate { &self.o.isolate_nodes } else { &self.o.kill_nodes };
        let node = nodes[(i as usize / 2) % nodes.len()];
        let (script, dir) = (self.o.mariadb_script.clone(), self.o.db_dir.clone());
        self.note(&format!("fault {}: node {node}", if isolate { "node-isolate" } else { "node-kill" }));
        let thread = std::thread::spawn(move || node_op(&script, &dir, node, isolate));
        self.node_op = Some(NodeOp { thread });
    }

    fn finish_node_op(&mut self) -> Result<(), String> {
        let Some(op) = self.node_op.take() else { return Ok(()) };
        let steps = op.thread.join().map_err(|_| "the node fault thread panicked".to_owned())??;
        for (sent, landed, kind) in steps {
            self.write_fault(&Landed { sent, landed, kind, ends: Ends::None, target: None })?;
        }
        Ok(())
    }

    /// Injects one fault, trying the enabled kinds that landed least so far first (with
    /// `only_short`, only those still short of `--min-faults`).
    /// False when none could be aimed at anybody or none landed.
    fn inject(&mut self, only_short: bool) -> Result<bool, String> {
        let mut kinds: Vec<(u32, u64, &'static str)> =
            self.kinds(only_short).into_iter().map(|(i, k)| (self.landed[i], self.rng.next_u64(), k)).collect();
        kinds.sort_unstable();
        let holders = self.holders();
        for (_, _, kind) in kinds {
            if let Some(landed) = self.try_fault(kind, &holders)? {
                self.write_fault(&landed)?;
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// One fault of `kind`, if there is somebody to aim it at; Some once it landed.
    fn try_fault(&mut self, kind: &'static str, holders: &[Holder]) -> Result<Option<Landed>, String> {
        let stoppable = self.stopped.len() < MAX_STOPPED;
        let is_cli = |h: &&Holder| self.workers[h.worker].spec.kind == "cli";
        let candidates: Vec<&Holder> = match kind {
            "kill9" | "kill-session" => holders.iter().collect(),
            "stop" if stoppable => holders.iter().filter(|h| !is_cli(h)).collect(),
            "stop-group" | "stop-mysqllock" if stoppable => holders.iter().filter(is_cli).collect(),
            "stop-any" if stoppable => return Ok(self.stop_any()),
            "kill-query" => return Ok(self.kill_query()),
            _ => Vec::new(),
        };
        if candidates.is_empty() {
            return Ok(None);
        }
        let h = candidates[self.rng.below(candidates.len())].clone();
        let label = self.workers[h.worker].label.clone();
        self.note(&format!(
            "fault {kind}: {label} pid {} holding {} (token {}, session {})",
            h.pid, h.name, h.token, h.connection_id
        ));
        let target = Some((h.name.clone(), h.token, h.pid));
        let landed = match kind {
            "kill9" => {
                let sent = journal::monotonic_ns();
                signal(h.pid, libc::SIGKILL);
                let landed = self.await_landing(|| process_gone(h.pid));
                landed.map(|landed| Landed { sent, landed, kind, ends: Ends::Pid, target })
            }
            "kill-session" => {
                let sent = journal::monotonic_ns();
                match self
                    .locker
                    .session()
                    .map_err(|e| e.chain())
                    .and_then(|s| s.kill(h.connection_id).map_err(|e| e.to_string()))
                {
                    Ok(()) => {
                        let landed = self.await_gone(SESSION, &[h.connection_id.into()]);
                        landed.map(|landed| Landed { sent, landed, kind, ends: Ends::Section, target })
                    }
                    Err(e) => {
                        self.note(&format!("KILL {} failed: {e}", h.connection_id));
                        None
                    }
                }
            }
            _ => {
                let group = self.workers[h.worker].pgid().unwrap_or(h.pid);
                let signalled = if kind == "stop-group" { -group } else { h.pid };
                self.stop(h.worker, signalled, h.pid, kind).map(|landed| Landed { target, ..landed })
            }
        };
        if landed.is_none() {
            self.note(&format!("fault {kind} on {label} did not land"));
        }
        Ok(landed)
    }

    /// Polls `gone` until it holds; the instant it was seen to, or None after
    /// LANDING_WAIT.
    fn await_landing(&self, mut gone: impl FnMut() -> bool) -> Option<u64> {
        let deadline = Instant::now() + LANDING_WAIT;
        loop {
            if gone() {
                return Some(journal::monotonic_ns());
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(LANDING_POLL);
        }
    }

    /// Waits until `count` (a `SELECT COUNT(*)` with `params`) answers 0; the instant it
    /// was seen to, or None.
    fn await_gone(&mut self, count: &str, params: &[Value]) -> Option<u64> {
        let deadline = Instant::now() + LANDING_WAIT;
        loop {
            let listed = self
                .locker
                .session()
                .map_err(|e| e.chain())
                .and_then(|s| s.execute(count, params).map_err(|e| e.to_string()))
                .map(|out| out.rows.first().and_then(|r| r.first()).and_then(Value::as_u64));
            match listed {
                Ok(Some(0)) => return Some(journal::monotonic_ns()),
                Ok(_) => {}
                Err(e) => {
                    self.note(&format!("cannot read the process list: {e}"));
                    return None;
                }
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(LANDING_POLL);
        }
    }

    /// SIGSTOP of `signalled` (a pid or a negative group id) of worker `worker`, landed
    /// when `watched` shows state T; then the deadlines of the leases its processes hold,
    /// as the table shows them, go to the journal.
    fn stop(&mut self, worker: usize, signalled: i32, watched: i32, kind: &'static str) -> Option<Landed> {
        let sent = journal::monotonic_ns();
        signal(signalled, libc::SIGSTOP);
        let until =
            Instant::now() + Duration::from_secs_f64(self.rng.between(self.o.stop_seconds.0, self.o.stop_seconds.1));
        self.stopped.push(Stopped { worker, target: signalled, until });
        let landed = self.await_landing(|| process_state(watched) == Some('T'))?;
        self.observe_leases(worker);
        let name = self.workers[worker].spec.name.clone();
        Some(Landed { sent, landed, kind, ends: Ends::None, target: Some((name, 0, watched)) })
    }

    /// Journals, for every lease held by a process of worker `worker` (just stopped),
    /// the earliest instant it can end as the table shows it now: the row's `remaining`
    /// counts to `created + ttl`, and another session may reclaim it only once the wall
    /// clock reaches `created + ttl + 1` (docs/protocol.md, "The lease protocol"; `journal::
    /// ttl_deadline_ns` argues the same for an acquisition). The monotonic clock is read
    /// before the query, whose clock reading comes later: a lower bound. A renewal its
    /// frozen keep-alive had already sent may still land after this read: that only
    /// lengthens the lease, so the deadline stays a lower bound.
    fn observe_leases(&mut self, worker: usize) {
        let Some(group) = self.workers[worker].pgid() else { return };
        if self.o.lease {
            // A takeover needs expires_at < UTC_TIMESTAMP(6): the lease runs at least
            // `remaining` from the query, which ran after `before`.
            let before = journal::monotonic_ns();
            let Some(rows) = self.lease_rows() else { return };
            for (name, owner, token, micros) in rows {
                let Some(pid) = Self::owner_pid(&owner) else { continue };
                if pgid_of(pid) != Some(group) || token == 0 {
                    continue;
                }
                let deadline = (before + (micros.max(0) as u64) * 1000).saturating_sub(journal::CLOCK_MARGIN_NS);
                let line = Line::Lease { at: before, name, token: Some(token), deadline, pid: pid as u32 };
                self.note(&format!("stopped lease: {line} ({micros} us left)"));
                if let Err(e) = self.write(&line) {
                    self.note(&e);
                }
            }
            return;
        }
        let before = journal::monotonic_ns();
        let rows = match self.locker.status(Some(&self.workers[worker].spec.name.clone())) {
            Ok(rows) => rows,
            Err(e) => {
                self.note(&format!("cannot read the stopped lease: {}", e.chain()));
                return;
            }
        };
        for r in rows {
            // The original table: no token; the checker finds the section by NAME and PID.
            let token = r.token.filter(|_| !self.o.original_table);
            if !self.o.original_table && token.is_none() {
                continue;
            }
            let Some(pid) = self.holder_pid(&r) else { continue };
            if !r.holder_alive || pgid_of(pid) != Some(group) {
                continue;
            }
            let until = ((r.remaining + 1.0).max(0.0) * 1e9) as u64;
            let deadline = (before + until).saturating_sub(journal::CLOCK_MARGIN_NS);
            let line = Line::Lease { at: before, name: r.name.clone(), token, deadline, pid: pid as u32 };
            self.note(&format!("stopped lease: {line} (remaining {:.3} s)", r.remaining));
            if let Err(e) = self.write(&line) {
                self.note(&e);
            }
        }
    }

    /// `KILL QUERY` of a random session waiting in GET_LOCK: the wait ends at once
    /// (MariaDB: with NULL, as if it had timed out; MySQL: with error 1317), in the
    /// middle of an acquisition. Aimed at the statement as closely as the server allows
    /// (see [`KillQuery`]); landed once that statement is no longer running.
    fn kill_query(&mut self) -> Option<Landed> {
        let k = match self.locker.session() {
            Ok(s) if s.topology().is_some_and(|t| t.mariadb) => &MARIADB_KILL_QUERY,
            Ok(_) => &MYSQL_KILL_QUERY,
            Err(e) => {
                self.note(&format!("cannot list the sessions waiting in GET_LOCK: {}", e.chain()));
                return None;
            }
        };
        let waiters = match self.locker.session() {
            Ok(s) => s.execute(k.waiters, &["%GET_LOCK(%".into()]).map_err(|e| e.to_string()),
            Err(e) => Err(e.chain()),
        };
        let rows: Vec<Vec<u64>> = match waiters {
            Ok(out) => out.rows.iter().filter_map(|r| r.iter().map(Value::as_u64).collect()).collect(),
            Err(e) => {
                self.note(&format!("cannot list the sessions waiting in GET_LOCK: {e}"));
                return None;
            }
        };
        if rows.is_empty() {
            return None;
        }
        let row = &rows[self.rng.below(rows.len())];
        let (target, key) = (row[0], &row[1..]);
        let sent = journal::monotonic_ns();
        let killed = match self.locker.session() {
            Ok(s) => s.execute(&format!("{} {target}", k.kill), &[]).map(|_| ()).map_err(|e| e.to_string()),
            Err(e) => Err(e.chain()),
        };
        if let Err(e) = killed {
            self.note(&format!("{} {target} failed: {e}", k.kill));
            return None;
        }
        self.note(&format!("fault kill-query: {} {target}, waiting in GET_LOCK", k.kill));
        let key: Vec<Value> = key.iter().map(|&v| v.into()).collect();
        let landed = self.await_gone(k.running, &key)?;
        Some(Landed { sent, landed, kind: "kill-query", ends: Ends::None, target: None })
    }

    /// Stops the whole process group of a random running worker that is not stopped yet.
    fn stop_any(&mut self) -> Option<Landed> {
        let candidates: Vec<usize> = (0..self.workers.len())
            .filter(|i| self.workers[*i].child.is_some() && !self.stopped.iter().any(|s| s.worker == *i))
            .filter(|i| self.victim(*i))
            .collect();
        if candidates.is_empty() {
            return None;
        }
        let i = candidates[self.rng.below(candidates.len())];
        let group = self.workers[i].pgid()?;
        let label = self.workers[i].label.clone();
        self.note(&format!("fault stop-any: {label} process group {group}"));
        self.stop(i, -group, group, "stop-any")
    }

    /// Starts the next scheduled server restart (clean or crash, alternating) in a thread.
    fn start_restart(&mut self) {
        let crash = self.restarts_started % 2 == 1;
        self.restarts_started += 1;
        let kind = if crash { "crash" } else { "restart" };
        self.note(&format!("fault {kind}: the database server"));
        let (script, db_dir) = (self.o.mariadb_script.clone(), self.o.db_dir.clone());
        let sent = journal::monotonic_ns();
        let thread = std::thread::spawn(move || restart_server(&script, &db_dir, crash));
        self.restart = Some(Restart { kind, sent, thread });
    }

    /// After the restart thread ended: waits until the server answers, then journals the
    /// restart as landed if the server's own uptime shows a process started since the
    /// fault was sent (the script's word alone is not taken for it).
    fn finish_restart(&mut self, r: Restart) -> Result<(), String> {
        r.thread.join().map_err(|_| "the restart thread panicked".to_owned())??;
        let deadline = Instant::now() + SERVER_BACK_WAIT;
        loop {
            match self.locker.status(None) {
                Ok(_) => break,
                Err(e) if Instant::now() >= deadline => {
                    return Err(format!("the server did not answer after the {}: {}", r.kind, e.chain()));
                }
                Err(_) => std::thread::sleep(TICK),
            }
        }
        let landed = journal::monotonic_ns();
        // (Variable_name, Value) on both servers; MySQL has no information_schema.GLOBAL_STATUS.
        const UPTIME: &str = "SHOW GLOBAL STATUS LIKE 'Uptime'";
        let uptime = self
            .locker
            .session()
            .map_err(|e| e.chain())
            .and_then(|s| s.execute(UPTIME, &[]).map_err(|e| e.to_string()))
            .map(|out| out.rows.first().and_then(|row| row.get(1)).and_then(Value::as_u64));
        // Uptime counts whole seconds: a process started after `sent` shows at most the
        // seconds since then, rounded up.
        let since_sent = (landed - r.sent).div_ceil(1_000_000_000);
        match uptime {
            Ok(Some(up)) if up <= since_sent => {
                self.write_fault(&Landed { sent: r.sent, landed, kind: r.kind, ends: Ends::All, target: None })
            }
            other => {
                self.note(&format!(
                    "fault {} did not land: uptime {other:?}, {since_sent} s after it was sent",
                    r.kind
                ));
                Ok(())
            }
        }
    }

    /// Ends the run: lets stopped processes go, asks workers to finish, waits, kills
    /// what is left, and marks the end of chaos in the journal.
    fn wind_down(&mut self) -> Result<(), String> {
        let node_op = self.finish_node_op();
        let restarted = match self.restart.take() {
            Some(r) => self.finish_restart(r),
            None => Ok(()),
        };
        for s in std::mem::take(&mut self.stopped) {
            self.resume(&s);
        }
        self.await_progress()?;
        self.winding_down = true;
        // The chaos ends here: what follows is the workers finishing their last section.
        self.write(&Line::Phase { at: journal::monotonic_ns(), phase: "chaos-end".into() })?;
        File::create(self.o.dir.join("stop")).map_err(|e| format!("creating the stop file: {e}"))?;
        let deadline = Instant::now() + WIND_DOWN;
        while Instant::now() < deadline && self.workers.iter().any(|w| w.child.is_some()) {
            self.tend_workers()?;
            std::thread::sleep(TICK);
        }
        for i in 0..self.workers.len() {
            let Some(mut child) = self.workers[i].child.take() else { continue };
            let group = child.id() as i32;
            let sent = journal::monotonic_ns();
            signal(-group, libc::SIGKILL);
            let _ = child.wait();
            // Its sections end with it (a CLI worker's mysqllock dies with the group).
            let landed = Landed {
                sent,
                landed: journal::monotonic_ns(),
                kind: "wind-down-kill",
                ends: Ends::Pid,
                target: Some((self.workers[i].spec.name.clone(), 0, group)),
            };
            self.write_fault(&landed)?;
            let text = format!("worker {} did not finish in time: killed", self.workers[i].label);
            self.note(&text);
            println!("chaos: {text}");
        }
        restarted?;
        node_op?;
        if self.o.final_probe {
            self.probe()?;
        }
        let starts: u32 = self.workers.iter().map(|w| w.spawns).sum();
        println!(
            "chaos: {:.1} s with {} workers ({starts} worker processes started); details in {}",
            self.start.elapsed().as_secs_f64(),
            self.workers.len(),
            self.o.dir.join("driver.log").display()
        );
        Ok(())
    }
}

impl Driver {
    /// Goes on (workers respawned, no more faults) until some worker journaled an
    /// acquisition after the last fault landed, for at most PROGRESS_WAIT. The checker
    /// wants an acquisition after every fault; one that lands in the run's last moments
    /// (a node's rejoin, whose `wait` for every member ONLINE can end just as the time is
    /// up) would otherwise leave that to how fast the wind-down is. Nobody acquiring
    /// within PROGRESS_WAIT is left for the checker to fail.
    fn await_progress(&mut self) -> Result<(), String> {
        if self.last_landed == 0 {
            return Ok(());
        }
        let deadline = Instant::now() + PROGRESS_WAIT;
        let journals = self.o.dir.join("journals");
        while !acquired_since(&journals, self.last_landed)? {
            if Instant::now() >= deadline {
                let text = format!("no worker acquired within {} s of the last fault", PROGRESS_WAIT.as_secs());
                self.note(&text);
                println!("chaos: {text}");
                return Ok(());
            }
            self.tend_workers()?;
            // The poll's interval: the condition is the journals, read again each tick.
            std::thread::sleep(TICK);
        }
        Ok(())
    }

    /// `--final-probe`: every name locked and released once by the driver, now that no
    /// worker runs, journaled as worker `probe-0` (TOKEN: the lease's token, or the
    /// section's identity on the original table). A name that cannot be had within
    /// PROBE_TIMEOUT is journaled nowhere: the checker then misses an acquisition of it.
    fn probe(&mut self) -> Result<(), String> {
        let journal = self.o.dir.join("journals").join("probe-0.journal");
        let mut names: Vec<String> = self.workers.iter().map(|w| w.spec.name.clone()).collect();
        names.sort();
        names.dedup();
        let ttl: f64 = self.o.ttl.parse().map_err(|_| format!("--ttl {}: not a number", self.o.ttl))?;
        let pid = std::process::id();
        let append =
            |line: Line| journal::append(&journal, &line.to_string()).map_err(|e| format!("probe journal: {e}"));
        for name in names {
            let deadline = journal::ttl_deadline_ns(ttl);
            let lease = match self.locker.acquire(&name, PROBE_TIMEOUT, ttl) {
                Ok(lease) => lease,
                Err(e) => {
                    let text = format!("probe: {name} could not be locked within {PROBE_TIMEOUT} s: {}", e.chain());
                    self.note(&text);
                    println!("chaos: {text}");
                    continue;
                }
            };
            let at = journal::monotonic_ns();
            let token = if self.o.original_table { at } else { lease.token.unwrap_or(0) };
            append(Line::Acquired { at, name: name.clone(), token, deadline: Some(deadline), pid })?;
            let releasing = journal::monotonic_ns();
            let verdict = match self.locker.release(&name) {
                Ok(()) => journal::Verdict::Ok,
                Err(e) if e.is_not_held() => journal::Verdict::Lost,
                Err(_) => journal::Verdict::Error,
            };
            append(Line::Release { at: releasing, name: name.clone(), token, verdict, pid })?;
            self.note(&format!("probe: {name} locked and released ({})", verdict.as_str()));
        }
        Ok(())
    }
}

/// Whether any journal in `journals` holds an acquisition after `after` (monotonic ns).
fn acquired_since(journals: &Path, after: u64) -> Result<bool, String> {
    let entries = fs::read_dir(journals).map_err(|e| format!("{}: {e}", journals.display()))?;
    for path in entries.filter_map(|e| e.ok().map(|e| e.path())) {
        if path.extension().is_none_or(|x| x != "journal") {
            continue;
        }
        let text = fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        if text.lines().filter_map(Line::parse).any(|l| matches!(l, Line::Acquired { at, .. } if at > after)) {
            return Ok(true);
        }
    }
    Ok(false)
}

/// Makes the process die with the driver (an interrupted suite must not leave workers
/// looping). The driver spawns workers from its main thread only, which PDEATHSIG
/// follows.
fn die_with_driver(command: &mut Command) {
    // SAFETY: the closure runs between fork and exec and only calls prctl(2), which is
    // async-signal-safe, with plain integers.
    unsafe {
        command.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// One cluster fault, start to end: `galera.sh kill` node, 2 s down, `restart`, `wait`;
/// or `isolate`, 3 s cut off, `rejoin`, `wait`. Returns (sent, landed, kind) per step.
fn node_op(script: &Path, dir: &Path, node: u32, isolate: bool) -> Result<NodeSteps, String> {
    let galera = |args: &[&str]| run_script(script, args[0], dir, &args[1..]);
    let k = node.to_string();
    let (cut, back, cut_kind, back_kind, down) = if isolate {
        ("isolate", "rejoin", "node-isolate", "node-rejoin", 3.0)
    } else {
        ("kill", "restart", "node-kill", "node-restart", 2.0)
    };
    let sent = journal::monotonic_ns();
    galera(&[cut, &k])?;
    let landed = journal::monotonic_ns();
    // How long the node stays down or cut off: the fault's length, not a wait for anybody.
    std::thread::sleep(Duration::from_secs_f64(down));
    let sent2 = journal::monotonic_ns();
    galera(&[back, &k])?;
    galera(&["wait"])?;
    Ok(vec![(sent, landed, cut_kind), (sent2, journal::monotonic_ns(), back_kind)])
}

/// A clean restart, or (`crash`) SIGKILL of the server and a start on the same port.
fn restart_server(script: &Path, db_dir: &Path, crash: bool) -> Result<(), String> {
    if crash {
        let pid_file = db_dir.join("mysqld.pid");
        let pid: i32 = fs::read_to_string(&pid_file)
            .map_err(|e| format!("{}: {e}", pid_file.display()))?
            .trim()
            .parse()
            .map_err(|_| format!("{}: not a pid", pid_file.display()))?;
        signal(pid, libc::SIGKILL);
        let gone_by = Instant::now() + Duration::from_secs(10);
        // SAFETY: kill(pid, 0) only probes whether the process exists.
        while unsafe { libc::kill(pid, 0) } == 0 {
            if Instant::now() >= gone_by {
                // The restart would stop it cleanly: no crash.
                return Err(format!("the server (pid {pid}) survived SIGKILL for 10 s"));
            }
            std::thread::sleep(TICK);
        }
    }
    run_script(script, "restart", db_dir, &[])
}

/// `bash SCRIPT CMD DIR ARGS...` (scripts/mariadb.sh, scripts/galera.sh), its output
/// discarded; Err names the command that failed.
fn run_script(script: &Path, cmd: &str, dir: &Path, args: &[&str]) -> Result<(), String> {
    let status = Command::new("bash")
        .arg(script)
        .arg(cmd)
        .arg(dir)
        .args(args)
        .stdout(Stdio::null())
        .status()
        .map_err(|e| format!("running {}: {e}", script.display()))?;
    if status.success() {
        Ok(())
    } else {
        let args = args.join(" ");
        Err(format!("{} {cmd} {} {args} failed: {}", script.display(), dir.display(), describe(status)))
    }
}

fn describe(status: ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exit {code}"),
        (None, Some(sig)) => format!("signal {sig}"),
        _ => "unknown status".to_owned(),
    }
}

/// kill(2); a process that is already gone is no error here.
fn signal(target: i32, sig: libc::c_int) {
    // SAFETY: plain kill(2) on a pid or group that the caller checked is ours.
    unsafe { libc::kill(target, sig) };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_an_acquisition_after_the_time_counts_as_progress() {
        let dir = std::env::temp_dir().join(format!("chaos-progress-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        fs::write(dir.join("c-1.journal"), "acquired 100 a 1 - 7\nrelease 300 a 1 ok 7\n").unwrap();
        fs::write(dir.join("notes.log"), "acquired 900 a 2 - 8\n").unwrap();
        assert!(acquired_since(&dir, 99).unwrap());
        assert!(!acquired_since(&dir, 100).unwrap(), "a release is no acquisition, nor is a line in a log");
        fs::write(dir.join("php-2.journal"), "renewed 500 a 1 - 7\nacquired 600 b 3 - 9\n").unwrap();
        assert!(acquired_since(&dir, 300).unwrap());
        assert!(!acquired_since(&dir, 600).unwrap());
        fs::remove_dir_all(&dir).unwrap();
    }
}
