//! Where locks are taken: the core's native MySQL session (the default), the session of
//! a PDO the user handed over or asked for, or (session locks) of a user's mysqli. The
//! protocol is the core's in every case; this module only builds sessions.
//!
//! [`PhpConnector`] is the one core `Connector` of every PHP class: the `Locker`s of
//! `SharedLock` and `SessionLock`, and the lease mode's `DistributedLock`. What differs is
//! said by whoever builds it: a PDO session of a `Locker` knows its `CONNECTION_ID()`
//! (the protocol writes it into the row and KILLs by it), one of the lease mode does not
//! need it (and SQLite has none); only the lease mode's PDO may be replaced by the
//! constructor's `$reconnect` once it is lost.

use std::path::Path;
use std::time::Duration;

use ext_php_rs::types::Zval;
use ext_php_rs::zend::ClassEntry;
use mysqllock_core::{
    url_settings, Config, Connector, Dialect, Error, MysqlSession, OpenSession, Session, SessionError, Table, Tls,
};

use crate::driver::{self, Statements};
use crate::ini;
use crate::mysqli_session::MysqliSession;
use crate::pdo_session::{self, PdoSession, ReadBound};
use crate::php;

/// The extension's own connection as configured (`mysqllock.dsn`, or the parameters of
/// `configureConnection()`): the core's [`Config`], laid by the core's own
/// [`Config::set`] over a base made from php.ini's settings ([`ini::config`]), so every
/// setting has one parser and one default; and the little a PDO DSN needs beyond it.
#[derive(Clone)]
pub struct OwnConnection {
    /// As given: `host` may be empty or `localhost`, which [`native`](Self::native) reads
    /// as PDO does.
    pub config: Config,
    /// Whether a port was given (a PDO DSN names one only then).
    port_named: bool,
    /// `configureConnection()`'s `$additionalDsn` without its TLS keys, appended
    /// verbatim to a PDO DSN.
    additional_dsn: Option<String>,
}

impl OwnConnection {
    /// `configureConnection($host, $dbName, $username, $password, $charset, $port,
    /// $additionalDsn)` over `base` (php.ini's settings). The PDO DSN keys in
    /// `$additionalDsn` that the native connection understands (`unix_socket`, `host`,
    /// `port`, `dbname`, `charset`) are applied to it too; others only reach PDOs made by
    /// `getConnection()`. The TLS keys of the `mysql` client (`ssl-mode`, `ssl-ca`,
    /// `ssl-cert`, `ssl-key`, or with `_`) are no PDO DSN keys: they go to the core's
    /// `Config::set`, as in `mysqllock.dsn`, and are taken out of the DSN (a PDO gets them
    /// as attributes, see `pdo_tls`).
    #[allow(clippy::too_many_arguments)] // the PHP method's parameters, one for one
    pub fn from_parameters(
        base: Config,
        host: String,
        database: Option<String>,
        user: String,
        password: Option<String>,
        charset: String,
        port: Option<u16>,
        additional_dsn: Option<String>,
    ) -> Result<OwnConnection, Error> {
        let mut config = Config { host, database, user, password, charset, ..base };
        let mut port_named = port.is_some();
        config.port = port.unwrap_or(config.port);
        let (mut pdo_pairs, mut took_tls) = (Vec::new(), false);
        if let Some(extra) = &additional_dsn {
            for pair in extra.split(';').map(str::trim).filter(|p| !p.is_empty()) {
                let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
                let value = value.trim().to_owned();
                let key = key.trim().to_ascii_lowercase();
                if TLS_KEYS.contains(&key.replace('_', "-").as_str()) {
                    config.set(&key, &value)?;
                    took_tls = true;
                    continue;
                }
                match key.as_str() {
                    "unix_socket" => config.socket = Some(value),
                    "host" => config.host = value,
                    "dbname" => config.database = Some(value),
                    "charset" => config.charset = value,
                    "port" => {
                        config.port = port_number(&value)?;
                        port_named = true;
                    }
                    _ => {}
                }
                pdo_pairs.push(pair);
            }
        }
        config.tls.validate()?;
        // PDO would ignore the TLS keys; they are not left in its DSN to look as if it did.
        let pdo_extra = (!pdo_pairs.is_empty()).then(|| pdo_pairs.join(";"));
        let additional_dsn = if took_tls { pdo_extra } else { additional_dsn };
        Ok(OwnConnection { config, port_named, additional_dsn })
    }

    /// A `mysql://` URL (`mysqllock.dsn`) over `base` (php.ini's settings): what the URL
    /// names wins, part by part. Also returns its table if it named one (`table=`,
    /// `quote=`), which wins over `mysqllock.table`.
    pub fn from_url(base: Config, url: &str) -> Result<(OwnConnection, Option<Table>), Error> {
        let mut config = base;
        let mut table_named = false;
        for (key, value) in url_settings(url)? {
            table_named |= matches!(key.replace('-', "_").as_str(), "table" | "quote");
            config.set(&key, &value)?;
        }
        config.validate()?;
        let table = table_named.then(|| config.table.clone());
        Ok((OwnConnection { config, port_named: true, additional_dsn: None }, table))
    }

    /// The core's connection parameters for `table`. An empty host is the core's default
    /// one; a `localhost` host means the Unix socket, as it does for PDO
    /// (`pdo_mysql.default_socket`), when that socket exists.
    pub fn native(&self, table: &Table) -> Config {
        let mut config = self.config.clone();
        if config.host.is_empty() {
            config.host = Config::default().host;
        }
        if config.socket.is_none() && config.host == "localhost" {
            config.socket = ini::get(c"pdo_mysql.default_socket").filter(|path| Path::new(path).exists());
        }
        config.database = config.database.filter(|d| !d.is_empty());
        config.table = table.clone();
        config
    }

    /// What `getConnection()` opens: the original package's DSN, the login, the TLS
    /// settings (PDO goes over the Unix socket for `localhost`), and the bounds of the
    /// native connection's settings.
    pub fn pdo_target(&self) -> PdoTarget {
        let config = self.native(&Table::default());
        PdoTarget {
            dsn: self.pdo_dsn(),
            user: self.config.user.clone(),
            password: self.config.password.clone(),
            tls: self.config.tls.clone(),
            over_socket: is_socket_host(&self.config.host),
            connect_timeout: config.connect_timeout,
            read_bound: Some(ReadBound::new(config.read_bound_set_once(), config.server())),
        }
    }

    /// The DSN the original package would build: `mysql:host=..;dbname=..;charset=..`.
    pub fn pdo_dsn(&self) -> String {
        let c = &self.config;
        let mut dsn = format!("mysql:host={}", c.host);
        if let Some(db) = &c.database {
            dsn.push_str(&format!(";dbname={db}"));
        }
        dsn.push_str(&format!(";charset={}", c.charset));
        if self.port_named {
            dsn.push_str(&format!(";port={}", c.port));
        }
        match &self.additional_dsn {
            Some(extra) => {
                dsn.push(';');
                dsn.push_str(extra.trim_start_matches(';'));
            }
            None => {
                if let Some(socket) = &c.socket {
                    dsn.push_str(&format!(";unix_socket={socket}"));
                }
            }
        }
        dsn
    }
}

/// What opening a PDO takes (`pdo_factory`): its DSN and login, the TLS settings with
/// whether the PDO reaches the server over a Unix socket (where mysqlnd cannot encrypt),
/// and its bounds.
pub struct PdoTarget {
    pub dsn: String,
    pub user: String,
    pub password: Option<String>,
    pub tls: Tls,
    pub over_socket: bool,
    /// For the TCP connect (`PDO::ATTR_TIMEOUT`).
    pub connect_timeout: Duration,
    /// For every read, when the extension runs locks on the PDO itself; `None` for a PDO
    /// handed to the user (`PdoFactory::fromUrl`), whose reads mysqlnd's defaults bound.
    pub read_bound: Option<ReadBound>,
}

/// Whether PDO (mysqlnd) goes over the Unix socket to `host`: for `localhost`, whatever
/// the port, and when no host is given.
pub fn is_socket_host(host: &str) -> bool {
    host.is_empty() || host.eq_ignore_ascii_case("localhost")
}

/// The `mysql` client's TLS options, as `Config::set` names them (`_` spellings too).
const TLS_KEYS: [&str; 4] = ["ssl-mode", "ssl-ca", "ssl-cert", "ssl-key"];

fn port_number(value: &str) -> Result<u16, Error> {
    value.trim().parse::<u16>().ok().filter(|p| *p > 0).ok_or_else(|| Error::InvalidArgument {
        what: "port",
        reason: format!("{value:?} is not a port number from 1 to 65535"),
    })
}

/// Checks a `$port` argument.
pub fn port(value: f64) -> Result<u16, Error> {
    if value.fract() == 0.0 && (1.0..=65535.0).contains(&value) {
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)] // range checked
        return Ok(value as u16);
    }
    Err(Error::InvalidArgument { what: "port", reason: format!("{value} is not a port number from 1 to 65535") })
}

/// In a forked child: the engine must never deallocate (COM_STMT_CLOSE) what was
/// prepared on the parent's session.
fn never_free_statements(statements: &Statements) {
    for statement in statements.borrow_mut().values_mut() {
        php::never_free(statement);
    }
}

/// Who made the PDO a `Locker` runs on.
pub enum PdoOrigin {
    User,
    /// `getConnection()`, with the bound mysqlnd was given for its reads if it took one.
    GetConnection(Option<ReadBound>),
}

/// Where a connector's sessions come from.
pub enum Target {
    Native(Box<Config>),
    /// A PDO object.
    Pdo {
        pdo: Zval,
        /// Created by `getConnection()` (rather than the user).
        owned: bool,
        /// The bound mysqlnd was given for its reads, when we opened it with one.
        bound: Option<ReadBound>,
        statements: Statements,
        /// Sessions ask the server for their `CONNECTION_ID()` (a `Locker`'s must know
        /// it); the lease mode's need not, and its SQLite PDOs have none.
        identified: bool,
        /// The lease mode's `$reconnect`, for a PDO whose session was lost.
        reconnect: Option<Reconnect>,
    },
    /// A user's mysqli object (session locks only).
    Mysqli {
        mysqli: Zval,
        statements: Statements,
    },
}

impl Target {
    /// A PDO for a `Locker`.
    pub fn pdo(pdo: Zval, origin: PdoOrigin) -> Target {
        let (owned, bound) = match origin {
            PdoOrigin::User => (false, None),
            PdoOrigin::GetConnection(bound) => (true, bound),
        };
        Target::Pdo { pdo, owned, bound, statements: Statements::default(), identified: true, reconnect: None }
    }

    /// A user's PDO for the lease mode, replaced by `reconnect` (if given) once lost.
    pub fn lease_pdo(pdo: Zval, reconnect: Option<Reconnect>) -> Target {
        Target::Pdo { pdo, owned: false, bound: None, statements: Statements::default(), identified: false, reconnect }
    }

    pub fn mysqli(mysqli: Zval) -> Target {
        Target::Mysqli { mysqli, statements: Statements::default() }
    }
}

/// `DistributedLock`'s `$reconnect`: called for a new PDO each time the core asks for a
/// session again, which it does only after the session was lost.
pub struct Reconnect {
    callable: Zval,
    /// The lost PDO's driver, which a replacement must have too.
    dialect: Dialect,
    /// A session was made from the current PDO already: the next request for one means
    /// it was lost.
    used: bool,
}

impl Reconnect {
    pub fn new(callable: Zval, dialect: Dialect) -> Reconnect {
        Reconnect { callable, dialect, used: false }
    }

    /// The PDO that takes the lost one's place, of the same driver.
    fn replacement(&self) -> mysqllock_core::Result<Zval> {
        let dialect = self.dialect;
        let failed = |source: SessionError| Error::Connect { target: "the PDO $reconnect returns".to_owned(), source };
        let pdo = php::call(&self.callable, vec![]).map_err(|e| failed(pdo_session::failure(e, dialect)))?;
        if !is_pdo(&pdo) {
            return Err(failed(driver::unknown(&format!("$reconnect returned {}, not a PDO", php::type_name(&pdo)))));
        }
        let name = pdo_session::driver_name(&pdo).map_err(|e| failed(pdo_session::failure(e, dialect)))?;
        if Dialect::from_driver(&name).ok() != Some(dialect) {
            return Err(failed(driver::unknown(&format!(
                "$reconnect returned a PDO of the driver {name:?}, not of the lost one's"
            ))));
        }
        Ok(pdo)
    }
}

/// Whether `value` is a PDO object.
pub fn is_pdo(value: &Zval) -> bool {
    ClassEntry::try_find("PDO").zip(value.object()).is_some_and(|(class, object)| object.instance_of(class))
}

/// Opens sessions for a `Locker` or a lease-mode `DistributedLock` (again after one was
/// lost).
pub struct PhpConnector {
    pub target: Target,
}

impl PhpConnector {
    pub fn pdo(&self) -> Option<&Zval> {
        match &self.target {
            Target::Pdo { pdo, .. } => Some(pdo),
            Target::Native(_) | Target::Mysqli { .. } => None,
        }
    }

    /// The PDO or mysqli object whose session this is; `None` for the native connection.
    pub fn object(&self) -> Option<&Zval> {
        match &self.target {
            Target::Pdo { pdo, .. } => Some(pdo),
            Target::Mysqli { mysqli, .. } => Some(mysqli),
            Target::Native(_) => None,
        }
    }

    pub fn owns_pdo(&self) -> bool {
        matches!(self.target, Target::Pdo { owned: true, .. })
    }

    /// The same target without any session or prepared statement of this one (`clone`
    /// of a `DistributedLock`, and its fresh start in a forked child).
    pub fn fresh(&self) -> PhpConnector {
        let target = match &self.target {
            Target::Native(config) => Target::Native(config.clone()),
            Target::Pdo { pdo, owned, bound, identified, reconnect, .. } => Target::Pdo {
                pdo: pdo.shallow_clone(),
                owned: *owned,
                bound: bound.clone(),
                statements: Statements::default(),
                identified: *identified,
                reconnect: reconnect.as_ref().map(|r| Reconnect::new(r.callable.shallow_clone(), r.dialect)),
            },
            Target::Mysqli { mysqli, .. } => Target::mysqli(mysqli.shallow_clone()),
        };
        PhpConnector { target }
    }

    /// In a forked child: makes sure the engine never closes what belongs to the
    /// parent's session (our statements always; the PDO itself if we created it).
    pub fn protect_parents_session(&mut self) {
        match &mut self.target {
            Target::Pdo { pdo, owned, statements, .. } => {
                never_free_statements(statements);
                if *owned {
                    php::never_free(pdo);
                }
            }
            Target::Mysqli { statements, .. } => never_free_statements(statements),
            Target::Native(_) => {}
        }
    }
}

/// The lease mode asks only for sessions (`connect`): the questions below are the
/// `Locker`'s, answered for `SharedLock` and `SessionLock`.
impl Connector for PhpConnector {
    type Session = Box<dyn Session>;

    fn connect(&mut self) -> mysqllock_core::Result<Box<dyn Session>> {
        match &mut self.target {
            Target::Native(config) => Ok(Box::new(MysqlSession::connect(config)?)),
            Target::Pdo { pdo, statements, identified, reconnect, bound, .. } => {
                if let Some(reconnect) = reconnect {
                    if reconnect.used {
                        *pdo = reconnect.replacement()?;
                    }
                    reconnect.used = true;
                }
                if !*identified {
                    return Ok(Box::new(PdoSession::attach(pdo, statements.clone())));
                }
                // Read for `allows_cluster`: a bad value fails here, not silently there.
                ini::allow_cluster()?;
                match PdoSession::open(pdo, statements.clone()) {
                    Ok(session) => Ok(Box::new(session.bounded(bound.clone()))),
                    Err(source) => Err(session_failed(source)),
                }
            }
            Target::Mysqli { mysqli, statements } => {
                ini::allow_cluster()?;
                match MysqliSession::open(mysqli, statements.clone()) {
                    Ok(session) => Ok(Box::new(session)),
                    Err(source) => Err(session_failed(source)),
                }
            }
        }
    }

    /// The native connection learns the lock table's width in its setup round trip; a
    /// PDO or mysqli session runs no setup of ours, so its first claim tells.
    fn connect_learning(&mut self, table: &Table) -> mysqllock_core::Result<Box<dyn Session>> {
        match &mut self.target {
            Target::Native(config) => Ok(Box::new(MysqlSession::connect_learning(config, table)?)),
            _ => self.connect(),
        }
    }

    /// A keep-alive thread opens its own connection with the native parameters. A PDO
    /// session cannot be shared with a thread (PHP values stay on PHP's thread), so
    /// keep-alive is refused there.
    fn keep_alive(&self, io_timeout: Duration) -> Option<OpenSession> {
        match &self.target {
            Target::Native(config) => config.keep_alive(io_timeout),
            Target::Pdo { .. } | Target::Mysqli { .. } => None,
        }
    }

    /// The extension's own connection may open more sessions for many leases; a PDO
    /// is one session, and every lock must live in it (SPEC: `getConnection()`).
    fn spreads(&self) -> bool {
        matches!(self.target, Target::Native(_))
    }

    /// GET_LOCK-based locks on a replicated cluster node only when the deployment says
    /// all lock traffic goes to one node: `mysqllock.allow_cluster` (or, for the native
    /// connection, `allow_cluster=1` in `mysqllock.dsn`).
    fn allows_cluster(&self) -> bool {
        match &self.target {
            Target::Native(config) => config.allow_cluster,
            // A bad value was refused when the session was opened (`connect`).
            Target::Pdo { .. } | Target::Mysqli { .. } => ini::allow_cluster().unwrap_or(false),
        }
    }
}

/// Opening a session on a user's object failed.
fn session_failed(source: SessionError) -> Error {
    Error::from_session(source, None)
}
