//! Creating and upgrading the lock table.

use crate::boundary::{call, write_if_wanted};
use crate::client::{self, mysqllock_client};
use crate::status::mysqllock_status;

/// Creates the client's lock table with the original PHP package's exact
/// `CREATE TABLE` (MyISAM, latin1) unless it exists, as `mysqllock init` does. On
/// `MYSQLLOCK_OK`, `*created` (if not NULL) tells whether it was created now.
///
/// Needs the CREATE privilege (`MYSQLLOCK_TABLE` without it). Safe to run on several
/// nodes at once. `client` stays owned by the caller; any thread may call this.
///
/// # Safety
/// `client` is NULL or a live client; `created` is NULL or points to a writable `bool`.
#[no_mangle]
pub unsafe extern "C" fn mysqllock_init_table(client: *mut mysqllock_client, created: *mut bool) -> mysqllock_status {
    call(|| {
        // SAFETY: caller's contract.
        let client = unsafe { client::get(client) }?;
        let was_created = client.locker.lock().init_table()?;
        // SAFETY: NULL or a writable bool, by the caller's contract.
        unsafe { write_if_wanted(created, was_created) };
        Ok(())
    })
}

/// Creates the client's lock table if it is missing and adds the columns for fencing
/// tokens and introspection (`token`, `holder_host`, `holder_pid`), as
/// `mysqllock init --upgrade` does. On `MYSQLLOCK_OK`, `*changed` (if not NULL) tells
/// whether anything was created or added.
///
/// Processes running the original PHP package keep working on the upgraded table. This
/// client uses the new columns from its next lock on; other clients that used the table
/// before the upgrade keep taking leases without tokens until they are opened again.
/// Safe to run on several nodes at once. Needs the ALTER (and CREATE) privilege. A table
/// with only some of the columns is `MYSQLLOCK_INVALID_ARGUMENT` (fix it by hand).
/// `client` stays owned by the caller; any thread may call this.
///
/// # Safety
/// `client` is NULL or a live client; `changed` is NULL or points to a writable `bool`.
#[no_mangle]
pub unsafe extern "C" fn mysqllock_upgrade_table(
    client: *mut mysqllock_client,
    changed: *mut bool,
) -> mysqllock_status {
    call(|| {
        // SAFETY: caller's contract.
        let client = unsafe { client::get(client) }?;
        let was_changed = client.locker.lock().upgrade_table()?;
        // SAFETY: NULL or a writable bool, by the caller's contract.
        unsafe { write_if_wanted(changed, was_changed) };
        Ok(())
    })
}
