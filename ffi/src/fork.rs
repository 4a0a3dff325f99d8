//! Clients across `fork()`: a client belongs to the process that opened it.
//!
//! A forked child inherits the parent's sockets, and with them the parent's database
//! session and locks. Acting on that session (a release, a renewal) or closing it (the
//! `COM_QUIT` a dropped connection sends) would end the parent's locks. Keep-alive
//! threads are not forked at all, and a mutex one of the parent's threads held at the
//! fork stays locked in the child forever. So in a child an inherited client is never
//! used, never locked and never dropped.

use std::process;
use std::sync::atomic::{AtomicPtr, Ordering};

use crate::boundary::{invalid, Result};
use crate::mysqllock_client;

/// The inherited clients this process freed, linked through `next_abandoned`. Their
/// memory is the parent's copy and is never dropped; keeping it reachable from here
/// tells leak checkers (valgrind) that this is deliberate, not a leak.
static ABANDONED: AtomicPtr<mysqllock_client> = AtomicPtr::new(std::ptr::null_mut());

/// Fails with `MYSQLLOCK_INVALID_ARGUMENT` when this process is not the one that opened
/// the client (`owner_pid`): a forked child.
pub(crate) fn check_owner(owner_pid: u32) -> Result<()> {
    let me = process::id();
    if owner_pid == me {
        return Ok(());
    }
    Err(invalid(
        "client",
        &format!(
            "it was opened by process {owner_pid} and this is process {me} (a forked child): \
             using it would act on the parent's session and locks; open a new client here"
        ),
    ))
}

/// Forgets an inherited client in a forked child without touching its session, its
/// mutex or its keep-alive state: nothing is released, stopped or closed.
///
/// # Safety
/// `client` is a live client that the caller gives up and never uses again.
pub(crate) unsafe fn abandon(client: *mut mysqllock_client) {
    // SAFETY: live by the caller's contract; only this field is written, and no other
    // thread may use a client being freed.
    let link = unsafe { &(*client).next_abandoned };
    let mut head = ABANDONED.load(Ordering::Acquire);
    loop {
        link.store(head, Ordering::Relaxed);
        match ABANDONED.compare_exchange_weak(head, client, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => return,
            Err(current) => head = current,
        }
    }
}
