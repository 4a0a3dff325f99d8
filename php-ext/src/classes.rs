//! `SharedLock` and `SharedLockHandle`: argument conversion, a call into the state (and
//! through it the core), and the mapping of the result. No lock decisions here.
//!
//! Parameter names are the SPEC's (they are part of the API since PHP 8's named
//! arguments). As in the original package no method declares a return type and the
//! parameters are untyped (`mixed`), except `PDO $pdo` and `callable $callback`, so user
//! subclasses written for the original keep compiling. Values are checked here.

use ext_php_rs::args::Arg;
use ext_php_rs::builders::{ClassBuilder, FunctionBuilder};
use ext_php_rs::exception::{PhpException, PhpResult};
use ext_php_rs::flags::{ConstantFlags, DataType, MethodFlags};
use ext_php_rs::types::{ZendHashTable, Zval};
use ext_php_rs::zend::ExecuteData;
use mysqllock_core::{limits, Error, QuoteStyle, Table};

use crate::args::{self, Args, Name};
use crate::connection::{self, OwnConnection, PdoOrigin};
use crate::exceptions::{self, to_php, Op};
use crate::handler::{self, handlers, int, php_int};
use crate::ini;
use crate::options;
use crate::pdo_factory;
use crate::php::{self, CallError};
use crate::registry::Class;
use crate::state::{self, State};

/// `$options = []` of the acquiring methods (see `options`).
fn options_arg() -> Arg<'static> {
    Arg::new("options", DataType::Mixed).default("[]")
}

/// Registers `SharedLock` and `SharedLockHandle`; module startup only.
pub fn register() -> ext_php_rs::error::Result<()> {
    let arg = |name: &str| Arg::new(name, DataType::Mixed);
    let static_method = |name: &str, handler, args: &[&str]| {
        let mut f = FunctionBuilder::new(name, handler);
        for a in args {
            f = f.arg(arg(a));
        }
        (f, MethodFlags::Public | MethodFlags::Static)
    };

    let methods = [
        {
            let (f, flags) =
                static_method("configureConnection", configure_connection, &["host", "dbName", "username", "password"]);
            let f = f
                .not_required()
                .arg(arg("charset").default("'utf8mb4'"))
                .arg(arg("port").default("null"))
                .arg(arg("additionalDsn").default("null"));
            (f, flags)
        },
        {
            let f = FunctionBuilder::new("setConnection", set_connection).arg(Arg::new("pdo", DataType::object("PDO")));
            (f, MethodFlags::Public | MethodFlags::Static)
        },
        static_method("getConnection", get_connection, &[]),
        static_method("setQuoteStyle", set_quote_style, &["style"]),
        static_method("getTable", get_table, &[]),
        static_method("setTable", set_table, &["table"]),
        {
            let (f, flags) = static_method("lock", lock, &["name", "timeout", "ttl"]);
            (f.not_required().arg(options_arg()), flags)
        },
        {
            let (f, flags) = static_method("tryLock", try_lock, &["name", "ttl"]);
            (f.not_required().arg(options_arg()), flags)
        },
        {
            let (f, flags) = static_method("synchronized", synchronized, &["name", "timeout", "ttl"]);
            (f.arg(Arg::new("callback", DataType::Callable)).not_required().arg(options_arg()), flags)
        },
        static_method("unlock", unlock, &["name"]),
        static_method("renew", renew, &["name", "ttl"]),
        static_method("setRemainingTTL", set_remaining_ttl, &["name", "ttl"]),
        {
            let (f, flags) = static_method("assertTTL", assert_ttl, &["name"]);
            (f.not_required().arg(arg("minRemainingTTL").default("1")), flags)
        },
        static_method("tryRepairTable", try_repair_table, &[]),
        static_method("createTable", create_table, &[]),
        static_method("isLocked", is_locked, &["name"]),
        static_method("holder", holder, &["name"]),
    ];
    let mut shared_lock = ClassBuilder::new(Class::SharedLock.name())
        .constant("QUOTE_STYLE_DEFAULT", 0i64, &[], ConstantFlags::Public)?
        .constant("QUOTE_STYLE_ANSI", 1i64, &[], ConstantFlags::Public)?
        .constant("MAX_TTL", limits::MAX_SECONDS, &[], ConstantFlags::Public)?;
    for (method, flags) in methods {
        shared_lock = shared_lock.method(method, flags);
    }
    Class::SharedLock.register(shared_lock)?;

    let public = MethodFlags::Public;
    let handle = ClassBuilder::new(Class::Handle.name())
        .property(exceptions::protected_property("lockName"))
        .method(FunctionBuilder::new("__construct", handle_construct).arg(arg("lockName")), public)
        .method(FunctionBuilder::new("release", handle_release), public)
        .method(
            FunctionBuilder::new("assertTTL", handle_assert_ttl).not_required().arg(arg("min").default("1")),
            public,
        )
        .method(FunctionBuilder::new("getName", handle_get_name), public)
        .method(FunctionBuilder::new("getRemainingTTL", handle_get_remaining_ttl), public)
        .method(FunctionBuilder::new("getToken", handle_get_token), public)
        .method(FunctionBuilder::new("renew", handle_renew).arg(arg("ttl")), public)
        .method(FunctionBuilder::new("setRemainingTTL", handle_set_remaining_ttl).arg(arg("ttl")), public);
    Class::Handle.register(handle)
}

handlers! {
    configure_connection => configure_connection_body,
    set_connection => set_connection_body,
    get_connection => get_connection_body,
    set_quote_style => set_quote_style_body,
    get_table => get_table_body,
    set_table => set_table_body,
    lock => lock_body,
    try_lock => try_lock_body,
    synchronized => synchronized_body,
    unlock => unlock_body,
    renew => renew_body,
    set_remaining_ttl => set_remaining_ttl_body,
    assert_ttl => assert_ttl_body,
    try_repair_table => try_repair_table_body,
    create_table => create_table_body,
    is_locked => is_locked_body,
    holder => holder_body,
    handle_construct => handle_construct_body,
    handle_release => handle_release_body,
    handle_assert_ttl => handle_assert_ttl_body,
    handle_get_name => handle_get_name_body,
    handle_get_remaining_ttl => handle_get_remaining_ttl_body,
    handle_get_token => handle_get_token_body,
    handle_renew => handle_renew_body,
    handle_set_remaining_ttl => handle_set_remaining_ttl_body,
}

// ---------------------------------------------------------------------------------
// Connection and table settings

fn configure_connection_body(ex: &mut ExecuteData) -> PhpResult<Zval> {
    let a = Args::fetch(ex, &["host", "dbName", "username", "password", "charset", "port", "additionalDsn"], 4)?;
    let host = args::optional_string(a.get(0), 1)?.unwrap_or_default();
    let database = args::optional_string(a.get(1), 2)?;
    let user = args::optional_string(a.get(2), 3)?.unwrap_or_default();
    let password = args::optional_string(a.get(3), 4)?;
    let charset = args::optional_string(a.get(4), 5)?.unwrap_or_else(|| "utf8mb4".to_owned());
    let port = match a.get(5).filter(|p| !p.is_null()) {
        None => None,
        Some(p) => Some(connection::port(args::seconds(p, 6)?).map_err(|e| to_php(Op::Configure, &e))?),
    };
    let additional_dsn = args::optional_string(a.get(6), 7)?;
    let settings = ini::config()
        .and_then(|base| {
            OwnConnection::from_parameters(base, host, database, user, password, charset, port, additional_dsn)
        })
        .map_err(|e| to_php(Op::Configure, &e))?;
    state::with(|s| {
        s.configure(settings);
        Ok(())
    })
    .map_err(|e| to_php(Op::Configure, &e))?;
    Ok(handler::null())
}

fn set_connection_body(ex: &mut ExecuteData) -> PhpResult<Zval> {
    let a = Args::fetch(ex, &["pdo"], 1)?;
    let pdo = a.value(0);
    if !connection::is_pdo(&pdo) {
        return Err(args::type_error(1, "PDO", &pdo));
    }
    state::with(|s| {
        s.use_pdo(pdo, PdoOrigin::User);
        Ok(())
    })
    .map_err(|e| to_php(Op::Configure, &e))?;
    Ok(handler::null())
}

/// The PDO locks run on; without one, a new PDO from the configured parameters
/// (`ERRMODE_EXCEPTION`, real prepares, the TLS settings) on which every later lock runs.
fn get_connection_body(ex: &mut ExecuteData) -> PhpResult<Zval> {
    Args::fetch(ex, &[], 0)?;
    let (existing, parameters) =
        state::with(|s| Ok((s.pdo(), s.pdo_parameters()))).map_err(|e| to_php(Op::Configure, &e))?;
    if let Some(pdo) = existing {
        return Ok(pdo);
    }
    let target = parameters.map_err(|e| to_php(Op::Configure, &e))?;
    // Outside the state: `new PDO` may warn, and a user error handler may run.
    let (pdo, bound) = pdo_factory::open(&target)?;
    state::with(|s| {
        s.use_pdo(pdo.shallow_clone(), PdoOrigin::GetConnection(bound));
        Ok(())
    })
    .map_err(|e| to_php(Op::Configure, &e))?;
    Ok(pdo)
}

fn set_quote_style_body(ex: &mut ExecuteData) -> PhpResult<Zval> {
    let a = Args::fetch(ex, &["style"], 1)?;
    let style = a.value(0);
    let code = args::number(&style).filter(|n| n.fract() == 0.0);
    #[allow(clippy::cast_possible_truncation)] // integral, and from_code rejects all but 0 and 1
    let quote = match code {
        Some(code) => QuoteStyle::from_code(code as i64),
        None => Err(Error::InvalidArgument {
            what: "quote style",
            reason: format!("{} is neither 0 (default) nor 1 (ANSI)", php::to_php_string(&style)),
        }),
    };
    state::with(|s| {
        let table = s.table().clone().with_quote(quote?);
        s.set_table(table)
    })
    .map_err(|e| to_php(Op::Configure, &e))?;
    Ok(handler::null())
}

fn get_table_body(ex: &mut ExecuteData) -> PhpResult<Zval> {
    Args::fetch(ex, &[], 0)?;
    let name = state::with(|s| Ok(s.table().display_name())).map_err(|e| to_php(Op::Configure, &e))?;
    string_zval(&name)
}

fn set_table_body(ex: &mut ExecuteData) -> PhpResult<Zval> {
    let a = Args::fetch(ex, &["table"], 1)?;
    let name = args::string(&a.value(0), 1)?;
    state::with(|s| {
        let table = Table::new(&name, s.table().quote_style())?;
        s.set_table(table)
    })
    .map_err(|e| to_php(Op::Configure, &e))?;
    Ok(handler::null())
}

// ---------------------------------------------------------------------------------
// Locks

/// A lock name argument; an unusable one fails through `fail` (the operation's own
/// exception), like the core's refusals of empty or over-long names.
fn name_arg(value: &Zval, position: u32, fail: impl FnOnce(&str, &Error) -> PhpException) -> PhpResult<String> {
    match args::lock_name(value, position)? {
        Name::Valid(name) => Ok(name),
        Name::Invalid { shown, error } => Err(fail(&shown, &error)),
    }
}

fn lock_body(ex: &mut ExecuteData) -> PhpResult<Zval> {
    let a = Args::fetch(ex, &["name", "timeout", "ttl", "options"], 3)?;
    let timeout = a.value(1);
    let name = name_arg(&a.value(0), 1, |name, e| to_php(Op::Acquire { name, timeout: &timeout }, e))?;
    let (seconds, ttl) = (args::seconds(&timeout, 2)?, args::seconds(&a.value(2), 3)?);
    let options = options::parse(a.get(3), 4)?;
    state::with(|s| s.lock(&name, seconds, ttl, &options?))
        .map_err(|e| to_php(Op::Acquire { name: &name, timeout: &timeout }, &e))?;
    new_handle(&name)
}

fn try_lock_body(ex: &mut ExecuteData) -> PhpResult<Zval> {
    let a = Args::fetch(ex, &["name", "ttl", "options"], 2)?;
    let timeout = int(0);
    let name = name_arg(&a.value(0), 1, |name, e| to_php(Op::Acquire { name, timeout: &timeout }, e))?;
    let ttl = args::seconds(&a.value(1), 2)?;
    let options = options::parse(a.get(2), 3)?;
    let lease = state::with(|s| s.try_lock(&name, ttl, &options?))
        .map_err(|e| to_php(Op::Acquire { name: &name, timeout: &timeout }, &e))?;
    match lease {
        Some(_) => new_handle(&name),
        None => Ok(handler::null()),
    }
}

/// Runs `$callback($handle)` under the lock and returns its value. The lock is released
/// afterwards whatever happens; an exception of the callback is rethrown unchanged
/// (a failed release then goes unreported: the callback's failure matters more).
/// After `exit()` or a fatal error in the callback, request shutdown releases it.
fn synchronized_body(ex: &mut ExecuteData) -> PhpResult<Zval> {
    let a = Args::fetch(ex, &["name", "timeout", "ttl", "callback", "options"], 4)?;
    let timeout = a.value(1);
    let callback = a.value(3);
    let name = name_arg(&a.value(0), 1, |name, e| to_php(Op::Acquire { name, timeout: &timeout }, e))?;
    let (seconds, ttl) = (args::seconds(&timeout, 2)?, args::seconds(&a.value(2), 3)?);
    if !callback.is_callable() {
        return Err(args::type_error(4, "callable", &callback));
    }
    let options = options::parse(a.get(4), 5)?;
    state::with(|s| s.lock(&name, seconds, ttl, &options?))
        .map_err(|e| to_php(Op::Acquire { name: &name, timeout: &timeout }, &e))?;
    let handle = new_handle(&name);
    let result = match &handle {
        Ok(handle) => php::call(&callback, vec![handle]),
        Err(_) => Err(CallError::Failed("the lock handle could not be created".to_owned())),
    };
    if matches!(result, Err(CallError::Bailout | CallError::Exiting)) {
        // The request is ending (fatal error, exit()): no more PHP may run now, so a
        // PDO session could not release; request shutdown releases every lock.
        return Err(handler::pending());
    }
    let released = state::with(|s| s.release(&name));
    match result {
        Ok(value) => {
            released.map_err(|e| to_php(Op::Release { name: &name }, &e))?;
            Ok(value)
        }
        Err(error) => Err(handler::rethrow(error)),
    }
}

fn unlock_body(ex: &mut ExecuteData) -> PhpResult<Zval> {
    let a = Args::fetch(ex, &["name"], 1)?;
    release(&a.value(0), 1)?;
    Ok(handler::null())
}

fn release(name: &Zval, position: u32) -> PhpResult<()> {
    let name = name_arg(name, position, |name, e| to_php(Op::Release { name }, e))?;
    state::with(|s| s.release(&name)).map_err(|e| to_php(Op::Release { name: &name }, &e))
}

fn renew_body(ex: &mut ExecuteData) -> PhpResult<Zval> {
    let a = Args::fetch(ex, &["name", "ttl"], 2)?;
    renew_lock(&a.value(0), 1, &a.value(1), 2)?;
    Ok(handler::null())
}

/// Extends the lease to `$ttl` seconds from now; every failure (lost, bad TTL) means the
/// lock will not live that long: `SharedLockRemainingTTLException` naming the cause.
fn renew_lock(name: &Zval, name_position: u32, ttl: &Zval, ttl_position: u32) -> PhpResult<()> {
    let name = name_arg(name, name_position, |name, e| to_php(Op::Renew { name, ttl }, e))?;
    let seconds = args::seconds(ttl, ttl_position)?;
    state::with(|s| s.renew(&name, seconds)).map_err(|e| to_php(Op::Renew { name: &name, ttl }, &e))
}

fn set_remaining_ttl_body(ex: &mut ExecuteData) -> PhpResult<Zval> {
    let a = Args::fetch(ex, &["name", "ttl"], 2)?;
    set_remaining(&a.value(0), 1, &a.value(1), 2)?;
    Ok(handler::null())
}

/// Sets the lease to end `$ttl` seconds from now, sooner or later than it would have;
/// failures as `renew_lock`'s.
fn set_remaining(name: &Zval, name_position: u32, ttl: &Zval, ttl_position: u32) -> PhpResult<()> {
    let name = name_arg(name, name_position, |name, e| to_php(Op::Renew { name, ttl }, e))?;
    let seconds = args::seconds(ttl, ttl_position)?;
    state::with(|s| s.set_remaining_ttl(&name, seconds)).map_err(|e| to_php(Op::Renew { name: &name, ttl }, &e))
}

fn assert_ttl_body(ex: &mut ExecuteData) -> PhpResult<Zval> {
    let a = Args::fetch(ex, &["name", "minRemainingTTL"], 1)?;
    let min = a.get(1).map_or_else(|| int(1), Zval::shallow_clone);
    assert_remaining(&a.value(0), 1, &min, 2)?;
    Ok(handler::null())
}

fn assert_remaining(name: &Zval, name_position: u32, min: &Zval, min_position: u32) -> PhpResult<()> {
    let name = name_arg(name, name_position, |name, e| to_php(Op::AssertTtl { name, min }, e))?;
    let seconds = args::seconds(min, min_position)?;
    state::with(|s| s.assert_ttl(&name, seconds)).map_err(|e| to_php(Op::AssertTtl { name: &name, min }, &e))?;
    Ok(())
}

/// `REPAIR TABLE` on the locks table; a `TableRepairException` unless the server says
/// OK (the core decides, as it does when an acquisition finds the table crashed).
fn try_repair_table_body(ex: &mut ExecuteData) -> PhpResult<Zval> {
    Args::fetch(ex, &[], 0)?;
    state::with(State::repair_table).map_err(|e| to_php(Op::Repair, &e))?;
    Ok(handler::null())
}

/// Creates the locks table (the original package's DDL; InnoDB on a Group Replication
/// member) on the current connection unless it exists; `true` if it was created.
fn create_table_body(ex: &mut ExecuteData) -> PhpResult<Zval> {
    Args::fetch(ex, &[], 0)?;
    let created = state::with(State::create_table).map_err(|e| to_php(Op::Configure, &e))?;
    Ok(handler::boolean(created))
}

/// Whether anyone (this process included) holds `$name` now.
fn is_locked_body(ex: &mut ExecuteData) -> PhpResult<Zval> {
    let a = Args::fetch(ex, &["name"], 1)?;
    let name = name_arg(&a.value(0), 1, |name, e| to_php(Op::Inspect { name }, e))?;
    let (row, _) = state::with(|s| s.status(&name)).map_err(|e| to_php(Op::Inspect { name: &name }, &e))?;
    let locked = row.is_some_and(|r| r.remaining > 0.0 && (!r.acquired || r.holder_alive));
    Ok(handler::boolean(locked))
}

/// Who holds `$name`: `null` when nobody does, else `['connectionId' => int, 'host' =>
/// ?string, 'ttl' => int, 'remainingTTL' => float, 'age' => float, 'acquired' => bool,
/// 'alive' => bool, 'mine' => bool, 'token' => ?int, 'hostname' => ?string, 'pid' =>
/// ?int, 'acquiredAt' => int, 'expiresAt' => int]` from the table row (database clock;
/// token, hostname and pid only on an upgraded table).
fn holder_body(ex: &mut ExecuteData) -> PhpResult<Zval> {
    let a = Args::fetch(ex, &["name"], 1)?;
    let name = name_arg(&a.value(0), 1, |name, e| to_php(Op::Inspect { name }, e))?;
    let (row, mine) = state::with(|s| s.status(&name)).map_err(|e| to_php(Op::Inspect { name: &name }, &e))?;
    let Some(row) = row else { return Ok(handler::null()) };
    let (acquired_at, expires_at) = (row.acquired_at(), row.expires_at());
    let mut info = ZendHashTable::new();
    info.insert("connectionId", php_int(row.connection_id))?;
    info.insert("host", row.host)?;
    info.insert("ttl", row.ttl)?;
    info.insert("remainingTTL", row.remaining)?;
    info.insert("age", row.age)?;
    info.insert("acquired", row.acquired)?;
    info.insert("alive", row.holder_alive)?;
    info.insert("mine", mine)?;
    info.insert("token", row.token.map(php_int))?;
    info.insert("hostname", row.hostname)?;
    info.insert("pid", row.pid.map(php_int))?;
    info.insert("acquiredAt", acquired_at)?;
    info.insert("expiresAt", expires_at)?;
    let mut z = Zval::new();
    z.set_hashtable(info);
    Ok(z)
}

// ---------------------------------------------------------------------------------
// SharedLockHandle

fn new_handle(name: &str) -> PhpResult<Zval> {
    let class = Class::Handle.entry().ok_or_else(handler::pending)?;
    php::instantiate(class, vec![&name]).map_err(handler::rethrow)
}

/// The handle's `$lockName` (as the constructor stored it).
fn handle_name(ex: &mut ExecuteData) -> PhpResult<(Zval, Zval)> {
    let this = args::this(ex)?;
    let class = Class::Handle.entry().ok_or_else(handler::pending)?;
    let name = this.object().and_then(|o| php::read_property(o, class, "lockName")).unwrap_or_default();
    Ok((this, name))
}

fn handle_construct_body(ex: &mut ExecuteData) -> PhpResult<Zval> {
    let mut this = args::this(ex)?;
    let a = Args::fetch(ex, &["lockName"], 1)?;
    let class = Class::Handle.entry().ok_or_else(handler::pending)?;
    if let Some(object) = this.object_mut() {
        php::write_property(object, class, "lockName", &a.value(0));
    }
    Ok(handler::null())
}

fn handle_release_body(ex: &mut ExecuteData) -> PhpResult<Zval> {
    let (this, name) = handle_name(ex)?;
    Args::fetch(ex, &[], 0)?;
    release(&name, 1)?;
    Ok(this)
}

fn handle_assert_ttl_body(ex: &mut ExecuteData) -> PhpResult<Zval> {
    let (this, name) = handle_name(ex)?;
    let a = Args::fetch(ex, &["min"], 0)?;
    let min = a.get(0).map_or_else(|| int(1), Zval::shallow_clone);
    assert_remaining(&name, 1, &min, 1)?;
    Ok(this)
}

fn handle_get_name_body(ex: &mut ExecuteData) -> PhpResult<Zval> {
    let (_, name) = handle_name(ex)?;
    Args::fetch(ex, &[], 0)?;
    Ok(name)
}

/// Seconds until another process may take the lock over (database clock).
fn handle_get_remaining_ttl_body(ex: &mut ExecuteData) -> PhpResult<Zval> {
    let (_, name) = handle_name(ex)?;
    Args::fetch(ex, &[], 0)?;
    let name = name_arg(&name, 1, |name, e| to_php(Op::RemainingTtl { name }, e))?;
    let remaining =
        state::with(|s| s.remaining_ttl(&name)).map_err(|e| to_php(Op::RemainingTtl { name: &name }, &e))?;
    Ok(handler::double(remaining))
}

/// The fencing token of this acquisition (see `SharedLock` in the stub for its use).
fn handle_get_token_body(ex: &mut ExecuteData) -> PhpResult<Zval> {
    let (_, name) = handle_name(ex)?;
    Args::fetch(ex, &[], 0)?;
    let name = name_arg(&name, 1, |name, e| to_php(Op::Token { name }, e))?;
    let (token, table) = state::with(|s| s.token(&name)).map_err(|e| to_php(Op::Token { name: &name }, &e))?;
    match token {
        Some(token) => Ok(int(php_int(token))),
        None => Err(exceptions::no_token(&name, &table)),
    }
}

fn handle_renew_body(ex: &mut ExecuteData) -> PhpResult<Zval> {
    let (this, name) = handle_name(ex)?;
    let a = Args::fetch(ex, &["ttl"], 1)?;
    renew_lock(&name, 1, &a.value(0), 1)?;
    Ok(this)
}

fn handle_set_remaining_ttl_body(ex: &mut ExecuteData) -> PhpResult<Zval> {
    let (this, name) = handle_name(ex)?;
    let a = Args::fetch(ex, &["ttl"], 1)?;
    set_remaining(&name, 1, &a.value(0), 1)?;
    Ok(this)
}

// ---------------------------------------------------------------------------------

fn string_zval(value: &str) -> PhpResult<Zval> {
    let mut z = Zval::new();
    z.set_string(value, false)?;
    Ok(z)
}
