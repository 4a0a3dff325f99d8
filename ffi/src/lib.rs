//! The C ABI of mysqllock: `libmysqllock.so` / `libmysqllock.a`, declared in
//! `include/mysqllock.h` (generated from this crate by cbindgen).
//!
//! Glue only: each function checks its arguments, calls the core's
//! [`NativeLocker`](mysqllock_core::NativeLocker), and turns the result into a [`mysqllock_status`] plus a
//! thread-local message. The lock protocol lives in `mysqllock-core`.
//!
//! Conventions, the same for every function:
//! - the return value is a `mysqllock_status`; `MYSQLLOCK_OK` (0) is success, and any
//!   other value leaves a message for `mysqllock_last_error()` on the calling thread;
//! - out-parameters come last and are written only on success;
//! - NULL pointers are reported as `MYSQLLOCK_INVALID_ARGUMENT`, never dereferenced;
//! - strings are NUL-terminated UTF-8, borrowed for the duration of the call only;
//! - no panic crosses the boundary: a bug returns `MYSQLLOCK_INTERNAL`;
//! - a client belongs to the process that opened it: in a forked child every call on it
//!   is refused, and freeing it touches nothing of the parent's (see `mysqllock_client`).
//!
//! Contents, one module per topic; the exports are re-exported here. cbindgen writes
//! the header's functions in the order of these `mod` lines, so a new module goes where
//! its functions belong in the header:
//! - `client`: open, configure and free a client; its session's id (`mysqllock_client_*`,
//!   `mysqllock_connection_id`);
//! - `ttl_lease`: TTL leases in the original package's table (`mysqllock_acquire`,
//!   `mysqllock_try_acquire`, `mysqllock_release`, `mysqllock_assert_ttl`,
//!   `mysqllock_remaining_ttl`);
//! - `session_lock`: plain `GET_LOCK` session locks (`mysqllock_session_*`);
//! - `version`: `mysqllock_version`;
//! - `boundary`: the panic boundary and argument checks every export goes through, and
//!   `mysqllock_last_error` (the message itself lives in `last_error`);
//! - `extended`: TTL leases with options, fencing tokens, renewal;
//! - `holder`: who holds a lock, from its row;
//! - `lease`: the lease mode (`mysqllock_lease_*`);
//! - `options`: `mysqllock_options` and its flags;
//! - `status`: the status codes and their names;
//! - `table`: creating and upgrading the lock table.

// C names (`mysqllock_client`) are the point of this crate.
#![allow(non_camel_case_types)]

// In the header's order (see above); blank lines keep rustfmt from sorting them.
mod client;

mod ttl_lease;

mod session_lock;

mod version;

mod boundary;
mod extended;
mod holder;
mod last_error;
mod lease;
mod options;
mod status;
mod table;

pub use boundary::mysqllock_last_error;
pub use client::{
    mysqllock_client, mysqllock_client_allow_cluster, mysqllock_client_free, mysqllock_client_open,
    mysqllock_client_open_url, mysqllock_client_set_table, mysqllock_connection_id,
};
pub use extended::{mysqllock_acquire_ex, mysqllock_renew, mysqllock_token, mysqllock_try_acquire_ex};
pub use holder::{mysqllock_holder, mysqllock_holder_info};
pub use lease::{
    mysqllock_lease_acquire, mysqllock_lease_init_table, mysqllock_lease_is_held, mysqllock_lease_release,
    mysqllock_lease_renew, mysqllock_lease_set_table, mysqllock_lease_upgrade_table,
};
pub use options::{mysqllock_option_flag, mysqllock_options};
pub use session_lock::{
    mysqllock_session_held, mysqllock_session_holder, mysqllock_session_lock, mysqllock_session_unlock,
};
pub use status::{mysqllock_status, mysqllock_status_name};
pub use table::{mysqllock_init_table, mysqllock_upgrade_table};
pub use ttl_lease::{
    mysqllock_acquire, mysqllock_assert_ttl, mysqllock_release, mysqllock_remaining_ttl, mysqllock_try_acquire,
};
pub use version::mysqllock_version;
