//! The PDOs the extension opens for the user: `SharedLock::getConnection()`'s, and
//! `MySqlLock\PdoFactory::fromUrl()`'s (the bridges lease on PDOs), with the connection's
//! TLS settings in the form PDO takes them: attributes, not DSN keys.
//!
//! What mysqlnd does with TLS, measured with PHP 8.2 against a MariaDB 10.11 with
//! `require_secure_transport` (and one without TLS):
//!
//! - It encrypts only when one of `MYSQL_ATTR_SSL_KEY`, `_CERT`, `_CA`, `_CAPATH` or
//!   `_CIPHER` is set, and then insists: a server without TLS ends the login ("MySQL
//!   server has gone away"). `MYSQL_ATTR_SSL_VERIFY_SERVER_CERT` alone changes nothing.
//! - Encrypting, it checks the server's certificate unless
//!   `MYSQL_ATTR_SSL_VERIFY_SERVER_CERT` is false, and checking is the chain (to
//!   `MYSQL_ATTR_SSL_CA`, else `_CAPATH`, with php.ini's `openssl.cafile`) *and* the DSN's
//!   host name: there is no `VERIFY_CA` that leaves the name out. With false nothing is
//!   checked, not even against a CA given.
//! - It cannot encrypt over a Unix socket, and `host=localhost` is the socket to PDO.
//! - Every TLS failure reads "Cannot connect to MySQL using SSL" (2002).
//!
//! So the modes become:
//!
//! | ssl-mode | the PDO |
//! |---|---|
//! | `DISABLED` | no TLS (exact) |
//! | `PREFERRED` | no TLS: mysqlnd cannot fall back to plain, and insisting would shut out servers without TLS (PDOs were always plain; documented) |
//! | `REQUIRED` | TLS, the certificate unchecked (exact) |
//! | `REQUIRED` with `ssl-ca`, `VERIFY_CA` | TLS, chain *and* host name checked: stricter than asked, never weaker |
//! | `VERIFY_IDENTITY` | TLS, chain and host name checked (exact) |
//!
//! A mode that needs TLS on a PDO that would go over a Unix socket is refused.

use std::fs::File;

use ext_php_rs::args::Arg;
use ext_php_rs::builders::{ClassBuilder, FunctionBuilder};
use ext_php_rs::exception::{PhpException, PhpResult};
use ext_php_rs::flags::{ClassFlags, DataType, MethodFlags};
use ext_php_rs::types::{ZendHashTable, Zval};
use ext_php_rs::zend::{ClassEntry, ExecuteData};
use mysqllock_core::{Config, Error, Tls};

use crate::args::{self, Args};
use crate::connection::{is_socket_host, OwnConnection, PdoTarget};
use crate::exceptions::{to_php, Op};
use crate::handler::{self, handlers};
use crate::ini;
use crate::pdo_session::{whole_seconds, ReadBound};
use crate::php::{self, Noise};
use crate::registry::Class;

/// `PDO::ATTR_ERRMODE` => `PDO::ERRMODE_EXCEPTION`, `PDO::ATTR_EMULATE_PREPARES`,
/// `PDO::ATTR_TIMEOUT`: PDO's own attributes, the same numbers in every build.
const ATTR_TIMEOUT: i64 = 2;
const ATTR_ERRMODE: i64 = 3;
const ERRMODE_EXCEPTION: i64 = 2;
const ATTR_EMULATE_PREPARES: i64 = 20;

/// `new PDO(...)` for `target`: exceptions on, real prepared statements, the TLS
/// attributes, and its bounds: `connect_timeout` for the TCP connect (`ATTR_TIMEOUT`,
/// whole seconds, rounded up), and the read bound, if any, as `mysqlnd.net_read_timeout`
/// while it connects (mysqlnd takes that setting once, for the connection's lifetime,
/// and PDO has no attribute for it; the user's value is put back at once). Returns the
/// read bound the PDO got: none where `ini_set` is disabled. Called outside the state:
/// `new PDO` may warn, and a user's error handler may run.
pub fn open(target: &PdoTarget) -> PhpResult<(Zval, Option<ReadBound>)> {
    let class = ClassEntry::try_find("PDO")
        .ok_or_else(|| PhpException::from_message("the PDO extension is not loaded".to_owned()))?;
    let mut options = ZendHashTable::new();
    options.insert_at_index(ATTR_ERRMODE, ERRMODE_EXCEPTION)?;
    options.insert_at_index(ATTR_EMULATE_PREPARES, false)?;
    if !target.connect_timeout.is_zero() {
        let seconds = i64::try_from(whole_seconds(target.connect_timeout)).unwrap_or(i64::MAX);
        options.insert_at_index(ATTR_TIMEOUT, seconds)?;
    }
    for (attribute, value) in tls_attributes(&target.tls, target.over_socket).map_err(|e| to_php(Op::Configure, &e))? {
        match value {
            Value::Text(text) => options.insert_at_index(attribute, text)?,
            Value::Flag(flag) => options.insert_at_index(attribute, flag)?,
        }
    }
    let mut options_zval = Zval::new();
    options_zval.set_hashtable(options);
    let password = target.password.as_deref().map_or_else(Zval::null, |p| {
        let mut z = Zval::new();
        let _ = z.set_string(p, false);
        z
    });
    let applied = target.read_bound.as_ref().and_then(|bound| {
        let replaced = set_ini(NET_READ_TIMEOUT, &bound.limit.as_secs().to_string())?;
        Some((replaced, bound.clone()))
    });
    let pdo = php::instantiate(class, vec![&target.dsn, &target.user, &password, &options_zval]);
    if let Some((users, _)) = &applied {
        set_ini(NET_READ_TIMEOUT, users);
    }
    Ok((pdo.map_err(handler::rethrow)?, applied.map(|(_, bound)| bound)))
}

/// mysqlnd's bound for every read (and write) of a connection, taken when it connects.
const NET_READ_TIMEOUT: &str = "mysqlnd.net_read_timeout";

/// `ini_set($name, $value)`: the value it replaced, or `None` where it was refused
/// (`disable_functions`, a PHP without mysqlnd).
fn set_ini(name: &str, value: &str) -> Option<String> {
    php::call_function("ini_set", vec![&name, &value], Noise::Quiet).ok()?.string()
}

/// mysqlnd's TLS attributes (`PDO::MYSQL_ATTR_SSL_*`).
#[derive(Debug, Clone, Copy)]
enum Attribute {
    Key,
    Cert,
    Ca,
    Capath,
    VerifyServerCert,
}

impl Attribute {
    /// The constant's name after `PDO::MYSQL_ATTR_` (and `Pdo\Mysql::ATTR_`).
    fn suffix(self) -> &'static str {
        match self {
            Attribute::Key => "SSL_KEY",
            Attribute::Cert => "SSL_CERT",
            Attribute::Ca => "SSL_CA",
            Attribute::Capath => "SSL_CAPATH",
            Attribute::VerifyServerCert => "SSL_VERIFY_SERVER_CERT",
        }
    }

    /// The attribute's number. pdo_mysql numbers its attributes differently when built
    /// on libmysqlclient than on mysqlnd, so it is asked, never assumed.
    fn number(self) -> Result<i64, Error> {
        for name in [format!("Pdo\\Mysql::ATTR_{}", self.suffix()), format!("PDO::MYSQL_ATTR_{}", self.suffix())] {
            if let Some(n) = php::call_function("constant", vec![&name], Noise::Quiet).ok().and_then(|z| z.long()) {
                return Ok(n);
            }
        }
        Err(Error::InvalidArgument {
            what: "ssl-mode",
            reason: format!("PDO::MYSQL_ATTR_{} is not defined: is pdo_mysql loaded?", self.suffix()),
        })
    }
}

/// What the plan puts in an attribute.
enum Planned {
    /// A file the user named (`ssl-ca`, `ssl-cert`, `ssl-key`), with its setting's name.
    File(&'static str, String),
    /// OpenSSL's default CA directory: the system's store.
    SystemStore,
    Flag(bool),
}

/// An attribute's value for PDO.
enum Value {
    Text(String),
    Flag(bool),
}

/// The TLS attributes of `tls` in the table above, with PHP's names resolved; the
/// user's files checked first (mysqlnd would only say "Cannot connect to MySQL using
/// SSL").
fn tls_attributes(tls: &Tls, over_socket: bool) -> Result<Vec<(i64, Value)>, Error> {
    let plan = plan(tls, over_socket)?;
    if plan.is_empty() {
        return Ok(Vec::new());
    }
    let openssl = php::call_function("extension_loaded", vec![&"openssl"], Noise::Quiet).ok().and_then(|z| z.bool());
    if openssl != Some(true) {
        return Err(Error::InvalidArgument {
            what: "ssl-mode",
            reason: format!(
                "ssl-mode={} needs TLS on the PDO, and PDO encrypts through PHP's openssl extension, which is not loaded",
                tls.mode().name()
            ),
        });
    }
    let mut attributes = Vec::with_capacity(plan.len());
    for (attribute, planned) in plan {
        let value = match planned {
            Planned::File(setting, path) => {
                if let Err(e) = File::open(&path) {
                    return Err(Error::InvalidArgument { what: setting, reason: format!("cannot read {path}: {e}") });
                }
                Value::Text(path)
            }
            Planned::SystemStore => Value::Text(system_ca_dir()?),
            Planned::Flag(flag) => Value::Flag(flag),
        };
        attributes.push((attribute.number()?, value));
    }
    Ok(attributes)
}

/// Which attributes `tls` calls for (see the module's table).
fn plan(tls: &Tls, over_socket: bool) -> Result<Vec<(Attribute, Planned)>, Error> {
    let mode = tls.mode();
    if !mode.requires_tls() {
        return Ok(Vec::new());
    }
    if over_socket {
        return Err(Error::InvalidArgument {
            what: "ssl-mode",
            reason: format!(
                "ssl-mode={} needs TLS, and a PDO (mysqlnd) cannot use TLS over a Unix socket, which is where PDO goes \
                 for host localhost or a socket: give the PDO a TCP address (the server's name as its certificate \
                 lists it, or an IP address with ssl-mode=REQUIRED)",
                mode.name()
            ),
        });
    }
    let mut plan = Vec::new();
    if let (Some(cert), Some(key)) = (&tls.cert, &tls.key) {
        plan.push((Attribute::Cert, Planned::File("ssl-cert", cert.clone())));
        plan.push((Attribute::Key, Planned::File("ssl-key", key.clone())));
    }
    // Without ssl-ca the system's store is the CA, as for the native connection; with
    // verification off it is read by nobody and only tells mysqlnd to encrypt.
    plan.push(match &tls.ca {
        Some(ca) => (Attribute::Ca, Planned::File("ssl-ca", ca.clone())),
        None => (Attribute::Capath, Planned::SystemStore),
    });
    plan.push((Attribute::VerifyServerCert, Planned::Flag(tls.verifies_chain())));
    Ok(plan)
}

/// OpenSSL's default CA directory, as PHP's openssl extension reports it.
fn system_ca_dir() -> Result<String, Error> {
    php::call_function("openssl_get_cert_locations", vec![], Noise::Quiet)
        .ok()
        .and_then(|locations| locations.array().and_then(|a| a.get("default_cert_dir")).and_then(Zval::string))
        .filter(|dir| !dir.is_empty())
        .ok_or_else(|| Error::InvalidArgument {
            what: "ssl-ca",
            reason: "PHP's openssl extension names no default CA directory: name the server's CA with ssl-ca".into(),
        })
}

// ---------------------------------------------------------------------------------
// MySqlLock\PdoFactory

/// Registers `MySqlLock\PdoFactory` (final: the class only holds a static method);
/// module startup only.
pub fn register() -> ext_php_rs::error::Result<()> {
    let from_url = FunctionBuilder::new("fromUrl", from_url).arg(Arg::new("url", DataType::String)).returns(
        DataType::object("PDO"),
        false,
        false,
    );
    let builder =
        ClassBuilder::new(Class::PdoFactory.name()).method(from_url, MethodFlags::Public | MethodFlags::Static);
    Class::PdoFactory.register_with(builder, ClassFlags::Final)
}

handlers! {
    from_url => from_url_body,
}

/// `fromUrl(string $url): PDO`: a PDO on the server of a `mysql://` URL in
/// `mysqllock.dsn`'s syntax.
fn from_url_body(ex: &mut ExecuteData) -> PhpResult<Zval> {
    let a = Args::fetch(ex, &["url"], 1)?;
    let url = args::string(&a.value(0), 1)?;
    let target = url_target(&url).map_err(|e| to_php(Op::Configure, &e))?;
    open(&target).map(|(pdo, _)| pdo)
}

/// The PDO for a `mysql://` URL: its socket if it names one (as the native connection
/// takes it), else its host and port.
fn url_target(url: &str) -> Result<PdoTarget, Error> {
    let (own, _) = OwnConnection::from_url(ini::config()?, url)?;
    let Config { host, port, socket, database, charset, user, password, tls, connect_timeout, .. } = own.config;
    let mut dsn = match &socket {
        Some(path) => format!("mysql:unix_socket={path}"),
        None => format!("mysql:host={host};port={port}"),
    };
    if let Some(db) = &database {
        dsn.push_str(&format!(";dbname={db}"));
    }
    dsn.push_str(&format!(";charset={charset}"));
    let over_socket = socket.is_some() || is_socket_host(&host);
    Ok(PdoTarget { dsn, user, password, tls, over_socket, connect_timeout, read_bound: None })
}
