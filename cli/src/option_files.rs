//! Option files in the `mysql` client's my.cnf syntax, so a crontab line can name the
//! server without showing the password to every user of the machine (`ps`).
//!
//! Which files: `--defaults-extra-file` then `~/.my.cnf` (a later file overriding single
//! settings), or only `--defaults-file`, or none with `--no-defaults`, as the `mysql`
//! client does (it reads the system-wide files as well; mysqllock does not).
//!
//! Which groups: `[client]`, shared with the `mysql` client and other tools (so keys
//! mysqllock does not know are ignored there), then `[mysqllock]`, which wins over
//! `[client]` whichever file or line it is in, and where an unknown key is an error.
//!
//! The syntax: `[group]`; `key`, `key=value` (spaces around `=` allowed, `_` and `-`
//! alike in keys, a `loose-` prefix marks a key that may be unknown); `#` and `;` start a
//! comment line, and `#` outside quotes starts a comment after a value too; a value
//! that begins and ends with the same quote (`'...'` or `"..."`) loses them, and the
//! backslash escapes below (`\s` is a space) are resolved in every value, quoted or not.
//! That is the `mysql` client's own reading, down to its corners (a value like `"ab"cd`
//! or an unclosed `"abc` is taken as written; text after a group's `]` is ignored), so a
//! password that works there works here: a test compares with `my_print_defaults` of
//! MariaDB and MySQL. `!include FILE` and `!includedir DIR` (the `.cnf` files in it, by
//! name) read other files in place; a relative name is relative to the including file's
//! directory. Where the client is lenient and a cron job would fail unclearly later, this
//! reading is strict: a missing `!include` file is an error (the client skips it).
//!
//! A world-writable file is ignored with a warning (anyone could point mysqllock at
//! another server or account), as the `mysql` client does.

use std::fmt;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// The groups read, lowest precedence first.
const GROUPS: [&str; 2] = ["client", "mysqllock"];
/// The group where an unknown key is an error.
const OWN_GROUP: &str = "mysqllock";

/// The keys taken from the option files, as [`mysqllock_core::Config::set`] names them.
pub const KEYS: [&str; 10] =
    ["user", "password", "host", "port", "socket", "database", "ssl-mode", "ssl-ca", "ssl-cert", "ssl-key"];

/// How deep `!include` and `!includedir` may nest (a file including itself ends here).
const MAX_INCLUDE_DEPTH: usize = 10;

/// Which option files to read: the `mysql` client's `--no-defaults`, `--defaults-file`
/// and `--defaults-extra-file`.
#[derive(Debug, Clone, Copy)]
pub enum Files<'a> {
    /// `--no-defaults`.
    None,
    /// `--defaults-file=F`: only F.
    Only(&'a Path),
    /// `--defaults-extra-file` (if given), then `HOME/.my.cnf` (if `home` is known and the
    /// file exists).
    Defaults { extra: Option<&'a Path>, home: Option<&'a Path> },
}

/// A file and line, for messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Place {
    pub file: PathBuf,
    pub line: usize,
}

impl fmt::Display for Place {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.file.display(), self.line)
    }
}

/// One setting for [`mysqllock_core::Config::set`]: `key` is one of [`KEYS`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Setting {
    pub key: &'static str,
    pub value: String,
    pub place: Place,
}

/// What the option files say.
#[derive(Debug, Default)]
pub struct Read {
    /// In the order they apply: a later one overrides an earlier one of the same key.
    pub settings: Vec<Setting>,
    /// One line each, for stderr (files ignored, and why).
    pub warnings: Vec<String>,
}

/// Why the option files cannot be used; the message names the file (and line), never a
/// value read from it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error(String);

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl Error {
    fn at(place: &Place, what: impl fmt::Display) -> Self {
        Error(format!("option file {place}: {what}"))
    }
}

/// Reads the option files `files` chooses.
pub fn read(files: Files<'_>) -> Result<Read, Error> {
    let mut reader = Reader::default();
    match files {
        Files::None => {}
        Files::Only(file) => reader.file(file, 0)?,
        Files::Defaults { extra, home } => {
            if let Some(extra) = extra {
                reader.file(extra, 0)?;
            }
            if let Some(mycnf) = home.map(|home| home.join(".my.cnf")) {
                // Whether it exists, not whether it can be read: an unreadable one is an error.
                if fs::symlink_metadata(&mycnf).is_ok() {
                    reader.file(&mycnf, 0)?;
                }
            }
        }
    }
    let [client, own] = reader.groups;
    Ok(Read { settings: client.into_iter().chain(own).collect(), warnings: reader.warnings })
}

/// The settings found so far, one list per group of [`GROUPS`], in file order.
#[derive(Default)]
struct Reader {
    groups: [Vec<Setting>; 2],
    warnings: Vec<String>,
}

impl Reader {
    fn file(&mut self, path: &Path, depth: usize) -> Result<(), Error> {
        let shown = path.display();
        let meta = fs::metadata(path).map_err(|e| Error(format!("option file {shown}: {e}")))?;
        if meta.is_dir() {
            return Err(Error(format!("option file {shown} is a directory")));
        }
        if meta.permissions().mode() & 0o002 != 0 {
            self.warnings.push(format!(
                "warning: option file {shown} is ignored: it is world-writable (chmod o-w, or better 600)"
            ));
            return Ok(());
        }
        let bytes = fs::read(path).map_err(|e| Error(format!("option file {shown}: {e}")))?;
        let mut group: Option<usize> = None;
        for (index, raw) in bytes.split(|&b| b == b'\n').enumerate() {
            let place = Place { file: path.to_owned(), line: index + 1 };
            let text = String::from_utf8_lossy(raw);
            let line = parse_line(&text).map_err(|why| Error::at(&place, why))?;
            let valid_utf8 = matches!(text, std::borrow::Cow::Borrowed(_));
            match line {
                Line::Blank => {}
                Line::Group(name) => group = GROUPS.iter().position(|g| g.eq_ignore_ascii_case(&name)),
                Line::Include(name) | Line::IncludeDir(name) if depth >= MAX_INCLUDE_DEPTH => {
                    return Err(Error::at(&place, format!("{name} nests includes deeper than {MAX_INCLUDE_DEPTH}")));
                }
                Line::Include(name) => self.file(&relative_to(path, &name), depth + 1)?,
                Line::IncludeDir(name) => self.dir(&relative_to(path, &name), &place, depth + 1)?,
                Line::Option { .. } if group.is_none() => {}
                Line::Option { .. } if !valid_utf8 => return Err(Error::at(&place, "not UTF-8")),
                Line::Option { key, value } => {
                    let group = group.unwrap_or_default();
                    if let Some(setting) = setting(GROUPS[group], &key, value, &place)? {
                        self.groups[group].push(setting);
                    }
                }
            }
        }
        Ok(())
    }

    /// `!includedir DIR`: its `.cnf` files, by name.
    fn dir(&mut self, dir: &Path, place: &Place, depth: usize) -> Result<(), Error> {
        let entries = fs::read_dir(dir).map_err(|e| Error::at(place, format!("{}: {e}", dir.display())))?;
        let mut files = Vec::new();
        for entry in entries {
            let path = entry.map_err(|e| Error::at(place, format!("{}: {e}", dir.display())))?.path();
            if path.extension().is_some_and(|ext| ext == "cnf") && path.is_file() {
                files.push(path);
            }
        }
        files.sort();
        files.iter().try_for_each(|file| self.file(file, depth))
    }
}

fn relative_to(including: &Path, name: &str) -> PathBuf {
    match including.parent() {
        Some(dir) => dir.join(name),
        None => PathBuf::from(name),
    }
}

/// The setting an option line of `group` makes, if mysqllock takes it.
fn setting(group: &str, key: &str, raw: Option<&str>, place: &Place) -> Result<Option<Setting>, Error> {
    let key = key.replace('_', "-");
    let (loose, key) = match key.strip_prefix("loose-") {
        Some(rest) => (true, rest),
        None => (false, key.as_str()),
    };
    let Some(known) = KEYS.iter().copied().find(|k| *k == key) else {
        if group == OWN_GROUP && !loose {
            let known = KEYS.join(", ");
            return Err(Error::at(place, format!("unknown option {key:?} in [{OWN_GROUP}] (known: {known})")));
        }
        return Ok(None);
    };
    let Some(raw) = raw else {
        if known == "password" {
            return Err(Error::at(
                place,
                "password without a value (the mysql client would prompt for it, which a cron job \
                 cannot answer): write password=... or drop the line",
            ));
        }
        return Err(Error::at(place, format!("{known} needs a value ({known}=...)")));
    };
    let value = unquote(raw);
    Ok(Some(Setting { key: known, value, place: place.clone() }))
}

/// One line of an option file, its value not yet unquoted.
#[derive(Debug, PartialEq, Eq)]
enum Line<'a> {
    Blank,
    Group(String),
    Include(String),
    IncludeDir(String),
    Option { key: String, value: Option<&'a str> },
}

fn parse_line(line: &str) -> Result<Line<'_>, &'static str> {
    let line = line.strip_suffix('\r').unwrap_or(line).trim_start();
    if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
        return Ok(Line::Blank);
    }
    if let Some(rest) = line.strip_prefix('[') {
        // As the `mysql` client: what follows the `]` is ignored, and only the spaces at
        // the name's end go (`[ client]` is no `[client]` to it).
        let (name, _) = rest.split_once(']').ok_or("a group header without its closing ]")?;
        return Ok(Line::Group(name.trim_end().to_owned()));
    }
    if let Some(directive) = line.strip_prefix('!').map(str::trim_start) {
        let (word, name) = directive.split_once(char::is_whitespace).unwrap_or((directive, ""));
        let name = name.trim().to_owned();
        return match word {
            _ if name.is_empty() => Err("!include or !includedir without a name"),
            "include" => Ok(Line::Include(name)),
            "includedir" => Ok(Line::IncludeDir(name)),
            _ => Err("unknown directive (only !include and !includedir)"),
        };
    }
    let (key, value) = match before_comment(line).split_once('=') {
        Some((key, value)) => (key, Some(value)),
        None => (before_comment(line), None),
    };
    let key = key.trim();
    if key.is_empty() {
        return Err("a value without an option name");
    }
    Ok(Line::Option { key: key.to_owned(), value })
}

/// The part of an option line before its comment: a `#` outside quotes. A quote opens
/// at `'` or `"` and closes at the same character, unless a backslash inside the quote
/// escapes it (the `mysql` client's rule, key and value alike).
fn before_comment(line: &str) -> &str {
    let (mut quote, mut escaped) = (None, false);
    for (i, c) in line.char_indices() {
        if (c == '\'' || c == '"') && !escaped {
            match quote {
                None => quote = Some(c),
                Some(open) if open == c => quote = None,
                Some(_) => {}
            }
        }
        if quote.is_none() && c == '#' {
            return &line[..i];
        }
        escaped = quote.is_some() && c == '\\' && !escaped;
    }
    line
}

/// A value as written after `=`, its comment gone: spaces around it dropped, the quotes
/// around it dropped when it begins and ends with the same one, escapes resolved (a
/// backslash at the very end stays).
fn unquote(raw: &str) -> String {
    let raw = raw.trim_matches(|c: char| c.is_ascii_whitespace() || c == '\u{b}');
    let inner = match raw.chars().next() {
        Some(quote @ ('\'' | '"')) if raw.len() > 1 && raw.ends_with(quote) => &raw[1..raw.len() - 1],
        _ => raw,
    };
    let mut value = String::new();
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        match (c, chars.as_str().is_empty()) {
            ('\\', false) => push_escaped(&mut value, chars.next().unwrap_or_default()),
            _ => value.push(c),
        }
    }
    value
}

/// The `mysql` client's escapes: `\b \t \n \r \s \\ \" \'`; a backslash before any other
/// character stays.
fn push_escaped(value: &mut String, escaped: char) {
    match escaped {
        'b' => value.push('\u{8}'),
        't' => value.push('\t'),
        'n' => value.push('\n'),
        'r' => value.push('\r'),
        's' => value.push(' '),
        '\\' | '"' | '\'' => value.push(escaped),
        other => {
            value.push('\\');
            value.push(other);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A directory of the test's own, removed at the end.
    struct Dir(PathBuf);

    impl Dir {
        fn new(tag: &str) -> Self {
            static NEXT: AtomicUsize = AtomicUsize::new(0);
            let n = NEXT.fetch_add(1, Ordering::SeqCst);
            let dir = std::env::temp_dir().join(format!("mysqllock-optfiles-{tag}-{}-{n}", std::process::id()));
            let _ = fs::remove_dir_all(&dir);
            fs::create_dir_all(&dir).unwrap();
            Dir(dir)
        }

        /// Writes `name` (mode 600) and returns its path.
        fn file(&self, name: &str, text: &str) -> PathBuf {
            let path = self.0.join(name);
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            fs::write(&path, text).unwrap();
            fs::set_permissions(&path, fs::Permissions::from_mode(0o600)).unwrap();
            path
        }
    }

    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.0);
        }
    }

    /// The settings of one file, as `key=value` strings.
    fn settings_of(text: &str) -> Result<Vec<String>, Error> {
        let dir = Dir::new("one");
        let file = dir.file("my.cnf", text);
        Ok(read(Files::Only(&file))?.settings.iter().map(|s| format!("{}={}", s.key, s.value)).collect())
    }

    #[test]
    fn keys_values_spaces_and_both_spellings() {
        let text = "[client]\nuser=app\n  host =  db.example  \nssl_mode = REQUIRED\nssl-ca=/etc/ca.pem\n";
        assert_eq!(
            settings_of(text).unwrap(),
            ["user=app", "host=db.example", "ssl-mode=REQUIRED", "ssl-ca=/etc/ca.pem"]
        );
    }

    #[test]
    fn comments_are_dropped_but_not_inside_quotes() {
        let text = "# a comment\n; another\n[client] # trailing\nuser = app # who\npassword = \"p#ss\" # quoted\n\
                    host='h#1'\n";
        assert_eq!(settings_of(text).unwrap(), ["user=app", "password=p#ss", "host=h#1"]);
    }

    #[test]
    fn quotes_around_a_value_go_and_escapes_are_resolved_inside_either() {
        let text = "[client]\npassword=\"a\\\"b\\\\c\\sd\\te\\q\"\nuser='x\\sy \"z\"'\n";
        assert_eq!(settings_of(text).unwrap(), ["password=a\"b\\c d\te\\q", "user=x y \"z\""]);
    }

    #[test]
    fn unquoted_values_take_the_mysql_clients_escapes() {
        assert_eq!(settings_of("[client]\npassword=a\\sb\\\\c\\d\n").unwrap(), ["password=a b\\c\\d"]);
    }

    #[test]
    fn an_empty_value_is_an_empty_password() {
        assert_eq!(settings_of("[client]\npassword=\nuser=\"\"\n").unwrap(), ["password=", "user="]);
    }

    #[test]
    fn unclosed_quotes_and_text_after_them_are_taken_as_written() {
        let text = "[client]\npassword=\"abc\nuser=\"a\"b\nhost='h\n";
        assert_eq!(settings_of(text).unwrap(), ["password=\"abc", "user=\"a\"b", "host='h"]);
    }

    #[test]
    fn a_syntax_error_never_shows_the_value() {
        let e = settings_of("[mysqllock]\npasword=s3cret\n").unwrap_err().to_string();
        assert!(e.contains("unknown option \"pasword\""), "{e}");
        assert!(!e.contains("s3cret"), "{e}");
    }

    /// Values with every corner of the syntax, each read as a `password=...` line.
    const CORNERS: [&str; 17] = [
        r"plain",
        r"  spaced value  ",
        r"'a\tb\\c'",
        r#""x\ty""#,
        r"'q#r' # comment",
        r#""ab"cd"#,
        r#""abc"#,
        r"'abc",
        r"ab'c#d'e # comment",
        r"a\sb\\c\d",
        r#""a\"b#c" # comment"#,
        r"'it''s'",
        r"x\",
        r"'",
        r"''",
        r"p#ss",
        r#""with ; semicolon""#,
    ];

    /// Group headers and directives the `mysql` client reads in its own way.
    const HEADERS: [&str; 3] = [
        "[client] x\nuser=a\n[client] ; note\npassword=b\n",
        "[ client]\nuser=a\n[client]  \npassword=b\n",
        "[mysqldump]\nuser=a\n[client]\npassword=b\n[mysqldump]\nuser=c\n[client]\nhost=h\n",
    ];

    /// Every file the comparisons read: [`CORNERS`] as values, then [`HEADERS`].
    fn compared_files() -> Vec<String> {
        let values = CORNERS.iter().map(|raw| format!("[client]\npassword={raw}\n"));
        values.chain(HEADERS.iter().map(|text| (*text).to_owned())).collect()
    }

    /// What `my_print_defaults` (the parser of the `mysql` client itself) prints for the
    /// `[client]` group of each of [`compared_files`]; `command` runs it on a file.
    fn client_reading(mut command: impl FnMut(&Path) -> std::process::Output) -> Vec<String> {
        let dir = Dir::new("client-reading");
        let files = compared_files();
        let read = |(i, text): (usize, &String)| {
            let out = command(&dir.file(&format!("{i}.cnf"), text));
            assert!(out.status.success(), "my_print_defaults: {}", String::from_utf8_lossy(&out.stderr));
            String::from_utf8(out.stdout).unwrap()
        };
        files.iter().enumerate().map(read).collect()
    }

    /// The same as mysqllock reads it, in `my_print_defaults`'s form.
    fn our_reading() -> Vec<String> {
        let printed = |text: &String| settings_of(text).unwrap().iter().map(|s| format!("--{s}\n")).collect();
        compared_files().iter().map(printed).collect()
    }

    #[test]
    fn files_read_as_mariadbs_my_print_defaults_reads_them() {
        let theirs = client_reading(|file| {
            std::process::Command::new("my_print_defaults")
                .arg(format!("--defaults-file={}", file.display()))
                .arg("client")
                .output()
                .expect("my_print_defaults (Debian's mariadb-client, which scripts/install-deps.sh installs)")
        });
        assert_eq!(our_reading(), theirs);
    }

    /// MySQL's own `my_print_defaults`, in the chroot `scripts/mysql.sh` runs MySQL 9.7 in:
    /// in the test runs against MySQL (`MYSQLLOCK_TEST_SERVER=mysql`), which made it.
    #[test]
    fn files_read_as_mysqls_my_print_defaults_reads_them() {
        if std::env::var("MYSQLLOCK_TEST_SERVER").as_deref() != Ok("mysql") {
            eprintln!("MariaDB run: MySQL's my_print_defaults is compared in the MySQL run");
            return;
        }
        let script =
            std::env::var("MYSQLLOCK_SERVER_SCRIPT").expect("MYSQLLOCK_SERVER_SCRIPT (scripts/test.sh sets it)");
        let root = std::process::Command::new("bash").arg(&script).arg("root").output().unwrap();
        assert!(root.status.success(), "{script} root: {}", String::from_utf8_lossy(&root.stderr));
        let root = PathBuf::from(String::from_utf8(root.stdout).unwrap().lines().last().unwrap().trim());
        let name = format!("tmp/mysqllock-option-files-{}", std::process::id());
        // Removed however the test ends: the chroot is shared by every later run.
        let inside = Dir(root.join(&name));
        fs::create_dir_all(&inside.0).unwrap();
        let theirs = client_reading(|file| {
            fs::copy(file, inside.0.join("my.cnf")).unwrap();
            std::process::Command::new("chroot")
                .arg(&root)
                .arg("my_print_defaults")
                .arg(format!("--defaults-file=/{name}/my.cnf"))
                .args(["-s", "client"])
                .output()
                .unwrap()
        });
        assert_eq!(our_reading(), theirs);
    }

    #[test]
    fn other_groups_and_unknown_client_keys_are_ignored() {
        let text = "[mysqld]\nport=1\nnonsense \"unclosed\n[client]\ndefault-character-set=utf8mb4\nport=3307\n\
                    [mysqldump]\nuser=dump\n";
        assert_eq!(settings_of(text).unwrap(), ["port=3307"]);
    }

    #[test]
    fn an_unknown_key_in_the_own_group_is_an_error_unless_loose() {
        let e = settings_of("[client]\nuser=a\n[mysqllock]\ntable=x\n").unwrap_err().to_string();
        assert!(e.contains("my.cnf:4: unknown option \"table\" in [mysqllock]"), "{e}");
        assert_eq!(settings_of("[mysqllock]\nloose-table=x\nloose_user=b\n").unwrap(), ["user=b"]);
    }

    #[test]
    fn the_own_group_wins_over_client_whatever_the_order() {
        let text = "[mysqllock]\nuser=mine\n[CLIENT]\nuser=shared\nhost=h\n";
        assert_eq!(settings_of(text).unwrap(), ["user=shared", "host=h", "user=mine"]);
    }

    #[test]
    fn a_password_without_a_value_is_an_error_not_a_prompt() {
        let e = settings_of("[client]\nuser=a\npassword\n").unwrap_err().to_string();
        assert!(e.contains("my.cnf:3: password without a value") && e.contains("cron"), "{e}");
        // Elsewhere, a bare `password` (mysqldump's prompt) is not mysqllock's business.
        assert_eq!(settings_of("[mysqldump]\npassword\n").unwrap(), Vec::<String>::new());
    }

    #[test]
    fn an_option_outside_any_group_is_ignored() {
        assert_eq!(settings_of("user=nobody\n[client]\nuser=app\n").unwrap(), ["user=app"]);
    }

    #[test]
    fn crlf_line_ends_are_understood() {
        assert_eq!(settings_of("[client]\r\nuser = app\r\n").unwrap(), ["user=app"]);
    }

    #[test]
    fn includes_read_in_place_and_includedir_reads_cnf_files_by_name() {
        let dir = Dir::new("include");
        dir.file("conf.d/20-b.cnf", "[client]\nhost=b\n");
        dir.file("conf.d/10-a.cnf", "[client]\nhost=a\nport=1\n");
        dir.file("conf.d/readme.txt", "[client]\nhost=never\n");
        dir.file("secret.cnf", "[mysqllock]\npassword=pw\n");
        let main = dir.file("main.cnf", "[client]\nuser=u\n!include secret.cnf\nport=2\n!includedir conf.d\nuser=v\n");
        let read = read(Files::Only(&main)).unwrap();
        let got: Vec<String> =
            read.settings.iter().map(|s| format!("{}={}@{}", s.key, s.value, s.place.line)).collect();
        assert_eq!(got, ["user=u@2", "port=2@4", "host=a@2", "port=1@3", "host=b@2", "user=v@6", "password=pw@2"]);
        assert!(read.settings[6].place.file.ends_with("secret.cnf"));
    }

    #[test]
    fn an_included_file_starts_outside_any_group() {
        let dir = Dir::new("includegroup");
        dir.file("inc.cnf", "user=outside\n[client]\nhost=h\n");
        let main = dir.file("main.cnf", "[client]\n!include inc.cnf\nport=3\n");
        let got: Vec<String> =
            read(Files::Only(&main)).unwrap().settings.iter().map(|s| format!("{}={}", s.key, s.value)).collect();
        // The including file's group goes on after the include.
        assert_eq!(got, ["host=h", "port=3"]);
    }

    #[test]
    fn a_missing_include_and_an_include_loop_are_errors() {
        let dir = Dir::new("includeerr");
        let main = dir.file("main.cnf", "[client]\n!include nowhere.cnf\n");
        let e = read(Files::Only(&main)).unwrap_err().to_string();
        assert!(e.contains("nowhere.cnf") && e.contains("No such file"), "{e}");
        let looping = dir.file("loop.cnf", "!include loop.cnf\n");
        let e = read(Files::Only(&looping)).unwrap_err().to_string();
        assert!(e.contains("nests includes deeper than"), "{e}");
    }

    #[test]
    fn extra_file_then_home_file_and_a_missing_home_file_is_fine() {
        let dir = Dir::new("defaults");
        let extra = dir.file("extra.cnf", "[client]\nuser=extra\nhost=h\n");
        let home = dir.0.join("home");
        fs::create_dir_all(&home).unwrap();
        let keys = |read: Read| read.settings.iter().map(|s| format!("{}={}", s.key, s.value)).collect::<Vec<_>>();
        let files = Files::Defaults { extra: Some(&extra), home: Some(&home) };
        assert_eq!(keys(read(files).unwrap()), ["user=extra", "host=h"]);
        dir.file("home/.my.cnf", "[client]\nuser=home\n");
        assert_eq!(keys(read(files).unwrap()), ["user=extra", "host=h", "user=home"]);
        assert_eq!(keys(read(Files::None).unwrap()), Vec::<String>::new());
    }

    #[test]
    fn a_missing_named_file_is_an_error_naming_it() {
        let e = read(Files::Only(Path::new("/nonexistent/my.cnf"))).unwrap_err().to_string();
        assert!(e.starts_with("option file /nonexistent/my.cnf: "), "{e}");
        let files = Files::Defaults { extra: Some(Path::new("/nonexistent/extra.cnf")), home: None };
        assert!(read(files).unwrap_err().to_string().contains("/nonexistent/extra.cnf"));
    }

    #[test]
    fn a_world_writable_file_is_ignored_with_a_warning() {
        let dir = Dir::new("worldwritable");
        let file = dir.file("my.cnf", "[client]\nhost=evil\n");
        fs::set_permissions(&file, fs::Permissions::from_mode(0o666)).unwrap();
        let read = read(Files::Only(&file)).unwrap();
        assert!(read.settings.is_empty(), "{:?}", read.settings);
        assert_eq!(read.warnings.len(), 1);
        assert!(read.warnings[0].contains("my.cnf is ignored: it is world-writable"), "{:?}", read.warnings);
    }

    #[test]
    fn text_after_a_group_header_is_ignored_and_spaces_before_its_name_count() {
        let text = "[client] x\nuser=a\n[client] ; note\nhost=h\n[ client]\nport=1\n";
        assert_eq!(settings_of(text).unwrap(), ["user=a", "host=h"]);
    }

    #[test]
    fn bad_group_headers_and_directives_are_errors() {
        for text in ["[client\nuser=a\n", "!inclde x.cnf\n", "!include\n", "= value\n"] {
            assert!(settings_of(text).is_err(), "{text:?} accepted");
        }
    }
}
