//! The chaos test of mutual exclusion under faults (tests/suites/60-chaos.sh and its
//! self-test, 61-chaos-selftest.sh), in one binary with several roles:
//!
//! - `chaos drive ...`: runs CLI, PHP and C workers and injects faults (see `driver`);
//! - `chaos check ...`: judges a run from the workers' and the driver's journals alone
//!   (see `journal` for the format, `check` for the rules);
//! - `chaos guard ...`: the protected resource, a fenced register the holders write to
//!   (see `guard`; the checker does not read it);
//! - `chaos now`, `chaos deadline TTL`, `chaos journal FILE [--at NS] WORD...`: the
//!   clock and the journal for workers written in shell (see `journal`).

mod check;
mod driver;
mod guard;
mod journal;
mod procfs;
mod rng;

use std::path::Path;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let code = match args.first().map(String::as_str) {
        Some("guard") => guard::main(&args[1..]),
        Some("drive") => driver::main(&args[1..]),
        Some("check") => check::main(&args[1..]),
        Some("now") if args.len() == 1 => {
            println!("{}", journal::monotonic_ns());
            0
        }
        Some("deadline") if args.len() == 2 => match args[1].parse::<f64>() {
            Ok(ttl) if ttl.is_finite() && ttl > 0.0 => {
                println!("{}", journal::ttl_deadline_ns(ttl));
                0
            }
            _ => usage(),
        },
        Some("journal") => append(&args[1..]),
        _ => usage(),
    };
    std::process::exit(code);
}

fn usage() -> i32 {
    eprintln!(
        "usage: chaos drive|check|guard ... | chaos now | chaos deadline TTL_SECONDS \
         | chaos journal FILE [--at MONO_NS] acquired|renewed|release|lost WORDS..."
    );
    2
}

/// `chaos journal FILE [--at MONO_NS] OP WORDS...`: appends `OP MONO_NS WORDS...` (the
/// monotonic clock read now unless `--at` gives it), refusing a line the checker could
/// not read.
fn append(args: &[String]) -> i32 {
    let (file, rest) = match args {
        [file, rest @ ..] => (file, rest),
        _ => return usage(),
    };
    let (at, words) = match rest {
        [flag, at, words @ ..] if flag == "--at" => (at.clone(), words),
        words => (journal::monotonic_ns().to_string(), words),
    };
    let [op, words @ ..] = words else { return usage() };
    let line = std::iter::once(op.as_str()).chain([at.as_str()]).chain(words.iter().map(String::as_str));
    let line = line.collect::<Vec<_>>().join(" ");
    if journal::Line::parse(&line).is_none() {
        eprintln!("chaos journal: not a journal line: {line:?}");
        return 2;
    }
    match journal::append(Path::new(file), &line) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("chaos journal: {file}: {e}");
            2
        }
    }
}
