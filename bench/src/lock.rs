//! The one operation every Rust-side implementation offers, below the implementations
//! and the prototypes that both provide it.

use crate::Res;

/// TTL of every lease the benchmark takes: long enough never to expire during a run.
pub const TTL: f64 = 60.0;

/// Lock and release one name; what the Rust-side measurements drive.
pub trait Lock: Send {
    fn acquire(&mut self, name: &str, timeout: f64) -> Res<()>;
    fn release(&mut self, name: &str) -> Res<()>;
}
