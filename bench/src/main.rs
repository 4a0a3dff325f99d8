//! Benchmark harness for mysqllock (issue 6): the PHP extension and the Rust core (the
//! path the C ABI takes) side by side with their floors, raw `GET_LOCK`/`RELEASE_LOCK`
//! through PDO and through the `mysql` crate. `bench/run.sh` builds everything, starts a
//! throwaway MariaDB and runs the driver; the same binary also serves as the worker
//! process for the contention, scale and cold-start figures.
//!
//! ```text
//! mysqllock-bench [--quick] --dsn URL --php-ext SO --php-dir DIR [--work DIR] [--figures 1,2,3,4,5,p]
//! mysqllock-bench contend-worker --impl rust|mysql --dsn URL --name N --hold-us H --out FILE
//! mysqllock-bench scale-worker --impl rust|mysql --dsn URL --n N
//! mysqllock-bench cold --impl rust|mysql --dsn URL
//! ```
//!
//! Timings are never asserted: the exit status is non-zero only when a measurement
//! could not run.

mod args;
mod clock;
mod cold;
mod contention;
mod ctx;
mod driver;
mod handoff;
mod impls;
mod lines;
mod lock;
mod php;
mod proto;
mod report;
mod res;
mod scale;
mod stats;
mod status;
mod uncontended;

use std::process::ExitCode;

use res::Res;

fn main() -> ExitCode {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let result = match argv.first().map(String::as_str) {
        Some("contend-worker") => contention::worker(&argv[1..]),
        Some("scale-worker") => scale::worker(&argv[1..]),
        Some("cold") => cold::child(&argv[1..]),
        Some("-h" | "--help") => {
            println!(
                "usage: mysqllock-bench [--quick] --dsn URL --php-ext PATH/libmysqllock_php.so --php-dir bench/php \
                 [--work DIR] [--figures 1,2,3,4,5,p]"
            );
            Ok(())
        }
        _ => driver::run(&argv),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("mysqllock-bench: {e}");
            ExitCode::FAILURE
        }
    }
}
