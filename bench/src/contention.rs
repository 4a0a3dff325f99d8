//! Figure 3: contention. K separate processes loop acquire (long timeout) → short hold →
//! release on one name for a fixed time. Each logs, per acquisition, CLOCK_MONOTONIC ns
//! of: start of wait, got it, start of release, release returned. The driver counts the
//! server's statements around the run (before the workers disconnect) and computes
//! throughput, fairness, and the longest wait against the time others held the lock
//! during it.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::Duration;

use crate::args::Args;
use crate::clock::{now_ns, sleep_until};
use crate::ctx::Ctx;
use crate::impls::{self, Kind};
use crate::status::Counts;
use crate::Res;

/// One acquisition as a worker logged it.
#[derive(Debug, Clone, Copy)]
pub struct Rec {
    pub wait: i64,
    pub got: i64,
    pub release_start: i64,
    pub released: i64,
    pub worker: usize,
}

pub struct Contention {
    pub acquisitions: usize,
    pub per_second: f64,
    pub counts: Counts,
    /// Fewest and most acquisitions of one process.
    pub min_max: (usize, usize),
    pub max_wait_ns: i64,
    /// Time other processes held the lock during that longest wait.
    pub held_in_max_wait_ns: i64,
    /// The largest `wait - others' hold during it` of any acquisition.
    pub max_excess_ns: i64,
    /// Pairs of holds (got → start of release) of different processes that overlap:
    /// a mutual-exclusion failure. Must be 0.
    pub overlaps: usize,
}

/// Runs of one kind (interleaved with the other kinds') as one result: totals and means,
/// and the worst of each run's fairness, longest wait and excess.
pub fn merge(parts: Vec<Contention>) -> Contention {
    let n = parts.len().max(1) as f64;
    let counts = Counts::mean(parts.iter().map(|p| &p.counts));
    let per_second = parts.iter().map(|p| p.per_second).sum::<f64>() / n;
    let least_fair = parts.iter().min_by(|a, b| a.fairness().total_cmp(&b.fairness())).map_or((0, 0), |p| p.min_max);
    let longest = parts.iter().max_by_key(|p| p.max_wait_ns).map_or((0, 0), |p| (p.max_wait_ns, p.held_in_max_wait_ns));
    Contention {
        acquisitions: parts.iter().map(|p| p.acquisitions).sum(),
        per_second,
        counts,
        min_max: least_fair,
        max_wait_ns: longest.0,
        held_in_max_wait_ns: longest.1,
        max_excess_ns: parts.iter().map(|p| p.max_excess_ns).max().unwrap_or(0),
        overlaps: parts.iter().map(|p| p.overlaps).sum(),
    }
}

impl Contention {
    pub fn fairness(&self) -> f64 {
        if self.min_max.1 == 0 {
            0.0
        } else {
            self.min_max.0 as f64 / self.min_max.1 as f64
        }
    }
}

/// A worker process: killed if the driver gives up on it.
struct Worker {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    log: PathBuf,
}

impl Worker {
    fn line(&mut self) -> Res<String> {
        let mut line = String::new();
        self.stdout.read_line(&mut line)?;
        Ok(line.trim().to_owned())
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

pub fn measure(ctx: &mut Ctx, kind: Kind, procs: usize) -> Res<Contention> {
    let name = format!("bench-contend-{}-{procs}", kind.tag());
    let hold_us = ctx.params.hold_us.to_string();
    let dir = ctx.work.join(format!("contend-{}-{procs}", kind.tag()));
    std::fs::create_dir_all(&dir)?;
    let mut workers = Vec::with_capacity(procs);
    for i in 0..procs {
        let log = dir.join(format!("worker-{i}.log"));
        let mut cmd = if kind.is_php() {
            let mut c = ctx.php.command("contend.php");
            c.args([kind.tag(), &name, &hold_us]).arg(&log);
            c
        } else {
            let mut c = Command::new(std::env::current_exe()?);
            c.args(["contend-worker", "--impl", kind.tag(), "--dsn", &ctx.dsn, "--name", &name, "--hold-us", &hold_us]);
            c.arg("--out").arg(&log);
            c
        };
        let mut child = cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::inherit()).spawn()?;
        let stdin = child.stdin.take();
        let stdout = BufReader::new(child.stdout.take().ok_or("no stdout")?);
        workers.push(Worker { child, stdin, stdout, log });
    }
    for w in &mut workers {
        let line = w.line()?;
        if line != "ready" {
            return Err(format!("contention worker {}: said {line:?} instead of ready", kind.tag()).into());
        }
    }
    let (s0, s1) = ctx.admin.calibrate()?;
    let start = now_ns() + 20_000_000;
    let end = start + (ctx.params.contention_secs * 1e9) as i64;
    for w in &mut workers {
        let stdin = w.stdin.as_mut().ok_or("no stdin")?;
        writeln!(stdin, "{start} {end}")?;
        stdin.flush()?;
    }
    for w in &mut workers {
        let done = w.line()?;
        if !done.starts_with("done") {
            return Err(format!("contention worker {} failed (said {done:?})", kind.tag()).into());
        }
    }
    // Counted before the workers disconnect: a session's COM_QUIT counts as a question.
    let s2 = ctx.admin.snapshot()?;
    let mut logs = Vec::with_capacity(procs);
    for w in &mut workers {
        drop(w.stdin.take()); // end of input: the worker exits
        let status = w.child.wait()?;
        if !status.success() {
            return Err(format!("contention worker {} failed ({status})", kind.tag()).into());
        }
        logs.push(w.log.clone());
    }
    let mut recs = Vec::new();
    for (i, log) in logs.iter().enumerate() {
        recs.extend(read_log(log, i)?);
    }
    let acquisitions = recs.len();
    let counts = Counts::calibrated(&s0, &s1, &s2, acquisitions as f64);
    Ok(analyze(recs, procs, start, counts))
}

fn read_log(path: &Path, worker: usize) -> Res<Vec<Rec>> {
    let text = std::fs::read_to_string(path)?;
    let mut out = Vec::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let v: Vec<i64> = line.split_whitespace().filter_map(|w| w.parse().ok()).collect();
        let [wait, got, release_start, released] = v[..] else {
            return Err(format!("{}: bad line {line:?}", path.display()).into());
        };
        out.push(Rec { wait, got, release_start, released, worker });
    }
    Ok(out)
}

pub fn analyze(mut recs: Vec<Rec>, procs: usize, start: i64, counts: Counts) -> Contention {
    let acquisitions = recs.len();
    let mut per = vec![0usize; procs];
    for r in &recs {
        per[r.worker] += 1;
    }
    let min_max = (per.iter().copied().min().unwrap_or(0), per.iter().copied().max().unwrap_or(0));
    let last = recs.iter().map(|r| r.released).max().unwrap_or(start);
    let per_second = acquisitions as f64 / ((last - start).max(1) as f64 / 1e9);
    recs.sort_by_key(|r| r.got);
    let overlaps = recs.windows(2).filter(|w| w[0].worker != w[1].worker && w[1].got < w[0].release_start).count();
    // Holds count until release returned (generous to the lock: the release statement
    // is part of the hold).
    let longest_hold = recs.iter().map(|r| r.released - r.got).max().unwrap_or(0);
    let (mut max_wait_ns, mut held_in_max_wait_ns, mut max_excess_ns) = (0, 0, i64::MIN);
    for (i, r) in recs.iter().enumerate() {
        let wait = r.got - r.wait;
        // Holds that began before our got and may reach into our wait.
        let mut held = 0;
        for o in recs[..i].iter().rev() {
            if o.got + longest_hold < r.wait {
                break;
            }
            if o.worker != r.worker {
                held += (o.released.min(r.got) - o.got.max(r.wait)).max(0);
            }
        }
        if wait > max_wait_ns {
            max_wait_ns = wait;
            held_in_max_wait_ns = held;
        }
        max_excess_ns = max_excess_ns.max(wait - held);
    }
    Contention {
        acquisitions,
        per_second,
        counts,
        min_max,
        max_wait_ns,
        held_in_max_wait_ns,
        max_excess_ns: max_excess_ns.max(0),
        overlaps,
    }
}

/// `contend-worker`: a Rust-side contention worker (see [`measure`]).
pub fn worker(argv: &[String]) -> Res<()> {
    let a = Args::parse(argv, &[])?;
    let kind = Kind::from_tag(a.req("impl")?)?;
    let dsn = a.dsn()?;
    let name = a.req("name")?.to_owned();
    let hold = Duration::from_micros(a.num("hold-us")?);
    let out = PathBuf::from(a.req("out")?);
    let mut lock = impls::open(kind, &dsn, &format!("{name}-warm-{}", std::process::id()))?;
    println!("ready");
    let mut line = String::new();
    std::io::stdin().read_line(&mut line)?;
    let mut it = line.split_whitespace().map(|w| w.parse::<i64>());
    let (Some(Ok(start)), Some(Ok(end))) = (it.next(), it.next()) else {
        return Err(format!("expected \"START END\", got {line:?}").into());
    };
    sleep_until(start);
    let mut log = String::with_capacity(1 << 20);
    loop {
        let wait = now_ns();
        if wait >= end {
            break;
        }
        lock.acquire(&name, 60.0)?;
        let got = now_ns();
        if !hold.is_zero() {
            std::thread::sleep(hold);
        }
        let release_start = now_ns();
        lock.release(&name)?;
        let released = now_ns();
        log.push_str(&format!("{wait} {got} {release_start} {released}\n"));
    }
    std::fs::write(&out, log)?;
    println!("done");
    // Stay connected until the driver has read the server's counters (end of input).
    let mut rest = String::new();
    while std::io::stdin().read_line(&mut rest)? > 0 {}
    Ok(())
}
