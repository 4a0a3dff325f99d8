//! The driver: runs every figure for every implementation and prints one table.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::args::Args;
use crate::cold::{self, Cold};
use crate::contention::{self, Contention};
use crate::ctx::{Ctx, Params};
use crate::handoff::{self, Handoff};
use crate::impls::Kind;
use crate::php::Php;
use crate::report::{f0, f1, f2, f3, idx, ms, us, Cells, Table, Target, MAIN, PROTO};
use crate::scale::{self, Scale, WINDOW};
use crate::status::Admin;
use crate::uncontended::{self, Uncontended};
use crate::Res;

/// Runs one measurement; a failure is reported and remembered, the run goes on.
fn attempt<T>(failures: &mut Vec<String>, what: &str, f: impl FnOnce() -> Res<T>) -> Option<T> {
    let t = Instant::now();
    eprint!("  {what} ... ");
    match f() {
        Ok(v) => {
            eprintln!("{:.1} s", t.elapsed().as_secs_f64());
            Some(v)
        }
        Err(e) => {
            eprintln!("FAILED: {e}");
            failures.push(format!("{what}: {e}"));
            None
        }
    }
}

pub fn run(argv: &[String]) -> Res<()> {
    let a = Args::parse(argv, &["quick"])?;
    let params = Params::new(a.flag("quick"));
    let dsn = a.dsn()?;
    let work = match a.get("work") {
        Some(w) => PathBuf::from(w),
        None => std::env::temp_dir().join(format!("mysqllock-bench-{}", std::process::id())),
    };
    std::fs::create_dir_all(&work)?;
    let php = Php {
        ext: std::fs::canonicalize(a.req("php-ext")?)?,
        dir: std::fs::canonicalize(a.req("php-dir")?)?,
        dsn: dsn.clone(),
    };
    let mut admin = Admin::connect(&dsn)?;
    let header = machine(&mut admin, &php, &params)?;
    eprintln!("{header}");
    let mut ctx = Ctx { dsn, php, admin, params, work };
    let started = Instant::now();
    let mut failures = Vec::new();
    let mut table = Table::new(MAIN);

    let only = a.get("figures").unwrap_or("1,2,3,4,5,p").to_owned();
    let want = |f: &str| only.split(',').any(|x| x.trim().eq_ignore_ascii_case(f));
    let fig1 = if want("1") { figure1(&mut ctx, &mut table, &mut failures) } else { Default::default() };
    if want("2") {
        figure2(&mut ctx, &mut table, &mut failures);
    }
    let fig3 = if want("3") { figure3(&mut ctx, &mut table, &mut failures) } else { Vec::new() };
    if want("4") {
        figure4(&mut ctx, &mut table, &mut failures);
    }
    if want("5") {
        figure5(&mut ctx, &mut table, &mut failures);
    }
    let appendix = if want("p") { Some(prototypes(&mut ctx, &mut failures, fig1, fig3)) } else { None };
    let options = if want("p") { table_options(&mut ctx, &mut failures) } else { None };

    println!("{header}");
    println!();
    print!("{}", table.render());
    println!();
    if let Some(appendix) = appendix {
        println!("Appendix: prototypes of the proposed protocol changes P1/P2 (bench/src/proto.rs; raw SQL on the");
        println!(
            "product's table, NOT the product: no takeover, no stale holders). Rust/C now and raw mysql as above."
        );
        println!();
        print!("{}", appendix.render());
        println!();
    }
    if let Some(options) = options {
        print!("{options}");
        println!();
    }
    println!("measured in {:.0} s", started.elapsed().as_secs_f64());
    if table.unmet.is_empty() {
        println!("targets: all met");
    } else {
        println!("targets not met: {}", table.unmet.len());
        for u in &table.unmet {
            println!("  - {u}");
        }
    }
    if failures.is_empty() {
        Ok(())
    } else {
        for f in &failures {
            println!("FAILED: {f}");
        }
        Err(format!("{} measurement(s) failed to run", failures.len()).into())
    }
}

/// The lines above the table: mode, machine, versions.
fn machine(admin: &mut Admin, php: &Php, p: &Params) -> Res<String> {
    let cpus = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0);
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("model name").map(|m| m.trim_start_matches([' ', '\t', ':']).to_owned()))
        })
        .unwrap_or_else(|| "unknown".to_owned());
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").map(|s| s.trim().to_owned()).unwrap_or_default();
    let server = admin.version()?;
    let php_version = php.version()?;
    Ok(format!(
        "mysqllock benchmark, {} mode\n\
         machine: nproc {cpus}, CPU {cpu}, Linux {kernel}\n\
         server:  MariaDB {server} (throwaway, 127.0.0.1 TCP; every client uses TCP)\n\
         PHP:     {php_version}\n\
         sizes:   fig1 {} cycles (after {} warm-up per batch); fig2 {} hand-offs, hold {} ms{}; fig3 {} s per run, hold {} us; \
         fig4 {} names; fig5 {} processes per kind; figs 1-2 in {} interleaved rounds",
        if p.quick { "--quick" } else { "full" },
        p.cycles,
        p.warm,
        p.handoffs,
        p.handoff_hold.as_millis(),
        if p.long_handoffs > 0 { format!(" (+{} after a 0.7 s hold)", p.long_handoffs) } else { String::new() },
        p.contention_secs,
        p.hold_us,
        p.scale_n,
        p.cold_n,
        p.rounds,
    ))
}

/// Runs `f` for each kind in `contention_rounds` rounds, the kinds interleaved within a round, so
/// that load drifting on a shared machine hits them alike; `merge` joins a kind's parts.
/// A kind that fails in one round is dropped from the rest.
fn interleaved<P, T, const K: usize>(
    ctx: &mut Ctx,
    failures: &mut Vec<String>,
    what: &str,
    kinds: [Kind; K],
    mut f: impl FnMut(&mut Ctx, Kind, usize) -> Res<P>,
    merge: impl Fn(Vec<P>) -> T,
) -> [Option<T>; K] {
    let rounds = ctx.params.contention_rounds;
    let mut parts: [Option<Vec<P>>; K] = std::array::from_fn(|_| Some(Vec::new()));
    for round in 0..rounds {
        let t = Instant::now();
        eprint!("  {what}: round {}/{rounds} ... ", round + 1);
        for (i, &kind) in kinds.iter().enumerate() {
            let Some(done) = parts[i].as_mut() else { continue };
            match f(ctx, kind, round) {
                Ok(p) => done.push(p),
                Err(e) => {
                    eprint!("{} FAILED: {e} ... ", kind.tag());
                    failures.push(format!("{what}: {}: {e}", kind.tag()));
                    parts[i] = None;
                }
            }
        }
        eprintln!("{:.1} s", t.elapsed().as_secs_f64());
    }
    parts.map(|p| p.map(&merge))
}

/// Runs `f` for every kind; the results in [`Kind::ALL`] order.
fn each<T>(
    ctx: &mut Ctx,
    failures: &mut Vec<String>,
    what: &str,
    mut f: impl FnMut(&mut Ctx, Kind) -> Res<T>,
) -> [Option<T>; 4] {
    Kind::ALL.map(|k| attempt(failures, &format!("{what}: {}", k.tag()), || f(ctx, k)))
}

fn cells<T>(r: &[Option<T>; 4], f: impl Fn(&T) -> f64) -> Cells {
    [0, 1, 2, 3].map(|i| r[i].as_ref().map(&f))
}

fn figure1(ctx: &mut Ctx, t: &mut Table, failures: &mut Vec<String>) -> [Option<Uncontended>; 4] {
    eprintln!("figure 1: uncontended lock + release");
    let counted = ctx.params.count_cycles;
    let counts = each(ctx, failures, "uncontended, counted", |c, k| uncontended::counts(c, k, counted));
    let n = ctx.params.cycles / ctx.params.rounds;
    let groups = [vec![Kind::Ext, Kind::Pdo], vec![Kind::Rust, Kind::Mysql]];
    let rounds = ctx.params.rounds;
    let lat = grouped(ctx, failures, "uncontended, timed", rounds, &groups, |c, g| uncontended::latencies(c, g, n));
    let r: [Option<Uncontended>; 4] = Kind::ALL.map(|k| {
        let counts = counts[idx(k)].clone()?;
        let samples = take(&lat, k)?.into_iter().flatten().collect();
        Some(uncontended::assemble(counts, samples))
    });
    t.heading(
        "1 uncontended",
        &format!(
            "1 uncontended lock+release (statements: {counted} cycles per kind, server-counted; latency: {} cycles, \
             ext/PDO and rust/mysql alternating)",
            ctx.params.cycles
        ),
    );
    t.num("  statements/cycle (Questions)", cells(&r, |u| u.counts.statements()), f2, Target::None);
    let mix = [0, 1, 2, 3].map(|i| r[i].as_ref().map_or_else(|| "-".to_owned(), |u| u.counts.mix()));
    t.text("  statement mix/cycle", mix, "-", &[]);
    t.num("  round trips/cycle", cells(&r, |u| u.counts.round_trips()), f3, Target::AtMost(3.0));
    t.num("  median latency (us)", cells(&r, |u| us(u.latency.median)), f1, Target::RatioAtMost(1.5));
    t.num("  median minus raw's (us)", minus_raw(cells(&r, |u| us(u.latency.median)), MAIN_PAIRS), f1, Target::Plain);
    let per_round = |k: Kind| take(&lat, k).map(|rounds| rounds.into_iter().map(median).collect::<Vec<_>>());
    t.text("  median ratio to raw, per round (min..max)", round_ranges(per_round, MAIN_KINDS, true), "-", &[]);
    t.num("  p99 latency (us)", cells(&r, |u| us(u.latency.p99)), f1, Target::None);
    r
}

fn figure2(ctx: &mut Ctx, t: &mut Table, failures: &mut Vec<String>) -> [Option<Handoff>; 4] {
    eprintln!("figure 2: hand-off");
    let (n, hold) = (ctx.params.handoffs, ctx.params.handoff_hold);
    let per_round = n / ctx.params.rounds;
    let groups = [vec![Kind::Ext, Kind::Pdo], vec![Kind::Rust, Kind::Mysql]];
    let rounds = ctx.params.rounds;
    let parts = grouped(ctx, failures, "hand-off", rounds, &groups, |c, g| {
        handoff::measure(c, g, (3, per_round), hold, "short")
    });
    let r: [Option<Handoff>; 4] = Kind::ALL.map(|k| Some(merge_samples(take(&parts, k)?).result(hold)));
    t.heading(
        "2 hand-off",
        &format!(
            "2 hand-off: holder's release() returns -> waiter's acquire returns ({n} hand-offs, hold {} ms, \
             ext/PDO and rust/mysql taking turns)",
            hold.as_millis()
        ),
    );
    t.num("  median (us)", cells(&r, |h| us(h.delta.median)), f1, Target::RatioAtMost(1.5));
    t.num("  median minus raw's (us)", minus_raw(cells(&r, |h| us(h.delta.median)), MAIN_PAIRS), f1, Target::Plain);
    let per_round =
        |k: Kind| take(&parts, k).map(|rounds| rounds.into_iter().map(|s| s.result(hold).delta.median).collect());
    t.text("  median minus raw's, per round (min..max us)", round_ranges(per_round, MAIN_KINDS, false), "-", &[]);
    t.num("  p99 (us)", cells(&r, |h| us(h.delta.p99)), f1, Target::RatioAtMost(1.5));
    t.num("  waiter not blocked (of n; must be 0)", cells(&r, |h| h.not_blocked as f64), f0, Target::Plain);
    let long = ctx.params.long_handoffs;
    if long == 0 {
        t.text(
            "  median after a 0.7 s hold (past the 0.5 s grace)",
            ["not run in --quick".to_owned(), "-".to_owned(), "-".to_owned(), "-".to_owned()],
            "-",
            &[],
        );
        return r;
    }
    // Only the lock's own path changes with the hold (raw GET_LOCK waits alike): ext and
    // Rust here, against the raw floors of the short hand-off above.
    let hold = Duration::from_millis(700);
    let long_groups = [vec![Kind::Ext], vec![Kind::Rust]];
    let parts = grouped(ctx, failures, "hand-off after a 0.7 s hold", 1, &long_groups, |c, g| {
        handoff::measure(c, g, (1, long), hold, "long")
    });
    let mut lr: [Option<Handoff>; 4] = Kind::ALL.map(|k| Some(merge_samples(take(&parts, k)?).result(hold)));
    lr[idx(Kind::Pdo)] = r[idx(Kind::Pdo)].clone();
    lr[idx(Kind::Mysql)] = r[idx(Kind::Mysql)].clone();
    t.num(
        &format!("  median after a 0.7 s hold, past the 0.5 s grace (us; {long} hand-offs; raw as above)"),
        cells(&lr, |h| us(h.delta.median)),
        f1,
        Target::RatioAtMost(1.5),
    );
    r
}

/// Per process count, the four kinds' results.
type ContentionRuns = Vec<(usize, [Option<Contention>; 4])>;

fn figure3(ctx: &mut Ctx, t: &mut Table, failures: &mut Vec<String>) -> ContentionRuns {
    eprintln!("figure 3: contention");
    let mut runs = Vec::new();
    for procs in ctx.params.procs.clone() {
        let r: [Option<Contention>; 4] = interleaved(
            ctx,
            failures,
            &format!("contention x{procs}"),
            Kind::ALL,
            |c, k, _| contention::measure(c, k, procs),
            contention::merge,
        );
        t.heading(
            &format!("3 contention x{procs}"),
            &format!(
                "3 contention: {procs} processes, one name, hold {} us, {} run(s) of {} s per kind",
                ctx.params.hold_us, ctx.params.contention_rounds, ctx.params.contention_secs
            ),
        );
        t.num("  acquisitions (all processes)", cells(&r, |c| c.acquisitions as f64), f0, Target::None);
        t.num("  acquisitions/s", cells(&r, |c| c.per_second), f0, Target::RatioAtLeast(0.5));
        t.num("  statements/acquisition (Questions)", cells(&r, |c| c.counts.statements()), f3, Target::AtMost(4.0));
        let mix = [0, 1, 2, 3].map(|i| r[i].as_ref().map_or_else(|| "-".to_owned(), |c| c.counts.mix()));
        t.text("  statement mix/acquisition", mix, "-", &[]);
        t.num("  round trips/acquisition", cells(&r, |c| c.counts.round_trips()), f2, Target::None);
        let fair = [0, 1, 2, 3].map(|i| {
            r[i].as_ref()
                .map_or_else(|| "-".to_owned(), |c| format!("{:.2} ({}/{})", c.fairness(), c.min_max.0, c.min_max.1))
        });
        let fair_checks =
            [("ext", r[0].as_ref().map(|c| c.fairness() >= 0.5)), ("rust", r[1].as_ref().map(|c| c.fairness() >= 0.5))];
        t.text("  fairness min/max acquisitions per process", fair, ">= 0.5", &fair_checks);
        let wait = [0, 1, 2, 3].map(|i| {
            r[i].as_ref().map_or_else(
                || "-".to_owned(),
                |c| format!("{:.1} ({:.1})", ms(c.max_wait_ns), ms(c.held_in_max_wait_ns)),
            )
        });
        t.text("  max wait ms (others' hold during it)", wait, "-", &[]);
        t.num(
            "  max over acquisitions of wait - others' hold (ms)",
            cells(&r, |c| ms(c.max_excess_ns)),
            f1,
            Target::AtMost(50.0),
        );
        t.num("  overlapping holds (must be 0)", cells(&r, |c| c.overlaps as f64), f0, Target::Plain);
        runs.push((procs, r));
    }
    runs
}

fn figure4(ctx: &mut Ctx, t: &mut Table, failures: &mut Vec<String>) {
    eprintln!("figure 4: scale");
    let r: [Option<Scale>; 4] = each(ctx, failures, "scale", scale::measure);
    let n = ctx.params.scale_n;
    t.heading("4 scale", &format!("4 scale: one process acquires and holds {n} distinct names, then releases them"));
    t.num(&format!("  median acquisition, first {WINDOW} (us)"), cells(&r, |s| us(s.first_ns)), f1, Target::Plain);
    t.num(&format!("  median acquisition, last {WINDOW} (us)"), cells(&r, |s| us(s.last_ns)), f1, Target::Plain);
    t.num("  last/first", cells(&r, Scale::last_vs_first), f2, Target::AtMost(1.2));
    t.num(&format!("  release all {n} (ms)"), cells(&r, |s| ms(s.release_ns)), f0, Target::Plain);
    t.num("  RSS per held lock (bytes)", cells(&r, Scale::rss_bytes_per_lock), f0, Target::Plain);
    let mem: Cells = [0, 1, 2, 3].map(|i| r[i].as_ref().and_then(|s| s.php_mem_delta.map(|m| m as f64 / s.n as f64)));
    t.num("  PHP memory_get_usage per held lock (bytes)", mem, f0, Target::Plain);
}

fn figure5(ctx: &mut Ctx, t: &mut Table, failures: &mut Vec<String>) {
    eprintln!("figure 5: cold start");
    let mut r: [Option<Cold>; 4] = [None, None, None, None];
    for pair in [[Kind::Ext, Kind::Pdo], [Kind::Rust, Kind::Mysql]] {
        let what = format!("cold start: {} vs {}", pair[0].tag(), pair[1].tag());
        if let Some([a, b]) = attempt(failures, &what, || cold::measure(ctx, pair)) {
            r[idx(pair[0])] = Some(a);
            r[idx(pair[1])] = Some(b);
        }
    }
    t.heading(
        "5 cold start",
        &format!(
            "5 cold start: {} fresh processes each (connect, lock, release, exit); PHP ones all load the extension",
            ctx.params.cold_n
        ),
    );
    t.num(
        "  wall time per process, mean (ms)",
        cells(&r, |c| ms(c.total_ns) / c.n as f64),
        f2,
        Target::PhpRatioAtMost(1.1),
    );
    t.num("  wall time per process, median (ms)", cells(&r, |c| ms(c.per_process.median)), f2, Target::None);
    t.num("  statements/process (Questions)", cells(&r, |c| c.counts.statements()), f2, Target::None);
    let mix = [0, 1, 2, 3].map(|i| r[i].as_ref().map_or_else(|| "-".to_owned(), |c| c.counts.mix()));
    t.text("  statement mix/process", mix, "-", &[]);
}

/// The appendix: P1/P2 prototypes beside today's Rust path and the raw floor.
fn prototypes(
    ctx: &mut Ctx,
    failures: &mut Vec<String>,
    fig1: [Option<Uncontended>; 4],
    fig3: ContentionRuns,
) -> Table {
    eprintln!("appendix: prototypes P1, P2");
    // Columns: P1, P1b, Rust now, raw mysql; the timings all measured anew, alternating.
    let kinds = [Kind::ProtoA, Kind::ProtoB, Kind::Rust, Kind::Mysql];
    let mut t = Table::new(PROTO);
    let counted = ctx.params.count_cycles;
    let [ca, cb] = [Kind::ProtoA, Kind::ProtoB].map(|k| {
        attempt(failures, &format!("uncontended, counted: {}", k.tag()), || uncontended::counts(ctx, k, counted))
    });
    let counts = [
        ca,
        cb,
        fig1[idx(Kind::Rust)].as_ref().map(|u| u.counts.clone()),
        fig1[idx(Kind::Mysql)].as_ref().map(|u| u.counts.clone()),
    ];
    let n = ctx.params.cycles / ctx.params.rounds;
    let group = [kinds.to_vec()];
    let rounds = ctx.params.rounds;
    let lat = grouped(ctx, failures, "uncontended, timed", rounds, &group, |c, g| uncontended::latencies(c, g, n));
    let u: [Option<Uncontended>; 4] = std::array::from_fn(|i| {
        let samples = take(&lat, kinds[i])?.into_iter().flatten().collect();
        Some(uncontended::assemble(counts[i].clone()?, samples))
    });
    t.heading(
        "P 1 uncontended",
        &format!("1 uncontended lock+release ({} cycles, all four alternating)", ctx.params.cycles),
    );
    t.num("  statements/cycle (Questions)", cells(&u, |u| u.counts.statements()), f2, Target::None);
    let mix = [0, 1, 2, 3].map(|i| u[i].as_ref().map_or_else(|| "-".to_owned(), |u| u.counts.mix()));
    t.text("  statement mix/cycle", mix, "-", &[]);
    t.num("  round trips/cycle", cells(&u, |u| u.counts.round_trips()), f3, Target::AtMost(3.0));
    t.num("  median latency (us)", cells(&u, |u| us(u.latency.median)), f1, Target::RatioAtMost(1.5));
    t.num("  median minus raw's (us)", minus_raw(cells(&u, |u| us(u.latency.median)), PROTO_PAIRS), f1, Target::Plain);

    let (n, hold) = (ctx.params.handoffs, ctx.params.handoff_hold);
    let per_round = n / ctx.params.rounds;
    let parts = grouped(ctx, failures, "hand-off", rounds, &group, |c, g| {
        handoff::measure(c, g, (3, per_round), hold, "proto")
    });
    let h: [Option<Handoff>; 4] = std::array::from_fn(|i| Some(merge_samples(take(&parts, kinds[i])?).result(hold)));
    t.heading(
        "P 2 hand-off",
        &format!("2 hand-off ({n} hand-offs, hold {} ms, all four taking turns)", hold.as_millis()),
    );
    t.num("  median (us)", cells(&h, |h| us(h.delta.median)), f1, Target::RatioAtMost(1.5));
    t.num("  median minus raw's (us)", minus_raw(cells(&h, |h| us(h.delta.median)), PROTO_PAIRS), f1, Target::Plain);
    t.num("  p99 (us)", cells(&h, |h| us(h.delta.p99)), f1, Target::RatioAtMost(1.5));

    for (procs, mut r) in fig3 {
        let [a, b] = interleaved(
            ctx,
            failures,
            &format!("contention x{procs}"),
            [Kind::ProtoA, Kind::ProtoB],
            |c, k, _| contention::measure(c, k, procs),
            contention::merge,
        );
        let c: [Option<Contention>; 4] = [a, b, r[idx(Kind::Rust)].take(), r[idx(Kind::Mysql)].take()];
        t.heading(
            &format!("P 3 contention x{procs}"),
            &format!("3 contention: {procs} processes (Rust/C now and raw mysql as above)"),
        );
        t.num("  acquisitions/s", cells(&c, |c| c.per_second), f0, Target::RatioAtLeast(0.5));
        t.num("  statements/acquisition (Questions)", cells(&c, |c| c.counts.statements()), f3, Target::AtMost(4.0));
        t.num("  round trips/acquisition", cells(&c, |c| c.counts.round_trips()), f2, Target::None);
        let fair = [0, 1, 2, 3].map(|i| c[i].as_ref().map(Contention::fairness));
        t.num("  fairness min/max", fair, f2, Target::Plain);
        t.num("  max wait - others' hold (ms)", cells(&c, |c| ms(c.max_excess_ns)), f1, Target::AtMost(50.0));
        t.num("  overlapping holds (must be 0)", cells(&c, |c| c.overlaps as f64), f0, Target::Plain);
    }
    t
}

/// Runs `f` on each group of kinds (measured together, see `uncontended::latencies` and
/// `handoff::measure`) in `rounds` rounds; collects each kind's part per round. A group
/// that fails once is dropped from the later rounds.
fn grouped<P>(
    ctx: &mut Ctx,
    failures: &mut Vec<String>,
    what: &str,
    rounds: usize,
    groups: &[Vec<Kind>],
    mut f: impl FnMut(&mut Ctx, &[Kind]) -> Res<Vec<P>>,
) -> Vec<(Kind, Option<Vec<P>>)> {
    let mut out: Vec<(Kind, Option<Vec<P>>)> = groups.iter().flatten().map(|&k| (k, Some(Vec::new()))).collect();
    for round in 0..rounds {
        let t = Instant::now();
        eprint!("  {what}: round {}/{rounds} ... ", round + 1);
        for g in groups {
            if out.iter().any(|(k, parts)| g.contains(k) && parts.is_none()) {
                continue;
            }
            let names: Vec<&str> = g.iter().map(|k| k.tag()).collect();
            match f(ctx, g) {
                Ok(parts) if parts.len() == g.len() => {
                    for (k, p) in g.iter().zip(parts) {
                        if let Some((_, Some(v))) = out.iter_mut().find(|(x, _)| x == k) {
                            v.push(p);
                        }
                    }
                }
                result => {
                    let e = result.err().map_or_else(|| "wrong number of results".to_owned(), |e| e.to_string());
                    eprint!("{} FAILED: {e} ... ", names.join("+"));
                    failures.push(format!("{what}: {}: {e}", names.join("+")));
                    for (k, parts) in out.iter_mut() {
                        if g.contains(k) {
                            *parts = None;
                        }
                    }
                }
            }
        }
        eprintln!("{:.1} s", t.elapsed().as_secs_f64());
    }
    out
}

/// The kinds of the main table's columns.
const MAIN_KINDS: [Kind; 4] = Kind::ALL;

fn median(mut v: Vec<i64>) -> i64 {
    v.sort_unstable();
    crate::stats::percentile(&v, 0.5)
}

/// For the two compared columns: the smallest and largest ratio of a round's median to
/// the same round's raw median (they ran side by side), e.g. `1.31..2.87`, or with
/// `ratio` false the difference in microseconds. Shows how much the machine's state
/// moves a comparison from one round (fresh connections) to the next.
fn round_ranges(per_round: impl Fn(Kind) -> Option<Vec<i64>>, kinds: [Kind; 4], ratio: bool) -> [String; 4] {
    let mut out: [String; 4] = std::array::from_fn(|_| "-".to_owned());
    for (i, b) in MAIN_PAIRS {
        let (Some(v), Some(base)) = (per_round(kinds[i]), per_round(kinds[b])) else { continue };
        let values: Vec<f64> = v
            .iter()
            .zip(&base)
            .filter(|(_, &b)| !ratio || b > 0)
            .map(|(&v, &b)| if ratio { v as f64 / b as f64 } else { us(v - b) })
            .collect();
        let lo = values.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        if lo.is_finite() && hi.is_finite() {
            out[i] = if ratio { format!("{lo:.2}..{hi:.2}") } else { format!("{lo:.0}..{hi:.0}") };
        }
    }
    out
}

/// Which column is held against which raw column, in the main table and the appendix.
const MAIN_PAIRS: [(usize, usize); 2] = [(0, 2), (1, 3)];
const PROTO_PAIRS: [(usize, usize); 2] = [(0, 3), (1, 3)];

/// The compared columns minus their raw baselines (the raw columns stay empty): the
/// absolute cost on top of the floor, which says more than a ratio to a floor near 0.
fn minus_raw(c: Cells, pairs: [(usize, usize); 2]) -> Cells {
    let mut out: Cells = [None; 4];
    for (i, b) in pairs {
        out[i] = c[i].zip(c[b]).map(|(v, b)| v - b);
    }
    out
}

/// A kind's parts from [`grouped`], if it ran.
fn take<P: Clone>(parts: &[(Kind, Option<Vec<P>>)], kind: Kind) -> Option<Vec<P>> {
    parts.iter().find(|(k, _)| *k == kind).and_then(|(_, p)| p.clone())
}

fn merge_samples(parts: Vec<handoff::Samples>) -> handoff::Samples {
    let mut all = handoff::Samples::default();
    for p in parts {
        all.extend(p);
    }
    all
}

/// Appendix A2: today's claim + release on copies of the table with other options,
/// against raw GET_LOCK/RELEASE_LOCK (PHP, PDO, alternating cycle by cycle).
fn table_options(ctx: &mut Ctx, failures: &mut Vec<String>) -> Option<String> {
    eprintln!("appendix: table options");
    let n = ctx.params.option_cycles;
    let r = attempt(failures, "table options", || ctx.php.run("table_options.php", &[n.to_string()]))?;
    let kinds = [
        ("raw", "raw GET_LOCK + RELEASE_LOCK (no table)"),
        ("myisam", "MyISAM, the original table (today)"),
        ("myisam_delay_key_write", "MyISAM, DELAY_KEY_WRITE=1"),
        ("myisam_fixed_rows", "MyISAM, ROW_FORMAT=FIXED"),
        ("memory", "MEMORY engine"),
    ];
    let raw = r.num("opt_raw", "median").ok()?;
    let mut out = format!(
        "Appendix A2: one lock+release (today's INSERT ... GET_LOCK / DELETE ... RELEASE_LOCK) by table kind\n\
         (PDO, each kind on its own connection, all alternating cycle by cycle, {n} cycles each)\n\n"
    );
    out.push_str(&format!("{:<44} | {:>11} | {:>9} | {:>8}\n", "table", "median (us)", "p99 (us)", "x raw"));
    out.push_str(&format!("{}\n", "-".repeat(44 + 11 + 9 + 8 + 9)));
    for (tag, label) in kinds {
        let key = format!("opt_{tag}");
        let (Ok(median), Ok(p99)) = (r.num(&key, "median"), r.num(&key, "p99")) else { continue };
        out.push_str(&format!(
            "{label:<44} | {:>11.1} | {:>9.1} | {:>8.2}\n",
            us(median),
            us(p99),
            median as f64 / raw.max(1) as f64
        ));
    }
    Some(out)
}
