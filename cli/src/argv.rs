//! Hiding a password given on the command line (`--dsn mysql://user:password@host/db`)
//! from other users of the machine.
//!
//! Every user can read any process's arguments (`ps`, `/proc/PID/cmdline`), and a
//! crontab job shows them for as long as it runs. The kernel reads them from the
//! process's own memory, the strings `argv` points to, so overwriting the password there
//! hides it from then on; nothing can hide it before mysqllock starts, hence the warning
//! recommending an option file or `MYSQLLOCK_DSN` instead.
//!
//! The standard library does not hand out that memory: `std::env::args()` returns copies.
//! On glibc, the functions in an executable's `.init_array` section are called before
//! `main` with `(argc, argv, envp)`, the very `argv` the kernel points at, so one of
//! them keeps the pointer ([`raw`]). Elsewhere (musl calls them without arguments)
//! nothing is captured, and the password stays visible; the warning then says so.

use std::ffi::OsString;
use std::ops::Range;
use std::os::unix::ffi::OsStrExt;

/// What [`hide_dsn_passwords`] found and did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hiding {
    /// No `--dsn` argument carries a password.
    NoPassword,
    /// Every password in a `--dsn` argument is now `x`s in the process's arguments.
    Hidden,
    /// A `--dsn` argument carries a password that could not be hidden.
    Visible,
}

impl Hiding {
    /// The warning to print, if any: one line, without the password.
    pub fn warning(self) -> Option<&'static str> {
        match self {
            Hiding::NoPassword => None,
            Hiding::Hidden => Some(
                "warning: the password in --dsn was visible to other users (ps) until mysqllock hid it; \
                 put it in an option file (~/.my.cnf, [client] password=..., mode 600) or in MYSQLLOCK_DSN instead",
            ),
            Hiding::Visible => Some(
                "warning: the password in --dsn is visible to other users (ps); put it in an option file \
                 (~/.my.cnf, [client] password=..., mode 600) or in MYSQLLOCK_DSN instead",
            ),
        }
    }
}

/// Overwrites, with `x`s, each password in a `--dsn URL` or `--dsn=URL` argument of this
/// process, leaving the rest of the argument as it was. `args` is this process's
/// arguments as read before (`std::env::args_os()`): the program parses that copy, so
/// the connection still gets the real password.
///
/// Call it at the start of `main`, before any thread runs that could read the arguments.
pub fn hide_dsn_passwords(args: &[OsString]) -> Hiding {
    let spans = password_spans(args);
    if spans.is_empty() {
        return Hiding::NoPassword;
    }
    let mut all = true;
    for (index, bytes) in spans {
        all &= raw::overwrite(index, args[index].as_bytes(), bytes);
    }
    if all {
        Hiding::Hidden
    } else {
        Hiding::Visible
    }
}

/// Where passwords are: argument index, and the bytes of that argument to overwrite.
/// The arguments of the guarded command (after `--`) are not mysqllock's own.
fn password_spans(args: &[OsString]) -> Vec<(usize, Range<usize>)> {
    const OPTION: &[u8] = b"--dsn";
    let mut spans = Vec::new();
    let mut index = 1;
    while index < args.len() {
        let arg = args[index].as_bytes();
        if arg == b"--" {
            break;
        }
        let (value_index, offset) = match arg.strip_prefix(OPTION) {
            Some(b"") => (index + 1, 0),
            Some(rest) if rest.starts_with(b"=") => (index, OPTION.len() + 1),
            _ => {
                index += 1;
                continue;
            }
        };
        if let Some(value) = args.get(value_index) {
            if let Some(password) = password_in_url(&value.as_bytes()[offset..]) {
                spans.push((value_index, password.start + offset..password.end + offset));
            }
        }
        index = value_index + 1;
    }
    spans
}

/// Gives the command of a run `MYSQLLOCK_DSN` without its password (see
/// [`dsn_for_child`]). The command is not mysqllock: its children, its logs and a `ps e`
/// would carry the password on.
pub fn scrub_child_env(command: &mut std::process::Command) {
    let Some(dsn) = std::env::var_os("MYSQLLOCK_DSN") else { return };
    match dsn_for_child(dsn.as_bytes()) {
        Some(kept) => command.env("MYSQLLOCK_DSN", std::ffi::OsStr::from_bytes(&kept)),
        None => command.env_remove("MYSQLLOCK_DSN"),
    };
}

/// `MYSQLLOCK_DSN` as the command of a run sees it: `mysql://user@host/db?...`, the URL
/// without its password, so a nested `mysqllock` still knows the server and takes the
/// password from an option file. `None` (not passed on at all) when it carries a
/// password whose place in the URL is not clear.
pub fn dsn_for_child(dsn: &[u8]) -> Option<Vec<u8>> {
    match password_in_url(dsn) {
        None => Some(dsn.to_vec()),
        Some(range) if range.start > 0 && range.end < dsn.len() && dsn[range.start - 1] == b':' => {
            let mut kept = dsn[..range.start - 1].to_vec();
            kept.extend_from_slice(&dsn[range.end..]);
            Some(kept)
        }
        Some(_) => None,
    }
}

/// The bytes of a connection URL that hold its password (as written, percent-encoded),
/// if it has a non-empty one.
///
/// The URL is read by the core ([`mysqllock_core::url_settings`]); this only finds where
/// its password was written, and checks the finding against the core: the URL with those
/// bytes replaced must give the same settings but the password. If it does not (a URL
/// the core reads differently), the whole URL counts as the password: better a URL
/// hidden entirely than a password shown. A URL the core cannot read is refused at once;
/// what looks like its password is hidden meanwhile.
fn password_in_url(url: &[u8]) -> Option<Range<usize>> {
    let found = password_as_written(url);
    let Ok(text) = std::str::from_utf8(url) else {
        return found;
    };
    let settings = mysqllock_core::url_settings(text).ok();
    let has_password = settings.as_ref().map(|s| s.iter().any(|(k, v)| k == "password" && !v.is_empty()));
    match (found, has_password) {
        (None, Some(false)) => None,
        (Some(range), Some(true)) if same_but_password(text, &range, settings.as_deref().unwrap_or_default()) => {
            Some(range)
        }
        (found, None) => found,
        _ => Some(0..url.len()),
    }
}

/// `scheme://user:PASSWORD@host...`: after the first `:` of what precedes the last `@`
/// of the authority (which ends at the first `/` or `?`).
fn password_as_written(url: &[u8]) -> Option<Range<usize>> {
    let start = url.windows(3).position(|w| w == b"://")? + 3;
    let rest = &url[start..];
    let authority = &rest[..rest.iter().position(|&b| b == b'/' || b == b'?').unwrap_or(rest.len())];
    let userinfo = &authority[..authority.iter().rposition(|&b| b == b'@')?];
    let colon = userinfo.iter().position(|&b| b == b':')?;
    let range = start + colon + 1..start + userinfo.len();
    (!range.is_empty()).then_some(range)
}

/// Whether `url` with `range` overwritten reads as `settings` but for the password.
fn same_but_password(url: &str, range: &Range<usize>, settings: &[(String, String)]) -> bool {
    let hidden = format!("{}{}{}", &url[..range.start], "x".repeat(range.len()), &url[range.end..]);
    let Ok(after) = mysqllock_core::url_settings(&hidden) else {
        return false;
    };
    let other = |s: &[(String, String)]| s.iter().filter(|(k, _)| k != "password").cloned().collect::<Vec<_>>();
    other(&after) == other(settings) && after.iter().any(|(k, v)| k == "password" && *v == "x".repeat(range.len()))
}

/// The process's own argument memory, captured before `main`.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
mod raw {
    use std::ffi::{c_char, c_int};
    use std::ops::Range;
    use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering};

    static ARGC: AtomicUsize = AtomicUsize::new(0);
    static ARGV: AtomicPtr<*mut c_char> = AtomicPtr::new(std::ptr::null_mut());

    /// glibc calls each function in `.init_array` with `(argc, argv, envp)` before `main`
    /// (the standard library takes its own copy of the arguments the same way).
    #[used]
    #[link_section = ".init_array"]
    static CAPTURE: extern "C" fn(c_int, *mut *mut c_char, *mut *mut c_char) = capture;

    extern "C" fn capture(argc: c_int, argv: *mut *mut c_char, _envp: *mut *mut c_char) {
        ARGC.store(usize::try_from(argc).unwrap_or(0), Ordering::SeqCst);
        ARGV.store(argv, Ordering::SeqCst);
    }

    /// Overwrites `bytes` of argument `index` with `x`s, if that argument still reads as
    /// `expected`; whether it did.
    pub fn overwrite(index: usize, expected: &[u8], bytes: Range<usize>) -> bool {
        let argv = ARGV.load(Ordering::SeqCst);
        if argv.is_null() || index >= ARGC.load(Ordering::SeqCst) {
            return false;
        }
        // SAFETY: glibc passed `argv` with `argc` entries, and `index < argc`; the array
        // lives as long as the process (the initial stack), and nothing writes it.
        let arg = unsafe { *argv.add(index) };
        if arg.is_null() {
            return false;
        }
        // SAFETY: `arg` is a NUL-terminated string of the initial stack, which C lets a
        // program modify; the slice ends before the NUL. No other reference to it exists:
        // the standard library reads it only inside `args()`, and the caller runs before
        // any other thread.
        let memory = unsafe { std::slice::from_raw_parts_mut(arg.cast::<u8>(), libc::strlen(arg)) };
        if memory != expected || bytes.end > memory.len() {
            return false;
        }
        memory[bytes].fill(b'x');
        true
    }
}

/// Where the arguments cannot be captured: nothing is hidden.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
mod raw {
    pub fn overwrite(_index: usize, _expected: &[u8], _bytes: std::ops::Range<usize>) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Vec<OsString> {
        list.iter().map(OsString::from).collect()
    }

    /// The arguments with the spans found overwritten, as the process shows them then.
    fn hidden(list: &[&str]) -> Vec<String> {
        let mut out: Vec<String> = list.iter().map(|s| s.to_string()).collect();
        for (index, bytes) in password_spans(&args(list)) {
            out[index].replace_range(bytes.clone(), &"x".repeat(bytes.len()));
        }
        out
    }

    #[test]
    fn the_commands_dsn_has_no_password() {
        let child = |dsn: &str| dsn_for_child(dsn.as_bytes()).map(|b| String::from_utf8(b).unwrap());
        assert_eq!(
            child("mysql://app:s3cret@db:3306/prod?table=t").as_deref(),
            Some("mysql://app@db:3306/prod?table=t")
        );
        assert_eq!(child("mysql://app:p%40s:s@db/prod").as_deref(), Some("mysql://app@db/prod"));
        assert_eq!(child("mysql://app@db/prod").as_deref(), Some("mysql://app@db/prod"));
        // Not a URL the core reads (refused when the command runs mysqllock): what looks
        // like its password is taken out all the same.
        assert_eq!(child("mysql://app:s3cret@db:notaport/prod").as_deref(), Some("mysql://app@db:notaport/prod"));
    }

    #[test]
    fn both_forms_of_the_option_are_found_and_only_the_password_is_hidden() {
        assert_eq!(
            hidden(&["mysqllock", "--dsn", "mysql://app:s3cret@db:3306/prod", "status"]),
            ["mysqllock", "--dsn", "mysql://app:xxxxxx@db:3306/prod", "status"]
        );
        assert_eq!(
            hidden(&["mysqllock", "run", "--dsn=mysql://app:p%40ss@db/prod?table=t", "job", "--", "true"]),
            ["mysqllock", "run", "--dsn=mysql://app:xxxxxx@db/prod?table=t", "job", "--", "true"]
        );
    }

    #[test]
    fn a_password_with_at_signs_and_colons_is_hidden_whole() {
        // The core takes the last @ of the authority, and the first : before it.
        assert_eq!(
            hidden(&["mysqllock", "--dsn", "mysql://app:a:b@c@db/prod"]),
            ["mysqllock", "--dsn", "mysql://app:xxxxx@db/prod"]
        );
    }

    #[test]
    fn urls_without_a_password_and_the_commands_arguments_are_left_alone() {
        let untouched = [
            &["mysqllock", "--dsn", "mysql://app@db/prod", "status"][..],
            &["mysqllock", "--dsn", "mysql://app:@db/prod", "status"],
            &["mysqllock", "--dsn", "mysql://db/prod?ssl-ca=/a:b@c", "status"],
            &["mysqllock", "run", "job", "--", "cli", "--dsn", "mysql://app:pw@db/prod"],
            &["mysqllock", "--dsnx", "mysql://app:pw@db/prod"],
            &["mysqllock", "status", "--dsn"],
        ];
        for list in untouched {
            assert_eq!(hidden(list), *list, "{list:?}");
        }
    }

    #[test]
    fn a_url_the_core_cannot_read_still_has_its_password_hidden() {
        assert_eq!(
            hidden(&["mysqllock", "--dsn", "mysql://app:pw@db:notaport/prod"]),
            ["mysqllock", "--dsn", "mysql://app:xx@db:notaport/prod"]
        );
        // Not even recognisably a URL with a password: nothing to find, nothing hidden.
        assert_eq!(hidden(&["mysqllock", "--dsn", "app:pw"]), ["mysqllock", "--dsn", "app:pw"]);
    }

    #[test]
    fn the_warning_never_names_the_password_and_points_to_the_alternatives() {
        for hiding in [Hiding::Hidden, Hiding::Visible] {
            let warning = hiding.warning().expect("a warning");
            assert!(warning.contains("~/.my.cnf") && warning.contains("MYSQLLOCK_DSN"), "{warning}");
        }
        assert_eq!(Hiding::NoPassword.warning(), None);
    }
}
