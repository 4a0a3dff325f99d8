//! Figure 1: uncontended lock + release on one connection.
//!
//! Two passes. Counting: one kind at a time between server status snapshots, so the
//! server's counters belong to that kind alone. Timing: the kinds compared with each
//! other run in ONE process, alternating cycle by cycle (ext with raw PDO in PHP; the
//! core with the raw `mysql` crate in Rust), each on its own connection, so that a
//! shared machine's changing load and latency regime hit both sides of a ratio alike.

use crate::clock::now_ns;
use crate::ctx::Ctx;
use crate::impls::{self, Kind};
use crate::stats::{dist, Dist};
use crate::status::Counts;
use crate::Res;

pub struct Uncontended {
    /// Per lock + release cycle.
    pub counts: Counts,
    pub latency: Dist,
}

fn name(kind: Kind) -> String {
    format!("bench-uncontended-{}", kind.tag())
}

/// Server-counted statements per cycle of one kind: `n` cycles between snapshots.
pub fn counts(ctx: &mut Ctx, kind: Kind, n: usize) -> Res<Counts> {
    let warm = ctx.params.warm;
    if kind.is_php() {
        let args = ["count".to_owned(), kind.tag().to_owned(), n.to_string(), warm.to_string(), name(kind)];
        let r = ctx.php.run("uncontended.php", &args)?;
        return Ok(Counts::calibrated(&r.snapshot("snap0")?, &r.snapshot("snap1")?, &r.snapshot("snap2")?, n as f64));
    }
    let mut lock = impls::open(kind, &ctx.dsn, &name(kind))?;
    for _ in 0..warm {
        lock.acquire(&name(kind), 5.0)?;
        lock.release(&name(kind))?;
    }
    let (s0, s1) = ctx.admin.calibrate()?;
    for _ in 0..n {
        lock.acquire(&name(kind), 5.0)?;
        lock.release(&name(kind))?;
    }
    let s2 = ctx.admin.snapshot()?;
    Ok(Counts::calibrated(&s0, &s1, &s2, n as f64))
}

/// Latency (ns) of `n` cycles of each kind, the kinds alternating cycle by cycle in one
/// process: `[Ext, Pdo]` in PHP, or any Rust-side kinds here.
pub fn latencies(ctx: &mut Ctx, kinds: &[Kind], n: usize) -> Res<Vec<Vec<i64>>> {
    let warm = ctx.params.warm;
    if kinds.iter().any(|k| k.is_php()) {
        if kinds != [Kind::Ext, Kind::Pdo] {
            return Err("PHP latencies are measured for [ext, pdo] together".into());
        }
        let args = ["time".to_owned(), n.to_string(), warm.to_string(), "bench-uncontended".to_owned()];
        let r = ctx.php.run("uncontended.php", &args)?;
        return Ok(vec![r.list("lat_ext")?, r.list("lat_pdo")?]);
    }
    let mut locks = Vec::new();
    for &k in kinds {
        locks.push((impls::open(k, &ctx.dsn, &name(k))?, name(k)));
    }
    for _ in 0..warm {
        for (lock, name) in &mut locks {
            lock.acquire(name, 5.0)?;
            lock.release(name)?;
        }
    }
    let mut lat = vec![Vec::with_capacity(n); kinds.len()];
    let k = locks.len();
    for round in 0..n {
        // Which kind goes first rotates, so none always follows the same other kind.
        for j in 0..k {
            let i = (round + j) % k;
            let (lock, name) = &mut locks[i];
            let t = now_ns();
            lock.acquire(name, 5.0)?;
            lock.release(name)?;
            lat[i].push(now_ns() - t);
        }
    }
    Ok(lat)
}

/// Per kind: the counts and the latencies of all rounds.
pub fn assemble(counts: Counts, samples: Vec<i64>) -> Uncontended {
    Uncontended { counts, latency: dist(samples) }
}
