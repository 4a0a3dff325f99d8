//! The chaos test of mutual exclusion under faults (tests/suites/60-chaos.sh), in one
//! binary with three roles:
//!
//! - `chaos guard ...`: the protected resource, a fenced register the workers write to
//!   while they hold the lock (see `guard`);
//! - `chaos drive ...`: runs CLI, PHP and C workers and injects faults (see `driver`);
//! - `chaos check ...`: judges the run from the guard's journal (see `check`).

mod check;
mod driver;
mod guard;
mod journal;
mod rng;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let code = match args.first().map(String::as_str) {
        Some("guard") => guard::main(&args[1..]),
        Some("drive") => driver::main(&args[1..]),
        Some("check") => check::main(&args[1..]),
        _ => {
            eprintln!("usage: chaos guard|drive|check ...");
            2
        }
    };
    std::process::exit(code);
}
