//! Time as a value. A [`Deadline`] is made once, where a caller's figure enters the core
//! (the lock wait asked for, `connect_timeout`), and handed down with each call that
//! waits, to the socket: never kept on a connection for a later call to pick up, never
//! rebuilt from `(timeout, started)` further down. It keeps the caller's figure, so a
//! message says "5 s" where the caller asked for 5 s, not the time that happened to be
//! left.
//!
//! "No limit" exists only where a caller may ask for it (`connect_timeout=0`), as
//! `Option<Deadline>` ([`Config::connect_deadline`](crate::Config::connect_deadline)):
//! a `Deadline` itself always ends.

use std::time::{Duration, Instant};

/// When a wait ends: an instant on the monotonic clock, and the span it was made from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Deadline {
    end: Instant,
    budget: Duration,
}

impl Deadline {
    /// `budget` from now.
    pub fn after(budget: Duration) -> Deadline {
        Deadline { end: Instant::now() + budget, budget }
    }

    /// Now: for a statement that asks the server for no wait, answered at once.
    pub fn now() -> Deadline {
        Deadline::after(Duration::ZERO)
    }

    /// The span it was made from: the caller's own figure, for messages.
    pub fn budget(&self) -> Duration {
        self.budget
    }

    /// The instant it ends.
    pub fn end(&self) -> Instant {
        self.end
    }

    /// What is left of it (zero once it passed).
    pub fn left(&self) -> Duration {
        self.end.saturating_duration_since(Instant::now())
    }

    /// Whether it has passed.
    pub fn passed(&self) -> bool {
        Instant::now() >= self.end
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_deadline_keeps_its_budget_while_its_time_runs_out() {
        let d = Deadline::after(Duration::from_millis(30));
        assert_eq!(d.budget(), Duration::from_millis(30));
        assert!(!d.passed() && d.left() <= Duration::from_millis(30));
        let started = Instant::now();
        while !d.passed() {
            assert!(started.elapsed() < Duration::from_secs(5), "the deadline never passed");
            std::thread::yield_now();
        }
        assert_eq!((d.left(), d.budget()), (Duration::ZERO, Duration::from_millis(30)));
    }

    #[test]
    fn now_has_passed_already() {
        let d = Deadline::now();
        assert!(d.passed());
        assert_eq!((d.left(), d.budget()), (Duration::ZERO, Duration::ZERO));
    }
}
