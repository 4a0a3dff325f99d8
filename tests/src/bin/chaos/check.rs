//! `chaos check`: judges a run from the guard's journal alone.
//!
//! A *section* is one holder's stay in the resource: its `begin`, `end` and `release`
//! lines, tied together by lock name, fencing token and holder pid. Per lock name:
//!
//! 1. sections whose begin and end were both accepted never overlap (in journal order);
//! 2. accepted begins carry strictly increasing tokens;
//! 3. mutual exclusion as the holders saw it: a section whose release reported OK had
//!    its begin and its end accepted, and no other section began (accepted) between its
//!    begin and its end. A holder whose lease was taken over must learn it at release;
//!    a holder that believed it held the lock while another wrote is the bug this test
//!    exists to find, whatever the cause (two holders at once, a token that went
//!    backwards, a release that hid a loss);
//! 4. progress: acquisitions (sections that reached the resource) per second of chaos at
//!    or above the floor, and every caller kind completed sections.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;

use crate::journal::{self, Entry, Op};

/// How many violations the summary spells out with their journal lines.
const SHOWN_VIOLATIONS: usize = 10;

/// One holder's stay in the resource.
#[derive(Debug, Default, Clone)]
struct Section {
    begin: Option<Entry>,
    end: Option<Entry>,
    release: Option<Entry>,
}

impl Section {
    fn first(&self) -> &Entry {
        // Every section is created from one of its lines.
        self.begin.as_ref().or(self.end.as_ref()).or(self.release.as_ref()).expect("a section has a line")
    }

    fn name(&self) -> &str {
        &self.first().name
    }

    fn kind(&self) -> &str {
        &self.first().kind
    }

    fn released_ok(&self) -> bool {
        self.release.as_ref().is_some_and(|r| r.verdict == "ok")
    }

    /// [begin, end] in journal order, when both were accepted.
    fn accepted_span(&self) -> Option<(u64, u64)> {
        match (&self.begin, &self.end) {
            (Some(b), Some(e)) if b.accepted() && e.accepted() => Some((b.seq, e.seq)),
            _ => None,
        }
    }

    fn lines(&self) -> String {
        [&self.begin, &self.end, &self.release].iter().filter_map(|e| e.as_ref()).fold(String::new(), |mut s, e| {
            let _ = writeln!(s, "      {e}");
            s
        })
    }
}

/// Groups the journal's begin/end/release lines into sections, in journal order.
fn sections(entries: &[Entry]) -> Vec<Section> {
    let mut out: Vec<Section> = Vec::new();
    let mut open: HashMap<(String, u64, u32), usize> = HashMap::new();
    for e in entries {
        let key = (e.name.clone(), e.token, e.pid);
        let slot = match e.op {
            Op::Begin => None,
            Op::End | Op::Release => open.get(&key).copied(),
            Op::Fault | Op::Phase => continue,
        };
        let i = slot.unwrap_or_else(|| {
            out.push(Section::default());
            open.insert(key.clone(), out.len() - 1);
            out.len() - 1
        });
        match e.op {
            Op::Begin => out[i].begin = Some(e.clone()),
            Op::End => out[i].end = Some(e.clone()),
            _ => {
                out[i].release = Some(e.clone());
                open.remove(&key);
            }
        }
    }
    out
}

/// A broken invariant, with the journal lines that show it.
struct Violation {
    what: String,
    evidence: String,
}

/// (1) Accepted sections of one name never overlap.
fn accepted_overlaps(sections: &[&Section]) -> Vec<Violation> {
    let mut spans: Vec<(u64, u64, &Section)> =
        sections.iter().filter_map(|s| s.accepted_span().map(|(b, e)| (b, e, *s))).collect();
    spans.sort_by_key(|(b, _, _)| *b);
    let mut out = Vec::new();
    // The section reaching furthest so far: every later one must begin after its end.
    let mut widest: Option<(u64, &Section)> = None;
    for (begin, end, s) in spans {
        if let Some((reach, w)) = widest {
            if begin < reach {
                out.push(Violation {
                    what: format!("two accepted sections of {} overlap", s.name()),
                    evidence: format!("{}{}", w.lines(), s.lines()),
                });
            }
        }
        match widest {
            Some((reach, _)) if reach >= end => {}
            _ => widest = Some((end, s)),
        }
    }
    out
}

/// (2) Accepted begins of one name carry strictly increasing tokens.
fn tokens_not_increasing(entries: &[&Entry]) -> Vec<Violation> {
    let begins: Vec<&&Entry> = entries.iter().filter(|e| e.op == Op::Begin && e.accepted()).collect();
    begins
        .windows(2)
        .filter(|w| w[1].token <= w[0].token)
        .map(|w| Violation {
            what: format!("accepted tokens of {} did not increase", w[0].name),
            evidence: format!("      {}\n      {}\n", w[0], w[1]),
        })
        .collect()
}

/// (3) A holder told "released OK" held the resource alone from its begin to its end.
fn exclusion_broken(sections: &[&Section], entries: &[&Entry]) -> Vec<Violation> {
    let mut out = Vec::new();
    for s in sections.iter().filter(|s| s.released_ok()) {
        let rejected = [&s.begin, &s.end].into_iter().flatten().find(|x| !x.accepted());
        if let Some(x) = rejected {
            let since = s.begin.as_ref().map_or(0, |b| b.seq);
            let around = x.seq.saturating_sub(8).min(since);
            out.push(Violation {
                what: format!(
                    "{} holder's release reported OK, but the resource rejected its {}",
                    s.kind(),
                    x.op.as_str()
                ),
                evidence: format!("{}{}", s.lines(), between(entries, around, x.seq)),
            });
            continue;
        }
        let (Some(b), Some(e)) = (&s.begin, &s.end) else {
            out.push(Violation {
                what: format!("{} holder's release reported OK, but its section has no begin or no end", s.kind()),
                evidence: s.lines(),
            });
            continue;
        };
        let intruders: Vec<&&Entry> =
            entries.iter().filter(|x| x.op == Op::Begin && x.accepted() && x.seq > b.seq && x.seq < e.seq).collect();
        if !intruders.is_empty() {
            out.push(Violation {
                what: format!("{} holder's release reported OK, but another holder began inside its section", s.kind()),
                evidence: format!("{}{}", s.lines(), between(entries, b.seq, e.seq)),
            });
        }
    }
    out
}

/// The journal lines strictly between two sequence numbers (other holders, faults).
fn between(entries: &[&Entry], from: u64, to: u64) -> String {
    entries.iter().filter(|x| x.seq > from && x.seq < to).fold(String::new(), |mut s, e| {
        let _ = writeln!(s, "    | {e}");
        s
    })
}

/// Counts per caller kind, in a stable order.
type PerKind = BTreeMap<String, u64>;

fn show(counts: &PerKind) -> String {
    counts.iter().map(|(k, n)| format!("{k} {n}")).collect::<Vec<_>>().join(", ")
}

/// The run's figures, for the summary.
#[derive(Default)]
struct Figures {
    acquisitions: PerKind,
    released_ok: PerKind,
    released_lost: PerKind,
    released_error: PerKind,
    faults: PerKind,
    begins_rejected: u64,
    ends_rejected: u64,
}

fn figures(entries: &[Entry]) -> Figures {
    let mut f = Figures::default();
    for e in entries {
        let bump = |m: &mut PerKind, k: &str| *m.entry(k.to_owned()).or_default() += 1;
        match (e.op, e.verdict.as_str()) {
            (Op::Begin, v) => {
                bump(&mut f.acquisitions, &e.kind);
                f.begins_rejected += u64::from(v == "rejected");
            }
            (Op::End, "rejected") => f.ends_rejected += 1,
            (Op::Release, "ok") => bump(&mut f.released_ok, &e.kind),
            (Op::Release, "lost") => bump(&mut f.released_lost, &e.kind),
            (Op::Release, _) => bump(&mut f.released_error, &e.kind),
            (Op::Fault, kind) => bump(&mut f.faults, kind),
            _ => {}
        }
    }
    f
}

/// The longest time between two successive begins on `name`, in seconds: how long the
/// resource went without a new holder (a hung or dead holder, a restarting server).
fn longest_gap(entries: &[Entry], name: &str) -> f64 {
    let begins: Vec<u64> = entries.iter().filter(|e| e.op == Op::Begin && e.name == name).map(|e| e.mono_ns).collect();
    begins.windows(2).map(|w| w[1].saturating_sub(w[0])).max().unwrap_or(0) as f64 / 1e9
}

/// Seconds between the driver's chaos-start and chaos-end marks, if both are there.
fn chaos_seconds(entries: &[Entry]) -> Option<f64> {
    let at = |phase: &str| entries.iter().find(|e| e.op == Op::Phase && e.verdict == phase).map(|e| e.mono_ns);
    Some((at("chaos-end")?.checked_sub(at("chaos-start")?)?) as f64 / 1e9)
}

/// What `chaos check` was asked.
struct Options {
    dir: String,
    floor: f64,
    kinds: Vec<String>,
    seed: String,
}

fn options(args: &[String]) -> Result<Options, String> {
    let mut o = Options { dir: String::new(), floor: 1.0, kinds: Vec::new(), seed: "?".to_owned() };
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        let value = it.next().ok_or_else(|| format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--dir" => o.dir = value.clone(),
            "--floor" => o.floor = value.parse().map_err(|_| format!("--floor {value}: not a number"))?,
            "--kinds" => o.kinds = value.split(',').filter(|k| !k.is_empty()).map(str::to_owned).collect(),
            "--seed" => o.seed = value.clone(),
            _ => return Err(format!("unknown option {flag}")),
        }
    }
    if o.dir.is_empty() {
        return Err("usage: chaos check --dir DIR [--floor ACQ_PER_S] [--kinds cli,php,c] [--seed N]".to_owned());
    }
    Ok(o)
}

/// `chaos check --dir DIR [--floor F] [--kinds cli,php,c] [--seed N]`: prints the
/// summary; exit 1 on any violation or too little progress, 2 on bad usage.
pub fn main(args: &[String]) -> i32 {
    let o = match options(args) {
        Ok(o) => o,
        Err(message) => {
            eprintln!("chaos check: {message}");
            return 2;
        }
    };
    let path = std::path::Path::new(&o.dir).join(crate::guard::LOG);
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("chaos check: {}: {e}", path.display());
            return 2;
        }
    };
    let entries = journal::parse_all(&text);
    let (report, failed) = judge(&entries, &o);
    print!("{report}");
    i32::from(failed)
}

/// The summary text, and whether the run failed.
fn judge(entries: &[Entry], o: &Options) -> (String, bool) {
    let all = sections(entries);
    let mut names: Vec<&str> =
        entries.iter().filter(|e| matches!(e.op, Op::Begin | Op::End | Op::Release)).map(|e| e.name.as_str()).collect();
    names.sort_unstable();
    names.dedup();
    let mut violations = Vec::new();
    for name in &names {
        let of_name: Vec<&Section> = all.iter().filter(|s| s.name() == *name).collect();
        let lines: Vec<&Entry> = entries.iter().filter(|e| e.name == *name || e.op == Op::Fault).collect();
        violations.extend(accepted_overlaps(&of_name));
        violations.extend(tokens_not_increasing(&lines));
        violations.extend(exclusion_broken(&of_name, &lines));
    }
    let f = figures(entries);
    let seconds = chaos_seconds(entries).unwrap_or(0.0);
    let total: u64 = f.acquisitions.values().sum();
    let rate = if seconds > 0.0 { total as f64 / seconds } else { 0.0 };
    let mut shortfalls = Vec::new();
    if rate < o.floor {
        shortfalls.push(format!("{rate:.2} acquisitions/s is below the floor of {:.2}/s", o.floor));
    }
    for kind in &o.kinds {
        if f.released_ok.get(kind).copied().unwrap_or(0) == 0 {
            shortfalls.push(format!("no {kind} caller completed a section with its release reported OK"));
        }
    }

    let total_of = |m: &PerKind| m.values().sum::<u64>();
    let mut r = String::new();
    let mut line = |label: &str, value: String| {
        let _ = writeln!(r, "  {label:<24} {value}");
    };
    line("acquisitions:", format!("{total} ({rate:.2}/s, floor {:.2}/s): {}", o.floor, show(&f.acquisitions)));
    line("sections released OK:", format!("{}: {}", total_of(&f.released_ok), show(&f.released_ok)));
    line("releases reported lost:", format!("{}: {}", total_of(&f.released_lost), show(&f.released_lost)));
    line("releases failing else:", format!("{}: {}", total_of(&f.released_error), show(&f.released_error)));
    line("faults injected:", format!("{}: {}", total_of(&f.faults), show(&f.faults)));
    line("rejected stale writes:", format!("{} begin, {} end", f.begins_rejected, f.ends_rejected));
    let gaps: Vec<String> = names.iter().map(|n| format!("{n} {:.1} s", longest_gap(entries, n))).collect();
    line("longest without a begin:", gaps.join(", "));
    line("violations:", violations.len().to_string());
    let head = format!("chaos summary (seed {}, {seconds:.1} s of chaos, locks {})\n", o.seed, names.join(" "));
    r.insert_str(0, &head);
    for v in violations.iter().take(SHOWN_VIOLATIONS) {
        let _ = write!(r, "  VIOLATION: {}\n{}", v.what, v.evidence);
    }
    if violations.len() > SHOWN_VIOLATIONS {
        let _ = writeln!(r, "  ... and {} more violations", violations.len() - SHOWN_VIOLATIONS);
    }
    for s in &shortfalls {
        let _ = writeln!(r, "  TOO LITTLE PROGRESS: {s}");
    }
    (r, !violations.is_empty() || !shortfalls.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn journal(lines: &[&str]) -> Vec<Entry> {
        let text: Vec<String> = lines.iter().enumerate().map(|(i, l)| format!("{} {} {l}", i + 1, i * 1000)).collect();
        journal::parse_all(&text.join("\n"))
    }

    fn verdict(lines: &[&str]) -> (String, bool) {
        let o = Options { dir: String::new(), floor: 0.0, kinds: Vec::new(), seed: "0".into() };
        judge(&journal(lines), &o)
    }

    #[test]
    fn a_taken_over_holder_that_learns_it_at_release_is_no_violation() {
        let (report, failed) = verdict(&[
            "c begin a 5 100 accepted",
            "php begin a 6 200 accepted",
            "c end a 5 100 rejected",
            "c release a 5 100 lost",
            "php end a 6 200 accepted",
            "php release a 6 200 ok",
        ]);
        assert!(!failed, "{report}");
        assert!(report.contains("violations:              0"), "{report}");
    }

    #[test]
    fn a_holder_told_ok_whose_end_was_rejected_is_a_violation() {
        let (report, failed) = verdict(&[
            "c begin a 5 100 accepted",
            "php begin a 6 200 accepted",
            "c end a 5 100 rejected",
            "c release a 5 100 ok",
        ]);
        assert!(failed);
        assert!(report.contains("rejected its end"), "{report}");
    }

    #[test]
    fn a_holder_told_ok_whose_begin_was_rejected_is_a_violation() {
        // Its token was not the newest: another acquisition came after it while it held.
        let (report, failed) =
            verdict(&["php begin a 6 200 accepted", "c begin a 5 100 rejected", "c release a 5 100 ok"]);
        assert!(failed);
        assert!(report.contains("c holder's release reported OK, but the resource rejected its begin"), "{report}");
    }

    #[test]
    fn a_holder_told_ok_while_another_began_inside_its_section_is_a_violation() {
        // An accept-everything resource would let both in; the releases still tell.
        let (report, failed) = verdict(&[
            "c begin a 5 100 accepted",
            "cli begin a 9 300 accepted",
            "c end a 5 100 accepted",
            "c release a 5 100 ok",
        ]);
        assert!(failed);
        assert!(report.contains("another holder began inside its section"), "{report}");
    }

    #[test]
    fn tokens_that_go_backwards_are_a_violation() {
        let (report, failed) = verdict(&["c begin a 5 100 accepted", "c begin a 4 101 accepted"]);
        assert!(failed);
        assert!(report.contains("did not increase"), "{report}");
    }

    #[test]
    fn too_few_acquisitions_per_second_fail_the_run() {
        let o = Options { dir: String::new(), floor: 1.0, kinds: vec!["php".into()], seed: "0".into() };
        let entries = journal(&["driver phase - 0 1 chaos-start", "driver phase - 0 1 chaos-end"]);
        let (report, failed) = judge(&entries, &o);
        assert!(failed);
        assert!(report.contains("no php caller completed"), "{report}");
    }
}
