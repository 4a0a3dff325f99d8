//! `Nene\Kit\DistributedLock`: the core's lease mode (table-only leases with owner
//! strings, `core/src/lease_mode/`) as a drop-in for the PHP class of that name.
//!
//! The glue converts arguments, calls the object's `LeaseObject` (one core
//! `DistributedLock` on a `PhpConnector`) and maps errors once
//! (`exceptions::lease_to_php`); every decision is the core's.
//!
//! The object's state lives in `state`, found through the object's private `handle`
//! number (never reused): made by `__construct` (lazy: nothing connects before the first
//! call; `mysqllock.dsn` is read here, not cached), copied by `__clone` (a new session of
//! its own), dropped by `__destruct`, and at request end whatever is left, with its
//! leases kept. A forked child starts afresh on the same target (`state` says how).
//!
//! A PDO whose connection the core finds lost is replaced by what the constructor's
//! `$reconnect` returns, where one is given: the core decides what "lost" is and sends
//! the statement again, as on its own connection.

use ext_php_rs::args::Arg;
use ext_php_rs::builders::{ClassBuilder, FunctionBuilder};
use ext_php_rs::exception::{PhpException, PhpResult};
use ext_php_rs::flags::{ClassFlags, ConstantFlags, DataType, MethodFlags, PropertyFlags};
use ext_php_rs::types::{ZendHashTable, Zval};
use ext_php_rs::zend::{ce, ExecuteData};
use mysqllock_core::{Dialect, Error, QuoteStyle, Table, DEFAULT_LEASE_TABLE, MAX_LEASE_TTL};

use crate::args::{self, Args};
use crate::connection::{self, OwnConnection, PhpConnector, Reconnect, Target};
use crate::exceptions::{lease_exception, lease_to_php, protected_property};
use crate::handler::{self, boolean, double, handlers, int, php_int};
use crate::ini;
use crate::lease_object::LeaseObject;
use crate::pdo_session;
use crate::php;
use crate::registry::Class;
use crate::state;

/// The private property holding the object's number in `state`.
const HANDLE: &str = "handle";

const NO_DSN: &str = "new DistributedLock() without a PDO uses the extension's own connection, but mysqllock.dsn \
                      is not set: set it (php.ini, or ini_set('mysqllock.dsn', 'mysql://user:password@host:port/db')) \
                      or pass a PDO: new DistributedLock($pdo)";

// ---------------------------------------------------------------------------------
// Registration

/// Registers `Nene\Kit\DistributedLock` (the object's state cannot be serialized);
/// module startup only.
pub fn register() -> ext_php_rs::error::Result<()> {
    let public = MethodFlags::Public;
    let text = |name: &str| Arg::new(name, DataType::String);
    let ttl = || Arg::new("ttlSeconds", DataType::Long);
    let method = |name: &str, handler, ret: DataType, nullable: bool| {
        FunctionBuilder::new(name, handler).returns(ret, false, nullable)
    };
    let mut handle = protected_property(HANDLE);
    handle.flags = PropertyFlags::Private;
    #[allow(clippy::cast_possible_truncation)] // 253402300799: an integer, far inside i64
    let max_ttl = MAX_LEASE_TTL as i64;
    let builder = ClassBuilder::new(Class::DistributedLock.name())
        .constant("MAX_TTL", max_ttl, &[], ConstantFlags::Public)?
        .property(handle)
        .method(
            FunctionBuilder::new("__construct", construct)
                .not_required()
                .arg(Arg::new("pdo", DataType::object("PDO")).allow_null().default("null"))
                .arg(text("table").default("'distributed_locks'"))
                .arg(Arg::new("reconnect", DataType::Callable).allow_null().default("null")),
            public,
        )
        .method(
            method("acquire", acquire, DataType::Bool, false)
                .arg(text("resource"))
                .arg(text("owner"))
                .arg(ttl())
                .not_required()
                .arg(Arg::new("wait", DataType::Double).default("0.0")),
            public,
        )
        .method(method("release", release, DataType::Bool, false).arg(text("resource")).arg(text("owner")), public)
        .method(
            method("renew", renew, DataType::Bool, false).arg(text("resource")).arg(text("owner")).arg(ttl()),
            public,
        )
        .method(method("isHeld", is_held, DataType::Bool, false).arg(text("resource")), public)
        .method(method("isHeldBy", is_held_by, DataType::Bool, false).arg(text("resource")).arg(text("owner")), public)
        .method(method("owner", owner, DataType::String, true).arg(text("resource")), public)
        .method(method("forceRelease", force_release, DataType::Bool, false).arg(text("resource")), public)
        .method(method("heldWithPrefix", held_with_prefix, DataType::Array, false).arg(text("prefix")), public)
        .method(
            method("forceReleaseWithPrefix", force_release_with_prefix, DataType::Long, false).arg(text("prefix")),
            public,
        )
        .method(method("getToken", get_token, DataType::Long, true), public)
        .method(method("getRemaining", get_remaining, DataType::Double, false), public)
        .method(method("createTable", create_table, DataType::Bool, false), public)
        .method(method("upgradeTable", upgrade_table, DataType::Bool, false), public)
        .method(FunctionBuilder::new("__clone", clone), public)
        .method(FunctionBuilder::new("__destruct", destruct), public);
    Class::DistributedLock.register_with(builder, ClassFlags::NotSerializable)
}

handlers! {
    construct => construct_body,
    acquire => acquire_body,
    release => release_body,
    renew => renew_body,
    is_held => is_held_body,
    is_held_by => is_held_by_body,
    owner => owner_body,
    force_release => force_release_body,
    held_with_prefix => held_with_prefix_body,
    force_release_with_prefix => force_release_with_prefix_body,
    get_token => get_token_body,
    get_remaining => get_remaining_body,
    create_table => create_table_body,
    upgrade_table => upgrade_table_body,
    clone => clone_body,
    destruct => destruct_body,
}

// ---------------------------------------------------------------------------------
// Methods

/// `__construct(?PDO $pdo = null, string $table = 'distributed_locks', ?callable
/// $reconnect = null)`. Connects at the first call, not here.
fn construct_body(ex: &mut ExecuteData) -> PhpResult<Zval> {
    let mut this = args::this(ex)?;
    let a = Args::fetch(ex, &["pdo", "table", "reconnect"], 0)?;
    let pdo = a.get(0).filter(|p| !p.is_null());
    let table_name = a.get(1).map(|t| text_arg(t, 2, "table", "__construct")).transpose()?;
    let reconnect = a.get(2).filter(|r| !r.is_null());
    if let Some(reconnect) = reconnect {
        if !reconnect.is_callable() {
            return Err(args::type_error(3, "?callable", reconnect));
        }
        if pdo.is_none() {
            let reason = "it replaces a lost PDO; without a PDO the extension's own connection reconnects by itself";
            return Err(lease_to_php(
                "__construct",
                &Error::InvalidArgument { what: "$reconnect", reason: reason.to_owned() },
            ));
        }
    }
    let object = match pdo {
        Some(pdo) => {
            if !connection::is_pdo(pdo) {
                return Err(args::type_error(1, "?PDO", pdo));
            }
            let driver = pdo_session::driver_name(pdo)
                .map_err(|e| lease_exception(&format!("DistributedLock::__construct(): {}", e.describe()), 0, None))?;
            let dialect = Dialect::from_driver(&driver).map_err(|e| lease_to_php("__construct", &e))?;
            let table = table(table_name.as_deref().unwrap_or(DEFAULT_LEASE_TABLE))?;
            let reconnect = reconnect.map(|r| Reconnect::new(r.shallow_clone(), dialect));
            let target = Target::lease_pdo(pdo.shallow_clone(), reconnect);
            LeaseObject::new(PhpConnector { target }, table, dialect)
        }
        None => {
            let url = ini::get(ini::DSN)
                .ok_or_else(|| lease_exception(&format!("DistributedLock::__construct(): {NO_DSN}"), 0, None))?;
            let base =
                ini::config().map_err(|e| lease_exception(&format!("DistributedLock::__construct(): {e}"), 0, None))?;
            let (settings, shared_table) = OwnConnection::from_url(base, &url).map_err(|e| {
                lease_exception(&format!("DistributedLock::__construct(): mysqllock.dsn: {e}"), 0, None)
            })?;
            let config = settings.native(&shared_table.unwrap_or_default());
            let table = match table_name {
                Some(name) => table(&name)?,
                None => config.lease_table.clone(),
            };
            LeaseObject::new(PhpConnector { target: Target::Native(Box::new(config)) }, table, Dialect::MySql)
        }
    };
    // A second __construct() on one object replaces its earlier state.
    let earlier = this.object().and_then(read_handle);
    store(&mut this, object)?;
    if let Some(replaced) = earlier.and_then(state::take_lease) {
        replaced.close();
    }
    Ok(handler::null())
}

/// `acquire(string $resource, string $owner, int $ttlSeconds, float $wait = 0): bool`
fn acquire_body(ex: &mut ExecuteData) -> PhpResult<Zval> {
    let handle = handle_of(ex)?;
    let a = Args::fetch(ex, &["resource", "owner", "ttlSeconds", "wait"], 3)?;
    let (resource, owner) = resource_and_owner(&a, "acquire")?;
    let ttl = int_arg(&a.value(2), 3)?;
    let wait = a.get(3).map_or(Ok(0.0), |w| float_arg(w, 4))?;
    let won = with_object(handle, "acquire", |o| o.acquire(&resource, &owner, ttl, wait))?;
    Ok(boolean(won))
}

/// `release(string $resource, string $owner): bool`
fn release_body(ex: &mut ExecuteData) -> PhpResult<Zval> {
    let handle = handle_of(ex)?;
    let a = Args::fetch(ex, &["resource", "owner"], 2)?;
    let (resource, owner) = resource_and_owner(&a, "release")?;
    let released = with_object(handle, "release", |o| o.release(&resource, &owner))?;
    Ok(boolean(released))
}

/// `renew(string $resource, string $owner, int $ttlSeconds): bool`
fn renew_body(ex: &mut ExecuteData) -> PhpResult<Zval> {
    let handle = handle_of(ex)?;
    let a = Args::fetch(ex, &["resource", "owner", "ttlSeconds"], 3)?;
    let (resource, owner) = resource_and_owner(&a, "renew")?;
    let ttl = int_arg(&a.value(2), 3)?;
    let renewed = with_object(handle, "renew", |o| o.renew(&resource, &owner, ttl))?;
    Ok(boolean(renewed))
}

/// `isHeld(string $resource): bool`
fn is_held_body(ex: &mut ExecuteData) -> PhpResult<Zval> {
    let handle = handle_of(ex)?;
    let a = Args::fetch(ex, &["resource"], 1)?;
    let resource = text_arg(&a.value(0), 1, "resource", "isHeld")?;
    let held = with_object(handle, "isHeld", |o| o.lock().is_held(&resource))?;
    Ok(boolean(held))
}

/// `isHeldBy(string $resource, string $owner): bool`
fn is_held_by_body(ex: &mut ExecuteData) -> PhpResult<Zval> {
    let handle = handle_of(ex)?;
    let a = Args::fetch(ex, &["resource", "owner"], 2)?;
    let (resource, owner) = resource_and_owner(&a, "isHeldBy")?;
    let held = with_object(handle, "isHeldBy", |o| o.lock().is_held_by(&resource, &owner))?;
    Ok(boolean(held))
}

/// `owner(string $resource): ?string`: the owner of the live lease.
fn owner_body(ex: &mut ExecuteData) -> PhpResult<Zval> {
    let handle = handle_of(ex)?;
    let a = Args::fetch(ex, &["resource"], 1)?;
    let resource = text_arg(&a.value(0), 1, "resource", "owner")?;
    let owner = with_object(handle, "owner", |o| o.lock().owner(&resource))?;
    let mut z = Zval::new();
    match owner {
        Some(owner) => z.set_string(&owner, false)?,
        None => z.set_null(),
    }
    Ok(z)
}

/// `forceRelease(string $resource): bool`: ends the live lease whoever holds it.
fn force_release_body(ex: &mut ExecuteData) -> PhpResult<Zval> {
    let handle = handle_of(ex)?;
    let a = Args::fetch(ex, &["resource"], 1)?;
    let resource = text_arg(&a.value(0), 1, "resource", "forceRelease")?;
    let ended = with_object(handle, "forceRelease", |o| o.force_release(&resource))?;
    Ok(boolean(ended))
}

/// `heldWithPrefix(string $prefix): array`: the resources of the live leases whose name
/// begins with `$prefix` exactly, ordered (core `held_with_prefix`).
fn held_with_prefix_body(ex: &mut ExecuteData) -> PhpResult<Zval> {
    let handle = handle_of(ex)?;
    let a = Args::fetch(ex, &["prefix"], 1)?;
    let prefix = text_arg(&a.value(0), 1, "prefix", "heldWithPrefix")?;
    let held = with_object(handle, "heldWithPrefix", |o| o.lock().held_with_prefix(&prefix))?;
    let mut list = ZendHashTable::new();
    for resource in held {
        list.push(resource).map_err(|e| PhpException::from_message(e.to_string()))?;
    }
    let mut z = Zval::new();
    z.set_hashtable(list);
    Ok(z)
}

/// `forceReleaseWithPrefix(string $prefix): int`: ends every live lease whose name begins
/// with `$prefix` exactly, whoever holds it; how many it ended (core
/// `force_release_with_prefix`).
fn force_release_with_prefix_body(ex: &mut ExecuteData) -> PhpResult<Zval> {
    let handle = handle_of(ex)?;
    let a = Args::fetch(ex, &["prefix"], 1)?;
    let prefix = text_arg(&a.value(0), 1, "prefix", "forceReleaseWithPrefix")?;
    let ended = with_object(handle, "forceReleaseWithPrefix", |o| o.force_release_with_prefix(&prefix))?;
    Ok(int(php_int(ended)))
}

/// `getToken(): ?int`: the fencing token of the current lease (upgraded table only).
fn get_token_body(ex: &mut ExecuteData) -> PhpResult<Zval> {
    let handle = handle_of(ex)?;
    Args::fetch(ex, &[], 0)?;
    let token = with_object(handle, "getToken", |o| Ok(o.token()))?;
    Ok(token.map_or_else(Zval::null, |t| int(php_int(t))))
}

/// `getRemaining(): float`: seconds until the current lease's local deadline.
fn get_remaining_body(ex: &mut ExecuteData) -> PhpResult<Zval> {
    let handle = handle_of(ex)?;
    Args::fetch(ex, &[], 0)?;
    let remaining = with_object(handle, "getRemaining", |o| Ok(o.remaining()))?;
    Ok(double(remaining))
}

/// `createTable(): bool`: the original class's table (InnoDB on MySQL), `false` if it existed.
fn create_table_body(ex: &mut ExecuteData) -> PhpResult<Zval> {
    let handle = handle_of(ex)?;
    Args::fetch(ex, &[], 0)?;
    Ok(boolean(with_object(handle, "createTable", |o| o.lock().create_table())?))
}

/// `upgradeTable(): bool`: fencing tokens and microsecond times (MySQL only).
fn upgrade_table_body(ex: &mut ExecuteData) -> PhpResult<Zval> {
    let handle = handle_of(ex)?;
    Args::fetch(ex, &[], 0)?;
    Ok(boolean(with_object(handle, "upgradeTable", |o| o.lock().upgrade_table())?))
}

/// `clone $lock`: the copy gets a session of its own and the same current lease.
fn clone_body(ex: &mut ExecuteData) -> PhpResult<Zval> {
    let mut this = args::this(ex)?;
    let Some(old) = this.object().and_then(read_handle) else { return Ok(handler::null()) };
    let Some(copy) = state::copy_lease(old) else { return Ok(handler::null()) };
    store(&mut this, copy)?;
    Ok(handler::null())
}

/// `__destruct()`: closes the object's session (its leases stay until their TTL).
fn destruct_body(ex: &mut ExecuteData) -> PhpResult<Zval> {
    let this = args::this(ex)?;
    if let Some(object) = this.object().and_then(read_handle).and_then(state::take_lease) {
        object.close();
    }
    Ok(handler::null())
}

// ---------------------------------------------------------------------------------
// Helpers

/// The object's handle; an `Error` if its constructor never ran.
fn handle_of(ex: &mut ExecuteData) -> PhpResult<i64> {
    let this = args::this(ex)?;
    this.object().and_then(read_handle).ok_or_else(|| {
        PhpException::new(
            "DistributedLock is not initialized: a subclass constructor must call parent::__construct()".to_owned(),
            0,
            ce::error(),
        )
    })
}

/// Gives `this` a new handle for `state`.
fn store(this: &mut Zval, state: LeaseObject) -> PhpResult<()> {
    let class = Class::DistributedLock.entry().ok_or_else(handler::pending)?;
    let handle = state::add_lease(state);
    if let Some(object) = this.object_mut() {
        php::write_property(object, class, HANDLE, &int(handle));
    }
    Ok(())
}

fn read_handle(object: &ext_php_rs::types::ZendObject) -> Option<i64> {
    let class = Class::DistributedLock.entry()?;
    php::read_property(object, class, HANDLE).and_then(|h| h.long())
}

/// Runs `f` on the object's state (see `state::with_lease`); its error as this class's.
fn with_object<T>(handle: i64, method: &str, f: impl FnOnce(&mut LeaseObject) -> Result<T, Error>) -> PhpResult<T> {
    let Some(result) = state::with_lease(handle, f) else {
        return Err(PhpException::new(
            format!(
                "DistributedLock::{method}(): this object has no connection state: __destruct() already ran, or \
                 it was called from inside another of its calls (a PDO subclass, an error handler)"
            ),
            0,
            ce::error(),
        ));
    };
    result.map_err(|e| lease_to_php(method, &e))
}

/// A validated lease table name.
fn table(name: &str) -> PhpResult<Table> {
    Table::new(name, QuoteStyle::Backtick).map_err(|e| lease_to_php("__construct", &e))
}

/// The `$resource` and `$owner` parameters (the first two of every method that has them).
fn resource_and_owner(a: &Args, method: &str) -> PhpResult<(String, String)> {
    Ok((text_arg(&a.value(0), 1, "resource", method)?, text_arg(&a.value(1), 2, "owner", method)?))
}

/// A `string` parameter: a string (valid UTF-8), or an int/float/Stringable converted as
/// PHP's coercive mode would.
fn text_arg(value: &Zval, position: u32, what: &'static str, method: &str) -> PhpResult<String> {
    match args::lock_name(value, position)? {
        args::Name::Valid(s) => Ok(s),
        args::Name::Invalid { .. } => {
            Err(lease_to_php(method, &Error::InvalidArgument { what, reason: "it is not valid UTF-8".to_owned() }))
        }
    }
}

/// An `int` parameter (seconds): an int, or a float or numeric string with an integral
/// value; anything else is PHP's `TypeError`.
fn int_arg(value: &Zval, position: u32) -> PhpResult<f64> {
    let value = value.dereference();
    let number = if value.is_long() || value.is_double() || value.is_string() { args::number(value) } else { None };
    match number {
        Some(n) if n.fract() == 0.0 || !n.is_finite() => Ok(n),
        _ => Err(args::type_error(position, "int", value)),
    }
}

/// A `float` parameter: an int, a float or a numeric string.
fn float_arg(value: &Zval, position: u32) -> PhpResult<f64> {
    args::number(value).ok_or_else(|| args::type_error(position, "float", value))
}
