//! Where to connect and which table to use. Identifiers are validated here once, so
//! the SQL builders can quote them without further checks.

use std::time::Duration;

use crate::error::{Error, Result};

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
    pub connect_timeout: Duration,
    /// Let GET_LOCK-based locks run on a replicated cluster node (Galera, Group
    /// Replication). Only right when all lock traffic goes to one node; otherwise two
    /// nodes grant the same lock. Off by default: such a server is refused.
    pub allow_cluster: bool,
}

impl std::fmt::Debug for Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Config")
            .field("target", &self.target())
            .field("password", &self.password.as_ref().map(|_| "***"))
            .field("charset", &self.charset)
            .field("table", &self.table.display_name())
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
            connect_timeout: Duration::from_secs(10),
            allow_cluster: false,
        }
    }
}

impl Config {
    /// Parses `mysql://user:password@host:port/database?table=t&quote=ansi&socket=/p&charset=c`
    /// (also `lease_table=t` and `allow_cluster=1`).
    /// User and password may be percent-encoded.
    pub fn from_url(url: &str) -> Result<Self> {
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
        let mut cfg = Config::default();
        let hostport = match authority.rsplit_once('@') {
            Some((userinfo, hp)) => {
                match userinfo.split_once(':') {
                    Some((u, p)) => {
                        cfg.user = percent_decode(u).ok_or_else(|| bad("bad percent-encoding in user"))?;
                        cfg.password = Some(percent_decode(p).ok_or_else(|| bad("bad percent-encoding in password"))?);
                    }
                    None => cfg.user = percent_decode(userinfo).ok_or_else(|| bad("bad percent-encoding in user"))?,
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
            cfg.host = host.to_owned();
        }
        if let Some(p) = port {
            cfg.port = p.parse().map_err(|_| bad(&format!("port {p:?} is not a number from 1 to 65535")))?;
        }
        let db = path.trim_end_matches('/');
        if !db.is_empty() {
            cfg.database = Some(percent_decode(db).ok_or_else(|| bad("bad percent-encoding in database"))?);
        }
        let mut table_name = DEFAULT_TABLE.to_owned();
        let mut lease_table_name = DEFAULT_LEASE_TABLE.to_owned();
        let mut quote = QuoteStyle::Backtick;
        for pair in query.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            let v = percent_decode(v).ok_or_else(|| bad("bad percent-encoding in a parameter"))?;
            match k {
                "table" => table_name = v,
                "lease_table" => lease_table_name = v,
                "allow_cluster" => {
                    cfg.allow_cluster = match v.as_str() {
                        "1" | "true" | "on" | "yes" => true,
                        "0" | "false" | "off" | "no" => false,
                        _ => return Err(bad("allow_cluster must be 1 or 0")),
                    }
                }
                "quote" => {
                    quote = match v.as_str() {
                        "ansi" | "1" => QuoteStyle::Ansi,
                        "backtick" | "default" | "0" => QuoteStyle::Backtick,
                        _ => return Err(bad("quote must be 'backtick' or 'ansi'")),
                    }
                }
                "socket" => cfg.socket = Some(v),
                "charset" => cfg.charset = v,
                "connect_timeout" => {
                    let secs: f64 = v.parse().map_err(|_| bad("connect_timeout must be seconds"))?;
                    cfg.connect_timeout = crate::limits::duration("connect_timeout", secs)?;
                }
                other => {
                    return Err(bad(&format!(
                        "unknown parameter {other:?} (known: table, lease_table, quote, socket, charset, connect_timeout, allow_cluster)"
                    )))
                }
            }
        }
        cfg.table = Table::new(&table_name, quote)?;
        cfg.lease_table = Table::new(&lease_table_name, quote)?;
        cfg.validate()?;
        Ok(cfg)
    }

    /// Checks what cannot be bound as a parameter (charset goes into `SET NAMES`).
    pub fn validate(&self) -> Result<()> {
        if self.charset.is_empty() || !self.charset.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(Error::invalid("charset", format!("{:?} is not a character set name", self.charset)));
        }
        Ok(())
    }

    /// `user@host:port/database`, for messages: never the password.
    pub fn target(&self) -> String {
        let place = match &self.socket {
            Some(s) => s.clone(),
            None if self.host.contains(':') => format!("[{}]:{}", self.host, self.port),
            None => format!("{}:{}", self.host, self.port),
        };
        format!("{}@{}/{}", self.user, place, self.database.as_deref().unwrap_or(""))
    }
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
    fn bad_urls_are_refused() {
        for bad in
            ["postgres://x", "mysql://u@h:notaport/db", "mysql://h/db?frobnicate=1", "mysql://h/db?charset=utf8;drop"]
        {
            assert!(Config::from_url(bad).is_err(), "{bad:?} accepted");
        }
    }
}
