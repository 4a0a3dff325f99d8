//! The exceptions of the extension's own namespace `MySqlLock\`, and the one mapping from
//! core errors to them (for `MySqlLock\SessionLock`).
//!
//! `LockException extends \RuntimeException` is the base of every failure except bad
//! input, which is PHP's own `\InvalidArgumentException`. Each outcome a caller branches
//! on has its class: `LockTimeoutException`, `NotHeldException`, `AlreadyHeldException`,
//! `DeadlockException`, `ConnectionException`. They keep `Exception`'s constructor
//! (`$message, $code, $previous`), so users can `new` and subclass them; the code is the
//! server's error number where there is one, `getPrevious()` the driver's exception
//! (`PDOException`, `mysqli_sql_exception`) or, on a cluster node where GET_LOCK is
//! refused, the `ClusterNodeException` that `SharedLock` uses too.

use ext_php_rs::builders::ClassBuilder;
use ext_php_rs::class::ClassEntryInfo;
use ext_php_rs::exception::PhpException;
use mysqllock_core::Error;

use crate::driver;
use crate::exceptions::{cluster_node, own_exception, spl_exception};
use crate::registry::{parent, runtime_exception, Class};

/// The subclasses of `LockException`.
const KINDS: [Class; 5] =
    [Class::LockTimeout, Class::NotHeld, Class::AlreadyHeld, Class::Deadlock, Class::ConnectionException];

/// Registers the classes (the base first); module startup only.
pub fn register() -> ext_php_rs::error::Result<()> {
    let runtime: ClassEntryInfo = (runtime_exception, "RuntimeException");
    Class::LockException.register(ClassBuilder::new(Class::LockException.name()).extends(runtime))?;
    let base: ClassEntryInfo = (parent::<{ Class::LockException as usize }>, "LockException");
    for class in KINDS {
        class.register(ClassBuilder::new(class.name()).extends(base))?;
    }
    Ok(())
}

/// The single translation of a core error into the exception `what` (the failing
/// method, `SessionLock::acquire()`) throws. The message is `what: ` and the core's
/// message with its causes.
pub fn to_php(what: &str, error: &Error) -> PhpException {
    let message = format!("{what}: {}", error.chain());
    let class = match error {
        // No connection configured for the extension's own connection (or a bad DSN):
        // nothing about this call's arguments.
        Error::InvalidArgument { what: "connection", .. } => Class::ConnectionException,
        Error::InvalidArgument { .. } => return spl_exception("InvalidArgumentException", &message),
        Error::Timeout { .. } => Class::LockTimeout,
        Error::NotHeld { .. } => Class::NotHeld,
        Error::AlreadyHeld { .. } => Class::AlreadyHeld,
        Error::Deadlock { .. } => Class::Deadlock,
        Error::Connect { .. } | Error::ConnectionLost { .. } => Class::ConnectionException,
        _ => Class::LockException,
    };
    let previous = if error.is_cluster_node() { cluster_node(&error.chain()) } else { driver::cause_of(error) };
    let code = driver::error_code(error);
    match own_exception(class, &message, code, previous) {
        Some(object) => PhpException::from_message(message).with_object(object),
        // Only if our classes failed to register: still report the error.
        None => PhpException::from_message(message),
    }
}
