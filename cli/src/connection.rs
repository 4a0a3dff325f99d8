//! Where the connection settings come from, and which wins: the option files, then
//! `MYSQLLOCK_DSN`, then `--dsn`, then `--ssl-mode`, `--ssl-ca`, `--ssl-cert`,
//! `--ssl-key` and the `--*-timeout` options, each overriding single parts of what came before. So a crontab line's
//! `--dsn mysql://otherhost/db` keeps the user and password of `~/.my.cnf`.
//!
//! One exception, as in the `mysql` client: an option file's `socket` is used only when
//! the host is left unset or is `localhost`; one in a URL (`?socket=`) is always used.

use mysqllock_core::{url_settings, Config, Error};

use crate::exit;
use crate::option_files::Setting;

/// The sources of the settings, in the order they apply.
pub struct Sources<'a> {
    /// From the option files, in the order they apply.
    pub files: &'a [Setting],
    /// `MYSQLLOCK_DSN`.
    pub env_dsn: Option<&'a str>,
    /// `--dsn`.
    pub dsn: Option<&'a str>,
    /// The options `--ssl-*` and `--*-timeout`, as `(key, value)` for [`Config::set`].
    pub options: &'a [(&'static str, &'a str)],
    /// `--allow-cluster`.
    pub allow_cluster: bool,
}

/// Why there is no connection: one line for stderr (never a password) and the exit code.
#[derive(Debug)]
pub struct Refused {
    pub message: String,
    pub code: u8,
}

impl Refused {
    fn because(source: &str, e: &Error) -> Self {
        Refused { message: format!("{source}: {}", exit::describe(e)), code: exit::for_error(e) }
    }
}

/// The message when nothing names a server.
pub const NO_SERVER: &str = "no database: pass --dsn URL, set MYSQLLOCK_DSN, or write host= (with user= and \
                             password=) under [client] in ~/.my.cnf";

/// The connection the sources describe, layered part by part.
pub fn config(sources: &Sources<'_>) -> Result<Config, Refused> {
    let mut config = Config::default();
    // The host as named anywhere (not the default), and the option files' socket.
    let mut host: Option<String> = None;
    let mut file_socket: Option<&Setting> = None;
    for setting in sources.files {
        match setting.key {
            "socket" => file_socket = Some(setting),
            key => {
                if key == "host" {
                    host = Some(setting.value.clone());
                }
                config
                    .set(key, &setting.value)
                    .map_err(|e| Refused::because(&format!("option file {}", setting.place), &e))?;
            }
        }
    }
    let mut url_socket = false;
    for (source, url) in [("MYSQLLOCK_DSN", sources.env_dsn), ("--dsn", sources.dsn)] {
        let Some(url) = url else { continue };
        let settings = url_settings(url).map_err(|e| Refused::because(source, &e))?;
        for (key, value) in settings {
            match key.as_str() {
                "host" => host = Some(value.clone()),
                "socket" => url_socket = true,
                _ => {}
            }
            config.set(&key, &value).map_err(|e| Refused::because(source, &e))?;
        }
    }
    if let (Some(socket), false, None | Some("localhost")) = (file_socket, url_socket, host.as_deref()) {
        config
            .set("socket", &socket.value)
            .map_err(|e| Refused::because(&format!("option file {}", socket.place), &e))?;
    }
    if sources.env_dsn.is_none() && sources.dsn.is_none() && host.is_none() && file_socket.is_none() {
        return Err(Refused { message: NO_SERVER.to_owned(), code: exit::USAGE });
    }
    for (key, value) in sources.options {
        config.set(key, value).map_err(|e| Refused::because(&format!("--{}", key.replace('_', "-")), &e))?;
    }
    config.allow_cluster |= sources.allow_cluster;
    config.validate().map_err(|e| Refused::because("connection", &e))?;
    Ok(config)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::option_files::Place;
    use mysqllock_core::SslMode;

    fn file(settings: &[(&'static str, &str)]) -> Vec<Setting> {
        settings
            .iter()
            .enumerate()
            .map(|(line, (key, value))| Setting {
                key,
                value: value.to_string(),
                place: Place { file: "/home/u/.my.cnf".into(), line: line + 1 },
            })
            .collect()
    }

    fn sources<'a>(files: &'a [Setting], env_dsn: Option<&'a str>, dsn: Option<&'a str>) -> Sources<'a> {
        Sources { files, env_dsn, dsn, options: &[], allow_cluster: false }
    }

    #[test]
    fn a_dsn_naming_another_host_keeps_the_files_user_and_password() {
        let files = file(&[("user", "app"), ("password", "pw"), ("host", "db1"), ("database", "a")]);
        let c = config(&sources(&files, None, Some("mysql://db2:3307/b"))).unwrap();
        assert_eq!((c.user.as_str(), c.password.as_deref()), ("app", Some("pw")));
        assert_eq!((c.host.as_str(), c.port, c.database.as_deref()), ("db2", 3307, Some("b")));
    }

    #[test]
    fn the_environment_overrides_the_files_and_the_dsn_overrides_both() {
        let files = file(&[("user", "file"), ("password", "f"), ("host", "h")]);
        let c = config(&sources(&files, Some("mysql://env:e@h?table=t_env"), None)).unwrap();
        assert_eq!((c.user.as_str(), c.password.as_deref()), ("env", Some("e")));
        let c = config(&sources(&files, Some("mysql://env:e@h?table=t_env"), Some("mysql://dsn@h2"))).unwrap();
        // Part by part: the DSN's user, the environment's password and table.
        assert_eq!((c.user.as_str(), c.password.as_deref(), c.host.as_str()), ("dsn", Some("e"), "h2"));
        assert_eq!(c.table.display_name(), "t_env");
    }

    #[test]
    fn a_files_socket_applies_only_without_a_host_or_on_localhost() {
        let socket_only = file(&[("socket", "/run/db.sock")]);
        assert_eq!(config(&sources(&socket_only, None, None)).unwrap().socket.as_deref(), Some("/run/db.sock"));
        let localhost = file(&[("host", "localhost"), ("socket", "/run/db.sock")]);
        assert_eq!(config(&sources(&localhost, None, None)).unwrap().socket.as_deref(), Some("/run/db.sock"));
        let remote = file(&[("socket", "/run/db.sock"), ("host", "db")]);
        assert_eq!(config(&sources(&remote, None, None)).unwrap().socket, None);
        let c = config(&sources(&socket_only, None, Some("mysql://db/x"))).unwrap();
        assert_eq!((c.socket, c.host.as_str()), (None, "db"));
    }

    #[test]
    fn a_socket_in_a_url_wins_over_the_files_host() {
        let files = file(&[("host", "db"), ("socket", "/run/file.sock")]);
        let c = config(&sources(&files, None, Some("mysql://app@/x?socket=/run/url.sock"))).unwrap();
        assert_eq!(c.socket.as_deref(), Some("/run/url.sock"));
    }

    #[test]
    fn nothing_naming_a_server_is_a_usage_error_naming_the_three_ways() {
        let files = file(&[("user", "app"), ("password", "pw")]);
        let refused = config(&sources(&files, None, None)).unwrap_err();
        assert_eq!(refused.code, exit::USAGE);
        for way in ["--dsn", "MYSQLLOCK_DSN", "host=", "[client]", "~/.my.cnf"] {
            assert!(refused.message.contains(way), "{}", refused.message);
        }
    }

    #[test]
    fn tls_options_override_the_urls_and_contradictions_are_refused() {
        let tls = [("ssl-mode", "VERIFY_IDENTITY"), ("ssl-ca", "/ca.pem")];
        let s = Sources { options: &tls, ..sources(&[], None, Some("mysql://h/db?ssl-mode=DISABLED")) };
        let c = config(&s).unwrap();
        assert_eq!((c.tls.mode(), c.tls.ca.as_deref()), (SslMode::VerifyIdentity, Some("/ca.pem")));
        let tls = [("ssl-cert", "/c.pem")];
        let refused = config(&Sources { options: &tls, ..sources(&[], None, Some("mysql://h/db")) }).unwrap_err();
        assert_eq!(refused.code, exit::USAGE, "{}", refused.message);
    }

    #[test]
    fn errors_name_their_source_and_never_the_password() {
        let files = file(&[("password", "s3cret"), ("port", "http")]);
        let refused = config(&sources(&files, None, None)).unwrap_err();
        assert!(refused.message.starts_with("option file /home/u/.my.cnf:2: "), "{}", refused.message);
        let refused = config(&sources(&[], Some("mysql://u:s3cret@h:x/db"), None)).unwrap_err();
        assert!(refused.message.starts_with("MYSQLLOCK_DSN: "), "{}", refused.message);
        assert!(!refused.message.contains("s3cret"), "{}", refused.message);
        let refused = config(&sources(&[], None, Some("postgres://u:s3cret@h/db"))).unwrap_err();
        assert!(refused.message.starts_with("--dsn: ") && !refused.message.contains("s3cret"), "{}", refused.message);
    }

    #[test]
    fn allow_cluster_from_the_option_or_the_url() {
        let s = Sources { allow_cluster: true, ..sources(&[], None, Some("mysql://h/db")) };
        assert!(config(&s).unwrap().allow_cluster);
        assert!(config(&sources(&[], None, Some("mysql://h/db?allow_cluster=1"))).unwrap().allow_cluster);
        assert!(!config(&sources(&[], None, Some("mysql://h/db"))).unwrap().allow_cluster);
    }
}
