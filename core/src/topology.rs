//! Which kind of server a session talks to: a standalone server, a Galera node, or a
//! Group Replication member.
//!
//! On a replicated cluster `GET_LOCK`, `IS_USED_LOCK`, `CONNECTION_ID()` and `KILL` act on
//! one node only, so a client on another node takes the "same" lock at the same time.
//! The GET_LOCK-based locks refuse such a server unless the deployment routes all lock
//! traffic to one node and says so; the table-only lease mode is the safe choice there.

use crate::error::SessionError;
use crate::value::{Outcome, Value};

/// The one statement that tells: it works on MySQL and MariaDB alike and returns nothing
/// for variables a server does not have (no `wsrep_on` on MySQL, no Group Replication on
/// MariaDB).
pub const PROBE: &str = "SHOW VARIABLES WHERE Variable_name IN ('wsrep_on', 'group_replication_group_name', 'version')";

/// Whether a Group Replication member is part of its group right now. Only asked where
/// the plugin names a group (MySQL with Group Replication configured).
const GROUP_MEMBER_STATE: &str =
    "SELECT MEMBER_STATE FROM performance_schema.replication_group_members WHERE MEMBER_ID = @@server_uuid";

/// What a server is, as far as locking cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Topology {
    /// A Galera node (MariaDB Galera Cluster, Percona XtraDB Cluster) with `wsrep_on=ON`.
    pub wsrep: bool,
    /// An active (`ONLINE` or `RECOVERING`) Group Replication member.
    pub group_replication: bool,
    /// The server is MariaDB (it has `SET STATEMENT ... FOR`).
    pub mariadb: bool,
    /// Group Replication is configured (a group name is set), whether or not the member
    /// is in its group right now. Lease reads that decide ask such a server for the
    /// group's latest state (`group_replication_consistency = BEFORE`), which a member
    /// outside its group refuses instead of answering from its own, maybe stale, copy.
    pub group_configured: bool,
    /// Group Replication is configured: [`Topology::from_probe`] cannot tell from the
    /// variables alone whether the member is active, [`probe`] asks.
    group_named: bool,
}

impl Topology {
    /// Reads the rows of [`PROBE`] (`Variable_name`, `Value`).
    pub fn from_probe(rows: &[Vec<Value>]) -> Topology {
        let mut topology = Topology::default();
        for row in rows {
            let (Some(name), Some(value)) = (row.first().and_then(Value::as_text), row.get(1).and_then(Value::as_text))
            else {
                continue;
            };
            match name.to_ascii_lowercase().as_str() {
                "wsrep_on" => topology.wsrep = value.eq_ignore_ascii_case("ON") || value == "1",
                "group_replication_group_name" => {
                    topology.group_named = !value.trim().is_empty();
                    topology.group_configured = topology.group_named;
                }
                "version" => topology.mariadb = value.to_ascii_lowercase().contains("mariadb"),
                _ => {}
            }
        }
        topology
    }

    /// Whether GET_LOCK and KILL are node-local here.
    pub fn is_cluster(&self) -> bool {
        self.wsrep || self.group_replication
    }

    /// Whether `GET_LOCK` waits the fraction of a second it is given. MariaDB does; MySQL
    /// rounds the timeout to whole seconds (0.4 does not wait at all, 0.6 waits a second).
    pub fn get_lock_waits_fractions(&self) -> bool {
        self.mariadb
    }

    /// For messages: what kind of cluster node this is.
    pub fn describe(&self) -> &'static str {
        if self.wsrep {
            "a Galera cluster node (wsrep_on=ON)"
        } else if self.group_replication {
            "an active Group Replication member"
        } else {
            "a standalone server"
        }
    }
}

/// Asks a session what it is talking to: [`PROBE`], plus the member state where Group
/// Replication is configured. `run` runs one statement without parameters on the
/// session (so this module needs no session type).
pub fn probe(mut run: impl FnMut(&str) -> Result<Outcome, SessionError>) -> Result<Topology, SessionError> {
    let out = run(PROBE)?;
    let mut topology = Topology::from_probe(&out.rows);
    complete(run, &mut topology)?;
    Ok(topology)
}

/// The part of [`probe`] after the variables are known: asks for the Group Replication
/// member state when a group is named (one more statement, on such servers only).
pub fn complete(
    mut run: impl FnMut(&str) -> Result<Outcome, SessionError>,
    topology: &mut Topology,
) -> Result<(), SessionError> {
    if topology.group_named {
        topology.group_named = false;
        topology.group_replication = match run(GROUP_MEMBER_STATE) {
            Ok(out) => out.first(0).as_text().is_some_and(|s| matches!(s.as_str(), "ONLINE" | "RECOVERING")),
            // performance_schema off: a configured group is taken as active, the safe side.
            Err(e) if e.code.is_some() && !e.lost => true,
            Err(e) => return Err(e),
        };
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(name: &str, value: &str) -> Vec<Value> {
        vec![Value::Text(name.into()), Value::Text(value.into())]
    }

    #[test]
    fn a_galera_node_is_a_cluster() {
        let t = Topology::from_probe(&[row("version", "10.11.6-MariaDB-0+deb12u1"), row("wsrep_on", "ON")]);
        assert!(t.wsrep && t.mariadb && t.is_cluster());
    }

    #[test]
    fn mariadb_with_wsrep_off_is_standalone() {
        let t = Topology::from_probe(&[row("version", "10.11.6-MariaDB"), row("wsrep_on", "OFF")]);
        assert!(!t.is_cluster());
        assert!(t.get_lock_waits_fractions());
    }

    #[test]
    fn a_named_group_is_configured_but_asks_whether_the_member_is_in_it() {
        let mut t = Topology::from_probe(&[row("version", "9.7.4"), row("group_replication_group_name", "aaaa-bbbb")]);
        assert!(t.group_configured && !t.is_cluster(), "not yet asked: {t:?}");
        let member_state =
            |_: &str| Ok(Outcome { rows: vec![vec![Value::Text("ONLINE".into())]], ..Outcome::default() });
        complete(member_state, &mut t).unwrap();
        assert!(t.group_replication && t.group_configured && t.is_cluster());
        assert!(t.describe().contains("Group Replication"));
    }

    #[test]
    fn a_member_outside_its_group_is_no_cluster_node_but_still_configured() {
        let mut t = Topology::from_probe(&[row("group_replication_group_name", "aaaa-bbbb")]);
        let member_state =
            |_: &str| Ok(Outcome { rows: vec![vec![Value::Text("ERROR".into())]], ..Outcome::default() });
        complete(member_state, &mut t).unwrap();
        assert!(!t.group_replication && t.group_configured);
    }

    #[test]
    fn mysql_without_the_variables_is_standalone() {
        let t = Topology::from_probe(&[row("version", "8.0.36")]);
        assert!(!t.is_cluster() && !t.mariadb);
        assert!(!t.get_lock_waits_fractions(), "MySQL rounds GET_LOCK's timeout to whole seconds");
    }
}
