//! What every figure is given: the server, the PHP to run, the admin connection and
//! how much to measure. Below the figures and the driver, so both can use it.

use std::path::PathBuf;
use std::time::Duration;

use crate::php::Php;
use crate::status::Admin;

/// How much each figure measures.
pub struct Params {
    pub quick: bool,
    /// Figures 1 and 2 run in this many rounds, the kinds interleaved within each.
    pub rounds: usize,
    /// Figure 1: timed lock + release cycles per kind (over all rounds), after `warm`
    /// untimed ones per batch; `count_cycles` per kind between status snapshots.
    pub cycles: usize,
    pub count_cycles: usize,
    pub warm: usize,
    /// Figure 2: hand-offs, and how long the holder holds each time.
    pub handoffs: usize,
    pub handoff_hold: Duration,
    /// Figure 2b: hand-offs after a hold longer than the protocol's 0.5 s grace (0 = skip).
    pub long_handoffs: usize,
    /// Figure 3: seconds per run, process counts, hold per acquisition.
    pub contention_secs: f64,
    /// Runs per kind and process count, the kinds interleaved.
    pub contention_rounds: usize,
    pub procs: Vec<usize>,
    pub hold_us: u64,
    /// Figure 4: names held at once.
    pub scale_n: usize,
    /// Figure 5: processes per kind.
    pub cold_n: usize,
    /// Appendix A2: cycles per table kind.
    pub option_cycles: usize,
}

impl Params {
    pub fn new(quick: bool) -> Params {
        if quick {
            Params {
                quick,
                rounds: 4,
                cycles: 2000,
                count_cycles: 500,
                warm: 200,
                handoffs: 80,
                handoff_hold: Duration::from_millis(10),
                long_handoffs: 0,
                contention_secs: 1.0,
                contention_rounds: 1,
                procs: vec![4, 16],
                hold_us: 100,
                scale_n: 10_000,
                cold_n: 20,
                option_cycles: 500,
            }
        } else {
            Params {
                quick,
                rounds: 8,
                cycles: 20_000,
                count_cycles: 2000,
                warm: 500,
                handoffs: 300,
                handoff_hold: Duration::from_millis(10),
                long_handoffs: 15,
                contention_secs: 3.0,
                contention_rounds: 3,
                procs: vec![4, 16],
                hold_us: 100,
                scale_n: 10_000,
                cold_n: 100,
                option_cycles: 3000,
            }
        }
    }
}

pub struct Ctx {
    pub dsn: String,
    pub php: Php,
    pub admin: Admin,
    pub params: Params,
    pub work: PathBuf,
}
