//! Figure 2: hand-off. A holder holds the name, a waiter (own connection) blocks in
//! acquire with a long timeout; the time from the holder's release() returning to the
//! waiter's acquire returning. Rust: two threads; PHP: two processes (hrtime, i.e.
//! CLOCK_MONOTONIC, is comparable across processes).
//!
//! The kinds compared run in the same pair of threads/processes, taking turns hand-off
//! by hand-off, so that the machine's changing load hits them alike. The waiter is woken
//! by the server while the holder's release statement is still on its way back, so
//! single samples can be negative.

use std::sync::mpsc;
use std::time::Duration;

use crate::clock::now_ns;
use crate::ctx::Ctx;
use crate::impls::{self, Kind};
use crate::lock::Lock;
use crate::stats::{dist, Dist};
use crate::Res;

#[derive(Clone)]
pub struct Handoff {
    pub delta: Dist,
    /// Hand-offs where the waiter had not been blocked for most of the hold (should be 0).
    pub not_blocked: usize,
}

/// One kind's samples: hand-off times and how long each waiter's acquire took (ns).
#[derive(Default, Clone)]
pub struct Samples {
    deltas: Vec<i64>,
    waits: Vec<i64>,
}

impl Samples {
    pub fn extend(&mut self, other: Samples) {
        self.deltas.extend(other.deltas);
        self.waits.extend(other.waits);
    }

    /// `hold`: what the holder held; a waiter that waited less than half of it was not
    /// blocked the whole time.
    pub fn result(self, hold: Duration) -> Handoff {
        let hold_ns = i64::try_from(hold.as_nanos()).unwrap_or(i64::MAX);
        let not_blocked = self.waits.iter().filter(|&&w| w < hold_ns / 2).count();
        Handoff { delta: dist(self.deltas), not_blocked }
    }
}

/// `n` counted hand-offs per kind after `warm` uncounted ones (the waiter's first wait
/// prepares statements), the kinds taking turns: `[Ext, Pdo]` (or one of them) in PHP,
/// or any Rust-side kinds here. `hold`: how long the holder keeps the lock after the
/// waiter was told to start.
pub fn measure(
    ctx: &mut Ctx,
    kinds: &[Kind],
    (warm, n): (usize, usize),
    hold: Duration,
    label: &str,
) -> Res<Vec<Samples>> {
    let name = format!("bench-handoff-{label}");
    let total = n + warm;
    let mut out: Vec<Samples> = if kinds.iter().any(|k| k.is_php()) {
        let tags: Vec<&str> = kinds.iter().map(|k| k.tag()).collect();
        let args = [tags.join(","), total.to_string(), hold.as_micros().to_string(), name];
        let r = ctx.php.run("handoff.php", &args)?;
        let mut out = Vec::new();
        for tag in tags {
            out.push(Samples { deltas: r.list(&format!("delta_{tag}"))?, waits: r.list(&format!("waited_{tag}"))? });
        }
        out
    } else {
        native(&ctx.dsn, kinds, total, hold, &name)?
    };
    for (s, k) in out.iter_mut().zip(kinds) {
        if s.deltas.len() != total || s.waits.len() != total {
            return Err(format!("hand-off {}: {} samples instead of {total}", k.tag(), s.deltas.len()).into());
        }
        s.deltas.drain(..warm);
        s.waits.drain(..warm);
    }
    Ok(out)
}

fn open_all(dsn: &str, kinds: &[Kind], name: &str, side: &str) -> Res<Vec<(Box<dyn Lock>, String)>> {
    let mut locks = Vec::new();
    for &k in kinds {
        let n = format!("{name}-{}", k.tag());
        locks.push((impls::open(k, dsn, &format!("{n}-warm-{side}"))?, n));
    }
    Ok(locks)
}

/// Two threads, each with a connection per kind.
fn native(dsn: &str, kinds: &[Kind], n: usize, hold: Duration, name: &str) -> Res<Vec<Samples>> {
    let (go_tx, go_rx) = mpsc::channel::<usize>();
    let (done_tx, done_rx) = mpsc::channel::<(i64, i64)>();
    let mut waiter_locks = open_all(dsn, kinds, name, "w")?;
    let waiter = std::thread::spawn(move || -> Res<()> {
        while let Ok(k) = go_rx.recv() {
            let (lock, name) = &mut waiter_locks[k];
            let t0 = now_ns();
            lock.acquire(name, 30.0)?;
            let got = now_ns();
            lock.release(name)?;
            if done_tx.send((got, got - t0)).is_err() {
                break;
            }
        }
        Ok(())
    });
    let result = (|| -> Res<Vec<Samples>> {
        let mut locks = open_all(dsn, kinds, name, "h")?;
        let mut out: Vec<Samples> = kinds.iter().map(|_| Samples::default()).collect();
        for _ in 0..n {
            for (k, (lock, name)) in locks.iter_mut().enumerate() {
                lock.acquire(name, 5.0)?;
                go_tx.send(k).map_err(|_| "the waiter thread ended")?;
                std::thread::sleep(hold);
                lock.release(name)?;
                let released = now_ns();
                let (got, waited) = done_rx.recv().map_err(|_| "the waiter thread ended")?;
                out[k].deltas.push(got - released);
                out[k].waits.push(waited);
            }
        }
        Ok(out)
    })();
    drop(go_tx);
    let joined = waiter.join().map_err(|_| "the waiter thread panicked")?;
    // The waiter's own error explains a holder's "the waiter thread ended".
    joined?;
    result
}
