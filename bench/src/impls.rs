//! The four ways of locking that are compared, and the two that run in Rust.

use mysql::prelude::Queryable;
use mysql::{Conn, Statement};
use mysqllock_core::{Config, NativeLocker};

use crate::lock::{Lock, TTL};
use crate::status;
use crate::Res;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// The PHP extension (`SharedLock::lock()` / `->release()`), native connection.
    Ext,
    /// The Rust core (`NativeLocker`), what the C ABI and the CLI run.
    Rust,
    /// Raw `SELECT GET_LOCK(?,?)` / `SELECT RELEASE_LOCK(?)` through PDO, real prepares.
    Pdo,
    /// The same through the `mysql` crate, prepared once.
    Mysql,
    /// Prototype of proposal P1 (not the product): a busy first try is followed by
    /// `DO GET_LOCK(N, t); INSERT ...` in one round trip (see [`crate::proto`]).
    ProtoA,
    /// Prototype of proposal P2: P1 plus release by RELEASE_LOCK alone (the row stays as
    /// a dead row, taken over by the next claim) and no first try after a contended one.
    ProtoB,
}

impl Kind {
    pub const ALL: [Kind; 4] = [Kind::Ext, Kind::Rust, Kind::Pdo, Kind::Mysql];

    pub fn tag(self) -> &'static str {
        match self {
            Kind::Ext => "ext",
            Kind::Rust => "rust",
            Kind::Pdo => "pdo",
            Kind::Mysql => "mysql",
            Kind::ProtoA => "p1",
            Kind::ProtoB => "p2",
        }
    }

    pub fn from_tag(tag: &str) -> Res<Kind> {
        Kind::ALL
            .into_iter()
            .chain([Kind::ProtoA, Kind::ProtoB])
            .find(|k| k.tag() == tag)
            .ok_or_else(|| format!("unknown --impl {tag:?}").into())
    }

    /// Runs in a PHP process.
    pub fn is_php(self) -> bool {
        matches!(self, Kind::Ext | Kind::Pdo)
    }
}

struct Core(NativeLocker);

impl Lock for Core {
    fn acquire(&mut self, name: &str, timeout: f64) -> Res<()> {
        self.0.acquire(name, timeout, TTL)?;
        Ok(())
    }

    fn release(&mut self, name: &str) -> Res<()> {
        Ok(self.0.release(name)?)
    }
}

struct Raw {
    conn: Conn,
    get: Statement,
    rel: Statement,
}

impl Lock for Raw {
    fn acquire(&mut self, name: &str, timeout: f64) -> Res<()> {
        let got: Option<Option<i64>> = self.conn.exec_first(&self.get, (name, timeout))?;
        match got.flatten() {
            Some(1) => Ok(()),
            other => Err(format!("GET_LOCK({name:?}, {timeout}) returned {other:?}").into()),
        }
    }

    fn release(&mut self, name: &str) -> Res<()> {
        let done: Option<Option<i64>> = self.conn.exec_first(&self.rel, (name,))?;
        match done.flatten() {
            Some(1) => Ok(()),
            other => Err(format!("RELEASE_LOCK({name:?}) returned {other:?}").into()),
        }
    }
}

/// A connected locker of a Rust-side kind, warmed up (table shape looked up, statements
/// prepared) with one cycle on `warm_name`.
pub fn open(kind: Kind, dsn: &str, warm_name: &str) -> Res<Box<dyn Lock>> {
    let mut lock: Box<dyn Lock> = match kind {
        Kind::Rust => Box::new(Core(NativeLocker::from_config(Config::from_url(dsn)?))),
        Kind::Mysql => {
            let mut conn = Conn::new(status::opts(dsn)?)?;
            let get = conn.prep("SELECT GET_LOCK(?, ?)")?;
            let rel = conn.prep("SELECT RELEASE_LOCK(?)")?;
            Box::new(Raw { conn, get, rel })
        }
        Kind::ProtoA => Box::new(crate::proto::Proto::connect(dsn, false)?),
        Kind::ProtoB => Box::new(crate::proto::Proto::connect(dsn, true)?),
        Kind::Ext | Kind::Pdo => return Err(format!("{} runs in PHP, not here", kind.tag()).into()),
    };
    lock.acquire(warm_name, 5.0)?;
    lock.release(warm_name)?;
    Ok(lock)
}
