//! `mysqllock.so`: the PHP extension, a drop-in for the Composer package
//! its-mieger/mysql-shared-locks (classes `ItsMieger\MySqlSharedLocks\SharedLock`,
//! `SharedLockHandle` and the `Exception\*` classes), over the Rust core;
//! `Nene\Kit\DistributedLock`, the core's lease mode as a drop-in for that class; and in
//! its own namespace `MySqlLock\SessionLock`, plain GET_LOCK session locks.
//!
//! The glue is thin: `classes`, `session_lock` and `distributed` convert arguments and
//! call `state`, the one per-thread registry, which owns the core `Locker`s and each
//! `DistributedLock` object's `lease_object`, and says what request end and fork do to
//! them; every one of them takes its sessions from `connection::PhpConnector`.
//! `exceptions::to_php`, `exceptions::lease_to_php` and `lock_exceptions::to_php` map
//! every core error; `pdo_session` and `mysqli_session` let the core run on a user's PDO
//! or mysqli (sharing `driver`); `pdo_factory` opens the PDOs the extension hands out,
//! with the TLS settings as PDO takes them; `options` reads the `$options` array of the
//! acquiring methods; `ini` holds the php.ini settings; `worker` has
//! `MySqlLock\end_request()`, the request end of worker-mode servers. All lock decisions
//! are the core's.

#![cfg_attr(windows, feature(abi_vectorcall))]

mod args;
mod classes;
mod connection;
mod distributed;
mod driver;
mod exceptions;
mod handler;
mod ini;
mod lease_object;
mod lock_exceptions;
mod mysqli_session;
mod options;
mod pdo_factory;
mod pdo_session;
mod php;
mod registry;
mod session_lock;
mod state;
mod worker;

use std::panic::{catch_unwind, AssertUnwindSafe};

use ext_php_rs::error::php_error;
use ext_php_rs::flags::ErrorType;
use ext_php_rs::prelude::*;

/// `SUCCESS` / `FAILURE` of the engine's startup and shutdown hooks.
const SUCCESS: i32 = 0;
const FAILURE: i32 = -1;

#[php_module]
#[php(startup = module_startup)]
pub fn module(module: ModuleBuilder) -> ModuleBuilder {
    module
        .name("mysqllock")
        .version(env!("CARGO_PKG_VERSION"))
        .shutdown_function(module_shutdown)
        .request_shutdown_function(request_shutdown)
        .function(worker::end_request_function())
        .info_function(ini::info)
}

/// MINIT: settings and classes. A failure is reported and leaves PHP running without
/// the extension (a panic escaping a hook would abort the process).
fn module_startup(_type: i32, module_number: i32) -> i32 {
    let started = catch_unwind(|| {
        ini::register(module_number);
        exceptions::register()?;
        lock_exceptions::register()?;
        classes::register()?;
        distributed::register()?;
        session_lock::register()?;
        pdo_factory::register()
    });
    let problem = match started {
        Ok(Ok(())) => return SUCCESS,
        Ok(Err(e)) => e.to_string(),
        Err(_) => "a panic during class registration".to_owned(),
    };
    php_error(&ErrorType::CoreWarning, &format!("mysqllock: module startup failed: {problem}"));
    FAILURE
}

/// RSHUTDOWN: `SharedLock` and `SessionLock` locks taken during the request are
/// released (also under PHP-FPM, whose worker outlives the request) and connections
/// closed; `DistributedLock` leases stay until their TTL.
extern "C" fn request_shutdown(_type: i32, _module_number: i32) -> i32 {
    match catch_unwind(AssertUnwindSafe(state::request_shutdown)) {
        Ok(()) => SUCCESS,
        Err(_) => FAILURE,
    }
}

/// MSHUTDOWN: settings go; nothing that refers to PHP values may outlive the engine.
extern "C" fn module_shutdown(_type: i32, module_number: i32) -> i32 {
    let done = catch_unwind(|| {
        state::module_shutdown();
        ini::unregister(module_number);
    });
    if done.is_ok() {
        SUCCESS
    } else {
        FAILURE
    }
}
