//! Objects across `fork()`: a connection belongs to the process that opened it.
//!
//! A forked child inherits the parent's sockets, and with them the parent's database
//! sessions and locks. Acting on such a session (a release, a renewal) or closing it (the
//! `COM_QUIT` a dropped connection sends) would end the parent's locks. Keep-alive
//! threads are not forked at all, and a mutex one of the parent's threads held at the
//! fork stays locked in the child forever. So in a child an inherited object is never
//! used, never locked and never dropped: the surfaces stamp what they open with an
//! [`Owner`], check it before anything else, and [`abandon`] what a child inherited.
//!
//! What a surface does in a child is its own: the C ABI refuses every call on an
//! inherited client ([`Owner::check`]), the PHP extension abandons what it inherited and
//! connects anew ([`Owner::take_over`]).

use std::process;
use std::ptr::null_mut;
use std::sync::atomic::{AtomicPtr, Ordering};

use crate::error::{Error, Result};

/// The process that opened an object, the only one that may use its sessions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Owner {
    pid: u32,
}

impl Owner {
    /// This process.
    pub fn current() -> Owner {
        Owner { pid: process::id() }
    }

    /// The owner's process id.
    pub fn pid(self) -> u32 {
        self.pid
    }

    /// Whether this process is the owner (false in a forked child).
    pub fn is_current(self) -> bool {
        self.pid == process::id()
    }

    /// Refuses an object this process did not open (a forked child's inherited copy),
    /// with [`Error::InvalidArgument`] naming it as `what` ("client").
    pub fn check(self, what: &'static str) -> Result<()> {
        let me = process::id();
        if self.pid == me {
            return Ok(());
        }
        Err(Error::invalid(
            what,
            format!(
                "it was opened by process {} and this is process {me} (a forked child): using it would act on \
                 the parent's session and locks; open a new {what} here",
                self.pid
            ),
        ))
    }

    /// In a forked child, once: makes this process the owner and returns true, so the
    /// caller [`abandon`]s what it inherited and starts anew. False in the owner.
    pub fn take_over(&mut self) -> bool {
        let me = process::id();
        if self.pid == me {
            return false;
        }
        self.pid = me;
        true
    }
}

/// What a forked child abandoned, linked through each node's first field. Nothing here
/// is ever dropped or read; keeping it reachable tells leak checkers (valgrind) that
/// this is deliberate, not a leak.
static ABANDONED: AtomicPtr<Link> = AtomicPtr::new(null_mut());

/// The head of every node, whatever it keeps.
struct Link {
    next: *mut Link,
}

/// `repr(C)`: `link` comes first, so a node's address is its `Link`'s.
#[repr(C)]
struct Node<T> {
    link: Link,
    _kept: T,
}

/// Gives `value` up without dropping it: no destructor runs, so no session is closed
/// (no `COM_QUIT`), no lock released, no thread stopped or joined, no mutex locked. For
/// what a forked child inherited; its memory stays reachable for the life of the process.
/// Lock-free: a mutex another thread held at the fork would never be released here.
pub fn abandon<T>(value: T) {
    let node = Box::into_raw(Box::new(Node { link: Link { next: null_mut() }, _kept: value })).cast::<Link>();
    let mut head = ABANDONED.load(Ordering::Acquire);
    loop {
        // SAFETY: `node` is ours until the exchange below publishes it.
        unsafe { (*node).next = head };
        match ABANDONED.compare_exchange_weak(head, node, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => return,
            Err(current) => head = current,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_owner_passes_its_own_check() {
        let mut owner = Owner::current();
        assert!(owner.is_current());
        assert!(owner.check("client").is_ok());
        assert!(!owner.take_over());
    }

    #[test]
    fn another_process_is_refused_and_can_take_over() {
        let mut owner = Owner { pid: process::id().wrapping_add(1) };
        let e = owner.check("client").unwrap_err();
        assert!(e.is_invalid_argument());
        let message = e.to_string();
        assert!(message.starts_with("invalid client: it was opened by process "), "{message}");
        assert!(
            message.ends_with(
                "(a forked child): using it would act on the parent's session and locks; open a new client here"
            ),
            "{message}"
        );
        assert!(owner.take_over());
        assert!(owner.is_current());
        assert!(!owner.take_over());
    }

    #[test]
    fn abandoned_values_are_never_dropped() {
        struct Loud;
        impl Drop for Loud {
            fn drop(&mut self) {
                panic!("an abandoned value was dropped");
            }
        }
        abandon(Loud);
        abandon(Box::new(Loud));
        abandon(());
    }
}
