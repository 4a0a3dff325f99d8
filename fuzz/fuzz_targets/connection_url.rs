//! The connection URL (`mysql://user:password@host:port/db?key=value`), as users and
//! environment variables give it, and what a parsed one shows of itself: never the
//! password.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mysqllock_core::Config;

fuzz_target!(|url: &str| {
    let _ = mysqllock_core::url_settings(url);
    if let Ok(mut config) = Config::from_url(url) {
        if config.password.is_some() {
            let shown = format!("{config:?}");
            config.password = Some("another password".into());
            assert_eq!(shown, format!("{config:?}"), "what a Config shows depends on its password");
        }
    }
});
