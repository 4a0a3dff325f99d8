//! Figure 4: scale. One process acquires and holds N distinct names, timing each
//! acquisition; the median of the first 1,000 against the median of the last 1,000, and
//! the memory each held lock costs (RSS delta / N; for PHP also memory_get_usage()).
//! Then releases them all.

use std::process::{Command, Stdio};

use crate::args::Args;
use crate::clock::{now_ns, vm_rss_kb};
use crate::ctx::Ctx;
use crate::impls::{self, Kind};
use crate::lines::Report;
use crate::Res;

/// How many acquisitions the first and last windows hold.
pub const WINDOW: usize = 1000;

pub struct Scale {
    pub n: usize,
    /// Median acquisition time among the first and among the last [`WINDOW`].
    pub first_ns: i64,
    pub last_ns: i64,
    pub release_ns: i64,
    pub rss_delta_kb: i64,
    /// PHP only: memory_get_usage() delta in bytes (the handles and their names).
    pub php_mem_delta: Option<i64>,
}

impl Scale {
    pub fn last_vs_first(&self) -> f64 {
        self.last_ns as f64 / self.first_ns.max(1) as f64
    }

    pub fn rss_bytes_per_lock(&self) -> f64 {
        self.rss_delta_kb as f64 * 1024.0 / self.n as f64
    }
}

pub fn measure(ctx: &mut Ctx, kind: Kind) -> Res<Scale> {
    let n = ctx.params.scale_n;
    let report = if kind.is_php() {
        ctx.php.run("scale.php", &[kind.tag().to_owned(), n.to_string()])?
    } else {
        let out = Command::new(std::env::current_exe()?)
            .args(["scale-worker", "--impl", kind.tag(), "--dsn", &ctx.dsn, "--n", &n.to_string()])
            .stderr(Stdio::inherit())
            .output()?;
        if !out.status.success() {
            return Err(format!("scale worker {} failed ({})", kind.tag(), out.status).into());
        }
        Report::parse(&String::from_utf8_lossy(&out.stdout))
    };
    Ok(Scale {
        n,
        first_ns: report.num("scale", "first_ns")?,
        last_ns: report.num("scale", "last_ns")?,
        release_ns: report.num("scale", "release_ns")?,
        rss_delta_kb: report.num("scale", "rss_delta_kb")?,
        php_mem_delta: report.num("scale", "mem_delta").ok(),
    })
}

fn sorted(v: &[i64]) -> Vec<i64> {
    let mut v = v.to_vec();
    v.sort_unstable();
    v
}

/// `scale-worker`: the Rust-side scale run in a process of its own (clean RSS).
pub fn worker(argv: &[String]) -> Res<()> {
    let a = Args::parse(argv, &[])?;
    let kind = Kind::from_tag(a.req("impl")?)?;
    let n: usize = a.num("n")?;
    if n < 2 * WINDOW {
        return Err(format!("--n must be at least {}", 2 * WINDOW).into());
    }
    let names: Vec<String> = (0..n).map(|i| format!("bench-scale-{}-{i:05}", kind.tag())).collect();
    let mut lock = impls::open(kind, &a.dsn()?, &format!("bench-scale-{}-warm", kind.tag()))?;
    let rss_before = vm_rss_kb();
    let mut took = Vec::with_capacity(n);
    for name in &names {
        let t = now_ns();
        lock.acquire(name, 5.0)?;
        took.push(now_ns() - t);
    }
    let rss_after = vm_rss_kb();
    let t = now_ns();
    for name in &names {
        lock.release(name)?;
    }
    let release_ns = now_ns() - t;
    let first = crate::stats::percentile(&sorted(&took[..WINDOW]), 0.5);
    let last = crate::stats::percentile(&sorted(&took[n - WINDOW..]), 0.5);
    println!("scale first_ns={first} last_ns={last} release_ns={release_ns} rss_delta_kb={}", rss_after - rss_before);
    Ok(())
}
