//! Where to connect and which table to use. Identifiers are validated here once, so
//! the SQL builders can quote them without further checks.

use std::time::Duration;

use crate::deadline::Deadline;
use crate::error::{Error, Result};
use crate::limits::seconds_setting;

/// How identifiers are quoted: MySQL's backticks, or ANSI double quotes for servers
/// running with `sql_mode=ANSI_QUOTES`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum QuoteStyle {
    #[default]
    Backtick,
    Ansi,
}

impl QuoteStyle {
    /// The PHP package's constants: `QUOTE_STYLE_DEFAULT = 0`, `QUOTE_STYLE_ANSI = 1`.
    pub fn from_code(code: i64) -> Result<Self> {
        match code {
            0 => Ok(QuoteStyle::Backtick),
            1 => Ok(QuoteStyle::Ansi),
            other => Err(Error::invalid("quote style", format!("{other} is neither 0 (default) nor 1 (ANSI)"))),
        }
    }

    pub fn quote(self, ident: &str) -> String {
        match self {
            QuoteStyle::Backtick => format!("`{ident}`"),
            QuoteStyle::Ansi => format!("\"{ident}\""),
        }
    }
}

/// The locks table: an optionally schema-qualified name plus its quote style.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Table {
    schema: Option<String>,
    name: String,
    quote: QuoteStyle,
}

/// The original package's table name.
pub const DEFAULT_TABLE: &str = "shared_locks";

/// The lease mode's table name (`Nene\Kit\DistributedLock`'s).
pub const DEFAULT_LEASE_TABLE: &str = "distributed_locks";

impl Default for Table {
    fn default() -> Self {
        Table { schema: None, name: DEFAULT_TABLE.to_owned(), quote: QuoteStyle::Backtick }
    }
}

impl Table {
    /// The lease mode's default table, [`DEFAULT_LEASE_TABLE`].
    pub fn lease_default() -> Self {
        Table { schema: None, name: DEFAULT_LEASE_TABLE.to_owned(), quote: QuoteStyle::Backtick }
    }

    /// `name` or `schema.name`; each part 1–64 characters of `[A-Za-z0-9_$]`, so it can
    /// be quoted in either style without escaping.
    pub fn new(qualified: &str, quote: QuoteStyle) -> Result<Self> {
        let (schema, name) = match qualified.split_once('.') {
            Some((s, n)) => (Some(s), n),
            None => (None, qualified),
        };
        for part in schema.iter().chain(std::iter::once(&name)) {
            validate_identifier(part)?;
        }
        Ok(Table { schema: schema.map(str::to_owned), name: name.to_owned(), quote })
    }

    pub fn with_quote(mut self, quote: QuoteStyle) -> Self {
        self.quote = quote;
        self
    }

    pub fn quote_style(&self) -> QuoteStyle {
        self.quote
    }

    /// The unquoted table name (without schema).
    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn schema(&self) -> Option<&str> {
        self.schema.as_deref()
    }

    /// The name as the user wrote it: `shared_locks` or `app.shared_locks`.
    pub fn display_name(&self) -> String {
        match &self.schema {
            Some(s) => format!("{s}.{}", self.name),
            None => self.name.clone(),
        }
    }

    /// The quoted name for SQL text.
    pub fn sql_name(&self) -> String {
        match &self.schema {
            Some(s) => format!("{}.{}", self.quote.quote(s), self.quote.quote(&self.name)),
            None => self.quote.quote(&self.name),
        }
    }

    /// The original package's CREATE TABLE, verbatim apart from the table name, so its
    /// processes and ours can share the table.
    pub fn create_sql(&self) -> String {
        format!(
            "CREATE TABLE {} (\n  `name` varchar(64) NOT NULL,\n  `connection_id` bigint(20) NOT NULL,\n  `created` bigint(20) NOT NULL,\n  `ttl` bigint(20) NOT NULL,\n  `lock_acquired` tinyint(1) NOT NULL,\n  UNIQUE KEY `shared_locks_ix1` (`name`)\n) ENGINE=MyISAM DEFAULT CHARSET=latin1",
            self.sql_name()
        )
        .replace('`', match self.quote {
            QuoteStyle::Backtick => "`",
            QuoteStyle::Ansi => "\"",
        })
    }
}

fn validate_identifier(ident: &str) -> Result<()> {
    if ident.is_empty() || ident.chars().count() > 64 {
        return Err(Error::invalid("table name", format!("{ident:?} must be 1 to 64 characters")));
    }
    if !ident.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$') {
        return Err(Error::invalid("table name", format!("{ident:?} may only contain letters, digits, '_' and '$'")));
    }
    Ok(())
}

/// How the connection is encrypted: the `mysql` client's `--ssl-mode` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SslMode {
    /// Never TLS.
    Disabled,
    /// TLS when the server offers it (over TCP; a Unix socket stays plain), its
    /// certificate unchecked unless `ssl-ca` names a CA. The default, as for the `mysql`
    /// client: a server without TLS is still reached.
    Preferred,
    /// TLS or no connection; the certificate unchecked unless `ssl-ca` names a CA.
    Required,
    /// TLS, and the server's certificate must chain to `ssl-ca` (the system's CA store
    /// when none is given). The host name is not checked.
    VerifyCa,
    /// As `VerifyCa`, and the certificate must be for the host connected to.
    VerifyIdentity,
}

impl SslMode {
    pub fn parse(text: &str) -> Result<Self> {
        match text.to_ascii_uppercase().replace('-', "_").as_str() {
            "DISABLED" => Ok(SslMode::Disabled),
            "PREFERRED" => Ok(SslMode::Preferred),
            "REQUIRED" => Ok(SslMode::Required),
            "VERIFY_CA" => Ok(SslMode::VerifyCa),
            "VERIFY_IDENTITY" => Ok(SslMode::VerifyIdentity),
            _ => Err(Error::invalid(
                "ssl-mode",
                format!("{text:?} is not one of DISABLED, PREFERRED, REQUIRED, VERIFY_CA, VERIFY_IDENTITY"),
            )),
        }
    }

    /// The `mysql` client's spelling.
    pub fn name(self) -> &'static str {
        match self {
            SslMode::Disabled => "DISABLED",
            SslMode::Preferred => "PREFERRED",
            SslMode::Required => "REQUIRED",
            SslMode::VerifyCa => "VERIFY_CA",
            SslMode::VerifyIdentity => "VERIFY_IDENTITY",
        }
    }

    /// Whether a connection without TLS is refused.
    pub fn requires_tls(self) -> bool {
        matches!(self, SslMode::Required | SslMode::VerifyCa | SslMode::VerifyIdentity)
    }
}

/// TLS settings, named as the `mysql` client's options.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tls {
    /// `ssl-mode`; `None` when not given: see [`Tls::mode`]. `DISABLED` wins over the
    /// files below (an option file may name a CA that a command line then turns off).
    pub mode: Option<SslMode>,
    /// `ssl-ca`: a PEM file of the CA certificates to trust, instead of the system's.
    pub ca: Option<String>,
    /// `ssl-cert` and `ssl-key`: the client certificate (PEM) and its private key, for
    /// accounts created `REQUIRE X509` (or `SUBJECT`/`ISSUER`).
    pub cert: Option<String>,
    pub key: Option<String>,
}

impl Tls {
    /// The mode in force: the one given, else `VERIFY_CA` when a CA was named (as the
    /// `mysql` client does: naming a CA asks for it to be checked), else `PREFERRED`.
    pub fn mode(&self) -> SslMode {
        match (self.mode, &self.ca) {
            (Some(mode), _) => mode,
            (None, Some(_)) => SslMode::VerifyCa,
            (None, None) => SslMode::Preferred,
        }
    }

    /// Whether the server's certificate is checked against a CA: in the verifying modes,
    /// and in any mode when `ssl-ca` is given (a named CA is never ignored).
    pub fn verifies_chain(&self) -> bool {
        self.ca.is_some() || matches!(self.mode(), SslMode::VerifyCa | SslMode::VerifyIdentity)
    }

    /// Refuses settings that contradict each other: a client certificate without its key,
    /// or a key without its certificate.
    pub fn validate(&self) -> Result<()> {
        if self.cert.is_some() != self.key.is_some() {
            return Err(Error::invalid("ssl-cert/ssl-key", "a client certificate needs both ssl-cert and ssl-key"));
        }
        Ok(())
    }
}

/// Connection parameters. `Debug` and [`Config::target`] never show the password.
#[derive(Clone)]
pub struct Config {
    pub host: String,
    pub port: u16,
    pub user: String,
    pub password: Option<String>,
    pub database: Option<String>,
    /// Unix socket path; used instead of host/port when set.
    pub socket: Option<String>,
    /// Connection character set (`SET NAMES`); validated as an identifier.
    pub charset: String,
    pub table: Table,
    /// The lease mode's table ([`DistributedLock`](crate::DistributedLock)).
    pub lease_table: Table,
    /// The whole connect: TCP, TLS, login and the session's setup, together.
    pub connect_timeout: Duration,
    /// How long a statement may go without an answer beyond what it asked the server to
    /// wait (a `GET_LOCK` with a timeout waits that long more): then the server counts as
    /// gone and the session as lost. Named as MySQL clients name it (`read_timeout`).
    pub read_timeout: Duration,
    /// How long a write may stay stuck (the server takes no bytes): then the session
    /// counts as lost (`write_timeout`).
    pub write_timeout: Duration,
    /// Let GET_LOCK-based locks run on a replicated cluster node (Galera, Group
    /// Replication). Only right when all lock traffic goes to one node; otherwise two
    /// nodes grant the same lock. Off by default: such a server is refused.
    pub allow_cluster: bool,
    pub tls: Tls,
}

impl std::fmt::Debug for Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Config")
            .field("target", &self.target())
            .field("password", &self.password.as_ref().map(|_| "***"))
            .field("charset", &self.charset)
            .field("table", &self.table.display_name())
            .field("tls", &self.tls)
            .finish()
    }
}

impl Default for Config {
    fn default() -> Self {
        Config {
            host: "127.0.0.1".into(),
            port: 3306,
            user: "root".into(),
            password: None,
            database: None,
            socket: None,
            charset: "utf8mb4".into(),
            table: Table::default(),
            lease_table: Table::lease_default(),
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            read_timeout: DEFAULT_IO_TIMEOUT,
            write_timeout: DEFAULT_IO_TIMEOUT,
            allow_cluster: false,
            tls: Tls::default(),
        }
    }
}

/// The default [`Config::connect_timeout`]: a server that has not let a client in (TCP,
/// TLS, the login and the session's setup) within 10 s is not one to wait for.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The default [`Config::read_timeout`] and [`Config::write_timeout`]. A lock statement
/// takes well under a millisecond on an idle server; 30 s leaves room for a server under
/// heavy load or a lock table another session has locked for a moment, and still ends a
/// call on a silent network within a minute, before a crontab's next run starts.
pub const DEFAULT_IO_TIMEOUT: Duration = Duration::from_secs(30);

/// The longest lock wait one statement asks the server for on a client whose reads are
/// bounded once, when it connects, rather than per statement (a PDO or mysqli of PHP's,
/// [`Session::allowed_wait`](crate::Session::allowed_wait)): a longer wait is split into
/// several statements, so that [`Config::read_bound_set_once`] covers each of them. The
/// core's own sessions bound each statement and need no split.
pub const LONGEST_WAIT_PER_STATEMENT: Duration = Duration::from_secs(10);

impl Config {
    /// The connect's deadline, from now: `connect_timeout`, or none when it is 0 (then
    /// each read and write of the connect is bounded as a statement's). The one place
    /// that reads a `connect_timeout` of 0 as "no limit".
    pub fn connect_deadline(&self) -> Option<Deadline> {
        (!self.connect_timeout.is_zero()).then(|| Deadline::after(self.connect_timeout))
    }

    /// The bound for every read of a client that takes one when it connects:
    /// `read_timeout` plus [`LONGEST_WAIT_PER_STATEMENT`].
    pub fn read_bound_set_once(&self) -> Duration {
        self.read_timeout.saturating_add(LONGEST_WAIT_PER_STATEMENT)
    }
}

/// The keys [`Config::set`] takes besides the URL's own parts, for messages.
const URL_PARAMETERS: &str = "table, lease_table, quote, socket, charset, connect_timeout, read_timeout, \
                              write_timeout, allow_cluster, ssl-mode, ssl-ca, ssl-cert, ssl-key";

impl Config {
    /// Parses `mysql://user:password@host:port/database?table=t&quote=ansi&socket=/p&charset=c`
    /// (also `lease_table`, `allow_cluster`, `connect_timeout`, `read_timeout`,
    /// `write_timeout` and the TLS keys `ssl-mode`,
    /// `ssl-ca`, `ssl-cert`, `ssl-key`). User, password and values may be percent-encoded.
    pub fn from_url(url: &str) -> Result<Self> {
        let mut cfg = Config::default();
        for (key, value) in url_settings(url)? {
            cfg.set(&key, &value)?;
        }
        cfg.validate()?;
        Ok(cfg)
    }

    /// Sets one part by name: `host`, `port`, `user`, `password`, `database`, or any of
    /// the URL's query keys (`ssl_mode` for `ssl-mode` and so on accepted too). How the
    /// CLI layers option files, the environment and `--dsn`, one part at a time.
    pub fn set(&mut self, key: &str, value: &str) -> Result<()> {
        let bad = |reason: String| Error::invalid("connection setting", reason);
        match key.replace('_', "-").as_str() {
            "host" => self.host = value.to_owned(),
            "port" => {
                self.port = value.parse().map_err(|_| bad(format!("port {value:?} is not a number from 1 to 65535")))?
            }
            "user" => self.user = value.to_owned(),
            "password" => self.password = Some(value.to_owned()),
            "database" => self.database = Some(value.to_owned()).filter(|d| !d.is_empty()),
            "socket" => self.socket = Some(value.to_owned()).filter(|s| !s.is_empty()),
            "charset" => self.charset = value.to_owned(),
            "table" => self.table = Table::new(value, self.table.quote_style())?,
            "lease-table" => self.lease_table = Table::new(value, self.lease_table.quote_style())?,
            "quote" => {
                let quote = match value {
                    "ansi" | "1" => QuoteStyle::Ansi,
                    "backtick" | "default" | "0" => QuoteStyle::Backtick,
                    _ => return Err(bad("quote must be 'backtick' or 'ansi'".into())),
                };
                self.table = self.table.clone().with_quote(quote);
                self.lease_table = self.lease_table.clone().with_quote(quote);
            }
            "allow-cluster" => {
                self.allow_cluster = match value.trim().to_ascii_lowercase().as_str() {
                    "1" | "true" | "on" | "yes" => true,
                    "0" | "false" | "off" | "no" => false,
                    _ => {
                        return Err(Error::invalid("allow_cluster", format!("{value:?} is neither 1 (on) nor 0 (off)")))
                    }
                }
            }
            "connect-timeout" => self.connect_timeout = seconds_setting("connect_timeout", value)?,
            "read-timeout" => self.read_timeout = positive_seconds("read_timeout", value)?,
            "write-timeout" => self.write_timeout = positive_seconds("write_timeout", value)?,
            "ssl-mode" => self.tls.mode = Some(SslMode::parse(value)?),
            "ssl-ca" => self.tls.ca = Some(value.to_owned()).filter(|p| !p.is_empty()),
            "ssl-cert" => self.tls.cert = Some(value.to_owned()).filter(|p| !p.is_empty()),
            "ssl-key" => self.tls.key = Some(value.to_owned()).filter(|p| !p.is_empty()),
            _ => return Err(bad(format!("unknown parameter {key:?} (known: {URL_PARAMETERS})"))),
        }
        Ok(())
    }

    /// Checks what cannot be bound as a parameter (charset goes into `SET NAMES`), and
    /// TLS settings that contradict each other.
    pub fn validate(&self) -> Result<()> {
        if self.charset.is_empty() || !self.charset.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(Error::invalid("charset", format!("{:?} is not a character set name", self.charset)));
        }
        self.tls.validate()
    }

    /// `user@host:port/database`, for messages: never the password.
    pub fn target(&self) -> String {
        format!("{}@{}/{}", self.user, self.server(), self.database.as_deref().unwrap_or(""))
    }

    /// `host:port` (`[host]:port` for IPv6), or the Unix socket's path: the server, for
    /// messages.
    pub fn server(&self) -> String {
        match &self.socket {
            Some(s) => s.clone(),
            None if self.host.contains(':') => format!("[{}]:{}", self.host, self.port),
            None => format!("{}:{}", self.host, self.port),
        }
    }
}

/// [`limits::seconds_setting`](crate::limits::seconds_setting), and more than zero: an I/O
/// bound of zero would mean none at all.
fn positive_seconds(what: &'static str, value: &str) -> Result<Duration> {
    let duration = seconds_setting(what, value)?;
    if duration.is_zero() {
        return Err(Error::invalid(what, "must be more than 0 seconds (every read and write has a bound)"));
    }
    Ok(duration)
}

/// The parts a `mysql://` (or `mariadb://`) URL gives, as `(key, value)` pairs for
/// [`Config::set`], decoded, in the URL's order: only what the URL names, so a caller
/// can lay it over settings from elsewhere.
pub fn url_settings(url: &str) -> Result<Vec<(String, String)>> {
    let bad = |reason: &str| Error::invalid("connection URL", reason.to_owned());
    let rest = url
        .strip_prefix("mysql://")
        .or_else(|| url.strip_prefix("mariadb://"))
        .ok_or_else(|| bad("must start with mysql://"))?;
    let (main, query) = match rest.split_once('?') {
        Some((m, q)) => (m, Some(q)),
        None => (rest, None),
    };
    let (authority, path) = match main.split_once('/') {
        Some((a, p)) => (a, p),
        None => (main, ""),
    };
    let mut out = Vec::new();
    let mut put = |key: &str, value: String| out.push((key.to_owned(), value));
    let hostport = match authority.rsplit_once('@') {
        Some((userinfo, hp)) => {
            let (user, password) = match userinfo.split_once(':') {
                Some((u, p)) => (u, Some(p)),
                None => (userinfo, None),
            };
            put("user", percent_decode(user).ok_or_else(|| bad("bad percent-encoding in user"))?);
            if let Some(p) = password {
                put("password", percent_decode(p).ok_or_else(|| bad("bad percent-encoding in password"))?);
            }
            hp
        }
        None => authority,
    };
    let (host, port) = if let Some(stripped) = hostport.strip_prefix('[') {
        let (h, after) = stripped.split_once(']').ok_or_else(|| bad("unclosed [ in host"))?;
        (h, after.strip_prefix(':'))
    } else {
        match hostport.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (hostport, None),
        }
    };
    if !host.is_empty() {
        put("host", host.to_owned());
    }
    if let Some(p) = port {
        if p.parse::<u16>().is_err() {
            return Err(bad(&format!("port {p:?} is not a number from 1 to 65535")));
        }
        put("port", p.to_owned());
    }
    let db = path.trim_end_matches('/');
    if !db.is_empty() {
        put("database", percent_decode(db).ok_or_else(|| bad("bad percent-encoding in database"))?);
    }
    for pair in query.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        if matches!(k.replace('_', "-").as_str(), "host" | "port" | "user" | "password" | "database") {
            return Err(bad(&format!("unknown parameter {k:?} (known: {URL_PARAMETERS})")));
        }
        put(k, percent_decode(v).ok_or_else(|| bad("bad percent-encoding in a parameter"))?);
    }
    Ok(out)
}

fn percent_decode(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = s.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn url_with_everything() {
        let c = Config::from_url("mysql://app:p%40ss@db.example:3307/prod?table=locks&quote=ansi").unwrap();
        assert_eq!(
            (c.user.as_str(), c.password.as_deref(), c.host.as_str(), c.port),
            ("app", Some("p@ss"), "db.example", 3307)
        );
        assert_eq!(c.database.as_deref(), Some("prod"));
        assert_eq!(c.table.sql_name(), "\"locks\"");
    }

    #[test]
    fn target_and_debug_hide_the_password() {
        let c = Config::from_url("mysql://app:hunter2@h/db").unwrap();
        assert!(!c.target().contains("hunter2"));
        assert!(!format!("{c:?}").contains("hunter2"));
    }

    #[test]
    fn table_names_that_could_inject_are_refused() {
        for bad in ["", "a`b", "a\"b", "x; DROP TABLE y", "a.b.c", &"x".repeat(65)] {
            assert!(Table::new(bad, QuoteStyle::Backtick).is_err(), "{bad:?} accepted");
        }
        assert_eq!(Table::new("app.locks", QuoteStyle::Backtick).unwrap().sql_name(), "`app`.`locks`");
    }

    #[test]
    fn unknown_quote_style_is_refused() {
        assert!(QuoteStyle::from_code(2).is_err());
        assert_eq!(QuoteStyle::from_code(1).unwrap(), QuoteStyle::Ansi);
    }

    #[test]
    fn tls_keys_in_either_spelling() {
        let c = Config::from_url("mysql://h/db?ssl-mode=verify_identity&ssl_ca=/ca.pem&ssl-cert=/c.pem&ssl_key=/k.pem")
            .unwrap();
        assert_eq!(c.tls.mode(), SslMode::VerifyIdentity);
        assert_eq!(
            (c.tls.ca.as_deref(), c.tls.cert.as_deref(), c.tls.key.as_deref()),
            (Some("/ca.pem"), Some("/c.pem"), Some("/k.pem"))
        );
    }

    #[test]
    fn tls_is_preferred_by_default_and_a_named_ca_is_verified() {
        assert_eq!(Config::from_url("mysql://h/db").unwrap().tls.mode(), SslMode::Preferred);
        assert_eq!(Config::from_url("mysql://h/db?ssl-ca=/ca.pem").unwrap().tls.mode(), SslMode::VerifyCa);
        let required = Config::from_url("mysql://h/db?ssl-mode=REQUIRED&ssl-ca=/ca.pem").unwrap().tls;
        assert_eq!(required.mode(), SslMode::Required);
        assert!(required.verifies_chain(), "a named CA is never ignored");
    }

    #[test]
    fn contradictory_tls_settings_are_refused() {
        for bad in ["mysql://h/db?ssl-mode=sometimes", "mysql://h/db?ssl-cert=/c.pem", "mysql://h/db?ssl-key=/k.pem"] {
            assert!(Config::from_url(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn url_settings_name_only_what_the_url_gives() {
        let parts = url_settings("mysql://app@db.example/?ssl-mode=REQUIRED").unwrap();
        let keys: Vec<&str> = parts.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, ["user", "host", "ssl-mode"]);
    }

    #[test]
    fn timeouts_in_the_url_and_their_defaults() {
        let c = Config::from_url("mysql://h/db").unwrap();
        assert_eq!(
            (c.connect_timeout, c.read_timeout, c.write_timeout),
            (Duration::from_secs(10), DEFAULT_IO_TIMEOUT, DEFAULT_IO_TIMEOUT)
        );
        let c = Config::from_url("mysql://h/db?connect_timeout=1.5&read_timeout=7&write-timeout=0.25").unwrap();
        assert_eq!(
            (c.connect_timeout, c.read_timeout, c.write_timeout),
            (Duration::from_millis(1500), Duration::from_secs(7), Duration::from_millis(250))
        );
        for bad in ["read_timeout=0", "write_timeout=-1", "read_timeout=NaN", "read_timeout=soon"] {
            assert!(Config::from_url(&format!("mysql://h/db?{bad}")).is_err(), "{bad} accepted");
        }
        // The one reader of seconds, units and all, wherever a timeout is written.
        let c = Config::from_url("mysql://h/db?connect_timeout=1m&read_timeout=500ms&write_timeout=2s").unwrap();
        assert_eq!(
            (c.connect_timeout, c.read_timeout, c.write_timeout),
            (Duration::from_secs(60), Duration::from_millis(500), Duration::from_secs(2))
        );
        let zero = Config::from_url("mysql://h/db?read_timeout=0").err().unwrap().to_string();
        assert_eq!(zero, "invalid read_timeout: must be more than 0 seconds (every read and write has a bound)");
        let junk = Config::from_url("mysql://h/db?connect_timeout=5x").err().unwrap().to_string();
        assert!(junk.starts_with("invalid connect_timeout: \"5x\" is not a duration"), "{junk}");
    }

    #[test]
    fn allow_cluster_takes_the_usual_spellings_of_on_and_off() {
        for (text, on) in [("1", true), ("On", true), ("YES", true), ("true", true), ("0", false), ("off", false)] {
            let mut c = Config::default();
            c.set("allow_cluster", text).unwrap();
            assert_eq!(c.allow_cluster, on, "{text:?}");
        }
        let e = Config::default().set("allow_cluster", "maybe").unwrap_err().to_string();
        assert_eq!(e, "invalid allow_cluster: \"maybe\" is neither 1 (on) nor 0 (off)");
    }

    #[test]
    fn bad_urls_are_refused() {
        for bad in [
            "postgres://x",
            "mysql://u@h:notaport/db",
            "mysql://h/db?frobnicate=1",
            "mysql://h/db?charset=utf8;drop",
            "mysql://h/db?password=x",
        ] {
            assert!(Config::from_url(bad).is_err(), "{bad:?} accepted");
        }
    }
}
