//! The options of `mysqllock_acquire_ex()`: keep-alive, maximum hold, "at least".

use mysqllock_core::AcquireOptions;

use crate::boundary::{invalid, Result};

/// Flags for `mysqllock_options.flags`, combined with `|`. An enum rather than
/// `#define`s so that PHP's `FFI::cdef` sees them too.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(non_camel_case_types, clippy::upper_case_acronyms)]
pub enum mysqllock_option_flag {
    /// Renew the lease from a background thread with its own connection, every third of
    /// its TTL, while it is held, up to `max_hold` seconds after acquisition. If a
    /// renewal fails, the lock counts as lost: the next `mysqllock_renew()`,
    /// `mysqllock_assert_ttl()`, `mysqllock_remaining_ttl()` or `mysqllock_release()`
    /// returns `MYSQLLOCK_NOT_HELD`. The thread stops at release and at
    /// `mysqllock_client_free()`; a forked child never has it.
    KEEP_ALIVE = 1,
}

/// Every flag this version knows; other bits are refused, so that a caller built for a
/// newer version learns at once that its option is not supported here.
const KNOWN_FLAGS: u32 = mysqllock_option_flag::KEEP_ALIVE as u32;

/// Extras for `mysqllock_acquire_ex()` and `mysqllock_try_acquire_ex()`. All fields zero
/// (`mysqllock_options opts = {0};`), like a NULL pointer, mean a plain lease, the
/// same as `mysqllock_acquire()`. Read during the call only.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct mysqllock_options {
    /// `MYSQLLOCK_KEEP_ALIVE` or 0. Unknown bits are `MYSQLLOCK_INVALID_ARGUMENT`.
    pub flags: u32,
    /// With `MYSQLLOCK_KEEP_ALIVE`: seconds after acquisition when the renewals stop, so
    /// a process stuck in an endless loop loses the lock then (rounded up to whole
    /// seconds, database clock). 0 or less means the default, 3600. A positive value
    /// without `MYSQLLOCK_KEEP_ALIVE`, NaN or infinity is `MYSQLLOCK_INVALID_ARGUMENT`.
    pub max_hold: f64,
    /// Seconds from acquisition the lock stays taken even when released sooner, so a
    /// node whose cron fires a little later does not run the same job again ("at least";
    /// rounded up to whole seconds, database clock). 0 = off. Negative, NaN or infinite
    /// is `MYSQLLOCK_INVALID_ARGUMENT`.
    pub at_least: f64,
}

/// The core's options for a C options pointer (NULL = defaults), refused as
/// `MYSQLLOCK_INVALID_ARGUMENT` when malformed. The numbers themselves are checked by
/// the core, before anything is locked.
///
/// # Safety
/// `options` is NULL or points to a readable `mysqllock_options`.
pub(crate) unsafe fn acquire_options(options: *const mysqllock_options) -> Result<AcquireOptions> {
    // SAFETY: NULL or readable by the caller's contract.
    let Some(options) = (unsafe { options.as_ref() }) else {
        return Ok(AcquireOptions::default());
    };
    let unknown = options.flags & !KNOWN_FLAGS;
    if unknown != 0 {
        return Err(invalid(
            "options",
            &format!("unknown flags 0x{unknown:x} (this version knows MYSQLLOCK_KEEP_ALIVE = 1)"),
        ));
    }
    // Written so that NaN is not "0 or less": it reaches the core's check and is refused.
    let max_hold = if options.max_hold <= 0.0 { None } else { Some(options.max_hold) };
    Ok(AcquireOptions { keep_alive: options.flags & KNOWN_FLAGS != 0, max_hold, at_least: options.at_least })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(flags: u32, max_hold: f64, at_least: f64) -> mysqllock_options {
        mysqllock_options { flags, max_hold, at_least }
    }

    fn convert(o: mysqllock_options) -> Result<AcquireOptions> {
        // SAFETY: a reference is a readable pointer.
        unsafe { acquire_options(&o) }
    }

    #[test]
    fn null_and_zero_mean_a_plain_lease() {
        // SAFETY: NULL is allowed.
        assert_eq!(unsafe { acquire_options(std::ptr::null()) }.unwrap(), AcquireOptions::default());
        assert_eq!(convert(options(0, 0.0, 0.0)).unwrap(), AcquireOptions::default());
    }

    #[test]
    fn max_hold_of_zero_or_less_is_the_default_and_nan_is_passed_on_to_be_refused() {
        let default = convert(options(1, -5.0, 0.0)).unwrap();
        assert_eq!((default.keep_alive, default.max_hold), (true, None));
        assert_eq!(convert(options(1, 30.0, 2.0)).unwrap().max_hold, Some(30.0));
        assert!(convert(options(1, f64::NAN, 0.0)).unwrap().max_hold.is_some_and(f64::is_nan));
    }

    #[test]
    fn unknown_flags_are_refused_with_their_bits() {
        let e = convert(options(1 | 4, 0.0, 0.0)).unwrap_err();
        assert!(e.is_invalid_argument());
        assert!(e.to_string().contains("0x4"), "{e}");
    }
}
