//! The bridge between the engine's raw function handlers and plain Rust functions.
//!
//! Methods are registered by hand (`FunctionBuilder` + `Arg`) rather than with the
//! attribute macros, so that parameter names, defaults and the absence of return types
//! match the original PHP package exactly (a user subclass overriding `release()`
//! without a return type must keep compiling). Every handler body is a
//! `fn(&mut ExecuteData) -> PhpResult<Zval>` run through [`run`].

use std::panic::AssertUnwindSafe;

use ext_php_rs::exception::{PhpException, PhpResult};
use ext_php_rs::types::Zval;
use ext_php_rs::zend::{run_handler, ExecuteData};

use crate::php::{self, CallError};

/// The body of a PHP method: its return value, or what to throw.
pub type Body = fn(&mut ExecuteData) -> PhpResult<Zval>;

/// Runs `body` for the engine: a panic becomes a PHP `Error`, an error is thrown, and
/// a bailout absorbed by a call into PHP is re-raised once the body's values are gone.
pub fn run(ex: &mut ExecuteData, retval: &mut Zval, body: Body) {
    run_handler(AssertUnwindSafe(|| {
        match body(ex) {
            Ok(value) => *retval = value,
            // After a bailout the engine is ending the request: nothing to throw into.
            Err(error) if !php::bailout_pending() => error.throw(),
            Err(_) => {}
        }
        php::reraise_bailout();
    }));
}

/// The error to return when the engine already has an exception pending (an
/// `ArgumentCountError`, a `TypeError` raised by [`crate::args`]): throwing it is a
/// no-op then, so the pending one propagates.
pub fn pending() -> PhpException {
    PhpException::from_message("internal error: an exception was expected to be pending".to_owned())
}

/// Lets what a PHP call threw propagate unchanged (or a bailout / `exit()` continue).
pub fn rethrow(error: CallError) -> PhpException {
    match error {
        CallError::Threw(exception) => {
            PhpException::from_message(String::new()).with_object(php::object_zval(exception))
        }
        CallError::Bailout | CallError::Exiting => pending(),
        CallError::Failed(why) => PhpException::from_message(why),
    }
}

/// Defines `extern` handlers that run the given bodies through [`run`].
macro_rules! handlers {
    ($($name:ident => $body:path),* $(,)?) => {
        $(
            ::ext_php_rs::zend_fastcall! {
                extern fn $name(ex: &mut ::ext_php_rs::zend::ExecuteData, retval: &mut ::ext_php_rs::types::Zval) {
                    $crate::handler::run(ex, retval, $body)
                }
            }
        )*
    };
}
pub(crate) use handlers;

/// `null`, the return value of methods without one.
pub fn null() -> Zval {
    Zval::null()
}

pub fn boolean(value: bool) -> Zval {
    let mut z = Zval::new();
    z.set_bool(value);
    z
}

pub fn int(value: i64) -> Zval {
    let mut z = Zval::new();
    z.set_long(value);
    z
}

pub fn double(value: f64) -> Zval {
    let mut z = Zval::new();
    z.set_double(value);
    z
}

/// An unsigned number from the database (token, connection id) as a PHP int (they never
/// reach `i64::MAX`).
pub fn php_int(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}
