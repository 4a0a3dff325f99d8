//! Introspection: who holds a lock, from its row.

use std::ffi::c_char;

use mysqllock_core::LockStatus;

use crate::boundary::{call, fixed_text, non_null, text};
use crate::client::{self, mysqllock_client};
use crate::status::mysqllock_status;

/// Who holds a lock, as `mysqllock_holder()` reads it from the lock's row. A plain
/// struct owned by the caller (stack or heap): its strings are fixed arrays, always
/// NUL-terminated and valid UTF-8 (cut at a character boundary if too long), so
/// nothing needs freeing. Times are Unix seconds on the database clock.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct mysqllock_holder_info {
    /// The `CONNECTION_ID()` of the holder's session.
    pub connection_id: u64,
    /// The fencing token of the acquisition; 0 when unknown (`has_token` false: the table
    /// has no token column).
    pub token: u64,
    pub has_token: bool,
    /// The holder's process id on its machine; 0 when not recorded (`has_pid` false: the
    /// table is not upgraded, or the holder is not mysqllock, e.g. the original package).
    pub pid: u64,
    pub has_pid: bool,
    /// When the lock was acquired (renewals keep it).
    pub acquired_at: i64,
    /// When the lease ends unless renewed or released.
    pub expires_at: i64,
    /// Seconds until then; negative once expired.
    pub remaining: f64,
    /// The holder's session still holds the lock's GET_LOCK. False for a dead holder
    /// (the next acquirer reclaims the row at once) and for a row kept by "at least"
    /// after its release.
    pub alive: bool,
    /// The holder had taken the GET_LOCK when it last wrote the row; false while an
    /// acquisition is in progress and for a row kept by "at least" after its release.
    pub acquired: bool,
    /// The name as its holder spelled it (the table treats names that differ only in
    /// case or trailing spaces as one lock).
    pub name: [c_char; 257],
    /// The host name of the holder's machine; "" when not recorded (as `pid`).
    pub hostname: [c_char; 256],
    /// The client address of the holder's session from the server's process list
    /// ("10.0.0.12:50480", "localhost"); "" when not visible (the holder's session is gone,
    /// or this user lacks the PROCESS privilege to see other users' sessions).
    pub client_address: [c_char; 256],
}

impl From<&LockStatus> for mysqllock_holder_info {
    fn from(s: &LockStatus) -> Self {
        mysqllock_holder_info {
            connection_id: s.connection_id,
            token: s.token.unwrap_or(0),
            has_token: s.token.is_some(),
            pid: s.pid.unwrap_or(0),
            has_pid: s.pid.is_some(),
            acquired_at: s.acquired_at(),
            expires_at: s.expires_at(),
            remaining: s.remaining,
            alive: s.holder_alive,
            acquired: s.acquired,
            name: fixed_text(&s.name),
            hostname: fixed_text(s.hostname.as_deref().unwrap_or("")),
            client_address: fixed_text(s.host.as_deref().unwrap_or("")),
        }
    }
}

/// Looks up who holds the lock `name` (under any spelling the table folds together),
/// whichever session or process that is: on `MYSQLLOCK_OK`, `*found` is true and `*out`
/// is filled in when the lock has a row, and `*found` is false (with `*out` left
/// unwritten) when nobody holds it. Any other status writes neither.
///
/// One query; the answer may be out of date by the time it is read, so use it to show
/// or log, not to decide who may write (fencing tokens are for that). `client` stays
/// owned by the caller; any thread may call this.
///
/// # Safety
/// `client` is NULL or a live client; `name` is NULL or a NUL-terminated string; `out`
/// is NULL or points to a writable `mysqllock_holder_info`; `found` is NULL or points
/// to a writable `bool`.
#[no_mangle]
pub unsafe extern "C" fn mysqllock_holder(
    client: *mut mysqllock_client,
    name: *const c_char,
    out: *mut mysqllock_holder_info,
    found: *mut bool,
) -> mysqllock_status {
    call(|| {
        // SAFETY: caller's contract for both pointers.
        let (client, name) = unsafe { (client::get(client)?, text(name, "lock name")?) };
        let (out, found) = (non_null(out, "out pointer")?, non_null(found, "found pointer")?);
        let holder = client.locker.lock().holder(name)?;
        // SAFETY: both non-NULL; the caller guarantees they are writable.
        unsafe {
            if let Some(status) = &holder {
                out.as_ptr().write(status.into());
            }
            found.as_ptr().write(holder.is_some());
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::CStr;

    #[test]
    fn unknown_parts_of_a_row_become_zero_false_and_empty() {
        let row = LockStatus {
            name: "Job".into(),
            connection_id: 7,
            host: None,
            created: 1_000,
            ttl: 30,
            age: 1.0,
            remaining: 29.0,
            acquired: true,
            holder_alive: true,
            token: None,
            hostname: None,
            pid: None,
        };
        let info = mysqllock_holder_info::from(&row);
        assert_eq!((info.token, info.has_token, info.pid, info.has_pid), (0, false, 0, false));
        assert_eq!((info.acquired_at, info.expires_at), (1_000, 1_030));
        // SAFETY: fixed_text NUL-terminates.
        let (name, host) = unsafe { (CStr::from_ptr(info.name.as_ptr()), CStr::from_ptr(info.hostname.as_ptr())) };
        assert_eq!((name, host), (c"Job", c""));
    }
}
