//! The exception classes of the original package, and the one mapping from core errors
//! to them.
//!
//! The classes are registered with `ClassBuilder` and hand-written constructors rather
//! than `#[php_class]`: they must behave exactly like the PHP-defined originals. Users
//! `new` them with the original arguments, subclass them, catch them by any parent,
//! and see the file, line, trace and `getPrevious()` PHP would give them. Objects are
//! created through the engine's `Exception` object handler, so file, line and trace are
//! those of the PHP code that called the extension.

use ext_php_rs::builders::{ClassBuilder, ClassProperty, FunctionBuilder};
use ext_php_rs::class::ClassEntryInfo;
use ext_php_rs::exception::{PhpException, PhpResult};
use ext_php_rs::flags::{DataType, MethodFlags, PropertyFlags};
use ext_php_rs::types::Zval;
use ext_php_rs::zend::{ce, ClassEntry, ExecuteData};
use mysqllock_core::Error;

use crate::args::{self, Args};
use crate::driver;
use crate::handler::{self, handlers, int};
use crate::php;
use crate::registry::{parent, runtime_exception, Class, NS};

/// What the failing call was doing; decides the exception class and message.
#[derive(Clone, Copy)]
pub enum Op<'a> {
    /// `lock()` and friends; `timeout` is the caller's value, for the message.
    Acquire {
        name: &'a str,
        timeout: &'a Zval,
    },
    Release {
        name: &'a str,
    },
    /// `assertTTL()`; `min` is the caller's value, for the message.
    AssertTtl {
        name: &'a str,
        min: &'a Zval,
    },
    /// `getRemainingTTL()` of a handle.
    RemainingTtl {
        name: &'a str,
    },
    /// `renew()`; `ttl` is the caller's value, for the message.
    Renew {
        name: &'a str,
        ttl: &'a Zval,
    },
    /// `getToken()` of a handle.
    Token {
        name: &'a str,
    },
    /// `isLocked()` / `holder()`.
    Inspect {
        name: &'a str,
    },
    Repair,
    /// Table, quote style and connection settings.
    Configure,
}

/// The single translation of a core error into the PHP exception the original package
/// would throw for `op`. Expected outcomes (held elsewhere, lost, too little TTL) keep
/// the original message; other failures append the cause. `getPrevious()` carries a
/// `MySqlLock\DeadlockException` when the server refused the wait as a deadlock (with the
/// user's `PDOException` behind it, if any), else the user's `PDOException` when the
/// cause is one, else the core's message and its `source()` chain (the server's text,
/// hints, never a password): as an `InvalidArgumentException` for bad input, a
/// `RuntimeException` otherwise.
pub fn to_php(op: Op<'_>, error: &Error) -> PhpException {
    let detail = error.chain();
    let cause_class = if error.is_invalid_argument() { "InvalidArgumentException" } else { "RuntimeException" };
    let previous = || {
        if error.is_deadlock() {
            let code = driver::error_code(error);
            return own_exception(Class::Deadlock, &detail, code, driver::cause_of(error));
        }
        driver::cause_of(error).or_else(|| cause(error, cause_class, &detail))
    };
    let built = match op {
        Op::Acquire { name, timeout } => match error {
            Error::Timeout { .. } => lock_exception(Class::Timeout, name, Some(timeout), None, None),
            Error::AlreadyHeld { .. } => {
                let message = format!("{}: this process already holds it", timeout_message(name, timeout));
                lock_exception(Class::Timeout, name, Some(timeout), Some(&message), previous())
            }
            _ => {
                let message = format!("Acquiring lock \"{name}\" failed: {detail}");
                lock_exception(Class::Acquire, name, None, Some(&message), previous())
            }
        },
        Op::Release { name } => {
            let message = (!error.is_not_held()).then(|| format!("Releasing lock \"{name}\" failed: {detail}"));
            lock_exception(Class::Release, name, None, message.as_deref(), previous())
        }
        Op::AssertTtl { name, min } => {
            let expected = error.is_not_held() || error.is_ttl_too_short();
            let message = (!expected).then(|| format!("{}: {detail}", ttl_message(name, min)));
            lock_exception(Class::RemainingTtl, name, Some(min), message.as_deref(), previous())
        }
        Op::RemainingTtl { name } => {
            let message = format!("Lock \"{name}\" has no remaining TTL: {detail}");
            lock_exception(Class::RemainingTtl, name, Some(&int(0)), Some(&message), previous())
        }
        Op::Renew { name, ttl } => {
            let message = format!("Renewing lock \"{name}\" for {} seconds failed: {detail}", php::to_php_string(ttl));
            lock_exception(Class::RemainingTtl, name, Some(ttl), Some(&message), previous())
        }
        Op::Token { name } => {
            let message = format!("Lock \"{name}\" has no fencing token: {detail}");
            if error.is_not_held() {
                lock_exception(Class::RemainingTtl, name, Some(&int(0)), Some(&message), previous())
            } else {
                lock_exception(Class::SharedLockException, name, None, Some(&message), previous())
            }
        }
        Op::Inspect { name } => {
            let message = format!("Inspecting lock \"{name}\" failed: {detail}");
            lock_exception(Class::SharedLockException, name, None, Some(&message), previous())
        }
        Op::Repair => Class::TableRepair.entry().and_then(|class| {
            // A repair that ran and did not help says why in the server's own words.
            let why = match error {
                Error::RepairFailed { reason, .. } => reason.clone(),
                _ => detail.clone(),
            };
            let message = format!("Repairing the lock table failed: {why}");
            php::instantiate(class, vec![&message, &0i64, &previous().unwrap_or_default()]).ok()
        }),
        Op::Configure if error.is_invalid_argument() => spl("InvalidArgumentException", &detail, None),
        Op::Configure => spl("RuntimeException", &detail, driver::cause_of(error)),
    };
    match built {
        Some(object) => PhpException::from_message(detail).with_object(object),
        // Only if our classes failed to register: still report the error.
        None => PhpException::from_message(detail),
    }
}

/// The `getPrevious()` of a lock exception whose cause is no PDOException: a
/// `ClusterNodeException` when the server is a cluster node where GET_LOCK is refused
/// (so users can catch that case by class), else an SPL exception of `class`.
fn cause(error: &Error, class: &str, detail: &str) -> Option<Zval> {
    if error.is_cluster_node() {
        if let Some(node) = cluster_node(detail) {
            return Some(node);
        }
    }
    spl(class, detail, None)
}

/// `new ClusterNodeException($detail)`: why GET_LOCK-based locks are refused here.
pub fn cluster_node(detail: &str) -> Option<Zval> {
    own_exception(Class::ClusterNode, detail, 0, None)
}

/// `new $class($message, $code, $previous)` of one of our classes that keep
/// `Exception`'s constructor.
pub fn own_exception(class: Class, message: &str, code: i64, previous: Option<Zval>) -> Option<Zval> {
    let entry = class.entry()?;
    php::instantiate(entry, vec![&message, &code, &previous.unwrap_or_default()]).ok()
}

/// The single translation of a core error for `Nene\Kit\DistributedLock::$method()`:
/// bad input (rejected before anything was written) becomes `\InvalidArgumentException`;
/// every other failure a `Nene\Kit\DistributedLockException` whose code is the driver's
/// error number and whose `getPrevious()` is the `PDOException` behind it, if any. A
/// missing table names the DDL (and `mysqllock init --lease` where it applies).
pub fn lease_to_php(method: &str, error: &Error) -> PhpException {
    let detail = match error {
        Error::MissingTable { table, create_sql, init: Some(init), .. } => format!(
            "the lease table {table} does not exist: run `{init}`, call createTable(), or create it with: {create_sql}"
        ),
        Error::MissingTable { table, create_sql, .. } => {
            format!("the lease table {table} does not exist: call createTable() or create it with: {create_sql}")
        }
        _ => error.chain(),
    };
    let message = format!("DistributedLock::{method}(): {detail}");
    if error.is_invalid_argument() {
        return spl_exception("InvalidArgumentException", &message);
    }
    let code = driver::error_code(error);
    lease_exception(&message, code, driver::cause_of(error))
}

/// `new \Nene\Kit\DistributedLockException($message, $code, $previous)`.
pub fn lease_exception(message: &str, code: i64, previous: Option<Zval>) -> PhpException {
    match own_exception(Class::DistributedLockException, message, code, previous) {
        Some(object) => PhpException::from_message(message.to_owned()).with_object(object),
        None => PhpException::from_message(message.to_owned()),
    }
}

/// `new \{class}($message)` of an SPL exception class, as a `PhpException`.
pub fn spl_exception(class: &str, message: &str) -> PhpException {
    match spl(class, message, None) {
        Some(object) => PhpException::from_message(message.to_owned()).with_object(object),
        None => PhpException::from_message(message.to_owned()),
    }
}

/// `getToken()` on a table without the `token` column: a `SharedLockException` that
/// says how to add it.
pub fn no_token(name: &str, table: &str) -> PhpException {
    let message = format!(
        "Lock \"{name}\" has no fencing token: the lock table {table} has no token column; \
         run `mysqllock init --upgrade` on that table to add it"
    );
    match lock_exception(Class::SharedLockException, name, None, Some(&message), None) {
        Some(object) => PhpException::from_message(message).with_object(object),
        None => PhpException::from_message(message),
    }
}

/// `new \{class}($message, 0, $previous)` of an SPL exception class.
fn spl(class: &str, message: &str, previous: Option<Zval>) -> Option<Zval> {
    let class = ClassEntry::try_find(class)?;
    php::instantiate(class, vec![&message, &0i64, &previous.unwrap_or_default()]).ok()
}

/// `new $class($name[, $value], $message, 0, $previous)`; a `None` message gets the
/// class's default.
fn lock_exception(
    class: Class,
    name: &str,
    value: Option<&Zval>,
    message: Option<&str>,
    previous: Option<Zval>,
) -> Option<Zval> {
    let entry = class.entry()?;
    let message = message.unwrap_or("");
    let previous = previous.unwrap_or_default();
    let args: Vec<&dyn ext_php_rs::convert::IntoZvalDyn> = match value {
        Some(value) => vec![&name, value, &message, &0i64, &previous],
        None => vec![&name, &message, &0i64, &previous],
    };
    php::instantiate(entry, args).ok()
}

fn timeout_message(name: &str, timeout: &Zval) -> String {
    format!("Acquiring lock \"{name}\" timed out after {} seconds", php::to_php_string(timeout))
}

fn ttl_message(name: &str, ttl: &Zval) -> String {
    format!("Lock \"{name}\" is not to live for {} seconds anymore", php::to_php_string(ttl))
}

// ---------------------------------------------------------------------------------
// Registration

/// The protected property each class adds, read by its getter.
fn own_property(class: Class) -> Option<&'static str> {
    match class {
        Class::SharedLockException => Some("lockName"),
        Class::Timeout => Some("timeout"),
        Class::RemainingTtl => Some("ttl"),
        _ => None,
    }
}

/// Registers the exception classes (parents first) and the alias of
/// `TableRepairException` in the package's root namespace. Runs at module startup.
pub fn register() -> ext_php_rs::error::Result<()> {
    let exception: ClassEntryInfo = (ce::exception, "Exception");
    let classes: [(Class, ClassEntryInfo); 6] = [
        (Class::SharedLockException, exception),
        (Class::Acquire, (parent::<{ Class::SharedLockException as usize }>, "SharedLockException")),
        (Class::Timeout, (parent::<{ Class::Acquire as usize }>, "SharedLockAcquireException")),
        (Class::Release, (parent::<{ Class::SharedLockException as usize }>, "SharedLockException")),
        (Class::RemainingTtl, (parent::<{ Class::SharedLockException as usize }>, "SharedLockException")),
        (Class::TableRepair, exception),
    ];
    for (class, parent) in classes {
        let mut builder = ClassBuilder::new(class.name()).extends(parent);
        if let Some(property) = own_property(class) {
            builder = builder.property(protected_property(property));
        }
        for method in methods(class) {
            builder = builder.method(method, MethodFlags::Public);
        }
        class.register(builder)?;
    }
    if let Some(entry) = Class::TableRepair.entry() {
        alias(&format!("{NS}\\TableRepairException"), entry);
    }
    // Exception's own constructor ($message, $code, $previous) serves both.
    let runtime: ClassEntryInfo = (runtime_exception, "RuntimeException");
    for class in [Class::ClusterNode, Class::DistributedLockException] {
        class.register(ClassBuilder::new(class.name()).extends(runtime))?;
    }
    Ok(())
}

fn methods(class: Class) -> Vec<FunctionBuilder<'static>> {
    let arg = |name: &str| ext_php_rs::args::Arg::new(name, DataType::Mixed);
    let constructor = |value: Option<&str>| {
        let mut f = FunctionBuilder::new("__construct", construct).arg(arg("lockName"));
        if let Some(value) = value {
            f = f.arg(arg(value));
        }
        f.not_required()
            .arg(arg("message").default("''"))
            .arg(arg("code").default("0"))
            .arg(ext_php_rs::args::Arg::new("previous", DataType::object("Throwable")).allow_null().default("null"))
    };
    match class {
        Class::SharedLockException => vec![constructor(None), FunctionBuilder::new("getLockName", get_lock_name)],
        Class::Acquire | Class::Release => vec![constructor(None)],
        Class::Timeout => vec![constructor(Some("timeout")), FunctionBuilder::new("getTimeout", get_timeout)],
        Class::RemainingTtl => vec![constructor(Some("ttl")), FunctionBuilder::new("getTTL", get_ttl)],
        _ => vec![],
    }
}

fn alias(name: &str, class: &ClassEntry) {
    // SAFETY: module startup; the engine copies (and lowercases) the name.
    unsafe {
        zend_register_class_alias_ex(name.as_ptr().cast(), name.len(), std::ptr::from_ref(class).cast_mut(), true);
    }
}

unsafe extern "C" {
    // Zend API (zend_API.h) not covered by ext-php-rs' bindings.
    fn zend_register_class_alias_ex(
        name: *const std::ffi::c_char,
        name_len: usize,
        ce: *mut ClassEntry,
        persistent: bool,
    ) -> i32;
}

handlers! {
    construct => construct_body,
    get_lock_name => get_lock_name_body,
    get_timeout => get_timeout_body,
    get_ttl => get_ttl_body,
}

/// The class whose method is running (not `$this`'s class: a user subclass calling
/// `parent::__construct()` must get the parent's default message).
fn running_class(ex: &ExecuteData) -> Option<Class> {
    let function = ex.function()?;
    // SAFETY: `common` is valid for every kind of zend_function.
    let scope = unsafe { function.common.scope.as_ref() }?;
    Class::of(scope)
}

/// `__construct($lockName[, $timeout|$ttl], $message = '', $code = 0, ?Throwable $previous = null)`
fn construct_body(ex: &mut ExecuteData) -> PhpResult<Zval> {
    let class = running_class(ex).unwrap_or(Class::SharedLockException);
    let value_name = own_property(class).filter(|_| class != Class::SharedLockException);
    let mut this = args::this(ex)?;
    let names: &[&str] = match value_name {
        Some(v) => &["lockName", v, "message", "code", "previous"],
        None => &["lockName", "message", "code", "previous"],
    };
    let required = names.len() - 3;
    let args = Args::fetch(ex, names, required)?;
    let lock_name = args.value(0);
    let value = value_name.map(|_| args.value(1));

    let message = args.value(required);
    let message = if message.is_null() || message.str() == Some("") {
        let mut default = Zval::new();
        default.set_string(&default_message(class, &lock_name, value.as_ref()), false)?;
        default
    } else {
        message
    };
    let code = args.get(required + 1).map_or_else(|| int(0), Zval::shallow_clone);
    let previous = args.value(required + 2);

    let base = Class::SharedLockException.entry().ok_or_else(handler::pending)?;
    let object = this.object_mut().ok_or_else(handler::pending)?;
    php::write_property(object, base, "lockName", &lock_name);
    if let (Some(name), Some(value), Some(scope)) = (value_name, value.as_ref(), class.entry()) {
        php::write_property(object, scope, name, value);
    }
    exception_constructor(object, [message, code, previous])?;
    Ok(handler::null())
}

/// `parent::__construct($message, $code, $previous)`, i.e. `Exception`'s own
/// constructor (not a user override), which validates and stores the three.
fn exception_constructor(object: &mut ext_php_rs::types::ZendObject, mut params: [Zval; 3]) -> PhpResult<()> {
    let exception = ce::exception();
    let mut retval = Zval::new();
    // SAFETY: `Exception::__construct` exists for the life of the process; `object`
    // is live; the engine copies the three parameters into its own frame.
    unsafe {
        ext_php_rs::ffi::zend_call_known_function(
            exception.constructor,
            object,
            object.ce,
            &raw mut retval,
            3,
            params.as_mut_ptr().cast(),
            std::ptr::null_mut(),
        );
    }
    if ext_php_rs::zend::ExecutorGlobals::has_exception() {
        return Err(handler::pending());
    }
    Ok(())
}

fn default_message(class: Class, lock_name: &Zval, value: Option<&Zval>) -> String {
    let name = php::to_php_string(lock_name);
    let value = value.map(php::to_php_string).unwrap_or_default();
    match class {
        Class::Acquire => format!("Acquiring lock \"{name}\" failed"),
        Class::Timeout => format!("Acquiring lock \"{name}\" timed out after {value} seconds"),
        Class::Release => format!("Releasing lock \"{name}\" failed"),
        Class::RemainingTtl => format!("Lock \"{name}\" is not to live for {value} seconds anymore"),
        _ => String::new(),
    }
}

fn getter(ex: &mut ExecuteData, class: Class, property: &str) -> PhpResult<Zval> {
    let this = args::this(ex)?;
    Args::fetch(ex, &[], 0)?;
    let (Some(object), Some(scope)) = (this.object(), class.entry()) else {
        return Err(handler::pending());
    };
    Ok(php::read_property(object, scope, property).unwrap_or_default())
}

fn get_lock_name_body(ex: &mut ExecuteData) -> PhpResult<Zval> {
    getter(ex, Class::SharedLockException, "lockName")
}

fn get_timeout_body(ex: &mut ExecuteData) -> PhpResult<Zval> {
    getter(ex, Class::Timeout, "timeout")
}

fn get_ttl_body(ex: &mut ExecuteData) -> PhpResult<Zval> {
    getter(ex, Class::RemainingTtl, "ttl")
}

/// An untyped protected property without default, as the original classes declare
/// theirs (`$lockName`, `$timeout`, `$ttl`).
pub(crate) fn protected_property(name: &str) -> ClassProperty {
    ClassProperty {
        name: name.to_owned(),
        flags: PropertyFlags::Protected,
        default: None,
        docs: &[],
        ty: None,
        nullable: false,
        readonly: false,
        default_stub: None,
    }
}
