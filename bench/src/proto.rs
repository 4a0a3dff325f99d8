//! Prototypes of the protocol changes proposed in bench/RESULTS.md, measured beside the
//! product so that the proposals come with numbers. NOT the product and not safe outside
//! the benchmark: no stale holders, no expired rows, no takeover, no other spellings, no
//! upgraded table (tokens). Same table, same first-try INSERT as the product.
//!
//! P1 — after a busy first try, wait for the GET_LOCK and claim the row in ONE round
//! trip: `DO GET_LOCK(N, t); INSERT ... lock_acquired = IF(IS_USED_LOCK(N) <=>
//! CONNECTION_ID(), 1, NULL)` as one multi-statement query. The server runs the INSERT
//! the moment GET_LOCK returns, so a woken waiter needs no further round trip; the INSERT
//! fails with 1048 when the GET_LOCK was not obtained, like the first try. (Text
//! protocol: the name goes in as a hex literal, which cannot inject anything.) Release
//! as today: `DELETE ... AND RELEASE_LOCK(name) = 1`.
//!
//! P2 — P1, plus: release is `SELECT RELEASE_LOCK(N)` alone, leaving the row behind as a
//! dead row (`lock_acquired = 1`, owner no longer holding the GET_LOCK: what every
//! acquirer, the original package's too, already treats as reclaimable); the claim is an
//! `INSERT ... ON DUPLICATE KEY UPDATE` that takes such a row over in the same
//! statement. And a locker whose last acquisition of a name had to wait goes straight to
//! the one-round-trip wait+claim next time (no first try bound to fail).

use std::collections::HashSet;

use mysql::prelude::Queryable;
use mysql::{Conn, Statement};

use crate::lock::{Lock, TTL};
use crate::status;
use crate::Res;

const TABLE: &str = "`shared_locks`";
/// The product's grace for the first wait in the GET_LOCK queue.
const GRACE: f64 = 0.5;

/// The claim of P2: take the row over when it is a dead row of our spelling: marked
/// acquired, and its owner no longer holds the GET_LOCK or is us (our own leftover; a
/// row of ours with `lock_acquired = 0` is an "at least" row and stays). `connection_id`
/// is assigned last because the other assignments read it.
fn upsert(acquired: &str, name: &str) -> String {
    let take = format!(
        "(BINARY name = BINARY {name} AND lock_acquired = 1 \
         AND (connection_id = CONNECTION_ID() OR NOT (IS_USED_LOCK(name) <=> connection_id)))"
    );
    format!(
        "INSERT INTO {TABLE} (name, connection_id, created, ttl, lock_acquired) \
         VALUES ({name}, CONNECTION_ID(), UNIX_TIMESTAMP(), {ttl}, {acquired}) \
         ON DUPLICATE KEY UPDATE created = IF({take}, VALUES(created), created), \
         ttl = IF({take}, VALUES(ttl), ttl), lock_acquired = IF({take}, 1, lock_acquired), \
         connection_id = IF({take}, VALUES(connection_id), connection_id)",
        ttl = TTL as i64
    )
}

pub struct Proto {
    conn: Conn,
    try_claim: Statement,
    release: Statement,
    /// P2 (lazy release, upsert, adaptive first try); else P1.
    p2: bool,
    /// P2: names whose last acquisition had to wait.
    contended: HashSet<String>,
    /// P2: names whose row this session left behind on release. A claim that changed
    /// nothing (affected rows 0) found such a row with the very values it would write
    /// (same owner, second and TTL): it is ours. Any other unchanged row is not.
    left_behind: HashSet<String>,
}

impl Proto {
    pub fn connect(dsn: &str, p2: bool) -> Res<Proto> {
        let mut conn = Conn::new(status::opts(dsn)?)?;
        let (try_claim, release) = if p2 {
            (upsert("IF(GET_LOCK(?, 0) = 1, 1, NULL)", "?"), "SELECT RELEASE_LOCK(?)".to_owned())
        } else {
            (
                format!(
                    "INSERT INTO {TABLE} (name, connection_id, created, ttl, lock_acquired) \
                     VALUES (?, CONNECTION_ID(), UNIX_TIMESTAMP(), {ttl}, IF(GET_LOCK(?, 0) = 1, 1, NULL))",
                    ttl = TTL as i64
                ),
                format!(
                    "DELETE FROM {TABLE} WHERE name = ? AND connection_id = CONNECTION_ID() AND RELEASE_LOCK(name) = 1"
                ),
            )
        };
        let try_claim = conn.prep(try_claim)?;
        let release = conn.prep(release)?;
        Ok(Proto { conn, try_claim, release, p2, contended: HashSet::new(), left_behind: HashSet::new() })
    }

    /// The first try (one statement). Ok(false): the GET_LOCK is busy.
    fn first_try(&mut self, name: &str) -> Res<bool> {
        let result = if self.p2 {
            // The name is bound twice (VALUES and the take-over check) plus GET_LOCK's.
            self.conn.exec_drop(&self.try_claim, (name, name, name, name, name, name))
        } else {
            self.conn.exec_drop(&self.try_claim, (name, name))
        };
        match result {
            Ok(()) => self.claimed(name, self.conn.affected_rows()),
            Err(mysql::Error::MySqlError(e)) if e.code == 1048 => Ok(false),
            Err(e) => Err(e.into()),
        }
    }

    /// One round trip: queue for the GET_LOCK up to `wait` s, then claim the row if the
    /// GET_LOCK is ours. Ok(false): not obtained in time.
    fn wait_and_claim(&mut self, name: &str, wait: f64) -> Res<bool> {
        let hex: String = name.bytes().map(|b| format!("{b:02X}")).collect();
        let n = format!("CONVERT(X'{hex}' USING utf8mb4)");
        let acquired = format!("IF(IS_USED_LOCK({n}) <=> CONNECTION_ID(), 1, NULL)");
        let claim = if self.p2 {
            upsert(&acquired, &n)
        } else {
            format!(
                "INSERT INTO {TABLE} (name, connection_id, created, ttl, lock_acquired) \
                 VALUES ({n}, CONNECTION_ID(), UNIX_TIMESTAMP(), {ttl}, {acquired})",
                ttl = TTL as i64
            )
        };
        let sql = format!("DO GET_LOCK({n}, {wait:.3}); {claim}");
        let run = |conn: &mut Conn| -> mysql::Result<u64> {
            let mut result = conn.query_iter(sql)?;
            let mut affected = 0;
            while let Some(set) = result.iter() {
                affected = set.affected_rows();
                for row in set {
                    row?;
                }
            }
            Ok(affected)
        };
        match run(&mut self.conn) {
            Ok(affected) => self.claimed(name, affected),
            Err(mysql::Error::MySqlError(e)) if e.code == 1048 => Ok(false),
            Err(mysql::Error::MySqlError(e)) if e.code == 1062 => {
                // Row taken while the GET_LOCK is ours: the product would inspect it.
                self.conn.exec_drop("DO RELEASE_LOCK(?)", (name,))?;
                Err(format!("prototype: row of {name:?} taken while holding its GET_LOCK").into())
            }
            Err(e) => Err(e.into()),
        }
    }
}

impl Proto {
    /// A claim statement succeeded: did it claim the row?
    fn claimed(&mut self, name: &str, affected: u64) -> Res<bool> {
        if !self.p2 || affected > 0 || self.left_behind.contains(name) {
            self.left_behind.remove(name);
            return Ok(true);
        }
        Err(format!("prototype: row of {name:?} is not reclaimable here").into())
    }
}

impl Lock for Proto {
    fn acquire(&mut self, name: &str, timeout: f64) -> Res<()> {
        let start = std::time::Instant::now();
        let skip_try = self.p2 && self.contended.contains(name);
        if !skip_try {
            if self.first_try(name)? {
                return Ok(());
            }
            if self.p2 {
                self.contended.insert(name.to_owned());
            }
        }
        let mut waited = false;
        loop {
            let left = timeout - start.elapsed().as_secs_f64();
            if left <= 0.0 {
                return Err(format!("prototype: {name:?} timed out").into());
            }
            let t = std::time::Instant::now();
            let got = self.wait_and_claim(name, left.min(GRACE))?;
            // Contended if the GET_LOCK was not there at once (a queue formed).
            waited |= t.elapsed().as_micros() > 500 || !got;
            if got {
                if self.p2 && skip_try && !waited {
                    self.contended.remove(name);
                }
                return Ok(());
            }
        }
    }

    fn release(&mut self, name: &str) -> Res<()> {
        if self.p2 {
            let done: Option<Option<i64>> = self.conn.exec_first(&self.release, (name,))?;
            return match done.flatten() {
                Some(1) => {
                    self.left_behind.insert(name.to_owned());
                    Ok(())
                }
                other => Err(format!("prototype: RELEASE_LOCK({name:?}) returned {other:?}").into()),
            };
        }
        self.conn.exec_drop(&self.release, (name,))?;
        if self.conn.affected_rows() == 1 {
            Ok(())
        } else {
            Err(format!("prototype: release of {name:?} matched nothing").into())
        }
    }
}
