//! The guard's journal: one line per operation on the protected resource, in the order
//! the guard serialised them. It is the single source of truth: the guard rebuilds its
//! state from it, the driver adds its faults to it (so a violation can be read next to
//! the faults around it), and the checker judges the run from it alone.
//!
//! A line: `SEQ MONO_NS KIND OP NAME TOKEN PID VERDICT`, e.g.
//! `17 8123456789 php begin chaos-a 42 3171 accepted`.

use std::fmt;

/// What a journal line records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// A holder starts writing to the resource under its token.
    Begin,
    /// A holder finishes writing under its token.
    End,
    /// What the holder's lock release reported afterwards (verdict ok, lost or error).
    Release,
    /// A fault the driver injected (verdict: its kind).
    Fault,
    /// A milestone of the run (verdict: chaos-start, chaos-end).
    Phase,
}

impl Op {
    pub fn parse(word: &str) -> Option<Op> {
        Some(match word {
            "begin" => Op::Begin,
            "end" => Op::End,
            "release" => Op::Release,
            "fault" => Op::Fault,
            "phase" => Op::Phase,
            _ => return None,
        })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Op::Begin => "begin",
            Op::End => "end",
            Op::Release => "release",
            Op::Fault => "fault",
            Op::Phase => "phase",
        }
    }
}

/// One journal line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// Position in the guard's total order, from 1.
    pub seq: u64,
    /// CLOCK_MONOTONIC when the guard wrote it (for durations and for reading the log).
    pub mono_ns: u64,
    /// Who called: cli, php, c, driver.
    pub kind: String,
    pub op: Op,
    /// The lock name ("-" for a fault or phase not tied to one).
    pub name: String,
    /// The fencing token (for a fault: the killed session's id, or 0).
    pub token: u64,
    /// The holder's process id (for CLI callers: the `mysqllock run` process).
    pub pid: u32,
    /// accepted / rejected for begin and end; ok / lost / error for a release; the
    /// fault's kind; the phase's name.
    pub verdict: String,
}

impl Entry {
    pub fn parse(line: &str) -> Option<Entry> {
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
            verdict: w[7].to_owned(),
        })
    }

    pub fn accepted(&self) -> bool {
        self.verdict == "accepted"
    }
}

impl fmt::Display for Entry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {} {} {} {} {} {} {}",
            self.seq,
            self.mono_ns,
            self.kind,
            self.op.as_str(),
            self.name,
            self.token,
            self.pid,
            self.verdict
        )
    }
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

/// Reads every well-formed line of the journal text, in order.
pub fn parse_all(text: &str) -> Vec<Entry> {
    text.lines().filter_map(Entry::parse).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_reads_back_as_written() {
        let e = Entry {
            seq: 17,
            mono_ns: 8_123_456_789,
            kind: "php".into(),
            op: Op::Begin,
            name: "chaos-a".into(),
            token: 42,
            pid: 3171,
            verdict: "accepted".into(),
        };
        assert_eq!(Entry::parse(&e.to_string()), Some(e));
    }

    #[test]
    fn a_torn_line_is_ignored() {
        assert_eq!(Entry::parse("17 8123 php begin chaos-a"), None);
    }
}
