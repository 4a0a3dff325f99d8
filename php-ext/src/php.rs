//! Calls from Rust into PHP code (PDO methods, user callables, constructors).
//!
//! Three engine behaviours shape every call made from here:
//! - A PHP exception does not unwind Rust: the call returns and the exception waits in
//!   the executor globals, where it silently turns every further call into a no-op.
//!   So each call takes a pending exception off the engine and hands it back as
//!   [`CallError::Threw`], for the caller to keep as a cause or to rethrow.
//! - A fatal error "bails out" with a `longjmp` that would skip the destructors of the
//!   Rust frames in between (a `RefCell` borrow of the extension's state would stay
//!   borrowed forever). Each call therefore runs under `zend_try`; a bailout is
//!   remembered and re-raised once the handler has unwound (see [`reraise_bailout`]).
//! - Warnings raised inside a call (mysqlnd's "Error while sending packet" when a
//!   session was killed) would reach the user's error handler, which may throw.
//!   Quiet calls mask non-fatal errors like PHP's `@` operator does.

use std::cell::Cell;
use std::ffi::c_char;
use std::panic::AssertUnwindSafe;

use ext_php_rs::boxed::ZBox;
use ext_php_rs::convert::{IntoZval, IntoZvalDyn};
use ext_php_rs::ffi::{zend_read_property, E_FATAL_ERRORS};
use ext_php_rs::types::{PropertyQuery, ZendCallable, ZendObject, Zval};
use ext_php_rs::zend::{bailout, ce, try_catch, CatchError, ClassEntry, ExecutorGlobals};

thread_local! {
    /// Set when the engine bailed out inside one of our calls; cleared when re-raised.
    static BAILED_OUT: Cell<bool> = const { Cell::new(false) };
}

/// Why a call into PHP did not return a value.
#[derive(Debug)]
pub enum CallError {
    /// The PHP code threw; the exception was taken off the engine.
    Threw(ZBox<ZendObject>),
    /// The engine bailed out (fatal error); it is re-raised when the handler returns.
    Bailout,
    /// The called code ran `exit()`: the engine is unwinding the request with an
    /// internal non-`Throwable` object, left pending so that it keeps unwinding.
    Exiting,
    /// The call could not be made at all (no such method, not callable, ...).
    Failed(String),
}

impl CallError {
    /// A one-line description, for causes that are not PHP exceptions.
    pub fn describe(&self) -> String {
        match self {
            CallError::Threw(e) => exception_message(e),
            CallError::Bailout => "the PHP engine bailed out (fatal error) during the call".to_owned(),
            CallError::Exiting => "the script exited during the call".to_owned(),
            CallError::Failed(why) => why.clone(),
        }
    }
}

/// Whether PHP warnings and notices raised by the call reach the user.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Noise {
    /// As with `@`: only fatal errors are reported.
    Quiet,
    /// The user sees what the called code reports (user callables, `new PDO`).
    Audible,
}

/// `$object->$method(...$args)`.
pub fn call_method(object: &Zval, method: &str, args: Vec<&dyn IntoZvalDyn>, noise: Noise) -> Result<Zval, CallError> {
    guarded(noise, || object.try_call_method(method, args))
}

/// `$callable(...$args)`.
pub fn call(callable: &Zval, args: Vec<&dyn IntoZvalDyn>) -> Result<Zval, CallError> {
    let callable = ZendCallable::new(callable).map_err(|e| CallError::Failed(e.to_string()))?;
    guarded(Noise::Audible, || callable.try_call(args))
}

/// `$name(...$args)` of a function.
pub fn call_function(name: &str, args: Vec<&dyn IntoZvalDyn>, noise: Noise) -> Result<Zval, CallError> {
    let function = ZendCallable::try_from_name(name).map_err(|e| CallError::Failed(format!("{name}(): {e}")))?;
    guarded(noise, || function.try_call(args))
}

/// `$object->$name` of a public property; what reading it throws (a closed mysqli
/// throws `Error`) comes back as [`CallError::Threw`].
pub fn property(object: &Zval, name: &str) -> Result<Zval, CallError> {
    let object = object.object().ok_or_else(|| CallError::Failed(format!("${name} of a value that is no object")))?;
    guarded(Noise::Quiet, || Ok(read_property(object, object.get_class_entry(), name).unwrap_or_default()))
}

/// `isset($object->$name)`, which never throws (a closed mysqli answers `false` for
/// every property instead).
pub fn property_isset(object: &Zval, name: &str) -> bool {
    object.object().is_some_and(|o| o.has_property(name, PropertyQuery::Isset).unwrap_or(false))
}

/// `new $class(...$args)`: the object's file, line and trace are those of the PHP code
/// that called the running handler, as for any exception PHP itself creates there.
pub fn instantiate(class: &ClassEntry, args: Vec<&dyn IntoZvalDyn>) -> Result<Zval, CallError> {
    let object = class.new().into_zval(false).map_err(|e| CallError::Failed(e.to_string()))?;
    if class.constructor.is_null() {
        return Ok(object);
    }
    call_method(&object, "__construct", args, Noise::Audible)?;
    Ok(object)
}

/// A PHP string of `value` exactly as `"$value"` would print it (floats use the
/// `precision` setting: `2.5`, `5`, `1.0E+25`).
pub fn to_php_string(value: &Zval) -> String {
    if let Some(s) = value.str() {
        return s.to_owned();
    }
    let converted = ZendCallable::try_from_name("strval")
        .ok()
        .and_then(|strval| guarded(Noise::Quiet, || strval.try_call(vec![value])).ok())
        .and_then(|s| s.string());
    converted.or_else(|| value.coerce_to_string()).unwrap_or_default()
}

/// PHP's name of the value's type in engine messages: `int`, `string`, `array`,
/// `null`, or the object's class.
pub fn type_name(value: &Zval) -> String {
    let value = value.dereference();
    if let Some(object) = value.object() {
        return object.get_class_name().unwrap_or_else(|_| "object".to_owned());
    }
    let name = if value.is_null() {
        "null"
    } else if value.is_bool() {
        "bool"
    } else if value.is_long() {
        "int"
    } else if value.is_double() {
        "float"
    } else if value.is_string() {
        "string"
    } else if value.is_array() {
        "array"
    } else if value.is_resource() {
        "resource"
    } else {
        "mixed"
    };
    name.to_owned()
}

/// `get_class($e) . ': ' . $e->getMessage()` for an exception object.
pub fn exception_message(exception: &ZendObject) -> String {
    let class = exception.get_class_name().unwrap_or_else(|_| "Exception".to_owned());
    let message = guarded(Noise::Quiet, || exception.try_call_method("getMessage", vec![]))
        .ok()
        .and_then(|m| m.string())
        .unwrap_or_default();
    format!("{class}: {message}")
}

/// Reads `$object->$name` as code of class `scope` would (so protected properties
/// declared by `scope` are visible); `None` when it is unset.
pub fn read_property(object: &ZendObject, scope: &ClassEntry, name: &str) -> Option<Zval> {
    let mut rv = Zval::new();
    // SAFETY: both pointers come from live references; `silent` avoids a warning for an
    // undefined property, and the returned pointer is read before `rv` goes away.
    let value = unsafe {
        zend_read_property(
            std::ptr::from_ref(scope).cast_mut(),
            std::ptr::from_ref(object).cast_mut(),
            name.as_ptr().cast(),
            name.len(),
            true,
            &raw mut rv,
        )
        .as_ref()
    }?;
    Some(value.dereference().shallow_clone())
}

/// Writes `$object->$name = $value` as code of class `scope` would.
pub fn write_property(object: &mut ZendObject, scope: &ClassEntry, name: &str, value: &Zval) {
    let mut value = value.shallow_clone();
    // SAFETY: live references; the engine copies the value (adding its own reference),
    // and `value`'s reference is released when it drops.
    unsafe {
        zend_update_property(
            std::ptr::from_ref(scope).cast_mut(),
            object,
            name.as_ptr().cast(),
            name.len(),
            &raw mut value,
        );
    }
}

unsafe extern "C" {
    // Zend API not covered by ext-php-rs' bindings (exported by every PHP 8 binary).
    fn zend_update_property(
        scope: *mut ClassEntry,
        object: *mut ZendObject,
        name: *const c_char,
        name_length: usize,
        value: *mut Zval,
    );
}

/// Marks an object as already destructed and freed, so the engine never runs its
/// destructor or free handler: for a PDO, never closes its connection; for a prepared
/// PDOStatement, never deallocates it on the server. Used in a forked child on the
/// parent's objects, whose socket it shares: closing it there would end the parent's
/// session and every lock on it. The object's memory is simply not reclaimed.
pub fn never_free(value: &mut Zval) {
    const IS_OBJ_DESTRUCTOR_CALLED: u32 = 1 << 8;
    const IS_OBJ_FREE_CALLED: u32 = 1 << 9;
    if let Some(object) = value.object_mut() {
        // SAFETY: `type_info` is the only field of the union; the flag bits are the
        // engine's GC_ADD_FLAGS(obj, IS_OBJ_DESTRUCTOR_CALLED | IS_OBJ_FREE_CALLED).
        unsafe { object.gc.u.type_info |= IS_OBJ_DESTRUCTOR_CALLED | IS_OBJ_FREE_CALLED };
    }
}

/// Re-raises a bailout that one of our calls absorbed. Called by the handler wrapper
/// once every Rust value of the handler is dropped.
pub fn reraise_bailout() {
    if BAILED_OUT.replace(false) {
        // SAFETY: called from the outermost frame of a handler, inside the `zend_try`
        // of ext-php-rs' `run_handler`; nothing of ours is left to drop.
        unsafe { bailout() }
    }
}

/// Whether a bailout is waiting to be re-raised.
pub fn bailout_pending() -> bool {
    BAILED_OUT.get()
}

/// Forgets an absorbed bailout: at request shutdown the engine has already handled it.
pub fn clear_bailout() {
    BAILED_OUT.set(false);
}

fn guarded<F>(noise: Noise, f: F) -> Result<Zval, CallError>
where
    F: FnOnce() -> ext_php_rs::error::Result<Zval>,
{
    if BAILED_OUT.get() {
        // After a fatal error the engine is unwinding the request: run no more PHP.
        return Err(CallError::Bailout);
    }
    if ExecutorGlobals::has_exception() {
        return Err(CallError::Failed("a PHP exception is pending".to_owned()));
    }
    let restore = (noise == Noise::Quiet).then(silence);
    let result = try_catch(AssertUnwindSafe(f));
    if let Some(level) = restore {
        ExecutorGlobals::get_mut().error_reporting = level;
    }
    match result {
        Err(CatchError::Bailout) => {
            BAILED_OUT.set(true);
            Err(CallError::Bailout)
        }
        Err(other) => Err(CallError::Failed(other.to_string())),
        Ok(value) => {
            let pending = ExecutorGlobals::get().exception().map(|e| e.instance_of(ce::throwable()));
            match pending {
                None => value.map_err(|e| CallError::Failed(e.to_string())),
                Some(false) => Err(CallError::Exiting),
                Some(true) => {
                    ExecutorGlobals::take_exception().map_or(Err(CallError::Exiting), |e| Err(CallError::Threw(e)))
                }
            }
        }
    }
}

/// An object as a zval owning the reference the box held.
pub fn object_zval(object: ZBox<ZendObject>) -> Zval {
    object.into_zval(false).unwrap_or_default()
}

/// Masks non-fatal errors as `@` does; returns the level to restore.
fn silence() -> i32 {
    let mut globals = ExecutorGlobals::get_mut();
    let level = globals.error_reporting;
    #[allow(clippy::cast_possible_wrap)] // 4437 fits
    let fatal = E_FATAL_ERRORS as i32;
    globals.error_reporting = level & fatal;
    level
}
