//! Validation of the numbers a caller passes: timeouts and TTLs.

use std::time::Duration;

use crate::error::{Error, Result};

/// The longest timeout or TTL accepted: far beyond any sane lock, well inside every
/// integer type the table and GET_LOCK use.
pub const MAX_SECONDS: f64 = 1.0e9;

/// A non-negative, finite number of seconds (fractions allowed).
pub fn duration(what: &'static str, secs: f64) -> Result<Duration> {
    if !secs.is_finite() {
        return Err(Error::invalid(what, format!("{secs} is not a finite number of seconds")));
    }
    if secs < 0.0 {
        return Err(Error::invalid(what, format!("{secs} is negative")));
    }
    if secs > MAX_SECONDS {
        return Err(Error::invalid(what, format!("{secs} exceeds the maximum of {MAX_SECONDS} seconds")));
    }
    Ok(Duration::from_secs_f64(secs))
}

/// A TTL: positive and finite. The table stores whole seconds, so a fraction rounds up
/// (a lease never ends earlier than asked).
pub fn ttl_seconds(secs: f64) -> Result<i64> {
    whole_seconds("ttl", secs)
}

/// A positive, finite span stored in whole seconds, rounded up.
pub fn whole_seconds(what: &'static str, secs: f64) -> Result<i64> {
    let d = duration(what, secs)?;
    if d.is_zero() {
        return Err(Error::invalid(what, "0 would expire the lock at once; it must be positive"));
    }
    Ok(secs.ceil() as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn negative_nan_infinite_are_refused() {
        for bad in [-1.0, -0.001, f64::NAN, f64::INFINITY, f64::NEG_INFINITY, 2.0e9] {
            assert!(duration("timeout", bad).is_err(), "{bad} accepted");
            assert!(ttl_seconds(bad).is_err(), "{bad} accepted as ttl");
        }
        assert!(ttl_seconds(0.0).is_err());
    }

    #[test]
    fn fractional_ttl_rounds_up() {
        assert_eq!(ttl_seconds(0.2).unwrap(), 1);
        assert_eq!(ttl_seconds(2.0).unwrap(), 2);
        assert_eq!(duration("timeout", 0.25).unwrap(), Duration::from_millis(250));
    }
}
