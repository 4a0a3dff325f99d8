//! The library's version.

use std::ffi::c_char;

/// The library's version ("0.1.0"), as a static NUL-terminated string owned by the
/// library; do not free it. Any thread may call this.
#[no_mangle]
pub extern "C" fn mysqllock_version() -> *const c_char {
    concat!(env!("CARGO_PKG_VERSION"), "\0").as_ptr().cast()
}
