//! The bottom of the C boundary: the calling thread's last error message, and the one
//! panic guard, which leaves its message there.
//!
//! Both `status` (`mysqllock_status_name()` runs inside the guard) and `boundary`
//! (every status-returning export) build on this module, and it uses neither of them,
//! so the crate reads top-down: last error -> status -> boundary -> exports.

use std::cell::RefCell;
use std::panic::{catch_unwind, AssertUnwindSafe};

thread_local! {
    /// The message of the last failed call on this thread; empty after a success.
    static LAST_ERROR: RefCell<String> = const { RefCell::new(String::new()) };
}

pub(crate) fn set_last_error(message: String) {
    // A NUL inside would silently cut the C string short and make `out_n` disagree
    // with `strlen`. None of our messages has one, but the server's text is not ours.
    let message = if message.contains('\0') { message.replace('\0', "\\0") } else { message };
    LAST_ERROR.with(|e| *e.borrow_mut() = message);
}

/// Runs `f` with the calling thread's last error message (`mysqllock_last_error()`).
pub(crate) fn with_last_error<T>(f: impl FnOnce(&str) -> T) -> T {
    LAST_ERROR.with(|e| f(&e.borrow()))
}

/// The one panic boundary: runs `f`, and returns `on_panic` if it panicked, because
/// unwinding into C is undefined behaviour. The client a panicking call was using may
/// be left inconsistent (parking_lot mutexes do not poison); the caller learns of it
/// from `MYSQLLOCK_INTERNAL` and should free it.
pub(crate) fn guard<T>(on_panic: T, f: impl FnOnce() -> T) -> T {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(value) => value,
        Err(payload) => {
            let what = payload
                .downcast_ref::<&str>()
                .copied()
                .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
                .unwrap_or("unknown panic payload");
            set_last_error(format!("internal error (a bug in mysqllock): panic: {what}"));
            on_panic
        }
    }
}
