//! php.ini settings and the `php --ri mysqllock` / `phpinfo()` section.
//!
//! | setting | default | meaning |
//! |---|---|---|
//! | `mysqllock.dsn` | (empty) | `mysql://user:password@host:port/db?socket=...&ssl-mode=...` used until `configureConnection()`/`setConnection()` is called |
//! | `mysqllock.table` | `shared_locks` | the locks table (`name` or `schema.name`) until `setTable()` |
//! | `mysqllock.connect_timeout` | `10` | seconds the whole connect may take (TCP, TLS, login, session setup) |
//! | `mysqllock.read_timeout` | `30` | seconds a statement may go unanswered beyond the lock wait it asks for |
//! | `mysqllock.write_timeout` | `30` | seconds sending to the server may stay stuck |
//! | `mysqllock.allow_cluster` | `0` | let `SharedLock` (GET_LOCK) run on a Galera node or Group Replication member |
//!
//! The defaults are the core's (`Config::default()`), written into the entries at startup,
//! and every value is read by the core's own `Config::set` ([`config`]): a timeout is
//! seconds (`1.5`) or a number with a unit (`500ms`), as in a URL, and a value the core
//! refuses (`0` for a read or write bound, `soon`) is an error naming the setting, never
//! quietly the default. `connect_timeout`, `read_timeout` and `write_timeout` in
//! `mysqllock.dsn`'s query win over the three settings. All are `PHP_INI_ALL` (php.ini,
//! `.user.ini`, `ini_set`). The password in `mysqllock.dsn` is shown masked by `php --ri`
//! and `phpinfo()`, which also show the TLS mode it puts in force (`ssl-mode`, `ssl-ca`,
//! `ssl-cert`, `ssl-key` in its query).

use std::ffi::{c_char, c_int, CStr, CString};
use std::time::Duration;

use ext_php_rs::ffi::{php_info_print_table_end, php_info_print_table_row, php_info_print_table_start, zend_ini_entry};
use ext_php_rs::flags::IniEntryPermission;
use ext_php_rs::zend::{IniEntryDef, ModuleEntry, SapiModule};
use mysqllock_core::{Config, Error, DEFAULT_TABLE};

pub const DSN: &CStr = c"mysqllock.dsn";
pub const TABLE: &CStr = c"mysqllock.table";
pub const CONNECT_TIMEOUT: &CStr = c"mysqllock.connect_timeout";
pub const ALLOW_CLUSTER: &CStr = c"mysqllock.allow_cluster";
pub const READ_TIMEOUT: &CStr = c"mysqllock.read_timeout";
pub const WRITE_TIMEOUT: &CStr = c"mysqllock.write_timeout";

/// The settings that are the core's `Config` parts of the same names, laid over its
/// defaults in this order by [`config`].
const CONFIG_PARTS: [(&CStr, &str); 4] = [
    (CONNECT_TIMEOUT, "connect_timeout"),
    (READ_TIMEOUT, "read_timeout"),
    (WRITE_TIMEOUT, "write_timeout"),
    (ALLOW_CLUSTER, "allow_cluster"),
];

fn masked(mut entry: IniEntryDef) -> IniEntryDef {
    entry.displayer = Some(display_masked);
    entry
}

/// Registers the settings, with the core's defaults (shown by `php --ri`); module
/// startup only. The table is made once per process and kept, as the engine keeps
/// pointers into it.
pub fn register(module_number: i32) {
    let defaults = Config::default();
    let seconds = |d: Duration| kept(d.as_secs_f64().to_string());
    let entry = |name, default| {
        let mut entry = IniEntryDef::new(name, default, IniEntryPermission::All);
        entry.on_modify = Some(take_any);
        entry
    };
    let entries = vec![
        masked(entry(DSN, c"")),
        entry(TABLE, kept(DEFAULT_TABLE.to_owned())),
        entry(CONNECT_TIMEOUT, seconds(defaults.connect_timeout)),
        entry(ALLOW_CLUSTER, kept(u8::from(defaults.allow_cluster).to_string())),
        entry(READ_TIMEOUT, seconds(defaults.read_timeout)),
        entry(WRITE_TIMEOUT, seconds(defaults.write_timeout)),
        IniEntryDef::end(),
    ];
    IniEntryDef::register(Box::leak(entries.into_boxed_slice()), module_number);
}

/// Every value is taken as it is: it is judged where it is read ([`config`]), so a bad
/// one is an error that names it there, never refused here in favour of the old one.
/// Without a handler the engine refuses `ini_restore()` at run time (it takes a missing
/// handler for a failed one), and the setting would keep what `ini_set()` gave it.
unsafe extern "C" fn take_any(
    _entry: *mut zend_ini_entry,
    _value: *mut ext_php_rs::ffi::zend_string,
    _arg1: *mut std::ffi::c_void,
    _arg2: *mut std::ffi::c_void,
    _arg3: *mut std::ffi::c_void,
    _stage: c_int,
) -> c_int {
    // SUCCESS
    0
}

/// `text` as a C string that lives as long as the process (a default value of the table
/// the engine keeps).
fn kept(text: String) -> &'static CStr {
    Box::leak(CString::new(text).unwrap_or_default().into_boxed_c_str())
}

/// Unregisters them; module shutdown.
pub fn unregister(module_number: i32) {
    // SAFETY: the entries were registered under this module number at startup.
    unsafe { zend_unregister_ini_entries(module_number) };
}

/// The current value of a setting; `None` when unset or empty.
pub fn get(name: &CStr) -> Option<String> {
    let mut exists = false;
    // SAFETY: a NUL-terminated name with its length; the engine returns its own copy
    // of the value (or NULL), valid until the setting changes; we copy it at once.
    let value = unsafe { zend_ini_string_ex(name.as_ptr(), name.count_bytes(), 0, &raw mut exists) };
    if !exists || value.is_null() {
        return None;
    }
    // SAFETY: non-null, NUL-terminated string owned by the engine.
    let value = unsafe { CStr::from_ptr(value) }.to_string_lossy().into_owned();
    (!value.is_empty()).then_some(value)
}

/// The core's `Config` with php.ini's `connect_timeout`, `read_timeout`, `write_timeout`
/// and `allow_cluster` laid over its defaults by `Config::set`, the one parser of every
/// surface: the base the extension's own connection is configured on. A value the core
/// refuses is an error naming the setting.
pub fn config() -> Result<Config, Error> {
    let mut config = Config::default();
    for (name, key) in CONFIG_PARTS {
        lay(&mut config, name, key)?;
    }
    Ok(config)
}

/// `mysqllock.allow_cluster` alone (for the user's PDO or mysqli, where the timeouts do
/// not apply): whether GET_LOCK-based locks may run on a replicated cluster node (a
/// deployment that routes all lock traffic to one node). php.ini's spellings of on and
/// off (`1`, `On`, `yes`, `true`; `0`, `Off`, `no`, `false`), as the core reads them.
pub fn allow_cluster() -> Result<bool, Error> {
    let mut config = Config::default();
    lay(&mut config, ALLOW_CLUSTER, "allow_cluster")?;
    Ok(config.allow_cluster)
}

/// Lays the setting `name` over `config` as its part `key`, when it has a value.
fn lay(config: &mut Config, name: &'static CStr, key: &str) -> Result<(), Error> {
    let Some(value) = get(name) else { return Ok(()) };
    config.set(key, &value).map_err(|e| match e {
        // The core's words, with the setting's own name.
        Error::InvalidArgument { reason, .. } => {
            Error::InvalidArgument { what: name.to_str().unwrap_or("php.ini setting"), reason }
        }
        other => other,
    })
}

/// `mysql://user:***@host/db`: the URL with its password replaced.
pub fn mask_password(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, path) = rest.split_at(authority_end);
    let Some((userinfo, host)) = authority.rsplit_once('@') else {
        return url.to_owned();
    };
    match userinfo.split_once(':') {
        Some((user, _)) => format!("{scheme}://{user}:***@{host}{path}"),
        None => url.to_owned(),
    }
}

/// The engine's `ZEND_INI_DISPLAY_ORIG`: show the php.ini value, not the current one.
const DISPLAY_ORIG: c_int = 1;

/// Displays `mysqllock.dsn` without its password (php --ri, phpinfo()).
unsafe extern "C" fn display_masked(entry: *mut zend_ini_entry, kind: c_int) {
    let _ = std::panic::catch_unwind(|| {
        // SAFETY: the engine passes a live entry.
        let Some(entry) = (unsafe { entry.as_ref() }) else { return };
        let value = if kind == DISPLAY_ORIG && entry.modified != 0 { entry.orig_value } else { entry.value };
        // SAFETY: null or a live zend_string owned by the entry.
        let value =
            unsafe { value.as_ref() }.map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned()).unwrap_or_default();
        let html = SapiModule::get().phpinfo_as_text == 0;
        let shown = match (value.is_empty(), html) {
            (true, true) => "<i>no value</i>".to_owned(),
            (true, false) => "no value".to_owned(),
            (false, true) => html_escape(&mask_password(&value)),
            (false, false) => mask_password(&value),
        };
        let _ = ext_php_rs::zend::printf(&shown);
    });
}

fn html_escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// The `php --ri mysqllock` section: version, what the extension provides, then the
/// settings (through the engine, so `phpinfo()` formats them as for any extension).
pub unsafe extern "C" fn info(module: *mut ModuleEntry) {
    let _ = std::panic::catch_unwind(|| {
        let rows: [(&CStr, &CStr); 4] = [
            (c"mysqllock support", c"enabled"),
            (c"Version", VERSION),
            (
                c"Classes",
                c"ItsMieger\\MySqlSharedLocks\\SharedLock, SharedLockHandle, Exception\\*; Nene\\Kit\\DistributedLock; \
                  MySqlLock\\SessionLock, MySqlLock\\PdoFactory, MySqlLock\\*Exception",
            ),
            (
                c"Lock table protocol",
                c"its-mieger/mysql-shared-locks (shared_locks table + GET_LOCK); lease mode (distributed_locks table); \
                  session locks (GET_LOCK only)",
            ),
        ];
        let tls = CString::new(tls_in_force()).unwrap_or_default();
        // SAFETY: called by the engine while printing module info; the C strings live
        // until the end of this block.
        unsafe {
            php_info_print_table_start();
            for (key, value) in rows {
                php_info_print_table_row(2, key.as_ptr(), value.as_ptr());
            }
            php_info_print_table_row(2, c"TLS (mysqllock.dsn)".as_ptr(), tls.as_ptr());
            php_info_print_table_end();
            display_ini_entries(module);
        }
    });
}

/// The TLS of the connection `mysqllock.dsn` names: the mode in force (given, or what
/// the settings imply) and the files named. Paths only, never a password.
fn tls_in_force() -> String {
    let Some(url) = get(DSN) else {
        return "PREFERRED (the default; mysqllock.dsn is not set)".to_owned();
    };
    let tls = match Config::from_url(&url) {
        Ok(config) => config.tls,
        Err(e) => return format!("unknown: mysqllock.dsn is invalid: {e}"),
    };
    let mut shown = tls.mode().name().to_owned();
    match (tls.mode, &tls.ca) {
        (None, Some(_)) => shown.push_str(" (ssl-ca without ssl-mode)"),
        (None, None) => shown.push_str(" (the default)"),
        (Some(_), _) => {}
    }
    for (key, path) in [("ssl-ca", &tls.ca), ("ssl-cert", &tls.cert), ("ssl-key", &tls.key)] {
        if let Some(path) = path {
            shown.push_str(&format!(", {key}={path}"));
        }
    }
    shown
}

const VERSION: &CStr = match CStr::from_bytes_with_nul(concat!(env!("CARGO_PKG_VERSION"), "\0").as_bytes()) {
    Ok(v) => v,
    Err(_) => c"unknown",
};

unsafe extern "C" {
    // Zend/PHP API (zend_ini.h) not covered by ext-php-rs' bindings.
    fn zend_ini_string_ex(name: *const c_char, name_length: usize, orig: c_int, exists: *mut bool) -> *mut c_char;
    fn zend_unregister_ini_entries(module_number: c_int);
    fn display_ini_entries(module: *mut ModuleEntry);
}
