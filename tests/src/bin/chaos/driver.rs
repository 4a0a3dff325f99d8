//! `chaos drive`: runs the workers for a bounded time and injects faults into whoever
//! holds a lock at that moment.
//!
//! Holders are found the way an operator would: through the lock table of an upgraded
//! table (`holder_pid`, `connection_id`, `token`), filtered to processes of our own
//! worker process groups so nothing else on the machine is ever signalled. For a CLI
//! worker the recorded pid is the `mysqllock run` process; PHP and C workers are the
//! holding process themselves.
//!
//! Faults, every 1–3 s at random (seeded; `--fault-gap` changes it), most into a random
//! holder:
//! - `kill9`: SIGKILL of the holder process (a PHP/C worker is respawned; a CLI worker's
//!   loop goes on, and `mysqllock`'s death sends SIGTERM to its command);
//! - `stop` (PHP, C), `stop-group` and `stop-mysqllock` (CLI): SIGSTOP for 3–4 s, longer
//!   than the 2 s TTL, then SIGCONT. For CLI holders both variants are used: stopping
//!   the whole process group is a frozen machine (the command pauses too and resumes
//!   after a takeover); stopping only `mysqllock` freezes its keep-alive while the
//!   command keeps writing, the case where the holder's own process cannot know;
//! - `kill-session`: `KILL <connection_id>` of the holder's database session;
//! - `stop-any` (one fault in eleven): SIGSTOP of a random worker's process group for
//!   3–4 s, holder or not, so waiters are also frozen halfway through an acquisition;
//! - `kill-query` (one in eleven): `KILL QUERY` of a session waiting in GET_LOCK;
//! - `restart` and `crash`: a clean restart of the server and a SIGKILL of it followed by
//!   a start on the same port and data (scheduled, `--restarts` in all, alternating).

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use mysqllock_core::{Config, NativeLocker, Session, Value};

use crate::guard::{Call, Guard};
use crate::journal::Op;
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
const TICK: Duration = Duration::from_millis(50);

/// One worker of the plan: `KIND NAME keep-alive|plain PROGRAM ARGS...`.
#[derive(Debug, Clone)]
struct Spec {
    kind: String,
    name: String,
    keep_alive: bool,
    argv: Vec<String>,
}

impl Spec {
    fn parse(text: &str) -> Result<Spec, String> {
        let w: Vec<&str> = text.split_whitespace().collect();
        match w.as_slice() {
            [kind, name, mode, argv @ ..] if !argv.is_empty() && ["keep-alive", "plain"].contains(mode) => Ok(Spec {
                kind: (*kind).to_owned(),
                name: (*name).to_owned(),
                keep_alive: *mode == "keep-alive",
                argv: argv.iter().map(|a| (*a).to_owned()).collect(),
            }),
            _ => Err(format!("--worker {text:?}: expected \"KIND NAME keep-alive|plain PROGRAM ARGS...\"")),
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
    specs: Vec<Spec>,
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
        specs: Vec::new(),
    };
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        let value = it.next().ok_or_else(|| format!("{flag} needs a value"))?;
        let number = |v: &str| v.parse::<f64>().map_err(|_| format!("{flag} {v}: not a number"));
        match flag.as_str() {
            "--dir" => o.dir = value.into(),
            "--db-dir" => o.db_dir = value.into(),
            "--mariadb-script" => o.mariadb_script = value.into(),
            "--dsn" => o.dsn = value.clone(),
            "--seconds" => o.seconds = number(value)?,
            "--seed" => o.seed = value.parse().map_err(|_| format!("--seed {value}: not an integer"))?,
            "--restarts" => o.restarts = value.parse().map_err(|_| format!("--restarts {value}: not an integer"))?,
            "--fault-gap" => {
                let (low, high) =
                    value.split_once(',').ok_or_else(|| format!("--fault-gap {value}: expected LOW,HIGH"))?;
                o.fault_gap = (number(low)?, number(high)?);
            }
            "--worker" => o.specs.push(Spec::parse(value)?),
            _ => return Err(format!("unknown option {flag}")),
        }
    }
    if o.dir.as_os_str().is_empty() || o.db_dir.as_os_str().is_empty() || o.dsn.is_empty() || o.specs.is_empty() {
        return Err("usage: chaos drive --dir DIR --db-dir DIR --mariadb-script PATH --dsn URL [--seconds N] \
                    [--seed N] [--restarts N] [--fault-gap LOW,HIGH] --worker \"KIND NAME keep-alive|plain PROGRAM ARGS...\"..."
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

struct Driver {
    o: Options,
    rng: Rng,
    guard: Guard,
    locker: NativeLocker,
    workers: Vec<Worker>,
    stopped: Vec<Stopped>,
    restart: Option<JoinHandle<Result<(), String>>>,
    /// This very binary, as it was at the start (a rebuild during the run replaces the
    /// file, and /proc/self/exe would then name a deleted one): the workers' guard.
    guard_path: PathBuf,
    /// Restarts begun so far: every second one is a crash.
    restarts_started: u32,
    log: File,
    start: Instant,
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
        fs::create_dir_all(o.dir.join("workers")).map_err(|e| format!("{}: {e}", o.dir.display()))?;
        let config = Config::from_url(&o.dsn).map_err(|e| e.chain())?;
        let log = File::create(o.dir.join("driver.log")).map_err(|e| format!("driver.log: {e}"))?;
        let guard_path = std::env::current_exe().map_err(|e| format!("locating the chaos binary: {e}"))?;
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
            guard: Guard::new(&o.dir),
            locker: NativeLocker::from_config(config),
            o,
            workers,
            stopped: Vec::new(),
            restart: None,
            guard_path,
            restarts_started: 0,
            log,
            start: Instant::now(),
            winding_down: false,
        })
    }

    fn note(&mut self, text: &str) {
        let _ = writeln!(self.log, "+{:7.3}s {text}", self.start.elapsed().as_secs_f64());
    }

    /// Appends a fault or phase line to the guard's journal.
    fn journal(&mut self, op: Op, name: &str, token: u64, pid: i32, verdict: &str) -> Result<(), String> {
        let call = Call { kind: "driver", op, name, token, pid: pid.max(0) as u32, verdict };
        self.guard.call(&call).map(|_| ()).map_err(|e| format!("writing the guard journal: {e}"))
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
        self.start = Instant::now();
        self.journal(Op::Phase, "-", 0, 0, "chaos-start")?;
        let seconds = Duration::from_secs_f64(self.o.seconds);
        let end = self.start + seconds;
        let mut restarts: Vec<Instant> = (1..=self.o.restarts)
            .map(|i| self.start + seconds.mul_f64(f64::from(i) / f64::from(self.o.restarts + 1)))
            .collect();
        let mut next_fault = self.start + self.fault_gap();
        while Instant::now() < end {
            self.tend_workers()?;
            self.continue_due();
            let now = Instant::now();
            let restarting = self.restart.as_ref().is_some_and(|h| !h.is_finished());
            if !restarting {
                if let Some(h) = self.restart.take() {
                    let outcome = h.join().map_err(|_| "the restart thread panicked".to_owned())?;
                    outcome?;
                    self.note("server is back");
                }
            }
            if !restarting && restarts.first().is_some_and(|at| now >= *at) {
                restarts.remove(0);
                self.start_restart()?;
            } else if !restarting && now >= next_fault {
                next_fault = if self.inject()? { now + self.fault_gap() } else { now + Duration::from_millis(200) };
            }
            std::thread::sleep(TICK);
        }
        Ok(())
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

    fn spawn(&mut self, i: usize) -> Result<(), String> {
        let guard_path = self.guard_path.clone();
        let stop_file = self.o.dir.join("stop");
        let w = &mut self.workers[i];
        let log_path = self.o.dir.join("workers").join(format!("{}.log", w.label));
        let log = OpenOptions::new().create(true).append(true).open(&log_path).map_err(|e| format!("{e}"))?;
        let err = log.try_clone().map_err(|e| format!("{e}"))?;
        let seed = self.o.seed.wrapping_mul(1000).wrapping_add(i as u64 * 100 + u64::from(w.spawns));
        let mut command = Command::new(&w.spec.argv[0]);
        command
            .args(&w.spec.argv[1..])
            .env("CHAOS_DIR", &self.o.dir)
            .env("CHAOS_GUARD", &guard_path)
            .env("CHAOS_KIND", &w.spec.kind)
            .env("CHAOS_NAME", &w.spec.name)
            .env("CHAOS_KEEP_ALIVE", if w.spec.keep_alive { "1" } else { "0" })
            .env("CHAOS_SEED", seed.to_string())
            .env("CHAOS_WORKER", &w.label)
            .env("CHAOS_TTL", TTL_SECONDS)
            .env("CHAOS_TIMEOUT", ACQUIRE_TIMEOUT_SECONDS)
            .env("CHAOS_STOP", &stop_file)
            .env("MYSQLLOCK_DSN", &self.o.dsn)
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

    /// The live holders that are processes of our own workers, not stopped already.
    fn holders(&mut self) -> Vec<Holder> {
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
                let pid = i32::try_from(r.pid?).ok()?;
                let group = pgid_of(pid)?;
                let worker = self.workers.iter().position(|w| w.pgid() == Some(group))?;
                if self.stopped.iter().any(|s| s.worker == worker) {
                    return None;
                }
                Some(Holder { worker, pid, name: r.name, token: r.token.unwrap_or(0), connection_id: r.connection_id })
            })
            .collect()
    }

    /// Injects one fault: mostly into a random holder (kill9, stop, kill-session, three
    /// times in eleven each), sometimes into whoever is there (`stop-any`: any worker,
    /// holder or not, so waiters are frozen halfway through an acquisition too;
    /// `kill-query`: a session waiting in GET_LOCK). False when there was nobody to hit.
    fn inject(&mut self) -> Result<bool, String> {
        let roll = self.rng.below(11);
        match roll {
            0 => return self.stop_any(),
            1 => return self.kill_query(),
            _ => {}
        }
        let holders = self.holders();
        if holders.is_empty() {
            return Ok(false);
        }
        let h = holders[self.rng.below(holders.len())].clone();
        let kind = self.workers[h.worker].spec.kind.clone();
        let label = self.workers[h.worker].label.clone();
        let fault = match roll {
            2..=4 => {
                signal(h.pid, libc::SIGKILL);
                "kill9"
            }
            5..=7 if self.stopped.len() < MAX_STOPPED => self.stop(&h, &kind),
            _ => match self.kill_session(h.connection_id) {
                Ok(()) => "kill-session",
                Err(e) => {
                    self.note(&format!("KILL {} failed: {e}", h.connection_id));
                    return Ok(false);
                }
            },
        };
        self.note(&format!(
            "fault {fault}: {label} pid {} holding {} (token {}, session {})",
            h.pid, h.name, h.token, h.connection_id
        ));
        self.journal(Op::Fault, &h.name, h.token, h.pid, fault)?;
        Ok(true)
    }

    fn kill_session(&mut self, id: u64) -> Result<(), String> {
        let session = self.locker.session().map_err(|e| e.chain())?;
        session.kill(id).map_err(|e| e.to_string())
    }

    /// `KILL QUERY` of a random session waiting in GET_LOCK: the wait ends at once with
    /// NULL, as if it had timed out, in the middle of an acquisition.
    fn kill_query(&mut self) -> Result<bool, String> {
        const WAITERS: &str =
            "SELECT ID FROM information_schema.PROCESSLIST WHERE INFO LIKE ? AND ID <> CONNECTION_ID()";
        let waiters = match self.locker.session() {
            Ok(s) => s.execute(WAITERS, &["%GET_LOCK(%".into()]).map_err(|e| e.to_string()),
            Err(e) => Err(e.chain()),
        };
        let ids: Vec<u64> = match waiters {
            Ok(out) => out.rows.iter().filter_map(|r| r.first().and_then(Value::as_u64)).collect(),
            Err(e) => {
                self.note(&format!("cannot list the sessions waiting in GET_LOCK: {e}"));
                return Ok(false);
            }
        };
        if ids.is_empty() {
            return Ok(false);
        }
        let id = ids[self.rng.below(ids.len())];
        let killed = match self.locker.session() {
            Ok(s) => s.execute(&format!("KILL QUERY {id}"), &[]).map(|_| ()).map_err(|e| e.to_string()),
            Err(e) => Err(e.chain()),
        };
        if let Err(e) = killed {
            self.note(&format!("KILL QUERY {id} failed: {e}"));
            return Ok(false);
        }
        self.note(&format!("fault kill-query: session {id}, waiting in GET_LOCK"));
        self.journal(Op::Fault, "-", id, 0, "kill-query")?;
        Ok(true)
    }

    /// Stops the whole process group of a random running worker that is not stopped yet.
    fn stop_any(&mut self) -> Result<bool, String> {
        let candidates: Vec<usize> = (0..self.workers.len())
            .filter(|i| self.workers[*i].child.is_some() && !self.stopped.iter().any(|s| s.worker == *i))
            .collect();
        if candidates.is_empty() || self.stopped.len() >= MAX_STOPPED {
            return Ok(false);
        }
        let i = candidates[self.rng.below(candidates.len())];
        let Some(group) = self.workers[i].pgid() else { return Ok(false) };
        signal(-group, libc::SIGSTOP);
        let until = Instant::now() + Duration::from_secs_f64(self.rng.between(STOP_SECONDS.0, STOP_SECONDS.1));
        self.stopped.push(Stopped { worker: i, target: -group, until });
        let (label, name) = (self.workers[i].label.clone(), self.workers[i].spec.name.clone());
        self.note(&format!("fault stop-any: {label} process group {group} (lock {name})"));
        self.journal(Op::Fault, &name, 0, group, "stop-any")?;
        Ok(true)
    }

    /// Stops a holder for longer than its TTL; returns the fault's name.
    fn stop(&mut self, h: &Holder, kind: &str) -> &'static str {
        let group = self.workers[h.worker].pgid().unwrap_or(h.pid);
        let (target, fault) = match kind {
            "cli" if self.rng.below(2) == 0 => (-group, "stop-group"),
            "cli" => (h.pid, "stop-mysqllock"),
            _ => (h.pid, "stop"),
        };
        signal(target, libc::SIGSTOP);
        let until = Instant::now() + Duration::from_secs_f64(self.rng.between(STOP_SECONDS.0, STOP_SECONDS.1));
        self.stopped.push(Stopped { worker: h.worker, target, until });
        fault
    }

    /// Starts the next scheduled server restart (clean or crash, alternating) in a thread.
    fn start_restart(&mut self) -> Result<(), String> {
        let crash = self.restarts_started % 2 == 1;
        self.restarts_started += 1;
        let fault = if crash { "crash" } else { "restart" };
        self.note(&format!("fault {fault}: the database server"));
        self.journal(Op::Fault, "-", 0, 0, fault)?;
        let (script, db_dir) = (self.o.mariadb_script.clone(), self.o.db_dir.clone());
        self.restart = Some(std::thread::spawn(move || restart_server(&script, &db_dir, crash)));
        Ok(())
    }

    /// Ends the run: lets stopped processes go, asks workers to finish, waits, kills
    /// what is left, and marks the end of chaos in the journal.
    fn wind_down(&mut self) -> Result<(), String> {
        self.winding_down = true;
        let restarted = match self.restart.take() {
            Some(h) => h.join().map_err(|_| "the restart thread panicked".to_owned()).and_then(|r| r),
            None => Ok(()),
        };
        for s in std::mem::take(&mut self.stopped) {
            self.resume(&s);
        }
        File::create(self.o.dir.join("stop")).map_err(|e| format!("creating the stop file: {e}"))?;
        let deadline = Instant::now() + WIND_DOWN;
        while Instant::now() < deadline && self.workers.iter().any(|w| w.child.is_some()) {
            self.tend_workers()?;
            std::thread::sleep(TICK);
        }
        for w in &mut self.workers {
            if let Some(mut child) = w.child.take() {
                signal(-(child.id() as i32), libc::SIGKILL);
                let _ = child.wait();
                let text = format!("worker {} did not finish in time: killed", w.label);
                let _ = writeln!(self.log, "{text}");
                println!("chaos: {text}");
            }
        }
        restarted?;
        self.journal(Op::Phase, "-", 0, 0, "chaos-end")?;
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
        while unsafe { libc::kill(pid, 0) } == 0 && Instant::now() < gone_by {
            std::thread::sleep(TICK);
        }
    }
    let status = Command::new("bash")
        .arg(script)
        .arg("restart")
        .arg(db_dir)
        .stdout(Stdio::null())
        .status()
        .map_err(|e| format!("running {}: {e}", script.display()))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("{} restart {} failed: {}", script.display(), db_dir.display(), describe(status)))
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

/// The process group of `pid`, from /proc (None once it is gone).
fn pgid_of(pid: i32) -> Option<i32> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // "pid (comm) state ppid pgrp ...": comm may hold spaces and parentheses.
    let after = &stat[stat.rfind(')')? + 1..];
    after.split_whitespace().nth(2)?.parse().ok()
}

/// kill(2); a process that is already gone is no error here.
fn signal(target: i32, sig: libc::c_int) {
    // SAFETY: plain kill(2) on a pid or group that the caller checked is ours.
    unsafe { libc::kill(target, sig) };
}
