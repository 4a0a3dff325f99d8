//! Decisive reads on a cluster: what makes "is it held, who holds it" see every commit
//! made on any node before it.

use super::*;

/// How a decisive read (is it held, who holds it) sees every commit made anywhere in the
/// cluster before it, leaving the caller's session settings as they were:
///
/// - Galera (MariaDB): `wsrep_sync_wait=1` for that statement only (`SET STATEMENT`).
/// - Group Replication: `group_replication_consistency = BEFORE` around the read: the
///   member first applies every transaction the group ordered before it, and a member
///   that is not ONLINE or cannot reach its group's majority refuses (3796, 3797:
///   [`Error::NodeNotReady`]) instead of answering from its own copy, which may be stale
///   (measured: a member cut off from its group kept answering plain reads at once).
///   The variable cannot be set per statement (`SET_VAR` ignores it, warning 3637), so
///   the session's value is saved in a user variable, set, and put back: two more round
///   trips, for reads only. Inside a caller's open transaction the server refuses to
///   change it (1766); the error is the caller's to see.
///
/// Writes do not wait: a conditional write is decided by certification (first committer
/// wins; a write made on a stale copy of the row conflicts with the commit it missed),
/// and a node that has not yet applied another node's release answers `false` for the
/// moment it needs to catch up, which the original class's contract allows (try again).
/// Waiting on writes too was tried on Galera: while a node was cut off, writes through a
/// healthy node then failed with 1205 (lock wait timeout). In a single-primary group only
/// the primary writes, and a newly elected primary holds writes until it has applied
/// what the old one committed (`BEFORE_ON_PRIMARY_FAILOVER`, the default since MySQL
/// 8.4; under `EVENTUAL` the certifier checks conflicts while that backlog lasts).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum SyncRead {
    /// A standalone server (or SQLite): every read sees every commit.
    None,
    Galera,
    GroupReplication,
}

pub(super) const GALERA_SYNC: &str = "SET STATEMENT wsrep_sync_wait = 1 FOR ";

pub(super) const GROUP_BEFORE: &str = "SET @mysqllock_consistency = @@SESSION.group_replication_consistency, \
                            @@SESSION.group_replication_consistency = 'BEFORE'";

pub(super) const GROUP_RESTORE: &str = "SET @@SESSION.group_replication_consistency = @mysqllock_consistency";

impl SyncRead {
    pub(super) fn for_server(topology: &Topology) -> SyncRead {
        if topology.wsrep && topology.mariadb {
            SyncRead::Galera
        } else if topology.group_configured {
            SyncRead::GroupReplication
        } else {
            SyncRead::None
        }
    }

    /// Runs the read `sql` on `session` as described above.
    pub(super) fn read<S: Session>(
        self,
        session: &mut S,
        sql: &str,
        params: &[Value],
    ) -> Result<crate::Outcome, SessionError> {
        match self {
            SyncRead::None => session.execute(sql, params),
            SyncRead::Galera => session.execute(&format!("{GALERA_SYNC}{sql}"), params),
            SyncRead::GroupReplication => {
                session.execute(GROUP_BEFORE, &[])?;
                let out = session.execute(sql, params);
                // Put the caller's level back whatever the read did (a lost session
                // takes it along); the read's own error comes first.
                let restored = session.execute(GROUP_RESTORE, &[]);
                let out = out?;
                restored?;
                Ok(out)
            }
        }
    }
}
