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
//! `connect_timeout`, `read_timeout` and `write_timeout` in `mysqllock.dsn`'s query win
//! over the three settings. All are `PHP_INI_ALL` (php.ini, `.user.ini`, `ini_set`). The password in
//! `mysqllock.dsn` is shown masked by `php --ri` and `phpinfo()`, which also show the
//! TLS mode it puts in force (`ssl-mode`, `ssl-ca`, `ssl-cert`, `ssl-key` in its query).

use std::ffi::{c_char, c_int, CStr, CString};
use std::time::Duration;

use ext_php_rs::ffi::{php_info_print_table_end, php_info_print_table_row, php_info_print_table_start, zend_ini_entry};
use ext_php_rs::flags::IniEntryPermission;
use ext_php_rs::zend::{IniEntryDef, IniEntryDefs, ModuleEntry, SapiModule};
use mysqllock_core::Config;

pub const DSN: &CStr = c"mysqllock.dsn";
pub const TABLE: &CStr = c"mysqllock.table";
pub const CONNECT_TIMEOUT: &CStr = c"mysqllock.connect_timeout";
pub const ALLOW_CLUSTER: &CStr = c"mysqllock.allow_cluster";
pub const READ_TIMEOUT: &CStr = c"mysqllock.read_timeout";
pub const WRITE_TIMEOUT: &CStr = c"mysqllock.write_timeout";

const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

static ENTRIES: IniEntryDefs<7> = IniEntryDefs::new([
    masked(IniEntryDef::new(DSN, c"", IniEntryPermission::All)),
    IniEntryDef::new(TABLE, c"shared_locks", IniEntryPermission::All),
    IniEntryDef::new(CONNECT_TIMEOUT, c"10", IniEntryPermission::All),
    IniEntryDef::new(ALLOW_CLUSTER, c"0", IniEntryPermission::All),
    IniEntryDef::new(READ_TIMEOUT, c"30", IniEntryPermission::All),
    IniEntryDef::new(WRITE_TIMEOUT, c"30", IniEntryPermission::All),
    IniEntryDef::end(),
]);

const fn masked(mut entry: IniEntryDef) -> IniEntryDef {
    entry.displayer = Some(display_masked);
    entry
}

/// Registers the settings; module startup only.
pub fn register(module_number: i32) {
    IniEntryDef::register(ENTRIES.as_slice(), module_number);
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

/// `mysqllock.connect_timeout` (a positive number of seconds; the default otherwise).
pub fn connect_timeout() -> Duration {
    seconds(CONNECT_TIMEOUT).unwrap_or(DEFAULT_CONNECT_TIMEOUT)
}

/// `mysqllock.read_timeout` (a positive number of seconds; the core's default otherwise).
pub fn read_timeout() -> Duration {
    seconds(READ_TIMEOUT).unwrap_or(mysqllock_core::DEFAULT_IO_TIMEOUT)
}

/// `mysqllock.write_timeout` (a positive number of seconds; the core's default otherwise).
pub fn write_timeout() -> Duration {
    seconds(WRITE_TIMEOUT).unwrap_or(mysqllock_core::DEFAULT_IO_TIMEOUT)
}

/// A setting of positive seconds under an hour; `None` when unset or not that.
fn seconds(name: &CStr) -> Option<Duration> {
    get(name)
        .and_then(|v| v.trim().parse::<f64>().ok())
        .filter(|s| s.is_finite() && *s > 0.0 && *s < 3600.0)
        .map(Duration::from_secs_f64)
}

/// `mysqllock.allow_cluster`: whether GET_LOCK-based locks may run on a replicated
/// cluster node (a deployment that routes all lock traffic to one node). php.ini's
/// boolean spellings: `1`, `on`, `yes`, `true`.
pub fn allow_cluster() -> bool {
    get(ALLOW_CLUSTER).is_some_and(|v| matches!(v.trim().to_ascii_lowercase().as_str(), "1" | "on" | "yes" | "true"))
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
