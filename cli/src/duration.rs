//! DURATION arguments: `90`, `90s`, `1.5s`, `500ms`, `5m`, `2h`, `1d`.
//!
//! A plain number is seconds, as `--timeout` and `--ttl` have always taken it, so
//! existing crontab lines keep their meaning. The syntax is the core's one reader of
//! seconds ([`limits::parse_seconds`], which a URL's and an option file's timeouts go
//! through too); whether a value is in range (negative, NaN, too large) is the core's
//! decision as well, so every option reports it in the same words (`invalid ttl: NaN is
//! not a finite number ...`).

use mysqllock_core::limits;

/// What the help and the error message show as accepted forms.
pub const FORMS: &str = limits::DURATION_FORMS;

/// Seconds in `text`, for clap's `value_parser`.
pub fn seconds(text: &str) -> Result<f64, String> {
    limits::parse_seconds(text).ok_or_else(|| format!("{text:?} is not a duration: expected {FORMS}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_numbers_are_seconds() {
        assert_eq!(seconds("90"), Ok(90.0));
        assert_eq!(seconds("0.25"), Ok(0.25));
        assert_eq!(seconds("0"), Ok(0.0));
    }

    #[test]
    fn units_scale_the_number() {
        assert_eq!(seconds("90s"), Ok(90.0));
        assert_eq!(seconds("1.5s"), Ok(1.5));
        assert_eq!(seconds("500ms"), Ok(0.5));
        assert_eq!(seconds("5m"), Ok(300.0));
        assert_eq!(seconds("2h"), Ok(7200.0));
        assert_eq!(seconds("1d"), Ok(86_400.0));
    }

    #[test]
    fn out_of_range_numbers_are_left_to_the_core() {
        assert_eq!(seconds("-1"), Ok(-1.0));
        assert!(seconds("NaN").is_ok_and(f64::is_nan));
    }

    #[test]
    fn anything_else_is_refused_with_the_accepted_forms() {
        for bad in ["", "s", "5x", "1.5.5s", "5 m", "m5", "5sec", "1h30m"] {
            let error = seconds(bad).expect_err(bad);
            assert!(error.contains("not a duration") && error.contains("2h"), "{bad:?}: {error}");
        }
    }
}
