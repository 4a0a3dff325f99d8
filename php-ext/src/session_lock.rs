//! `MySqlLock\SessionLock`: a plain `GET_LOCK` held by a database session, on the
//! extension's own connection or on a PDO or mysqli the caller hands over (the core's
//! `Locker::lock_session`; see the stub for the user's view).
//!
//! The object only names the lock and its connection (two private properties); the lock
//! belongs to the connection's session, and the locker on that session lives in `state`,
//! which also releases what is still held at request end and keeps a forked child off
//! the parent's sessions. Errors map once, in `lock_exceptions::to_php`.

use ext_php_rs::args::Arg;
use ext_php_rs::builders::{ClassBuilder, FunctionBuilder};
use ext_php_rs::exception::{PhpException, PhpResult};
use ext_php_rs::flags::{ClassFlags, DataType, MethodFlags, PropertyFlags};
use ext_php_rs::types::{ZendObject, Zval};
use ext_php_rs::zend::{ce, ClassEntry, ExecuteData};
use mysqllock_core::{name, Error};

use crate::args::{self, Args, Name};
use crate::exceptions::protected_property;
use crate::handler::{self, boolean, handlers, int, php_int};
use crate::lock_exceptions::to_php;
use crate::pdo_session;
use crate::php::{self, CallError};
use crate::registry::Class;
use crate::state::{self, Conn};

/// The private properties: the name as given, and the connection (`null`: the
/// extension's own).
const NAME: &str = "name";
const CONNECTION: &str = "connection";

const CONNECTION_TYPE: &str = "PDO|mysqli|null";

/// Registers the class (an object naming a live connection cannot be serialized);
/// module startup only.
pub fn register() -> ext_php_rs::error::Result<()> {
    let public = MethodFlags::Public;
    let private = |name: &str| {
        let mut property = protected_property(name);
        property.flags = PropertyFlags::Private;
        property
    };
    let timeout = || Arg::new("timeout", DataType::Double).default("0.0");
    let method = |name: &str, handler, ret: DataType, nullable: bool| {
        FunctionBuilder::new(name, handler).returns(ret, false, nullable)
    };
    let builder = ClassBuilder::new(Class::SessionLock.name())
        .property(private(NAME))
        .property(private(CONNECTION))
        .method(
            FunctionBuilder::new("__construct", construct)
                .arg(Arg::new("name", DataType::String))
                .not_required()
                .arg(Arg::new("connection", DataType::Mixed).default("null")),
            public,
        )
        .method(method("acquire", acquire, DataType::Bool, false).not_required().arg(timeout()), public)
        .method(method("release", release, DataType::Void, false), public)
        .method(method("isHeldByMe", is_held_by_me, DataType::Bool, false), public)
        .method(method("holder", holder, DataType::Long, true), public)
        .method(
            method("synchronized", synchronized, DataType::Mixed, false)
                .arg(Arg::new("work", DataType::Callable))
                .not_required()
                .arg(timeout()),
            public,
        )
        .method(method("getName", get_name, DataType::String, false), public)
        .method(method("getKey", get_key, DataType::String, false), public)
        .method(FunctionBuilder::new("__clone", clone), public)
        .method(FunctionBuilder::new("__destruct", destruct), public);
    Class::SessionLock.register_with(builder, ClassFlags::NotSerializable)
}

handlers! {
    construct => construct_body,
    acquire => acquire_body,
    release => release_body,
    is_held_by_me => is_held_by_me_body,
    holder => holder_body,
    synchronized => synchronized_body,
    get_name => get_name_body,
    get_key => get_key_body,
    clone => clone_body,
    destruct => destruct_body,
}

/// What an object says: the lock name and its connection.
struct Lock {
    name: String,
    connection: Zval,
}

impl Lock {
    fn conn(&self) -> Conn<'_> {
        let value = &self.connection;
        match value.object() {
            None => Conn::Native,
            Some(object) if is_a(object, "PDO") => Conn::Pdo(value),
            Some(_) => Conn::Mysqli(value),
        }
    }
}

fn is_a(object: &ZendObject, class: &str) -> bool {
    ClassEntry::try_find(class).is_some_and(|class| object.instance_of(class))
}

/// `$this` and what it names; an `Error` if its constructor never ran.
fn this_lock(ex: &mut ExecuteData) -> PhpResult<(Zval, Lock)> {
    let this = args::this(ex)?;
    let lock = this.object().and_then(read_lock).ok_or_else(|| {
        PhpException::new(
            "SessionLock is not initialized: a subclass constructor must call parent::__construct()".to_owned(),
            0,
            ce::error(),
        )
    })?;
    Ok((this, lock))
}

fn read_lock(object: &ZendObject) -> Option<Lock> {
    let class = Class::SessionLock.entry()?;
    let name = php::read_property(object, class, NAME)?.string()?;
    let connection = php::read_property(object, class, CONNECTION).unwrap_or_default();
    Some(Lock { name, connection })
}

// ---------------------------------------------------------------------------------
// Methods

/// `__construct(string $name, \PDO|\mysqli|null $connection = null)`: checks the name
/// (its GET_LOCK key must exist) and the connection; connects at the first call, not here.
fn construct_body(ex: &mut ExecuteData) -> PhpResult<Zval> {
    const WHAT: &str = "SessionLock::__construct()";
    let mut this = args::this(ex)?;
    let a = Args::fetch(ex, &[NAME, CONNECTION], 1)?;
    let name = match args::lock_name(&a.value(0), 1)? {
        Name::Valid(name) => name,
        Name::Invalid { error, .. } => return Err(to_php(WHAT, &error)),
    };
    name::session_key(&name).map_err(|e| to_php(WHAT, &e))?;
    let connection = a.value(1);
    check_connection(&connection)?;
    let lock = Lock { name, connection };
    state::with(|s| s.attach(lock.conn())).map_err(|e| to_php(WHAT, &e))?;
    // A second __construct() on one object: it no longer uses the earlier connection.
    if let Some(earlier) = this.object().and_then(read_lock) {
        state::with_existing(|s| s.detach(earlier.conn()));
    }
    let class = Class::SessionLock.entry().ok_or_else(handler::pending)?;
    if let Some(object) = this.object_mut() {
        let mut name = Zval::new();
        name.set_string(&lock.name, false)?;
        php::write_property(object, class, NAME, &name);
        php::write_property(object, class, CONNECTION, &lock.connection);
    }
    Ok(handler::null())
}

/// `null`, a pdo_mysql PDO or a mysqli.
fn check_connection(value: &Zval) -> PhpResult<()> {
    let Some(object) = value.object() else {
        return if value.is_null() { Ok(()) } else { Err(args::type_error(2, CONNECTION_TYPE, value)) };
    };
    if is_a(object, "mysqli") {
        return Ok(());
    }
    if !is_a(object, "PDO") {
        return Err(args::type_error(2, CONNECTION_TYPE, value));
    }
    let driver = pdo_session::driver_name(value).map_err(handler::rethrow)?;
    if driver != "mysql" {
        let error = Error::InvalidArgument {
            what: "PDO",
            reason: format!("session locks need a MySQL or MariaDB server (pdo_mysql), not the {driver:?} driver"),
        };
        return Err(to_php("SessionLock::__construct()", &error));
    }
    Ok(())
}

/// `acquire(float $timeout = 0.0): bool`: `false` when another session still holds it.
fn acquire_body(ex: &mut ExecuteData) -> PhpResult<Zval> {
    let (_, lock) = this_lock(ex)?;
    let a = Args::fetch(ex, &["timeout"], 0)?;
    let timeout = a.get(0).map_or(Ok(0.0), |t| args::seconds(t, 1))?;
    match state::with(|s| s.lock_session(lock.conn(), &lock.name, timeout)) {
        Ok(()) => Ok(boolean(true)),
        Err(Error::Timeout { .. }) => Ok(boolean(false)),
        Err(e) => Err(to_php("SessionLock::acquire()", &e)),
    }
}

/// `release(): void`
fn release_body(ex: &mut ExecuteData) -> PhpResult<Zval> {
    let (_, lock) = this_lock(ex)?;
    Args::fetch(ex, &[], 0)?;
    state::with(|s| s.unlock_session(lock.conn(), &lock.name)).map_err(|e| to_php("SessionLock::release()", &e))?;
    Ok(handler::null())
}

/// `isHeldByMe(): bool`, asked of the server.
fn is_held_by_me_body(ex: &mut ExecuteData) -> PhpResult<Zval> {
    let (_, lock) = this_lock(ex)?;
    Args::fetch(ex, &[], 0)?;
    let held = state::with(|s| s.holds_session_lock(lock.conn(), &lock.name))
        .map_err(|e| to_php("SessionLock::isHeldByMe()", &e))?;
    Ok(boolean(held))
}

/// `holder(): ?int`: the connection id of the session holding it, any client's.
fn holder_body(ex: &mut ExecuteData) -> PhpResult<Zval> {
    let (_, lock) = this_lock(ex)?;
    Args::fetch(ex, &[], 0)?;
    let holder = state::with(|s| s.session_lock_holder(lock.conn(), &lock.name))
        .map_err(|e| to_php("SessionLock::holder()", &e))?;
    Ok(holder.map_or_else(Zval::null, |id| int(php_int(id))))
}

/// `synchronized(callable $work, float $timeout = 0.0): mixed`: `$work($this)` under the
/// lock, released afterwards whatever happens. An exception of `$work` is rethrown
/// unchanged (a failed release then goes unreported: the work's failure matters more);
/// after `exit()` or a fatal error in `$work`, request shutdown releases it. A lock lost
/// while `$work` ran is reported when it returns (`NotHeldException`).
fn synchronized_body(ex: &mut ExecuteData) -> PhpResult<Zval> {
    const WHAT: &str = "SessionLock::synchronized()";
    let (this, lock) = this_lock(ex)?;
    let a = Args::fetch(ex, &["work", "timeout"], 1)?;
    let work = a.value(0);
    if !work.is_callable() {
        return Err(args::type_error(1, "callable", &work));
    }
    let timeout = a.get(1).map_or(Ok(0.0), |t| args::seconds(t, 2))?;
    state::with(|s| s.lock_session(lock.conn(), &lock.name, timeout)).map_err(|e| to_php(WHAT, &e))?;
    let result = php::call(&work, vec![&this]);
    if matches!(result, Err(CallError::Bailout | CallError::Exiting)) {
        // The request is ending: no more PHP may run now, so a PDO or mysqli session
        // could not release; request shutdown releases every session lock.
        return Err(handler::pending());
    }
    let released = state::with(|s| s.unlock_session(lock.conn(), &lock.name));
    match result {
        Ok(value) => {
            released.map_err(|e| to_php(WHAT, &e))?;
            Ok(value)
        }
        Err(error) => Err(handler::rethrow(error)),
    }
}

/// `getName(): string`: the name as given.
fn get_name_body(ex: &mut ExecuteData) -> PhpResult<Zval> {
    let (_, lock) = this_lock(ex)?;
    Args::fetch(ex, &[], 0)?;
    string_zval(&lock.name)
}

/// `getKey(): string`: the GET_LOCK name the lock takes (case and accents folded).
fn get_key_body(ex: &mut ExecuteData) -> PhpResult<Zval> {
    let (_, lock) = this_lock(ex)?;
    Args::fetch(ex, &[], 0)?;
    let key = name::session_key(&lock.name).map_err(|e| to_php("SessionLock::getKey()", &e))?;
    string_zval(&key)
}

/// `clone $lock`: the copy names the same lock on the same connection.
fn clone_body(ex: &mut ExecuteData) -> PhpResult<Zval> {
    let (_, lock) = this_lock(ex)?;
    state::with(|s| s.attach(lock.conn())).map_err(|e| to_php("SessionLock::__clone()", &e))?;
    Ok(handler::null())
}

/// `__destruct()`: the lock stays held (it belongs to the session, not the object).
fn destruct_body(ex: &mut ExecuteData) -> PhpResult<Zval> {
    let this = args::this(ex)?;
    if let Some(lock) = this.object().and_then(read_lock) {
        state::with_existing(|s| s.detach(lock.conn()));
    }
    Ok(handler::null())
}

fn string_zval(value: &str) -> PhpResult<Zval> {
    let mut z = Zval::new();
    z.set_string(value, false)?;
    Ok(z)
}
