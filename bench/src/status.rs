//! What the server counted: `SHOW GLOBAL STATUS` read on a separate admin connection
//! before and after a batch. The batch runs on a server nothing else uses (run.sh starts
//! its own), so the deltas are the batch's, once the status query itself is taken out:
//! two back-to-back snapshots before the batch measure what one snapshot adds.

use std::collections::BTreeMap;

use mysql::prelude::Queryable;
use mysql::{Conn, Opts, OptsBuilder};

use crate::Res;

/// The counters read. `Questions` counts every statement a client sent (COM_QUERY and
/// COM_STMT_EXECUTE, not prepares); the `Com_*` counters say which kinds.
pub const VARS: &[&str] = &[
    "Questions",
    "Com_stmt_prepare",
    "Com_stmt_execute",
    "Com_stmt_reset",
    "Com_stmt_fetch",
    "Com_stmt_close",
    "Com_select",
    "Com_insert",
    "Com_delete",
    "Com_update",
    "Com_do",
    "Com_set_option",
    "Com_kill",
    "Connections",
];

pub type Snapshot = BTreeMap<String, i64>;

/// The `mysql` crate's connection options from a mysqllock URL: always TCP (the crate
/// would otherwise switch to the Unix socket it finds, unlike PDO and the core).
pub fn opts(dsn: &str) -> Res<OptsBuilder> {
    let config = mysqllock_core::Config::from_url(dsn)?;
    let url = format!(
        "mysql://{}:{}@{}:{}/{}",
        config.user,
        config.password.clone().unwrap_or_default(),
        config.host,
        config.port,
        config.database.clone().unwrap_or_default()
    );
    Ok(OptsBuilder::from_opts(Opts::from_url(&url)?).prefer_socket(false))
}

pub struct Admin {
    conn: Conn,
}

impl Admin {
    pub fn connect(dsn: &str) -> Res<Admin> {
        Ok(Admin { conn: Conn::new(opts(dsn)?)? })
    }

    pub fn snapshot(&mut self) -> Res<Snapshot> {
        let list = VARS.iter().map(|v| format!("'{v}'")).collect::<Vec<_>>().join(", ");
        let rows: Vec<(String, String)> =
            self.conn.query(format!("SHOW GLOBAL STATUS WHERE Variable_name IN ({list})"))?;
        Ok(rows.into_iter().map(|(k, v)| (k, v.parse().unwrap_or(0))).collect())
    }

    /// Two back-to-back snapshots: the second minus the first is one snapshot's cost.
    pub fn calibrate(&mut self) -> Res<(Snapshot, Snapshot)> {
        Ok((self.snapshot()?, self.snapshot()?))
    }

    pub fn version(&mut self) -> Res<String> {
        let v: Option<String> = self.conn.query_first("SELECT VERSION()")?;
        Ok(v.unwrap_or_default())
    }
}

/// Server-counted statements per unit (cycle, acquisition, process).
#[derive(Debug, Clone, Default)]
pub struct Counts(BTreeMap<String, f64>);

impl Counts {
    /// `(s2 - s1) - (s1 - s0)`: the batch between s1 and s2, without the snapshot that
    /// ended it (s0, s1 are back to back), divided by `units`.
    pub fn calibrated(s0: &Snapshot, s1: &Snapshot, s2: &Snapshot, units: f64) -> Counts {
        let get = |s: &Snapshot, k: &str| s.get(k).copied().unwrap_or(0);
        let units = if units > 0.0 { units } else { 1.0 };
        Counts(
            VARS.iter()
                .map(|&k| {
                    let d = (get(s2, k) - get(s1, k)) - (get(s1, k) - get(s0, k));
                    (k.to_owned(), d as f64 / units)
                })
                .collect(),
        )
    }

    /// The mean of several batches' per-unit counts (batches of equal size).
    pub fn mean<'a>(parts: impl Iterator<Item = &'a Counts>) -> Counts {
        let mut sum: BTreeMap<String, f64> = BTreeMap::new();
        let mut n: f64 = 0.0;
        for p in parts {
            n += 1.0;
            for (k, v) in &p.0 {
                *sum.entry(k.clone()).or_default() += v;
            }
        }
        Counts(sum.into_iter().map(|(k, v)| (k, v / n.max(1.0))).collect())
    }

    pub fn get(&self, key: &str) -> f64 {
        self.0.get(key).copied().unwrap_or(0.0)
    }

    /// Statements the server executed for the clients (`Questions`).
    pub fn statements(&self) -> f64 {
        self.get("Questions")
    }

    /// Requests that wait for an answer: executes, prepares, resets and fetches
    /// (COM_STMT_CLOSE has no answer), and text-protocol queries. `Questions` counts the
    /// statements of a multi-statement query one by one; in the figures that use this,
    /// the only multi-statement query is the lock protocol's waiter batch (GET_LOCK
    /// sleep + claim, two statements), and the other text statements (KILL, SET) travel
    /// alone, so text statements other than those count one round trip per two.
    pub fn round_trips(&self) -> f64 {
        let text = self.statements() - self.get("Com_stmt_execute");
        let alone = self.get("Com_kill") + self.get("Com_set_option");
        let batched = (text - alone).max(0.0);
        self.get("Com_stmt_execute")
            + alone
            + batched / 2.0
            + self.get("Com_stmt_prepare")
            + self.get("Com_stmt_reset")
            + self.get("Com_stmt_fetch")
    }

    /// Which statements, e.g. `ins 1 del 1`.
    pub fn mix(&self) -> String {
        let kinds = [
            ("Com_select", "sel"),
            ("Com_insert", "ins"),
            ("Com_delete", "del"),
            ("Com_update", "upd"),
            ("Com_do", "do"),
            ("Com_set_option", "set"),
            ("Com_kill", "kill"),
            ("Com_stmt_prepare", "prep"),
        ];
        let parts: Vec<String> = kinds
            .iter()
            .filter(|(k, _)| self.get(k).abs() >= 0.005)
            .map(|(k, short)| format!("{short} {}", trim_num(self.get(k))))
            .collect();
        if parts.is_empty() {
            "-".to_owned()
        } else {
            parts.join(" ")
        }
    }
}

/// `1`, `1.5`, `0.02`: as few digits as tell the value.
pub fn trim_num(v: f64) -> String {
    let s = format!("{v:.2}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s == "-0" {
        "0".to_owned()
    } else {
        s.to_owned()
    }
}
