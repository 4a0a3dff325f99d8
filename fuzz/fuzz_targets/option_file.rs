//! An option file in the `mysql` client's my.cnf syntax, read by the CLI's own reader
//! (cli/src/option_files.rs, included as a module): groups, keys, quotes, escapes,
//! comments, `!include` and `!includedir` (which may name the file itself).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &[u8]| {
    mysqllock_fuzz::read_option_file(text);
});
