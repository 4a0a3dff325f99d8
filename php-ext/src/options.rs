//! The `$options` array of `lock()`, `tryLock()` and `synchronized()`: keep-alive and
//! "at least" (see the core's `AcquireOptions`), under the PHP spellings of their keys.
//!
//! An array that is not an array is a `TypeError`, as for any other argument. What is
//! inside it is the caller's input to the lock, so an unknown key or a value of the wrong
//! type fails like any other bad input to `lock()`: as a core `InvalidArgument` naming the
//! key, before anything is locked.

use ext_php_rs::exception::PhpResult;
use ext_php_rs::types::{ArrayKey, Zval};
use mysqllock_core::{limits, AcquireOptions, Error};

use crate::args;
use crate::php;

pub const KEEP_ALIVE: &str = "keepAlive";
const MAX_HOLD: &str = "maxHold";
const AT_LEAST: &str = "atLeast";
const KNOWN: [&str; 3] = [KEEP_ALIVE, MAX_HOLD, AT_LEAST];

/// What the core's messages call each key ("invalid option maxHold: -1 is negative").
pub const KEEP_ALIVE_OPTION: &str = "option keepAlive";
const MAX_HOLD_OPTION: &str = "option maxHold";
const AT_LEAST_OPTION: &str = "option atLeast";

/// Reads `$options` (argument `position`; omitted = no options). A `TypeError` is thrown
/// at once (`Err`); bad contents come back as `Ok(Err(..))` for the operation's own
/// exception.
pub fn parse(value: Option<&Zval>, position: u32) -> PhpResult<Result<AcquireOptions, Error>> {
    let Some(value) = value.map(Zval::dereference) else {
        return Ok(Ok(AcquireOptions::default()));
    };
    let Some(array) = value.array() else {
        return Err(args::type_error(position, "array", value));
    };
    let mut options = AcquireOptions::default();
    let mut max_hold = None;
    for (key, value) in array.iter() {
        let key = key_text(&key);
        let value = value.dereference();
        let parsed = match key.as_str() {
            KEEP_ALIVE => boolean(KEEP_ALIVE_OPTION, value).map(|on| options.keep_alive = on),
            MAX_HOLD => seconds(MAX_HOLD_OPTION, value).map(|s| max_hold = Some(s)),
            AT_LEAST => seconds(AT_LEAST_OPTION, value).map(|s| options.at_least = s),
            _ => Err(invalid("options", format!("unknown key {key:?} (known: {})", KNOWN.join(", ")))),
        };
        if let Err(e) = parsed {
            return Ok(Err(e));
        }
    }
    Ok(check(options, max_hold))
}

/// The checks that need all keys: ranges, and `maxHold` only with `keepAlive`.
fn check(mut options: AcquireOptions, max_hold: Option<f64>) -> Result<AcquireOptions, Error> {
    limits::duration(AT_LEAST_OPTION, options.at_least)?;
    if let Some(seconds) = max_hold {
        if !options.keep_alive {
            return Err(invalid(MAX_HOLD_OPTION, format!("only applies with {KEEP_ALIVE} => true")));
        }
        limits::whole_seconds(MAX_HOLD_OPTION, seconds)?;
        options.max_hold = Some(seconds);
    }
    Ok(options)
}

fn key_text(key: &ArrayKey<'_>) -> String {
    match key {
        ArrayKey::Long(index) => index.to_string(),
        ArrayKey::String(s) => s.clone(),
        ArrayKey::Str(s) => (*s).to_owned(),
        ArrayKey::ZendString(s) => String::from_utf8_lossy(s.as_bytes()).into_owned(),
    }
}

fn boolean(key: &'static str, value: &Zval) -> Result<bool, Error> {
    value.bool().ok_or_else(|| invalid(key, format!("must be of type bool, {} given", php::type_name(value))))
}

/// Seconds as for timeouts: int, float or numeric string (`true` is not a number).
fn seconds(key: &'static str, value: &Zval) -> Result<f64, Error> {
    let number = if value.is_bool() { None } else { args::number(value) };
    number.ok_or_else(|| invalid(key, format!("must be of type int|float, {} given", php::type_name(value))))
}

fn invalid(what: &'static str, reason: String) -> Error {
    Error::InvalidArgument { what, reason }
}
