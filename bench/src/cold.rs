//! Figure 5: cold start. N fresh processes, one after the other, that connect, lock,
//! release and exit: the extension against raw GET_LOCK through PDO (both PHP processes
//! load the extension, so the only difference is the work), and the Rust core against
//! the raw `mysql` crate. The pairs are interleaved so drift hits both alike.

use std::process::{Command, Stdio};

use crate::args::Args;
use crate::clock::now_ns;
use crate::ctx::Ctx;
use crate::impls::{self, Kind};
use crate::stats::{dist, Dist};
use crate::status::Counts;
use crate::Res;

pub struct Cold {
    pub n: usize,
    /// Wall time of all N processes.
    pub total_ns: i64,
    pub per_process: Dist,
    /// Server-counted, per process (connection setup included).
    pub counts: Counts,
}

/// Runs `n` processes of each of the two kinds, interleaved. Returns them in order.
pub fn measure(ctx: &mut Ctx, kinds: [Kind; 2]) -> Res<[Cold; 2]> {
    let n = ctx.params.cold_n;
    // One of each first, not counted: disk caches and the server's table cache.
    for kind in kinds {
        spawn(ctx, kind)?;
    }
    let mut times: [Vec<i64>; 2] = [Vec::with_capacity(n), Vec::with_capacity(n)];
    let mut counts = Vec::new();
    // Counted separately: a batch of each kind between snapshots.
    for kind in kinds {
        let (s0, s1) = ctx.admin.calibrate()?;
        for _ in 0..n.min(10) {
            spawn(ctx, kind)?;
        }
        let s2 = ctx.admin.snapshot()?;
        counts.push(Counts::calibrated(&s0, &s1, &s2, n.min(10) as f64));
    }
    for _ in 0..n {
        for (i, &kind) in kinds.iter().enumerate() {
            times[i].push(spawn(ctx, kind)?);
        }
    }
    let mut counts = counts.into_iter();
    let mut one = |t: Vec<i64>| Cold {
        n,
        total_ns: t.iter().sum(),
        per_process: dist(t),
        counts: counts.next().unwrap_or_default(),
    };
    let [a, b] = times;
    Ok([one(a), one(b)])
}

/// One process, timed from spawn to exit.
fn spawn(ctx: &Ctx, kind: Kind) -> Res<i64> {
    let mut cmd = if kind.is_php() {
        let mut c = ctx.php.command("cold.php");
        c.arg(kind.tag()).arg(format!("bench-cold-{}", kind.tag()));
        c
    } else {
        let mut c = Command::new(std::env::current_exe()?);
        c.args(["cold", "--impl", kind.tag(), "--dsn", &ctx.dsn]);
        c
    };
    cmd.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::inherit());
    let t = now_ns();
    let status = cmd.status()?;
    let took = now_ns() - t;
    if !status.success() {
        return Err(format!("cold start {} failed ({status})", kind.tag()).into());
    }
    Ok(took)
}

/// `cold`: connect, lock, release, exit (Rust side).
pub fn child(argv: &[String]) -> Res<()> {
    let a = Args::parse(argv, &[])?;
    let kind = Kind::from_tag(a.req("impl")?)?;
    impls::open(kind, &a.dsn()?, &format!("bench-cold-{}", kind.tag()))?;
    Ok(())
}
