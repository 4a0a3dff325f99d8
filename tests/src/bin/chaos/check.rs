//! `chaos check`: judges a run from the workers' journals and the driver's journal
//! alone (format: `journal`). It never looks at the lock table, the lock library or the
//! guard: a lock that lets two holders in is caught even if every write it protects
//! was fenced.
//!
//! # Sections
//!
//! A section is one acquisition as its holder saw it: the worker's `acquired` line and
//! the `renewed`, `lost` and `release` lines of the same journal with the same NAME,
//! TOKEN and PID. It spans [START, END]:
//!
//! - START = the `acquired` line's MONO_NS (acquire had returned);
//! - if its release reported `ok`, END = the release's MONO_NS (read before release was
//!   called): the lock told the holder it held the lock until then, whatever else
//!   happened (a deadline passed, its session was killed, its process was stopped);
//! - otherwise END = the earliest of: the release's MONO_NS (verdict `lost` or `error`);
//!   the `lost` line; the SENT_NS of a landed fault that ends it (`pid`: a kill -9 of its
//!   process; `section`: a KILL of its session; `all`: the server went down; a section
//!   beginning while such a fault was landing is cut at its start); and its lease's
//!   deadline as last extended: the largest DEADLINE_NS of its `acquired` and `renewed`
//!   lines and of the driver's `lease` lines for it (`-` everywhere: no deadline).
//!
//! So sections that ended by a failed release, by kill -9 or by SIGSTOP are all judged:
//! a stopped holder's section ends where its lease could be lost, unless it learned of
//! the loss earlier.
//!
//! A SIGSTOPped keep-alive holder: SIGSTOP freezes every thread of the process, so its
//! keep-alive stops with it (for `mysqllock run`, stopping only `mysqllock` freezes the
//! process that renews), and its lease then ends at the deadline of the keep-alive's
//! last renewal, which its worker could not journal. Ending the section at the
//! acquisition's deadline would be lenient (a takeover between that and the renewed
//! deadline would go unseen); assuming a renewal at the very instant of the stop would
//! raise false alarms. So once the stop has landed the driver reads that lease's
//! deadline from the table (a `lease` line), and the section runs at least to it. A
//! renewal already on the wire when the process froze can only make the real end later.
//! The table is the mechanism under test, so a `lease` line only ever lengthens a
//! section (the largest deadline wins): a table showing too little cannot hide a
//! takeover, it only leaves the section at its holder's own deadline.
//!
//! A section with END <= START is empty (its lease could be lost before acquire
//! returned, e.g. a holder stopped inside the acquire call): it is counted, and claims
//! nothing.
//!
//! # Rules, per lock name
//!
//! 1. No two non-empty sections overlap: each begins at or after the END of every
//!    section that began before it.
//! 2. Tokens strictly increase in section order (non-empty sections by START). Off in a
//!    run without tokens (the driver's `phase no-tokens`: the original table, whose
//!    TOKEN fields are section identities, see `journal`); the report says so. Rule 1,
//!    the one that matters, is the same in every run.
//! 3. Every fault kind named in `--require KIND=N,...` landed at least N times (the
//!    driver journals only faults it saw land).
//! 4. Progress: acquisitions (all `acquired` lines) per second of chaos (between the
//!    driver's chaos-start and chaos-end) at least `--floor`, and every caller kind in
//!    `--kinds` has sections released `ok`; with `--kind-floor R`, at least R of them per
//!    second of chaos (no kind of caller starved by the others), and with `--ok-share F`,
//!    at least the fraction F of its acquisitions (a lock that reports acquisitions it
//!    does not hold, and learns so at release, fails this even when nobody overlapped:
//!    faults end a few sections each, not most of them).
//! 5. Progress after each fault (`--progress-after KIND,...`): for every landed fault of
//!    those kinds, some worker journaled an `acquired` after the fault's LANDED_NS (for
//!    the cluster faults `node-restart` and `node-rejoin`, landed = the cluster showed
//!    every node Primary and Synced again). With `--progress-within S`, per name: every
//!    lock name of the run was acquired after each such fault, within S seconds when
//!    the fault landed at least S before the chaos ended (a later one: before the run
//!    ended, e.g. by the driver's `--final-probe`). A name no worker can get any more
//!    (wedged) fails this even while the other names go on.
//!
//! An unreadable journal line fails the run too: a checker that skipped what it cannot
//! read could be green for the wrong reason.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use crate::journal::{Ends, Fault, Line, Verdict};

/// How many violations the summary spells out with their journal lines.
const SHOWN_VIOLATIONS: usize = 8;

/// One acquisition as its holder saw it.
#[derive(Debug, Clone)]
struct Section {
    /// The worker slot whose journal holds it (`php-2`).
    label: String,
    name: String,
    token: u64,
    pid: u32,
    start: u64,
    /// The lease's deadline as last extended; None = unknown (never runs out).
    deadline: Option<u64>,
    release: Option<(u64, Verdict)>,
    lost: Option<u64>,
    /// The earliest landed fault that ends it: (instant, fault kind).
    cut: Option<(u64, String)>,
    /// Its journal lines, for the report.
    lines: Vec<String>,
}

impl Section {
    fn kind(&self) -> &str {
        self.label.rsplit_once('-').map_or(self.label.as_str(), |(kind, _)| kind)
    }

    /// END, and what ended it.
    fn end(&self) -> (u64, String) {
        if let Some((at, Verdict::Ok)) = self.release {
            return (at, "release ok".to_owned());
        }
        let mut candidates: Vec<(u64, String)> = Vec::new();
        if let Some((at, verdict)) = self.release {
            candidates.push((at, format!("release {}", verdict.as_str())));
        }
        if let Some(at) = self.lost {
            candidates.push((at, "lost".to_owned()));
        }
        if let Some((at, kind)) = &self.cut {
            candidates.push((*at, kind.clone()));
        }
        if let Some(at) = self.deadline {
            candidates.push((at, "deadline".to_owned()));
        }
        candidates.into_iter().min_by_key(|(at, _)| *at).unwrap_or((u64::MAX, "nothing".to_owned()))
    }

    fn empty(&self) -> bool {
        self.end().0 <= self.start
    }

    fn extend(&mut self, deadline: Option<u64>) {
        self.deadline = match (self.deadline, deadline) {
            // An unknown deadline is "never runs out": it stays so.
            (None, _) | (_, None) => None,
            (Some(a), Some(b)) => Some(a.max(b)),
        };
    }
}

/// Everything read from a run's directory.
#[derive(Default)]
struct Run {
    sections: Vec<Section>,
    faults: Vec<Fault>,
    chaos: (Option<u64>, Option<u64>),
    /// False when the driver journaled `phase no-tokens`: TOKEN fields are identities.
    no_tokens: bool,
    unreadable: Vec<String>,
}

/// Reads one worker journal into sections (`label`: the slot, from the file name).
fn read_worker(run: &mut Run, label: &str, text: &str) {
    // Index of the open section per (name, token, pid) in this journal.
    let mut open: BTreeMap<(String, u64, u32), usize> = BTreeMap::new();
    for (i, raw) in text.lines().enumerate() {
        let Some(line) = Line::parse(raw) else {
            run.unreadable.push(format!("{label}.journal:{}: {raw:?}", i + 1));
            continue;
        };
        let shown = format!("{label}: {raw}");
        let (key, rest) = match &line {
            Line::Acquired { at, name, token, deadline, pid } => {
                run.sections.push(Section {
                    label: label.to_owned(),
                    name: name.clone(),
                    token: *token,
                    pid: *pid,
                    start: *at,
                    deadline: *deadline,
                    release: None,
                    lost: None,
                    cut: None,
                    lines: vec![shown],
                });
                open.insert((name.clone(), *token, *pid), run.sections.len() - 1);
                continue;
            }
            Line::Renewed { name, token, pid, .. }
            | Line::Release { name, token, pid, .. }
            | Line::Lost { name, token, pid, .. } => ((name.clone(), *token, *pid), line.clone()),
            _ => {
                run.unreadable.push(format!("{label}.journal:{}: not a worker line: {raw:?}", i + 1));
                continue;
            }
        };
        let Some(&s) = open.get(&key) else {
            run.unreadable.push(format!("{label}.journal:{}: no acquired line before {raw:?}", i + 1));
            continue;
        };
        let section = &mut run.sections[s];
        section.lines.push(shown);
        match rest {
            Line::Renewed { deadline, .. } => section.extend(deadline),
            Line::Lost { at, .. } => section.lost = Some(section.lost.map_or(at, |l| l.min(at))),
            Line::Release { at, verdict, .. } => {
                section.release = Some((at, verdict));
                open.remove(&key);
            }
            _ => {}
        }
    }
}

/// Reads the driver's journal: faults, lease observations, the chaos phase.
fn read_driver(run: &mut Run, text: &str) {
    let mut leases = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        match Line::parse(raw) {
            Some(Line::Phase { at, phase }) if phase == "chaos-start" => run.chaos.0 = Some(at),
            Some(Line::Phase { at, phase }) if phase == "chaos-end" => run.chaos.1 = Some(at),
            Some(Line::Phase { phase, .. }) if phase == "no-tokens" => run.no_tokens = true,
            Some(Line::Phase { .. }) => {}
            Some(Line::Fault(fault)) => run.faults.push(fault),
            Some(Line::Lease { at, name, token, deadline, pid }) => leases.push((at, name, token, pid, deadline, raw)),
            _ => run.unreadable.push(format!("driver.journal:{}: {raw:?}", i + 1)),
        }
    }
    for (at, name, token, pid, deadline, raw) in leases {
        let of = |s: &Section| s.name == name && s.pid == pid;
        let hit: Vec<usize> = match token {
            Some(token) => {
                (0..run.sections.len()).filter(|i| of(&run.sections[*i]) && run.sections[*i].token == token).collect()
            }
            // No token: the section of NAME that PID began last before the observation.
            None => (0..run.sections.len())
                .filter(|i| of(&run.sections[*i]) && run.sections[*i].start <= at)
                .max_by_key(|i| run.sections[*i].start)
                .into_iter()
                .collect(),
        };
        for i in hit {
            run.sections[i].extend(Some(deadline));
            run.sections[i].lines.push(format!("driver: {raw}"));
        }
    }
    for f in &run.faults {
        for s in &mut run.sections {
            let hit = match f.ends {
                Ends::None => false,
                Ends::Pid => f.pid == Some(s.pid),
                // Without a token (a run without tokens): the sections of NAME and PID.
                Ends::Section => {
                    f.name.as_deref() == Some(s.name.as_str()) && f.token.map_or(f.pid == Some(s.pid), |t| t == s.token)
                }
                Ends::All => true,
            };
            // Only sections that began before the fault had landed, and the one section a
            // fault names by its token even when that holder journals its start after the
            // landing: the driver finds a holder in the table before the holder's own
            // journal says it acquired, so a KILL of that session can land first (seen in
            // CI: landed 2.6 ms before the "acquired" line); that section is then empty.
            let named = matches!(f.ends, Ends::Section) && f.token.is_some();
            if hit && (s.start < f.landed || named) {
                let at = f.sent.max(s.start);
                if s.cut.as_ref().is_none_or(|(c, _)| at < *c) {
                    s.cut = Some((at, f.kind.clone()));
                }
                if s.cut.as_ref().is_some_and(|(c, _)| *c == at) {
                    s.lines.push(format!("driver: {f}"));
                }
            }
        }
    }
}

/// Reads `DIR/journals/*.journal` and `DIR/driver.journal`.
fn read_run(dir: &Path) -> Result<Run, String> {
    let mut run = Run::default();
    let journals = dir.join("journals");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&journals)
        .map_err(|e| format!("{}: {e}", journals.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "journal"))
        .collect();
    files.sort();
    for path in files {
        let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        let label = path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
        read_worker(&mut run, &label, &text);
    }
    let driver = dir.join("driver.journal");
    let text = std::fs::read_to_string(&driver).map_err(|e| format!("{}: {e}", driver.display()))?;
    read_driver(&mut run, &text);
    Ok(run)
}

/// A broken rule, with the journal lines that show it.
struct Violation {
    what: String,
    evidence: Vec<String>,
}

/// Seconds since the chaos began, for the report.
struct Clock(u64);

impl Clock {
    fn at(&self, ns: u64) -> String {
        if ns == u64::MAX {
            return "never".to_owned();
        }
        format!("{:+.3} s", (ns as i128 - self.0 as i128) as f64 / 1e9)
    }

    fn describe(&self, s: &Section) -> String {
        let (end, why) = s.end();
        format!("{} token {} pid {} [{}, {}] (ended by {why})", s.label, s.token, s.pid, self.at(s.start), self.at(end))
    }
}

/// Rules 1 and 2 for the sections of one name; also the shortest time from a lease's
/// deadline to the next holder's start (how tight the deadlines are: a lenient checker
/// would leave much room there).
fn judge_name(sections: &[&Section], faults: &[Fault], clock: &Clock, tokens: bool) -> (Vec<Violation>, Option<u64>) {
    let mut live: Vec<&Section> = sections.iter().copied().filter(|s| !s.empty()).collect();
    live.sort_by_key(|s| (s.start, s.token));
    let mut out = Vec::new();
    // The section reaching furthest so far: every later one must begin at or after its end.
    let mut widest: Option<&Section> = None;
    let mut previous: Option<&Section> = None;
    let mut tightest: Option<u64> = None;
    for s in live {
        if let Some(w) = widest {
            let reach = w.end().0;
            if s.start >= reach && w.end().1 == "deadline" {
                let gap = s.start - reach;
                tightest = Some(tightest.map_or(gap, |t| t.min(gap)));
            }
            if s.start < reach {
                let together = (reach.min(s.end().0) - s.start) as f64 / 1e9;
                let window = |f: &&Fault| f.sent <= reach && f.landed >= w.start;
                let mut evidence: Vec<String> = w.lines.iter().chain(&s.lines).cloned().collect();
                evidence.extend(faults.iter().filter(window).map(|f| format!("driver: {f}")));
                evidence.dedup();
                out.push(Violation {
                    what: format!(
                        "{}: two holders at once for {together:.3} s: {} and {}",
                        s.name,
                        clock.describe(w),
                        clock.describe(s)
                    ),
                    evidence,
                });
            }
        }
        if let Some(p) = previous.filter(|_| tokens) {
            if s.token <= p.token {
                out.push(Violation {
                    what: format!(
                        "{}: tokens did not increase in section order: {} then {}",
                        s.name,
                        clock.describe(p),
                        clock.describe(s)
                    ),
                    evidence: p.lines.iter().chain(&s.lines).cloned().collect(),
                });
            }
        }
        previous = Some(s);
        if widest.is_none_or(|w| s.end().0 > w.end().0) {
            widest = Some(s);
        }
    }
    (out, tightest)
}

/// What `chaos check` was asked.
#[derive(Debug, Clone)]
pub struct Options {
    dir: PathBuf,
    floor: f64,
    kinds: Vec<String>,
    require: Vec<(String, u64)>,
    progress_after: Vec<String>,
    /// `--progress-within S`: rule 5 per name, within S seconds.
    progress_within: Option<f64>,
    /// `--kind-floor R`: sections released ok per second of chaos, per kind of `kinds`.
    kind_floor: f64,
    /// `--ok-share F`: the share of each kind's acquisitions released ok.
    ok_share: f64,
    seed: String,
}

fn options(args: &[String]) -> Result<Options, String> {
    let mut o = Options {
        dir: PathBuf::new(),
        floor: 1.0,
        kinds: Vec::new(),
        require: Vec::new(),
        progress_after: Vec::new(),
        progress_within: None,
        kind_floor: 0.0,
        ok_share: 0.0,
        seed: "?".into(),
    };
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        let value = it.next().ok_or_else(|| format!("{flag} needs a value"))?;
        let list = || value.split(',').filter(|k| !k.is_empty()).map(str::to_owned);
        match flag.as_str() {
            "--dir" => o.dir = value.into(),
            "--floor" => o.floor = value.parse().map_err(|_| format!("--floor {value}: not a number"))?,
            "--kinds" => o.kinds = list().collect(),
            "--progress-after" => o.progress_after = list().collect(),
            "--kind-floor" => {
                o.kind_floor = value.parse().map_err(|_| format!("--kind-floor {value}: not a number"))?
            }
            "--ok-share" => {
                o.ok_share = value.parse().map_err(|_| format!("--ok-share {value}: not a number"))?;
                if !(0.0..=1.0).contains(&o.ok_share) {
                    return Err(format!("--ok-share {value}: a fraction from 0 to 1"));
                }
            }
            "--progress-within" => {
                let s: f64 = value.parse().map_err(|_| format!("--progress-within {value}: not a number"))?;
                if !(s.is_finite() && s > 0.0) {
                    return Err(format!("--progress-within {value}: seconds > 0"));
                }
                o.progress_within = Some(s);
            }
            "--require" => {
                for item in list() {
                    let (kind, n) = item.split_once('=').ok_or_else(|| format!("--require {item}: expected KIND=N"))?;
                    let n = n.parse().map_err(|_| format!("--require {item}: {n} is not a count"))?;
                    o.require.push((kind.to_owned(), n));
                }
            }
            "--seed" => o.seed = value.clone(),
            _ => return Err(format!("unknown option {flag}")),
        }
    }
    if o.dir.as_os_str().is_empty() {
        return Err("usage: chaos check --dir DIR [--floor ACQ_PER_S] [--kinds cli,php,c] \
                    [--kind-floor R] [--ok-share F] [--require KIND=N,...] [--progress-after KIND,...] [--progress-within S] [--seed N]"
            .to_owned());
    }
    Ok(o)
}

/// `chaos check --dir DIR [--floor F] [--kinds K,...] [--require KIND=N,...] [--seed N]`:
/// prints the summary; exit 1 on any violation, missing fault or too little progress, 2
/// on bad usage or unreadable files.
pub fn main(args: &[String]) -> i32 {
    let o = match options(args) {
        Ok(o) => o,
        Err(message) => {
            eprintln!("chaos check: {message}");
            return 2;
        }
    };
    match read_run(&o.dir) {
        Ok(run) => {
            let (report, failed) = judge(&run, &o);
            print!("{report}");
            i32::from(failed)
        }
        Err(message) => {
            eprintln!("chaos check: {message}");
            2
        }
    }
}

type Counts = BTreeMap<String, u64>;

fn show(counts: &Counts) -> String {
    if counts.is_empty() {
        return "none".to_owned();
    }
    counts.iter().map(|(k, n)| format!("{k} {n}")).collect::<Vec<_>>().join(", ")
}

/// Rule 5 per name (`--progress-within`): for each name, the longest wait from a fault
/// of `--progress-after` landing to that name's next acquisition (shown), and what fails.
fn per_name_progress(run: &Run, o: &Options, names: &[&str], within: f64, clock: &Clock) -> (String, Vec<String>) {
    let end = run.chaos.1.unwrap_or(u64::MAX);
    let within_ns = (within * 1e9) as u64;
    let mut slowest = Vec::new();
    let mut failed = Vec::new();
    for name in names {
        let mut worst: Option<(u64, &Fault)> = None;
        for f in run.faults.iter().filter(|f| o.progress_after.contains(&f.kind)) {
            let next = run.sections.iter().filter(|s| s.name == *name && s.start > f.landed).map(|s| s.start).min();
            let Some(next) = next else {
                failed.push(format!(
                    "{name}: no acquisition after the fault {} landed at {}",
                    f.kind,
                    clock.at(f.landed)
                ));
                continue;
            };
            let wait = next - f.landed;
            if wait > within_ns && f.landed.saturating_add(within_ns) <= end {
                failed.push(format!(
                    "{name}: first acquired {:.1} s after the fault {} landed at {} (at most {within} s)",
                    wait as f64 / 1e9,
                    f.kind,
                    clock.at(f.landed)
                ));
            }
            if worst.is_none_or(|(w, _)| wait > w) {
                worst = Some((wait, f));
            }
        }
        if let Some((wait, f)) = worst {
            slowest.push(format!("{name} +{:.1}s ({} at {})", wait as f64 / 1e9, f.kind, clock.at(f.landed)));
        }
    }
    (if slowest.is_empty() { "-".to_owned() } else { slowest.join(", ") }, failed)
}

/// The summary text, and whether the run failed.
fn judge(run: &Run, o: &Options) -> (String, bool) {
    let first = run.sections.iter().map(|s| s.start).chain(run.faults.iter().map(|f| f.sent)).min().unwrap_or(0);
    let clock = Clock(run.chaos.0.unwrap_or(first));
    let mut names: Vec<&str> = run.sections.iter().map(|s| s.name.as_str()).collect();
    names.sort_unstable();
    names.dedup();

    let mut r = String::new();
    let seconds = match run.chaos {
        (Some(a), Some(b)) if b > a => (b - a) as f64 / 1e9,
        _ => 0.0,
    };
    let _ = writeln!(r, "chaos check (seed {}, {seconds:.1} s of chaos, locks {})", o.seed, names.join(" "));
    if run.no_tokens {
        let _ = writeln!(
            r,
            "  no tokens (the original table): TOKEN is each section's identity; rule 2 (tokens increase) is off"
        );
    }
    let mut violations = Vec::new();
    for name in &names {
        let of_name: Vec<&Section> = run.sections.iter().filter(|s| s.name == *name).collect();
        let mut ended: Counts = BTreeMap::new();
        for s in &of_name {
            let why = if s.empty() { "empty".to_owned() } else { s.end().1 };
            *ended.entry(why).or_default() += 1;
        }
        let live = of_name.iter().filter(|s| !s.empty()).count();
        let (found, tightest) = judge_name(&of_name, &run.faults, &clock, !run.no_tokens);
        let tightest = tightest.map_or(String::new(), |t| {
            format!("; next holder {:.3} s after a lease's deadline at the closest", t as f64 / 1e9)
        });
        let _ = writeln!(
            r,
            "  {name}: {} sections checked ({live} non-empty), {} violations; ended by: {}{tightest}",
            of_name.len(),
            found.len(),
            show(&ended)
        );
        violations.extend(found);
    }

    let mut landed: Counts = BTreeMap::new();
    for f in &run.faults {
        *landed.entry(f.kind.clone()).or_default() += 1;
    }
    let _ = writeln!(r, "  faults landed: {} ({})", run.faults.len(), show(&landed));
    let mut shortfalls = Vec::new();
    for (kind, n) in &o.require {
        let got = landed.get(kind).copied().unwrap_or(0);
        if got < *n {
            shortfalls.push(format!("fault {kind} landed {got} times, at least {n} required"));
        }
    }

    let mut acquisitions: Counts = BTreeMap::new();
    let mut released_ok: Counts = BTreeMap::new();
    for s in &run.sections {
        *acquisitions.entry(s.kind().to_owned()).or_default() += 1;
        if matches!(s.release, Some((_, Verdict::Ok))) {
            *released_ok.entry(s.kind().to_owned()).or_default() += 1;
        }
    }
    let total = run.sections.len();
    let rate = if seconds > 0.0 { total as f64 / seconds } else { 0.0 };
    let _ = writeln!(r, "  acquisitions: {total} ({rate:.2}/s, floor {:.2}/s): {}", o.floor, show(&acquisitions));
    let _ = writeln!(r, "  released ok: {}", show(&released_ok));
    if rate < o.floor {
        shortfalls.push(format!("{rate:.2} acquisitions/s is below the floor of {:.2}/s", o.floor));
    }
    for kind in &o.kinds {
        let ok = released_ok.get(kind).copied().unwrap_or(0);
        let acquired = acquisitions.get(kind).copied().unwrap_or(0);
        if ok == 0 {
            shortfalls.push(format!("no {kind} caller completed a section (release ok)"));
            continue;
        }
        let per_second = if seconds > 0.0 { ok as f64 / seconds } else { 0.0 };
        if per_second < o.kind_floor {
            shortfalls.push(format!(
                "{kind} callers completed {per_second:.2} sections/s, below the floor of {:.2}/s per kind",
                o.kind_floor
            ));
        }
        let share = ok as f64 / acquired as f64;
        if share < o.ok_share {
            shortfalls.push(format!(
                "{kind} callers released {ok} of {acquired} sections ok ({:.0}%), fewer than {:.0}%",
                share * 100.0,
                o.ok_share * 100.0
            ));
        }
    }
    let mut after: Vec<String> = Vec::new();
    for f in run.faults.iter().filter(|f| o.progress_after.contains(&f.kind)) {
        let next = run.sections.iter().map(|s| s.start).filter(|start| *start > f.landed).min();
        match next {
            Some(at) => after.push(format!("{} +{:.1}s", f.kind, (at - f.landed) as f64 / 1e9)),
            None => {
                shortfalls.push(format!("no acquisition after the fault {} landed at {}", f.kind, clock.at(f.landed)))
            }
        }
    }
    if let Some(within) = o.progress_within {
        let (slowest, failed) = per_name_progress(run, o, &names, within, &clock);
        let _ = writeln!(r, "  slowest first acquisition of each name after a fault: {slowest}");
        shortfalls.extend(failed);
    }
    if !o.progress_after.is_empty() {
        let _ = writeln!(
            r,
            "  first acquisition after each fault: {}",
            if after.is_empty() { "-".to_owned() } else { after.join(", ") }
        );
    }
    for line in &run.unreadable {
        shortfalls.push(format!("unreadable journal line: {line}"));
    }

    let _ = writeln!(r, "  violations: {}", violations.len());
    for v in violations.iter().take(SHOWN_VIOLATIONS) {
        let _ = writeln!(r, "  VIOLATION: {}", v.what);
        for line in &v.evidence {
            let _ = writeln!(r, "      {line}");
        }
    }
    if violations.len() > SHOWN_VIOLATIONS {
        let _ = writeln!(r, "  ... and {} more violations", violations.len() - SHOWN_VIOLATIONS);
    }
    for s in &shortfalls {
        let _ = writeln!(r, "  FAILED: {s}");
    }
    (r, !violations.is_empty() || !shortfalls.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;

    /// A run from worker journals (label, lines) and driver lines; times in the lines
    /// are whole seconds, turned into nanoseconds here.
    fn run(workers: &[(&str, &[&str])], driver: &[&str]) -> Run {
        let ns = |line: &str| {
            line.split(' ')
                .map(|w| match w.strip_suffix('s').and_then(|n| n.parse::<f64>().ok()) {
                    Some(secs) => ((secs * S as f64) as u64).to_string(),
                    None => w.to_owned(),
                })
                .collect::<Vec<_>>()
                .join(" ")
        };
        let mut r = Run::default();
        for (label, lines) in workers {
            let text: Vec<String> = lines.iter().map(|l| ns(l)).collect();
            read_worker(&mut r, label, &text.join("\n"));
        }
        let text: Vec<String> = driver.iter().map(|l| ns(l)).collect();
        read_driver(&mut r, &text.join("\n"));
        r
    }

    /// The report of a run (require: the fault counts asked for) that must pass.
    fn passes(r: &Run, require: &[(&str, u64)]) -> String {
        let (report, failed) = verdict(r, require);
        assert!(!failed, "{report}");
        report
    }

    /// A run that must fail, for the reason `why` (a piece of its report).
    fn fails_with(r: &Run, require: &[(&str, u64)], why: &str) {
        let (report, failed) = verdict(r, require);
        assert!(failed, "{report}");
        assert!(report.contains(why), "expected {why:?} in:\n{report}");
    }

    fn verdict(r: &Run, require: &[(&str, u64)]) -> (String, bool) {
        let o = Options {
            dir: PathBuf::new(),
            floor: 0.0,
            kinds: Vec::new(),
            progress_after: Vec::new(),
            progress_within: None,
            kind_floor: 0.0,
            ok_share: 0.0,
            require: require.iter().map(|(k, n)| ((*k).to_owned(), *n)).collect(),
            seed: "0".into(),
        };
        judge(r, &o)
    }

    #[test]
    fn holders_one_after_the_other_pass() {
        let r = run(
            &[
                ("c-1", &["acquired 1s a 5 3s 100", "release 2s a 5 ok 100"]),
                ("php-2", &["acquired 2.1s a 6 4s 200", "release 2.5s a 6 ok 200"]),
            ],
            &[],
        );
        let report = passes(&r, &[]);
        assert!(report.contains("a: 2 sections checked (2 non-empty), 0 violations"), "{report}");
    }

    #[test]
    fn two_holders_at_once_are_a_violation() {
        let r = run(
            &[
                ("c-1", &["acquired 1s a 5 3s 100", "release 2s a 5 ok 100"]),
                ("php-2", &["acquired 1.5s a 6 4s 200", "release 2.5s a 6 ok 200"]),
            ],
            &[],
        );
        fails_with(&r, &[], "VIOLATION: a: two holders at once for 0.500 s: c-1 token 5");
    }

    #[test]
    fn a_release_reporting_ok_stretches_the_section_past_its_deadline() {
        // The lock told c-1 it held until 5 s, though its deadline was 3 s and php-2
        // took over at 4 s: the "ignore the loss" bug.
        let r = run(
            &[
                ("c-1", &["acquired 1s a 5 3s 100", "release 5s a 5 ok 100"]),
                ("php-2", &["acquired 4s a 6 6s 200", "release 4.5s a 6 ok 200"]),
            ],
            &[],
        );
        fails_with(
            &r,
            &[],
            "two holders at once for 0.500 s: c-1 token 5 pid 100 [+0.000 s, +4.000 s] (ended by release ok)",
        );
    }

    #[test]
    fn a_holder_that_learns_of_the_loss_ends_at_its_deadline() {
        let r = run(
            &[
                ("c-1", &["acquired 1s a 5 3s 100", "release 5s a 5 lost 100"]),
                ("php-2", &["acquired 4s a 6 6s 200", "release 4.5s a 6 ok 200"]),
            ],
            &[],
        );
        let report = passes(&r, &[]);
        assert!(report.contains("ended by: deadline 1, release ok 1"), "{report}");
    }

    #[test]
    fn a_takeover_before_the_deadline_of_a_stopped_holder_is_a_violation() {
        // c-1 was stopped and never released: its section runs to its deadline.
        let r = run(
            &[
                ("c-1", &["acquired 1s a 5 3s 100"]),
                ("php-2", &["acquired 2.5s a 6 6s 200", "release 2.6s a 6 ok 200"]),
            ],
            &["fault 1.2s 1.21s stop none a 5 100"],
        );
        fails_with(
            &r,
            &[],
            "two holders at once for 0.100 s: c-1 token 5 pid 100 [+0.000 s, +2.000 s] (ended by deadline)",
        );
    }

    #[test]
    fn a_lease_the_driver_saw_extended_counts_to_its_new_deadline() {
        // The keep-alive had renewed invisibly: the table showed the lease to 4 s.
        let r = run(
            &[
                ("c-1", &["acquired 1s a 5 3s 100", "release 9s a 5 lost 100"]),
                ("php-2", &["acquired 3.5s a 6 6s 200", "release 3.6s a 6 ok 200"]),
            ],
            &["fault 1.2s 1.21s stop none a 5 100", "lease 1.22s a 5 4s 100"],
        );
        fails_with(&r, &[], "c-1 token 5 pid 100 [+0.000 s, +3.000 s] (ended by deadline)");
    }

    #[test]
    fn a_lease_line_never_shortens_a_section() {
        // The table (the mechanism under test) showing less than the holder's own
        // deadline cannot hide the takeover at 2.5 s.
        let r = run(
            &[
                ("c-1", &["acquired 1s a 5 3s 100", "release 9s a 5 lost 100"]),
                ("php-2", &["acquired 2.5s a 6 6s 200", "release 2.6s a 6 ok 200"]),
            ],
            &["fault 1.2s 1.21s stop none a 5 100", "lease 1.22s a 5 2s 100"],
        );
        fails_with(&r, &[], "c-1 token 5 pid 100 [+0.000 s, +2.000 s] (ended by deadline)");
    }

    #[test]
    fn a_killed_holder_ends_when_the_kill_was_sent() {
        let r = run(
            &[
                ("c-1", &["acquired 1s a 5 3s 100"]),
                ("php-2", &["acquired 1.3s a 6 6s 200", "release 1.6s a 6 ok 200"]),
            ],
            &["fault 1.2s 1.25s kill9 pid a 5 100"],
        );
        let report = passes(&r, &[("kill9", 1)]);
        assert!(report.contains("ended by: kill9 1, release ok 1"), "{report}");
    }

    #[test]
    fn a_section_beginning_while_the_server_goes_down_claims_nothing() {
        let r = run(
            &[
                ("c-1", &["acquired 1.5s a 5 3s 100", "release 9s a 5 error 100"]),
                ("php-2", &["acquired 2.5s a 6 6s 200", "release 2.6s a 6 ok 200"]),
            ],
            &["fault 1.2s 2.4s restart all - - -"],
        );
        let report = passes(&r, &[]);
        assert!(report.contains("ended by: empty 1, release ok 1"), "{report}");
    }

    #[test]
    fn tokens_that_go_backwards_are_a_violation() {
        let r = run(
            &[
                ("c-1", &["acquired 1s a 7 3s 100", "release 2s a 7 ok 100"]),
                ("php-2", &["acquired 2.1s a 6 4s 200", "release 2.5s a 6 ok 200"]),
            ],
            &[],
        );
        fails_with(&r, &[], "VIOLATION: a: tokens did not increase in section order: c-1 token 7");
    }

    #[test]
    fn without_tokens_identities_need_not_increase_but_overlaps_still_fail() {
        let workers: [(&str, &[&str]); 2] = [
            ("c-1", &["acquired 1s a 9 3s 100", "release 2s a 9 ok 100"]),
            ("original-2", &["acquired 2.1s a 6 4s 200", "release 2.5s a 6 ok 200"]),
        ];
        let report = passes(&run(&workers, &["phase 0s no-tokens"]), &[]);
        assert!(report.contains("rule 2 (tokens increase) is off"), "{report}");
        // The same identities with tokens are a violation of rule 2.
        fails_with(&run(&workers, &[]), &[], "tokens did not increase");
        let overlapping: [(&str, &[&str]); 2] = [
            ("c-1", &["acquired 1s a 1 3s 100", "release 2s a 1 ok 100"]),
            ("original-2", &["acquired 1.5s a 2 4s 200", "release 2.5s a 2 ok 200"]),
        ];
        fails_with(&run(&overlapping, &["phase 0s no-tokens"]), &[], "two holders at once for 0.500 s");
    }

    #[test]
    fn a_killed_session_without_a_token_ends_the_section_its_pid_held_of_that_name() {
        let r = run(
            &[
                ("php-1", &["acquired 0.5s a 1 3s 100", "release 0.6s a 1 ok 100", "acquired 1s a 2 3s 100"]),
                ("original-2", &["acquired 1.3s a 7 6s 200", "release 1.6s a 7 ok 200"]),
            ],
            &["phase 0s no-tokens", "fault 1.2s 1.25s kill-session section a - 100"],
        );
        let report = passes(&r, &[("kill-session", 1)]);
        assert!(report.contains("ended by: kill-session 1, release ok 2"), "{report}");
        // The fault names pid 100: pid 200's section of the same name is not cut by it.
        let r = run(
            &[
                ("php-1", &["acquired 1.3s a 2 3s 100"]),
                ("original-2", &["acquired 0.9s a 7 6s 200", "release 1.6s a 7 error 200"]),
            ],
            &["phase 0s no-tokens", "fault 1.2s 1.25s kill-session section a - 100"],
        );
        fails_with(&r, &[], "two holders at once for 0.300 s");
    }

    #[test]
    fn a_killed_session_ends_the_section_of_its_token_even_when_its_start_is_journaled_after_the_kill() {
        let holders = [
            ("cli-4", &["acquired 1.003s a 144 3s 100", "release 1.180s a 144 lost 100"][..]),
            ("php-5", &["acquired 1.004s a 145 3s 200", "release 1.270s a 145 ok 200"][..]),
        ];
        let report =
            passes(&run(&holders, &["fault 1.000s 1.001s kill-session section a 144 100"]), &[("kill-session", 1)]);
        // Token 144's section is cut where it began (empty); only php-5's is held.
        assert!(
            report.contains("2 sections checked (1 non-empty), 0 violations; ended by: empty 1, release ok 1"),
            "{report}"
        );
        // A kill naming another token does not excuse the overlap.
        fails_with(&run(&holders, &["fault 1.000s 1.001s kill-session section a 143 100"]), &[], "two holders at once");
    }

    #[test]
    fn a_lease_line_without_a_token_lengthens_the_section_its_pid_began_last() {
        let r = run(
            &[
                ("c-1", &["acquired 0.2s a 1 2.5s 100", "release 0.4s a 1 ok 100", "acquired 1s a 5 3s 100"]),
                ("original-2", &["acquired 3.5s a 6 6s 200", "release 3.6s a 6 ok 200"]),
            ],
            &["phase 0s no-tokens", "fault 1.2s 1.21s stop none a - 100", "lease 1.22s a - 4s 100"],
        );
        fails_with(&r, &[], "c-1 token 5 pid 100 [+0.800 s, +3.800 s] (ended by deadline)");
    }

    /// The report of a run judged with rule 5 per name (faults kill9, within 5 s).
    fn per_name(r: &Run) -> (String, bool) {
        let o = Options {
            dir: PathBuf::new(),
            floor: 0.0,
            kinds: Vec::new(),
            progress_after: vec!["kill9".to_owned()],
            progress_within: Some(5.0),
            kind_floor: 0.0,
            ok_share: 0.0,
            require: Vec::new(),
            seed: "0".into(),
        };
        judge(r, &o)
    }

    #[test]
    fn a_name_nobody_acquires_after_a_fault_is_wedged_even_while_others_go_on() {
        let workers: [(&str, &[&str]); 2] = [
            ("c-1", &["acquired 0.5s a 1 3s 100", "acquired 2s b 2 4s 300", "release 2.1s b 2 ok 300"]),
            ("php-2", &["acquired 0.6s b 3 3s 200", "release 0.7s b 3 ok 200"]),
        ];
        let driver = ["phase 0s chaos-start", "fault 1s 1.1s kill9 pid a 1 100", "phase 20s chaos-end"];
        let (report, failed) = per_name(&run(&workers, &driver));
        assert!(failed, "{report}");
        assert!(report.contains("FAILED: a: no acquisition after the fault kill9 landed at +1.100 s"), "{report}");
        assert!(report.contains("slowest first acquisition of each name after a fault: b +0.9s"), "{report}");
    }

    #[test]
    fn a_name_acquired_again_too_late_fails_unless_the_fault_came_near_the_end() {
        let workers: [(&str, &[&str]); 1] = [("c-1", &["acquired 0.5s a 1 3s 100", "acquired 9.1s a 2 12s 200"])];
        let late = ["phase 0s chaos-start", "fault 1s 1.1s kill9 pid a 1 100", "phase 20s chaos-end"];
        let (report, failed) = per_name(&run(&workers, &late));
        assert!(failed, "{report}");
        assert!(
            report.contains("a: first acquired 8.0 s after the fault kill9 landed at +1.100 s (at most 5 s)"),
            "{report}"
        );
        // The chaos ended 3 s after the fault: the next acquisition may come after that.
        let near_end = ["phase 0s chaos-start", "fault 1s 1.1s kill9 pid a 1 100", "phase 4s chaos-end"];
        let (report, failed) = per_name(&run(&workers, &near_end));
        assert!(!failed, "{report}");
    }

    #[test]
    fn a_kind_that_mostly_loses_its_sections_or_is_starved_fails() {
        // php: 1 of 4 released ok (its lock said "acquired" and then "not held");
        // original: one section in 10 s of chaos.
        let workers: [(&str, &[&str]); 2] = [
            (
                "php-1",
                &[
                    "acquired 1s a 1 3s 100",
                    "release 1.1s a 1 lost 100",
                    "acquired 2s a 2 4s 100",
                    "release 2.1s a 2 lost 100",
                    "acquired 3s a 3 5s 100",
                    "release 3.1s a 3 lost 100",
                    "acquired 4s a 4 6s 100",
                    "release 4.1s a 4 ok 100",
                ],
            ),
            ("original-2", &["acquired 5s a 5 7s 200", "release 5.1s a 5 ok 200"]),
        ];
        let r = run(&workers, &["phase 0s chaos-start", "phase 10s chaos-end"]);
        let judged = |kind_floor: f64, ok_share: f64| {
            let o = Options {
                dir: PathBuf::new(),
                floor: 0.0,
                kinds: vec!["php".to_owned(), "original".to_owned()],
                progress_after: Vec::new(),
                progress_within: None,
                kind_floor,
                ok_share,
                require: Vec::new(),
                seed: "0".into(),
            };
            judge(&r, &o)
        };
        let (report, failed) = judged(0.0, 0.5);
        assert!(failed && report.contains("php callers released 1 of 4 sections ok (25%), fewer than 50%"), "{report}");
        let (report, failed) = judged(0.2, 0.0);
        assert!(
            failed && report.contains("original callers completed 0.10 sections/s, below the floor of 0.20/s"),
            "{report}"
        );
        let (report, failed) = judged(0.1, 0.25);
        assert!(!failed, "{report}");
    }

    #[test]
    fn an_unknown_deadline_never_runs_out() {
        let r = run(
            &[("c-1", &["acquired 1s a 5 - 100"]), ("php-2", &["acquired 60s a 6 62s 200", "release 61s a 6 ok 200"])],
            &[],
        );
        fails_with(&r, &[], "c-1 token 5 pid 100 [+0.000 s, never] (ended by nothing)");
    }

    #[test]
    fn a_fault_kind_that_did_not_land_often_enough_fails_the_run() {
        let r = run(&[], &["fault 1s 1.1s kill9 pid a 5 100"]);
        fails_with(&r, &[("kill9", 2)], "fault kill9 landed 1 times, at least 2 required");
    }

    #[test]
    fn an_unreadable_line_fails_the_run() {
        let r = run(&[("c-1", &["acquired 1s a 5"])], &[]);
        fails_with(&r, &[], "unreadable journal line");
    }
}
