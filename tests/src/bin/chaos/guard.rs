//! The protected resource: a fenced register per lock name, shared by every worker
//! process through files under the run's directory. It is what the holders protect,
//! the way a user's fenced write would; `chaos check` does not read it (the checker
//! judges the run from the workers' and the driver's own journals, see `journal`).
//!
//! `chaos guard begin|end NAME TOKEN PID` is a write to the resource under a fencing
//! token, checked the classic way: the resource remembers the highest token that began
//! writing to it, accepts a `begin` only with a greater token and an `end` only with a
//! token at least that high. A holder that lost its lease unawares and comes back after
//! a newer holder began has a smaller token: its writes are rejected (exit 1).
//!
//! Each operation runs under flock(2) on `guard.lock` and is complete once its line is
//! appended to `guard.log` (one write(2) with O_APPEND): the log is the truth, and
//! `guard.state` (highest tokens, sequence counter, log length) is only a cache that is
//! brought up to date from the log's tail when it lags. So a guard process that dies at
//! any instant leaves either a complete operation or none. The driver never signals
//! guard processes (it kills or stops holders); a stopped process group can pause one
//! for a few seconds while it holds the flock, which delays the others but changes no
//! outcome. A log line: `SEQ MONO_NS KIND begin|end NAME TOKEN PID accepted|rejected`.

use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

use crate::journal;

pub const LOG: &str = "guard.log";
const STATE: &str = "guard.state";
const LOCK: &str = "guard.lock";

/// A write to the resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// A holder starts writing to the resource under its token.
    Begin,
    /// A holder finishes writing under its token.
    End,
}

impl Op {
    fn parse(word: &str) -> Option<Op> {
        match word {
            "begin" => Some(Op::Begin),
            "end" => Some(Op::End),
            _ => None,
        }
    }

    fn as_str(self) -> &'static str {
        match self {
            Op::Begin => "begin",
            Op::End => "end",
        }
    }
}

/// One line of the guard's log.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Entry {
    seq: u64,
    mono_ns: u64,
    kind: String,
    op: Op,
    name: String,
    token: u64,
    pid: u32,
    accepted: bool,
}

impl Entry {
    fn parse(line: &str) -> Option<Entry> {
        let w: Vec<&str> = line.split_whitespace().collect();
        if w.len() != 8 {
            return None;
        }
        Some(Entry {
            seq: w[0].parse().ok()?,
            mono_ns: w[1].parse().ok()?,
            kind: w[2].to_owned(),
            op: Op::parse(w[3])?,
            name: w[4].to_owned(),
            token: w[5].parse().ok()?,
            pid: w[6].parse().ok()?,
            accepted: match w[7] {
                "accepted" => true,
                "rejected" => false,
                _ => return None,
            },
        })
    }

    fn render(&self) -> String {
        let verdict = if self.accepted { "accepted" } else { "rejected" };
        format!(
            "{} {} {} {} {} {} {} {verdict}\n",
            self.seq,
            self.mono_ns,
            self.kind,
            self.op.as_str(),
            self.name,
            self.token,
            self.pid
        )
    }
}

/// The guard's memory, rebuilt from the journal whenever the cache lags.
#[derive(Debug, Default, PartialEq)]
struct State {
    /// How many bytes of the journal this state accounts for.
    log_len: u64,
    /// The last sequence number handed out.
    seq: u64,
    /// Per lock name, the highest token whose `begin` was accepted.
    highest: BTreeMap<String, u64>,
}

impl State {
    fn apply(&mut self, e: &Entry) {
        self.seq = self.seq.max(e.seq);
        if e.op == Op::Begin && e.accepted {
            let high = self.highest.entry(e.name.clone()).or_default();
            *high = (*high).max(e.token);
        }
    }

    fn parse(text: &str) -> Option<State> {
        let mut lines = text.lines();
        let mut head = lines.next()?.split_whitespace();
        let mut state =
            State { log_len: head.next()?.parse().ok()?, seq: head.next()?.parse().ok()?, ..State::default() };
        for line in lines {
            let (name, token) = line.split_once(' ')?;
            state.highest.insert(name.to_owned(), token.parse().ok()?);
        }
        Some(state)
    }

    fn render(&self) -> String {
        let mut text = format!("{} {}\n", self.log_len, self.seq);
        for (name, token) in &self.highest {
            text.push_str(&format!("{name} {token}\n"));
        }
        text
    }
}

/// The fence: whether a write under `token` is accepted when `highest` began last.
fn judge(op: Op, token: u64, highest: u64) -> bool {
    match op {
        Op::Begin => token > highest,
        Op::End => token >= highest,
    }
}

/// The run directory's guard files.
pub struct Guard {
    dir: PathBuf,
}

impl Guard {
    pub fn new(dir: &Path) -> Guard {
        Guard { dir: dir.to_owned() }
    }

    /// Judges one write and appends it to the log; returns whether it was accepted.
    pub fn call(&self, kind: &str, op: Op, name: &str, token: u64, pid: u32) -> io::Result<bool> {
        let lock = OpenOptions::new().create(true).truncate(false).write(true).open(self.dir.join(LOCK))?;
        flock_exclusive(&lock)?;
        let mut log = OpenOptions::new().create(true).append(true).read(true).open(self.dir.join(LOG))?;
        let mut state = self.load(&mut log)?;
        let highest = state.highest.get(name).copied().unwrap_or(0);
        let entry = Entry {
            seq: state.seq + 1,
            mono_ns: journal::monotonic_ns(),
            kind: journal::word(kind),
            op,
            name: journal::word(name),
            token,
            pid,
            accepted: judge(op, token, highest),
        };
        let line = entry.render();
        log.write_all(line.as_bytes())?;
        state.apply(&entry);
        state.log_len += line.len() as u64;
        self.save(&state)?;
        Ok(entry.accepted)
    }

    /// The cached state, brought up to date with any log lines it does not cover (a
    /// guard that died between its append and its cache update).
    fn load(&self, log: &mut File) -> io::Result<State> {
        let cached = fs::read_to_string(self.dir.join(STATE)).ok().and_then(|t| State::parse(&t));
        let len = log.metadata()?.len();
        let mut state = cached.filter(|s| s.log_len <= len).unwrap_or_default();
        if state.log_len < len {
            log.seek(SeekFrom::Start(state.log_len))?;
            let mut tail = String::new();
            log.read_to_string(&mut tail)?;
            for e in tail.lines().filter_map(Entry::parse) {
                state.apply(&e);
            }
            state.log_len = len;
        }
        Ok(state)
    }

    fn save(&self, state: &State) -> io::Result<()> {
        let tmp = self.dir.join(format!("{STATE}.tmp"));
        fs::write(&tmp, state.render())?;
        fs::rename(tmp, self.dir.join(STATE))
    }
}

fn flock_exclusive(file: &File) -> io::Result<()> {
    loop {
        // SAFETY: flock(2) on a descriptor this function's caller keeps open.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) } == 0 {
            return Ok(());
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// `chaos guard begin|end NAME TOKEN PID` (CHAOS_DIR: the run's directory, CHAOS_KIND:
/// the caller's kind): exit 0 when accepted, 1 when rejected, 2 on bad usage or an I/O
/// failure.
pub fn main(args: &[String]) -> i32 {
    match run(args) {
        Ok(true) => 0,
        Ok(false) => 1,
        Err(message) => {
            eprintln!("chaos guard: {message}");
            2
        }
    }
}

fn run(args: &[String]) -> Result<bool, String> {
    const USAGE: &str = "usage: chaos guard begin|end NAME TOKEN PID";
    let [op, name, token, pid] = args else { return Err(USAGE.to_owned()) };
    let op = Op::parse(op).ok_or(USAGE)?;
    let token: u64 = token.parse().map_err(|_| format!("TOKEN must be a positive integer, not {token:?}"))?;
    let pid: u32 = pid.parse().map_err(|_| format!("PID must be a process id, not {pid:?}"))?;
    let dir = std::env::var("CHAOS_DIR").map_err(|_| "CHAOS_DIR is not set (the run's directory)".to_owned())?;
    let kind = std::env::var("CHAOS_KIND").unwrap_or_else(|_| "unknown".to_owned());
    Guard::new(Path::new(&dir)).call(&kind, op, name, token, pid).map_err(|e| format!("{dir}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_begin_needs_a_token_greater_than_every_accepted_one() {
        assert!(judge(Op::Begin, 8, 7));
        assert!(!judge(Op::Begin, 7, 7));
        assert!(!judge(Op::Begin, 6, 7));
    }

    #[test]
    fn an_end_is_rejected_once_a_newer_token_began() {
        assert!(judge(Op::End, 7, 7));
        assert!(!judge(Op::End, 6, 7));
    }

    #[test]
    fn the_cache_reads_back_as_written() {
        let mut state = State { log_len: 120, seq: 3, ..State::default() };
        state.highest.insert("chaos-a".into(), 42);
        assert_eq!(State::parse(&state.render()), Some(state));
    }
}
