//! What every export goes through: the panic boundary, the NULL and UTF-8 checks of
//! arguments, and the thread-local last error that carries the message beside the status
//! (the guard and the message itself live one layer down, in `last_error`).

use std::ffi::{c_char, CStr};
use std::ptr::NonNull;

use mysqllock_core::Error;

use crate::last_error::{guard, set_last_error, with_last_error};
use crate::status::mysqllock_status;

pub(crate) type Result<T> = std::result::Result<T, Error>;

/// Why a call failed: an error of the core (its status comes from the one mapping in
/// `status.rs`), or a refusal decided at this boundary, where a result of the core is
/// not what the C function promises (`mysqllock_token()` on a table without tokens).
pub(crate) enum Failure {
    Core(Error),
    Refused { status: mysqllock_status, message: String },
}

impl From<Error> for Failure {
    fn from(e: Error) -> Self {
        Failure::Core(e)
    }
}

/// Runs the body of an export that returns a status, inside the panic boundary, and
/// records the outcome as this thread's last error (cleared on success).
pub(crate) fn call(body: impl FnOnce() -> Result<()>) -> mysqllock_status {
    call_or_refuse(|| body().map_err(Failure::Core))
}

/// [`call`] for a body that may also refuse with a status and message of its own.
pub(crate) fn call_or_refuse(body: impl FnOnce() -> std::result::Result<(), Failure>) -> mysqllock_status {
    guard(mysqllock_status::INTERNAL, || {
        let (status, message) = match body() {
            Ok(()) => (mysqllock_status::OK, String::new()),
            Err(Failure::Core(e)) => (mysqllock_status::from(&e), e.chain()),
            Err(Failure::Refused { status, message }) => (status, message),
        };
        set_last_error(message);
        status
    })
}

pub(crate) fn invalid(what: &'static str, reason: &str) -> Error {
    Error::InvalidArgument { what, reason: reason.to_owned() }
}

/// Writes `value` to an optional out-parameter: NULL means the caller does not want it.
///
/// # Safety
/// `out` is NULL or points to a writable `T`.
pub(crate) unsafe fn write_if_wanted<T>(out: *mut T, value: T) {
    if !out.is_null() {
        // SAFETY: non-NULL; the caller guarantees it points to a writable T.
        unsafe { out.write(value) };
    }
}

/// The longest prefix of `s` of at most `max` bytes that ends on a character boundary,
/// so that a truncated copy is still valid UTF-8.
fn truncated(s: &str, max: usize) -> &str {
    let mut n = s.len().min(max);
    while !s.is_char_boundary(n) {
        n -= 1;
    }
    &s[..n]
}

/// `s` as a NUL-terminated string in a fixed-size C array (struct fields that need no
/// freeing): cut at a character boundary to fit, the rest of the array zeroed.
pub(crate) fn fixed_text<const N: usize>(s: &str) -> [c_char; N] {
    let mut out = [0 as c_char; N];
    let kept = truncated(s, N.saturating_sub(1));
    for (dst, src) in out.iter_mut().zip(kept.bytes()) {
        *dst = src as c_char;
    }
    out
}

/// The one NULL check every pointer argument passes. `what` names the argument in the
/// message ("invalid client: it is NULL").
pub(crate) fn non_null<T>(p: *mut T, what: &'static str) -> Result<NonNull<T>> {
    NonNull::new(p).ok_or_else(|| invalid(what, "it is NULL"))
}

/// A NUL-terminated UTF-8 string argument, borrowed for the duration of the call.
///
/// # Safety
/// `p` is NULL or points to a NUL-terminated string that outlives the call.
pub(crate) unsafe fn text<'a>(p: *const c_char, what: &'static str) -> Result<&'a str> {
    let p = non_null(p.cast_mut(), what)?;
    // SAFETY: non-NULL, and NUL-terminated by the caller's contract.
    let s = unsafe { CStr::from_ptr(p.as_ptr()) };
    s.to_str().map_err(|_| invalid(what, "it is not valid UTF-8"))
}

/// An optional string argument: NULL means "none".
///
/// # Safety
/// As for [`text`].
pub(crate) unsafe fn optional_text<'a>(p: *const c_char, what: &'static str) -> Result<Option<&'a str>> {
    if p.is_null() {
        return Ok(None);
    }
    // SAFETY: forwarded contract.
    unsafe { text(p, what) }.map(Some)
}

/// Copies the last error message of the calling thread into `buf`, in the manner of
/// `snprintf`: at most `len - 1` bytes followed by a NUL (nothing when `len` is 0 or
/// `buf` is NULL). A truncated message is cut at a UTF-8 character boundary, so `buf`
/// always holds valid UTF-8.
///
/// Writes the number of bytes copied, without the NUL, to `*out_n` unless `out_n` is
/// NULL. Returns the full length of the message without the NUL, so a return value
/// `>= len` means the message was truncated; call with `(NULL, 0, NULL)` to learn the
/// size to allocate (return value + 1).
///
/// The message is the one of the last call on this thread that returned a status:
/// empty ("") after a success. It names the lock and the cause and includes the
/// server's own message; it never contains a password. `buf` is owned by the caller.
/// Any thread may call this; each thread sees only its own last error.
///
/// # Safety
/// `buf` is NULL or points to `len` writable bytes; `out_n` is NULL or points to a
/// writable `size_t`.
#[no_mangle]
pub unsafe extern "C" fn mysqllock_last_error(buf: *mut c_char, len: usize, out_n: *mut usize) -> usize {
    guard(0, || {
        with_last_error(|message| {
            let mut n = 0;
            if !buf.is_null() && len > 0 {
                n = truncated(message, len - 1).len();
                // SAFETY: the caller guarantees `buf` has room for `len` bytes, and
                // n + 1 <= len; the message is a separate Rust allocation.
                unsafe {
                    std::ptr::copy_nonoverlapping(message.as_ptr(), buf.cast::<u8>(), n);
                    *buf.add(n) = 0;
                }
            }
            if !out_n.is_null() {
                // SAFETY: non-NULL; the caller guarantees it points to a writable size_t.
                unsafe { *out_n = n };
            }
            message.len()
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn last_error() -> String {
        let mut buf = [0 as c_char; 512];
        let mut n = 0;
        // SAFETY: buf has the length passed, n is a valid out-param.
        unsafe { mysqllock_last_error(buf.as_mut_ptr(), buf.len(), &mut n) };
        // SAFETY: the function NUL-terminates.
        let s = unsafe { CStr::from_ptr(buf.as_ptr()) };
        assert_eq!(s.to_bytes().len(), n);
        s.to_string_lossy().into_owned()
    }

    #[test]
    fn a_panic_becomes_the_internal_status_with_a_message() {
        let status = call(|| panic!("boom"));
        assert_eq!(status, mysqllock_status::INTERNAL);
        assert!(last_error().contains("panic: boom"), "{}", last_error());
    }

    #[test]
    fn success_clears_the_last_error() {
        call(|| Err(invalid("lock name", "it is empty")));
        assert_eq!(last_error(), "invalid lock name: it is empty");
        assert_eq!(call(|| Ok(())), mysqllock_status::OK);
        assert_eq!(last_error(), "");
    }

    #[test]
    fn fixed_text_is_cut_at_a_character_boundary_and_nul_terminated() {
        let cut: [c_char; 5] = fixed_text("ab€cd"); // '€' would need bytes 2..5, NUL the 5th
        assert_eq!(cut, [b'a' as c_char, b'b' as c_char, 0, 0, 0]);
        let whole: [c_char; 8] = fixed_text("host");
        // SAFETY: fixed_text NUL-terminates.
        assert_eq!(unsafe { CStr::from_ptr(whole.as_ptr()) }, c"host");
    }

    #[test]
    fn truncation_keeps_utf8_whole_and_reports_the_full_length() {
        set_last_error("ab€cd".to_owned()); // '€' is 3 bytes: 2..5
        let mut buf = [1 as c_char; 4];
        let mut n = 99;
        // SAFETY: as above.
        let full = unsafe { mysqllock_last_error(buf.as_mut_ptr(), buf.len(), &mut n) };
        assert_eq!((full, n), (7, 2));
        assert_eq!(buf[..3], [b'a' as c_char, b'b' as c_char, 0]);
        // SAFETY: NULL buffer with len 0 is the documented size query.
        assert_eq!(unsafe { mysqllock_last_error(std::ptr::null_mut(), 0, std::ptr::null_mut()) }, 7);
    }
}
