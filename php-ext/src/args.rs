//! Reading and converting handler arguments.
//!
//! The engine does not check the arguments of internal functions against their
//! declared types, so every conversion happens here, with PHP's own wording for
//! `TypeError`s (`SharedLock::lock(): Argument #2 ($timeout) must be of type
//! int|float, array given`). Numbers follow PHP's loose rules for numeric strings,
//! since the original package passed them straight to SQL: `"5"` and `" 2.5"` are
//! seconds, `"five"` is a `TypeError`.

use std::ffi::{c_char, CString};

use ext_php_rs::args::Arg;
use ext_php_rs::exception::{PhpException, PhpResult};
use ext_php_rs::flags::DataType;
use ext_php_rs::types::Zval;
use ext_php_rs::zend::{ce, ExecuteData};
use mysqllock_core::Error;

use crate::handler;
use crate::php;

/// The arguments of one call, by position; `None` for an omitted optional one.
pub struct Args(Vec<Option<Zval>>);

impl Args {
    /// Reads the call's arguments; `names` are the registered parameter names and the
    /// first `required` are mandatory (an `ArgumentCountError` otherwise).
    pub fn fetch(ex: &mut ExecuteData, names: &[&str], required: usize) -> PhpResult<Args> {
        let mut specs: Vec<Arg<'_>> = names.iter().map(|n| Arg::new(*n, DataType::Mixed)).collect();
        let mut parser = ex.parser();
        for spec in &mut specs {
            parser = parser.arg(spec);
        }
        if parser.required_args(required).parse().is_err() {
            return Err(handler::pending());
        }
        Ok(Args(specs.iter_mut().map(|spec| spec.zval().map(|z| z.dereference().shallow_clone())).collect()))
    }

    /// The argument at `index` (0-based), `None` if it was not passed.
    pub fn get(&self, index: usize) -> Option<&Zval> {
        self.0.get(index).and_then(Option::as_ref)
    }

    /// The argument at `index`, or `null` if it was not passed.
    pub fn value(&self, index: usize) -> Zval {
        self.get(index).map_or_else(Zval::null, Zval::shallow_clone)
    }
}

/// `$this` of a method call.
pub fn this(ex: &mut ExecuteData) -> PhpResult<Zval> {
    let object = ex
        .get_self()
        .ok_or_else(|| PhpException::new("this method must be called on an object".to_owned(), 0, ce::error()))?;
    let mut this = Zval::new();
    this.set_object(object);
    Ok(this)
}

/// What a lock name argument turned out to be.
pub enum Name {
    Valid(String),
    /// A string that is not UTF-8: refused like any other unusable name (the core's
    /// checks need text, and a lossy conversion could let two names share a row).
    Invalid {
        shown: String,
        error: Error,
    },
}

/// A lock name: a string, or an int/float/`Stringable` converted as `(string)` would.
pub fn lock_name(value: &Zval, position: u32) -> PhpResult<Name> {
    let value = value.dereference();
    if let Some(bytes) = value.zend_str().map(|s| s.as_bytes()) {
        return Ok(match std::str::from_utf8(bytes) {
            Ok(s) => Name::Valid(s.to_owned()),
            Err(_) => Name::Invalid {
                shown: String::from_utf8_lossy(bytes).into_owned(),
                error: Error::InvalidArgument { what: "lock name", reason: "it is not valid UTF-8".to_owned() },
            },
        });
    }
    let stringable = value.object().is_some_and(|o| o.instance_of(ce::stringable()));
    if value.is_long() || value.is_double() || stringable {
        return Ok(Name::Valid(php::to_php_string(value)));
    }
    Err(type_error(position, "string", value))
}

/// A string argument (table names, connection parameters).
pub fn string(value: &Zval, position: u32) -> PhpResult<String> {
    match lock_name(value, position)? {
        Name::Valid(s) => Ok(s),
        Name::Invalid { .. } => Err(value_error(position, "must be valid UTF-8")),
    }
}

/// A string argument that may be `null` (or omitted).
pub fn optional_string(value: Option<&Zval>, position: u32) -> PhpResult<Option<String>> {
    match value.map(Zval::dereference) {
        None => Ok(None),
        Some(v) if v.is_null() => Ok(None),
        Some(v) => string(v, position).map(Some),
    }
}

/// Seconds (timeouts, TTLs): int, float or numeric string. Range checks (negative,
/// NaN, infinite) are the core's, so they fail as the operation's own exception.
pub fn seconds(value: &Zval, position: u32) -> PhpResult<f64> {
    number(value).ok_or_else(|| type_error(position, "int|float", value))
}

/// An int, float or numeric string as a float; `None` for anything else.
pub fn number(value: &Zval) -> Option<f64> {
    let value = value.dereference();
    if let Some(l) = value.long() {
        #[allow(clippy::cast_precision_loss)] // as PHP converts int to float
        return Some(l as f64);
    }
    if value.is_double() {
        return value.double();
    }
    value.str().and_then(numeric_string)
}

/// PHP 8's numeric strings: optional surrounding whitespace, a sign, digits with an
/// optional fraction and exponent. No hex, no `INF`/`NAN` words.
fn numeric_string(s: &str) -> Option<f64> {
    let t = s.trim_matches(|c| matches!(c, ' ' | '\t' | '\n' | '\r' | '\u{0b}' | '\u{0c}'));
    let body = t.strip_prefix(['+', '-']).unwrap_or(t);
    let valid = body.bytes().any(|b| b.is_ascii_digit())
        && body.bytes().all(|b| b.is_ascii_digit() || matches!(b, b'.' | b'e' | b'E' | b'+' | b'-'));
    if !valid {
        return None;
    }
    t.parse::<f64>().ok()
}

/// Throws PHP's own `TypeError` for argument `position` (1-based) and returns the
/// "already pending" marker.
pub fn type_error(position: u32, expected: &str, given: &Zval) -> PhpException {
    let message = format!("must be of type {expected}, {} given", php::type_name(given));
    engine_argument_error(position, &message, zend_argument_type_error);
    handler::pending()
}

/// Throws PHP's own `ValueError` for argument `position` (1-based).
pub fn value_error(position: u32, message: &str) -> PhpException {
    engine_argument_error(position, message, zend_argument_value_error);
    handler::pending()
}

type ArgumentError = unsafe extern "C" fn(arg_num: u32, format: *const c_char, ...);

/// The engine formats "Class::method(): Argument #N ($name) ..." from the running
/// function and its registered parameter names.
fn engine_argument_error(position: u32, message: &str, raise: ArgumentError) {
    let message = CString::new(message.replace('\0', "\\0")).unwrap_or_default();
    // SAFETY: called while our internal function is the running frame, as the engine
    // expects; "%s" with one valid C string.
    unsafe { raise(position, c"%s".as_ptr(), message.as_ptr()) };
}

unsafe extern "C" {
    // Zend API (zend_API.h) not covered by ext-php-rs' bindings.
    fn zend_argument_type_error(arg_num: u32, format: *const c_char, ...);
    fn zend_argument_value_error(arg_num: u32, format: *const c_char, ...);
}
