//! Validation of the numbers a caller passes: timeouts and TTLs, and the one reader of
//! seconds written as text (a URL's, php.ini's, an option file's, the CLI's).

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

/// What [`parse_seconds`] reads, for messages.
pub const DURATION_FORMS: &str = "seconds (90, 1.5), or a number with a unit: 500ms, 90s, 5m, 2h, 1d";

/// The unit suffixes and their length in seconds; `ms` before `s`, which it ends with.
const UNITS: [(&str, f64); 5] = [("ms", 0.001), ("s", 1.0), ("m", 60.0), ("h", 3600.0), ("d", 86_400.0)];

/// The seconds a text names: a plain number is seconds (`90`, `1.5`), or a number with a
/// unit (`500ms`, `90s`, `5m`, `2h`, `1d`); blanks around it are ignored. Only the syntax
/// is read here: whether the number is in range (negative, NaN, too large) is
/// [`duration`]'s to say, as for a number passed in. `None` for anything else.
pub fn parse_seconds(text: &str) -> Option<f64> {
    let text = text.trim();
    let (number, unit) = UNITS
        .iter()
        .find_map(|&(suffix, unit)| text.strip_suffix(suffix).map(|number| (number, unit)))
        .unwrap_or((text, 1.0));
    // `f64` also reads "inf", "1e3" and "-5": they pass, and `duration` judges the value.
    number.parse::<f64>().ok().map(|n| n * unit)
}

/// A timeout written as text ([`parse_seconds`]), as [`duration`] allows it.
pub fn seconds_setting(what: &'static str, text: &str) -> Result<Duration> {
    match parse_seconds(text) {
        Some(secs) => duration(what, secs),
        None => Err(Error::invalid(what, format!("{text:?} is not a duration: expected {DURATION_FORMS}"))),
    }
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
    fn seconds_are_read_as_a_number_or_with_a_unit() {
        for (text, secs) in [("90", 90.0), ("0.25", 0.25), ("0", 0.0), (" 30 ", 30.0), ("90s", 90.0), ("1.5s", 1.5)] {
            assert_eq!(parse_seconds(text), Some(secs), "{text:?}");
        }
        for (text, secs) in [("500ms", 0.5), ("5m", 300.0), ("2h", 7200.0), ("1d", 86_400.0), ("-1", -1.0)] {
            assert_eq!(parse_seconds(text), Some(secs), "{text:?}");
        }
        for bad in ["", "s", "5x", "1.5.5s", "5 m", "m5", "5sec", "1h30m", "soon"] {
            assert_eq!(parse_seconds(bad), None, "{bad:?}");
            let e = seconds_setting("read_timeout", bad).unwrap_err().to_string();
            assert!(e.contains("read_timeout") && e.contains("not a duration") && e.contains("2h"), "{e}");
        }
        assert_eq!(seconds_setting("t", "1.5s").unwrap(), Duration::from_millis(1500));
        assert!(seconds_setting("t", "-1").unwrap_err().to_string().contains("negative"));
    }

    #[test]
    fn fractional_ttl_rounds_up() {
        assert_eq!(ttl_seconds(0.2).unwrap(), 1);
        assert_eq!(ttl_seconds(2.0).unwrap(), 2);
        assert_eq!(duration("timeout", 0.25).unwrap(), Duration::from_millis(250));
    }
}
