//! MySQL-backed named locks, implemented once for PHP, C and the command line.
//!
//! Two kinds of lock, one [`Locker`] per database session:
//!
//! - **TTL leases** ([`Locker::acquire`]) over the `shared_locks` table of the PHP package
//!   its-mieger/mysql-shared-locks, interoperable with processes still running it: a
//!   lease ends when released, when its session ends, or when its TTL passes and another
//!   session takes it over (killing the stale holder's session).
//! - **Session locks** ([`Locker::lock_session`]): plain `GET_LOCK`/`RELEASE_LOCK`,
//!   held until released or until the session ends.
//!
//! ```no_run
//! use mysqllock_core::{Config, Locker};
//!
//! let config = Config::from_url("mysql://app:secret@127.0.0.1:3306/app")?;
//! let table = config.table.clone();
//! let mut locker = Locker::new(config, table);
//! locker.acquire("monthly-invoices", 5.0, 600.0)?;
//! // ... the work that must run on one node only ...
//! locker.assert_ttl("monthly-invoices", 60.0)?;
//! locker.release("monthly-invoices")?;
//! # Ok::<(), mysqllock_core::Error>(())
//! ```

mod config;
mod deadline;
mod dialect;
mod error;
pub mod fork;
#[cfg(any(test, feature = "fuzzing"))]
#[doc(hidden)]
pub mod fuzzing;
mod holder;
mod lease_mode;
pub mod limits;
mod locker;
pub mod name;
mod session;
pub mod topology;
mod transport;
mod value;

pub use config::{
    url_settings, Config, QuoteStyle, SslMode, Table, Tls, DEFAULT_CONNECT_TIMEOUT, DEFAULT_IO_TIMEOUT,
    DEFAULT_LEASE_TABLE, DEFAULT_TABLE, LONGEST_WAIT_PER_STATEMENT,
};
pub use deadline::Deadline;
pub use error::{Error, Loss, Result, SessionError};
pub use lease_mode::{
    unique_owner, Dialect, DistributedLock, Grant, LeaseKeeper, LeaseRow, DEFAULT_MARGIN, MAX_LEASE_TTL,
};
pub use locker::session_lock;
pub use locker::{
    AcquireOptions, Lease, LockStatus, Locker, NativeLocker, DEFAULT_MAX_HOLD, LEASES_PER_SESSION, MAX_SESSIONS,
};
pub use session::{Connector, OpenSession, Session};
pub use topology::Topology;
pub use transport::{stopped_answering, Authentication, During, MysqlSession};
pub use value::{Outcome, Value};
