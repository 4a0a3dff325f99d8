//! The class entries this extension registers, remembered at module startup.
//!
//! Handlers need "our" classes (to instantiate an exception, to tell which constructor
//! is running). Looking them up by name on every call would also find user classes
//! that shadow an alias, so the entries the engine hands back at registration are
//! kept here. They live as long as the process (classes of a persistent module). Every
//! class is registered through [`Class::register`], which also adds its class flags.

use std::sync::atomic::{AtomicPtr, Ordering};

use ext_php_rs::args::ArgInfoTables;
use ext_php_rs::builders::ClassBuilder;
use ext_php_rs::flags::ClassFlags;
use ext_php_rs::zend::{ce, ClassEntry};

/// Namespace of the original package, kept for drop-in compatibility.
pub const NS: &str = "ItsMieger\\MySqlSharedLocks";

/// Namespace of `Nene\Kit\DistributedLock`, the lease-mode drop-in.
pub const KIT_NS: &str = "Nene\\Kit";

/// The extension's own namespace, for what no package it replaces has (session locks).
pub const OWN_NS: &str = "MySqlLock";

/// Every class the extension registers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    SharedLock,
    Handle,
    SharedLockException,
    Acquire,
    Timeout,
    Release,
    RemainingTtl,
    TableRepair,
    /// The previous exception of a GET_LOCK-based lock refused on a cluster node.
    ClusterNode,
    DistributedLock,
    DistributedLockException,
    SessionLock,
    /// `MySqlLock\LockException`, the base of the failures below.
    LockException,
    LockTimeout,
    NotHeld,
    AlreadyHeld,
    Deadlock,
    ConnectionException,
    /// `MySqlLock\PdoFactory`: PDOs with the TLS settings of a `mysql://` URL.
    PdoFactory,
}

impl Class {
    pub const ALL: [Class; 19] = [
        Class::SharedLock,
        Class::Handle,
        Class::SharedLockException,
        Class::Acquire,
        Class::Timeout,
        Class::Release,
        Class::RemainingTtl,
        Class::TableRepair,
        Class::ClusterNode,
        Class::DistributedLock,
        Class::DistributedLockException,
        Class::SessionLock,
        Class::LockException,
        Class::LockTimeout,
        Class::NotHeld,
        Class::AlreadyHeld,
        Class::Deadlock,
        Class::ConnectionException,
        Class::PdoFactory,
    ];

    /// The fully qualified PHP class name.
    pub fn name(self) -> String {
        let short = match self {
            Class::SharedLock => "SharedLock",
            Class::Handle => "SharedLockHandle",
            Class::SharedLockException => "Exception\\SharedLockException",
            Class::Acquire => "Exception\\SharedLockAcquireException",
            Class::Timeout => "Exception\\SharedLockTimeoutException",
            Class::Release => "Exception\\SharedLockReleaseException",
            Class::RemainingTtl => "Exception\\SharedLockRemainingTTLException",
            Class::TableRepair => "Exception\\TableRepairException",
            Class::ClusterNode => "Exception\\ClusterNodeException",
            Class::DistributedLock => return format!("{KIT_NS}\\DistributedLock"),
            Class::DistributedLockException => return format!("{KIT_NS}\\DistributedLockException"),
            Class::SessionLock => return format!("{OWN_NS}\\SessionLock"),
            Class::LockException => return format!("{OWN_NS}\\LockException"),
            Class::LockTimeout => return format!("{OWN_NS}\\LockTimeoutException"),
            Class::NotHeld => return format!("{OWN_NS}\\NotHeldException"),
            Class::AlreadyHeld => return format!("{OWN_NS}\\AlreadyHeldException"),
            Class::Deadlock => return format!("{OWN_NS}\\DeadlockException"),
            Class::ConnectionException => return format!("{OWN_NS}\\ConnectionException"),
            Class::PdoFactory => return format!("{OWN_NS}\\PdoFactory"),
        };
        format!("{NS}\\{short}")
    }

    /// The registered class entry; `None` only if module startup failed to register it.
    pub fn entry(self) -> Option<&'static ClassEntry> {
        let ptr = SLOTS[self as usize].load(Ordering::Acquire);
        // SAFETY: the pointer is either null or a class entry the engine registered
        // persistently at module startup; it stays valid until the process exits.
        unsafe { ptr.cast_const().as_ref() }
    }

    /// Which of our classes `ce` is exactly (not a subclass).
    pub fn of(ce: &ClassEntry) -> Option<Class> {
        Class::ALL.into_iter().find(|c| c.entry().is_some_and(|e| std::ptr::eq(e, ce)))
    }

    /// Registers `builder` as this class and remembers its entry; module startup only.
    pub fn register(self, builder: ClassBuilder) -> ext_php_rs::error::Result<()> {
        self.register_with(builder, ClassFlags::empty())
    }

    /// As [`Class::register`], with `flags` added to the registered entry: `Final`, or
    /// `NotSerializable` for a class whose objects stand for state in this process (a
    /// session, a registry entry) that no serialized copy could carry.
    pub fn register_with(self, builder: ClassBuilder, flags: ClassFlags) -> ext_php_rs::error::Result<()> {
        builder.registration(self.registration()).register()?;
        let entry = SLOTS[self as usize].load(Ordering::Acquire);
        // SAFETY: null, or the entry the engine registered just now, persistently (valid
        // until the process exits); module startup runs on one thread, so nothing else
        // reads it while its flags change.
        if let Some(class) = unsafe { entry.as_mut() } {
            class.ce_flags |= flags.bits();
        }
        Ok(())
    }

    /// The registration callback `ClassBuilder::registration` wants for this class: a
    /// plain `fn`, hence one monomorphised function per slot.
    fn registration(self) -> fn(&'static mut ClassEntry, ArgInfoTables) {
        match self {
            Class::SharedLock => store::<0>,
            Class::Handle => store::<1>,
            Class::SharedLockException => store::<2>,
            Class::Acquire => store::<3>,
            Class::Timeout => store::<4>,
            Class::Release => store::<5>,
            Class::RemainingTtl => store::<6>,
            Class::TableRepair => store::<7>,
            Class::ClusterNode => store::<8>,
            Class::DistributedLock => store::<9>,
            Class::DistributedLockException => store::<10>,
            Class::SessionLock => store::<11>,
            Class::LockException => store::<12>,
            Class::LockTimeout => store::<13>,
            Class::NotHeld => store::<14>,
            Class::AlreadyHeld => store::<15>,
            Class::Deadlock => store::<16>,
            Class::ConnectionException => store::<17>,
            Class::PdoFactory => store::<18>,
        }
    }
}

#[allow(clippy::declare_interior_mutable_const)]
const EMPTY: AtomicPtr<ClassEntry> = AtomicPtr::new(std::ptr::null_mut());
static SLOTS: [AtomicPtr<ClassEntry>; Class::ALL.len()] = [EMPTY; Class::ALL.len()];

pub(crate) fn store<const SLOT: usize>(ce: &'static mut ClassEntry, arg_info: ArgInfoTables) {
    SLOTS[SLOT].store(ce, Ordering::Release);
    // The engine may point its function entries at these tables for the life of the
    // process (it copies them only for typed arguments), so they must never be freed.
    std::mem::forget(arg_info);
}

/// Our own class at `SLOT` as a parent for `ClassBuilder::extends` (which wants a plain
/// `fn`); registered before its children, so the fallback is never used.
pub fn parent<const SLOT: usize>() -> &'static ClassEntry {
    Class::ALL[SLOT].entry().unwrap_or_else(ce::exception)
}

/// SPL's `RuntimeException`, a parent for `ClassBuilder::extends`. SPL starts before
/// every other extension, but class lookup by name does not work yet during module
/// startup: its global entry does.
pub fn runtime_exception() -> &'static ClassEntry {
    // SAFETY: null or a class entry SPL registered persistently at its own startup.
    unsafe { spl_ce_RuntimeException.as_ref() }.unwrap_or_else(ce::exception)
}

unsafe extern "C" {
    // SPL's class entry (ext/spl/spl_exceptions.h), exported by every PHP 8 binary.
    static spl_ce_RuntimeException: *mut ClassEntry;
}
