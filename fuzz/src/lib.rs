//! What the fuzz targets share: the option file reader, and the process setup a
//! libFuzzer binary lacks.

use std::io::Write;
use std::sync::Once;

#[path = "../../cli/src/option_files.rs"]
#[allow(dead_code)]
mod option_files;

/// A libFuzzer binary's `main` is libFuzzer's, so Rust's runtime has not ignored
/// SIGPIPE: the fake server writing to a client that hung up would end the process.
pub fn ignore_sigpipe() {
    static ONCE: Once = Once::new();
    // SAFETY: setting a signal's disposition to SIG_IGN, no handler runs.
    ONCE.call_once(|| unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_IGN);
    });
}

/// Writes `text` as an option file in a directory of this process and reads it as the
/// CLI does with `--defaults-file`. A file whose `!include` or `!includedir` leaves that
/// directory (a `/` or `..` in the name: `/dev/stdin`, `/dev/zero`, the whole of `/`) is
/// not read: it would fuzz the machine's files, not the reader.
pub fn read_option_file(text: &[u8]) {
    let leaves = |line: &[u8]| {
        let line = line.trim_ascii_start();
        line.starts_with(b"!") && (line.contains(&b'/') || line.windows(2).any(|w| w == b".."))
    };
    if text.split(|&b| b == b'\n').any(leaves) {
        return;
    }
    let dir = std::env::temp_dir().join(format!("mysqllock-fuzz-cnf-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&dir);
    let path = dir.join("my.cnf");
    let written = std::fs::File::create(&path).and_then(|mut f| f.write_all(text));
    if written.is_ok() {
        let _ = option_files::read(option_files::Files::Only(&path));
    }
}
