//! The chaos journals: what `chaos check` judges a run by, written by the workers and
//! the driver, never by the lock code and never read back by the guard.
//!
//! # Files
//!
//! - `DIR/journals/LABEL.journal`, one per worker slot (LABEL = `KIND-N`, e.g. `php-2`;
//!   the checker takes the caller kind from it). Every process the slot runs appends to
//!   it; the driver passes its path to the worker as the first argument.
//! - `DIR/driver.journal`: what the driver did and what landed.
//!
//! Every line is appended with one `write(2)` on a file opened with `O_APPEND` (PHP
//! `file_put_contents(..., FILE_APPEND)`, C `open(O_APPEND)` + `write`, the CLI worker
//! through `chaos journal`), so a process killed at any instant leaves whole lines only.
//! Fields are separated by one space; names, kinds and verdicts hold no whitespace.
//!
//! # Clock
//!
//! `*_NS` fields are `CLOCK_MONOTONIC` in nanoseconds (PHP `hrtime(true)`, C
//! `clock_gettime(CLOCK_MONOTONIC)`, `chaos now`): one clock for every process of the
//! machine, so sections of different processes compare directly. `-` means unknown.
//!
//! # Worker lines (the holder's own account of its sections)
//!
//! ```text
//! acquired MONO_NS NAME TOKEN DEADLINE_NS PID
//! renewed  MONO_NS NAME TOKEN DEADLINE_NS PID
//! release  MONO_NS NAME TOKEN VERDICT PID
//! lost     MONO_NS NAME TOKEN PID
//! ```
//!
//! - `acquired`: written right after acquire returned (MONO_NS read then). TOKEN is the
//!   fencing token the acquisition returned. DEADLINE_NS is the instant before which
//!   the lease cannot be lost, so past which it could be: for a TTL lease of the
//!   GET_LOCK protocol, from clocks read *before* the acquire call (see
//!   [`ttl_deadline_ns`]); for the lease mode, the library's own local deadline; `-`
//!   when unknown (the checker then treats the lease as never running out).
//! - `renewed`: the holder renewed, or learned from the library that its lease still
//!   runs (e.g. the remaining TTL after a keep-alive renewal); DEADLINE_NS as above,
//!   from clocks read before that call.
//! - `release`: MONO_NS read right *before* calling release; VERDICT is what release
//!   reported: `ok` (held to the end), `lost` (the lock was no longer ours) or `error`
//!   (unknown). An `ok` is the lock's promise that the section lasted to MONO_NS.
//! - `lost`: the holder learned (assert, renew, remaining TTL, a keep-alive's signal)
//!   that the lock is gone.
//!
//! PID is the process whose death ends the lease (for `mysqllock run`, the mysqllock
//! process; for PHP and C workers, the worker itself): the driver's `kill9` of that pid
//! ends the section.
//!
//! # Runs on a table without tokens
//!
//! On the original package's table (5 columns, no `token`: `chaos drive --table
//! original`) an acquisition has no fencing token. The driver then journals `phase
//! MONO_NS no-tokens` before `chaos-start`, tells the workers so (`CHAOS_TOKENS=0`), and
//! TOKEN in the worker lines is the section's *identity* instead: the MONO_NS of its own
//! `acquired` line (each worker writes the same number in both fields). It is unique: the
//! checker keys a section by (NAME, TOKEN, PID) within one journal, and one process never
//! journals two acquisitions in the same nanosecond (an acquisition is at least one round
//! trip to the server). It carries no promise of the lock, so the checker does not
//! require identities to increase (rule 2 is off) and the workers write nothing to the
//! fenced guard (`guard`), which needs tokens. The driver, which cannot know an identity,
//! names a section by NAME and PID instead: see `fault` and `lease` below.
//!
//! # Driver lines
//!
//! ```text
//! phase MONO_NS chaos-start|chaos-end|no-tokens
//! fault SENT_NS LANDED_NS KIND ENDS NAME TOKEN PID
//! lease MONO_NS NAME TOKEN DEADLINE_NS PID
//! ```
//!
//! - `fault`: one line per fault that *landed*, written once the driver saw it land
//!   (a killed process is gone, a stopped one shows state `T` in /proc, a killed session
//!   is gone from the process list, a restarted server answers again). SENT_NS is read
//!   right before the fault was sent, LANDED_NS when it was seen to have landed. KIND is
//!   free data (`kill9`, `stop`, `kill-session`, `restart`, `node-kill`, ...): the
//!   checker counts landed faults per kind against the minimum it is given. ENDS says
//!   which sections the fault legitimately ends at SENT_NS (the lock may be taken over
//!   from then on): `none`; `pid` (every section of PID: the holder process died);
//!   `section` (the section NAME TOKEN: its database session was killed); `all` (every
//!   section: the server went down). A section that begins between SENT_NS and
//!   LANDED_NS of an `all` fault is cut at its start. NAME, TOKEN, PID are `-` when the
//!   fault had no such target. A `section` fault with TOKEN `-` (a run without tokens)
//!   ends the section of NAME that PID held: every section of NAME and PID that began
//!   before LANDED_NS is cut at SENT_NS (one that began after SENT_NS, on the new
//!   session a process may open at once, is cut at its start: it claims nothing).
//! - `lease`: the driver saw in the lock table (right after stopping a holder) that the
//!   lease NAME TOKEN of PID runs at least until DEADLINE_NS. A keep-alive renews
//!   invisibly to its holder; a stopped holder's keep-alive is frozen with it, so what
//!   the table shows after the stop landed is where that lease can end at the earliest.
//!   TOKEN is `-` in a run without tokens: the lease is then that of the section of NAME
//!   and PID that began last before MONO_NS (a process holds one section of a name at
//!   a time).

use std::fmt;
use std::fs::OpenOptions;
use std::io::{self, Write};
use std::path::Path;

/// What a release reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Verdict {
    Ok,
    Lost,
    Error,
}

impl Verdict {
    pub fn parse(word: &str) -> Option<Verdict> {
        Some(match word {
            "ok" => Verdict::Ok,
            "lost" => Verdict::Lost,
            "error" => Verdict::Error,
            _ => return None,
        })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Ok => "ok",
            Verdict::Lost => "lost",
            Verdict::Error => "error",
        }
    }
}

/// Which sections a landed fault ends (at its SENT_NS).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ends {
    None,
    Pid,
    Section,
    All,
}

impl Ends {
    pub fn parse(word: &str) -> Option<Ends> {
        Some(match word {
            "none" => Ends::None,
            "pid" => Ends::Pid,
            "section" => Ends::Section,
            "all" => Ends::All,
            _ => return None,
        })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Ends::None => "none",
            Ends::Pid => "pid",
            Ends::Section => "section",
            Ends::All => "all",
        }
    }
}

/// One journal line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Line {
    Acquired {
        at: u64,
        name: String,
        token: u64,
        deadline: Option<u64>,
        pid: u32,
    },
    Renewed {
        at: u64,
        name: String,
        token: u64,
        deadline: Option<u64>,
        pid: u32,
    },
    Release {
        at: u64,
        name: String,
        token: u64,
        verdict: Verdict,
        pid: u32,
    },
    Lost {
        at: u64,
        name: String,
        token: u64,
        pid: u32,
    },
    Phase {
        at: u64,
        phase: String,
    },
    Fault(Fault),
    /// `token` None: a run without tokens (the section is named by NAME and PID).
    Lease {
        at: u64,
        name: String,
        token: Option<u64>,
        deadline: u64,
        pid: u32,
    },
}

/// A `fault` line: a fault the driver saw land.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fault {
    pub sent: u64,
    pub landed: u64,
    pub kind: String,
    pub ends: Ends,
    pub name: Option<String>,
    pub token: Option<u64>,
    pub pid: Option<u32>,
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Fault { sent, landed, kind, ends, name, token, pid } = self;
        let (ends, name, token, pid) = (ends.as_str(), name.as_deref().unwrap_or("-"), show(token), show(pid));
        write!(f, "fault {sent} {landed} {kind} {ends} {name} {token} {pid}")
    }
}

fn opt<T: std::str::FromStr>(word: &str) -> Option<Option<T>> {
    if word == "-" {
        Some(None)
    } else {
        word.parse().ok().map(Some)
    }
}

fn show<T: fmt::Display>(value: &Option<T>) -> String {
    value.as_ref().map_or_else(|| "-".to_owned(), ToString::to_string)
}

impl Line {
    /// A line as written, or None when it is not one of the forms above.
    pub fn parse(text: &str) -> Option<Line> {
        let w: Vec<&str> = text.split(' ').collect();
        let n = |i: usize| w[i].parse::<u64>().ok();
        let pid = |i: usize| w[i].parse::<u32>().ok();
        let name = |i: usize| (!w[i].is_empty()).then(|| w[i].to_owned());
        Some(match (w[0], w.len()) {
            ("acquired", 6) => {
                Line::Acquired { at: n(1)?, name: name(2)?, token: n(3)?, deadline: opt(w[4])?, pid: pid(5)? }
            }
            ("renewed", 6) => {
                Line::Renewed { at: n(1)?, name: name(2)?, token: n(3)?, deadline: opt(w[4])?, pid: pid(5)? }
            }
            ("release", 6) => {
                Line::Release { at: n(1)?, name: name(2)?, token: n(3)?, verdict: Verdict::parse(w[4])?, pid: pid(5)? }
            }
            ("lost", 5) => Line::Lost { at: n(1)?, name: name(2)?, token: n(3)?, pid: pid(4)? },
            ("phase", 3) => Line::Phase { at: n(1)?, phase: name(2)? },
            ("fault", 8) => Line::Fault(Fault {
                sent: n(1)?,
                landed: n(2)?,
                kind: name(3)?,
                ends: Ends::parse(w[4])?,
                name: if w[5] == "-" { None } else { Some(name(5)?) },
                token: opt(w[6])?,
                pid: opt(w[7])?,
            }),
            ("lease", 6) => Line::Lease { at: n(1)?, name: name(2)?, token: opt(w[3])?, deadline: n(4)?, pid: pid(5)? },
            _ => return None,
        })
    }
}

impl fmt::Display for Line {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Line::Acquired { at, name, token, deadline, pid } => {
                write!(f, "acquired {at} {name} {token} {} {pid}", show(deadline))
            }
            Line::Renewed { at, name, token, deadline, pid } => {
                write!(f, "renewed {at} {name} {token} {} {pid}", show(deadline))
            }
            Line::Release { at, name, token, verdict, pid } => {
                write!(f, "release {at} {name} {token} {} {pid}", verdict.as_str())
            }
            Line::Lost { at, name, token, pid } => write!(f, "lost {at} {name} {token} {pid}"),
            Line::Phase { at, phase } => write!(f, "phase {at} {phase}"),
            Line::Fault(fault) => write!(f, "{fault}"),
            Line::Lease { at, name, token, deadline, pid } => {
                write!(f, "lease {at} {name} {} {deadline} {pid}", show(token))
            }
        }
    }
}

/// Appends one line to a journal with a single write(2) on an O_APPEND descriptor.
pub fn append(path: &Path, line: &str) -> io::Result<()> {
    let mut file = OpenOptions::new().create(true).append(true).open(path)?;
    let text = format!("{line}\n");
    let written = file.write(text.as_bytes())?;
    if written != text.len() {
        return Err(io::Error::other(format!("{}: short write ({written} of {} bytes)", path.display(), text.len())));
    }
    Ok(())
}

/// CLOCK_MONOTONIC in nanoseconds: one clock for every process of the machine.
pub fn monotonic_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC)
}

fn clock_ns(clock: libc::clockid_t) -> u64 {
    // SAFETY: timespec is plain data; clock_gettime writes it.
    let mut ts: libc::timespec = unsafe { std::mem::zeroed() };
    // SAFETY: a valid clock id and a writable timespec.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    (ts.tv_sec as u64) * 1_000_000_000 + ts.tv_nsec as u64
}

/// Taken off every deadline derived from the database clock: the wall clock and the
/// monotonic clock are read one after the other (microseconds apart); NTP slews both
/// alike. A step of the wall clock during a run would break the mapping (not expected
/// on a CI machine; the run is a minute long).
pub const CLOCK_MARGIN_NS: u64 = 5_000_000;

/// The DEADLINE_NS of a TTL lease of the GET_LOCK protocol whose acquire (or renew)
/// is about to be called now, for `ttl_seconds` as given to the library.
///
/// From docs/protocol.md, "The lease protocol": the row's `created` is
/// `UNIX_TIMESTAMP()` (whole seconds, floored) of the statement that claims (or, for a
/// renewal, extends) the lease, which runs after this instant; TTLs are whole seconds, a
/// fraction rounds up; and another session may reclaim the row only once `created + ttl <
/// UNIX_TIMESTAMP()`, i.e. once the wall clock reaches `created + ttl + 1`. So the lease
/// cannot be lost before `floor(now) + ceil(ttl) + 1` on the wall clock (the database
/// runs on this machine and reads the same clock), mapped here onto the monotonic
/// clock. A takeover then still needs the stale holder's GET_LOCK (a 0.5 s grace and a
/// KILL): not counted, so the deadline stays a lower bound of the real end.
pub fn ttl_deadline_ns(ttl_seconds: f64) -> u64 {
    let mono = monotonic_ns();
    let wall = clock_ns(libc::CLOCK_REALTIME);
    let ttl_ns = (ttl_seconds.max(0.0).ceil() as u64) * 1_000_000_000;
    let into_second = wall % 1_000_000_000;
    (mono + ttl_ns + (1_000_000_000 - into_second)).saturating_sub(CLOCK_MARGIN_NS)
}

/// A word safe for one journal field: no whitespace, never empty.
pub fn word(text: &str) -> String {
    let w: String = text.chars().map(|c| if c.is_whitespace() { '_' } else { c }).collect();
    if w.is_empty() {
        "-".to_owned()
    } else {
        w
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(text: &str) {
        let line = Line::parse(text).unwrap_or_else(|| panic!("{text:?} does not parse"));
        assert_eq!(line.to_string(), text);
    }

    #[test]
    fn every_form_reads_back_as_written() {
        round_trip("acquired 8123456789 chaos-a 42 10123456789 3171");
        round_trip("acquired 8123456789 chaos-a 42 - 3171");
        round_trip("renewed 8123456789 chaos-a 42 10123456789 3171");
        round_trip("release 8123456789 chaos-a 42 lost 3171");
        round_trip("lost 8123456789 chaos-a 42 3171");
        round_trip("phase 8123456789 chaos-start");
        round_trip("fault 8123456789 8123999999 kill9 pid chaos-a 42 3171");
        round_trip("fault 8123456789 9123999999 restart all - - -");
        round_trip("lease 8123456789 chaos-a 42 10123456789 3171");
        round_trip("lease 8123456789 chaos-a - 10123456789 3171");
        round_trip("phase 8123456789 no-tokens");
        round_trip("fault 8123456789 8123999999 kill-session section chaos-a - 3171");
    }

    #[test]
    fn torn_or_unknown_lines_do_not_parse() {
        assert_eq!(Line::parse("acquired 8123456789 chaos-a 42"), None);
        assert_eq!(Line::parse("release 8123456789 chaos-a 42 maybe 3171"), None);
        assert_eq!(Line::parse("begin 8123456789 chaos-a 42 - 3171"), None);
        assert_eq!(Line::parse("acquired 8123456789  42 - 3171"), None);
    }

    #[test]
    fn a_ttl_deadline_lies_between_ttl_and_ttl_plus_one_second_ahead() {
        let before = monotonic_ns();
        let deadline = ttl_deadline_ns(1.5);
        let after = monotonic_ns();
        assert!(deadline + CLOCK_MARGIN_NS > before + 2_000_000_000, "ceil(1.5) = 2 s at least");
        assert!(deadline + CLOCK_MARGIN_NS <= after + 3_000_000_000, "at most a second of rounding");
    }
}
