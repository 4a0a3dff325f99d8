//! The sessions of one locker: the first, which holds the session locks and the first
//! leases, and (when the connector [spreads](Connector::spreads)) up to
//! [`MAX_SESSIONS`] in all, each taking [`LEASES_PER_SESSION`] leases before a lease goes
//! to the next. Every session comes from [`open`], which refuses a cluster node unless
//! the deployment allows it. The pool counts the leases on each session; which lease is
//! on which session is the locker's bookkeeping (`Held::slot`).

use super::table::topology_of;
use crate::config::Table;
use crate::error::{Error, Result};
use crate::fork;
use crate::session::{Connector, Session};

/// Leases one session takes before the locker takes further leases on another. MariaDB
/// walks a session's list of metadata locks (GET_LOCKs among them) on every lock request,
/// so in a session holding thousands, each acquisition and release costs more than the
/// one before (measured: 10,000 held made the median GET_LOCK 1.5-8x slower). Spread
/// over sessions of this many, the cost stays flat.
pub const LEASES_PER_SESSION: usize = 500;

/// Sessions one locker opens at most; past `LEASES_PER_SESSION * MAX_SESSIONS` leases,
/// they share the least loaded sessions.
pub const MAX_SESSIONS: usize = 32;

/// One of a locker's sessions (opened on first use) and how many leases live on it.
struct Slot<S> {
    session: Option<S>,
    leases: usize,
    /// The session's server waits in GET_LOCK for fractions of a second.
    get_lock_fractions: bool,
}

impl<S> Slot<S> {
    fn vacant() -> Slot<S> {
        Slot { session: None, leases: 0, get_lock_fractions: false }
    }
}

/// A locker's sessions, by slot: slot 0 is the first session, the others only hold
/// leases. A slot's session is opened on first use and again after it was lost.
pub(super) struct Pool<S> {
    slots: Vec<Slot<S>>,
    /// An extra session could not be opened: all further leases share the open ones.
    spreading_refused: bool,
}

impl<S: Session> Pool<S> {
    /// One slot, not connected yet.
    pub(super) fn new() -> Pool<S> {
        Pool { slots: vec![Slot::vacant()], spreading_refused: false }
    }

    /// The session of `slot`, opened if there is none (learning how many columns `learn`
    /// has, when given: see [`Connector::connect_learning`]), and whether its server waits
    /// in GET_LOCK for fractions of a second.
    pub(super) fn open<C: Connector<Session = S>>(
        &mut self,
        slot: usize,
        connector: &mut C,
        learn: Option<&Table>,
    ) -> Result<(&mut S, bool)> {
        let slot = &mut self.slots[slot];
        if slot.session.is_none() {
            let (session, fractions) = open(connector, learn)?;
            slot.get_lock_fractions = fractions;
            slot.session = Some(session);
        }
        let session = slot.session.as_mut().ok_or_else(|| Error::invalid("session", "not connected"))?;
        Ok((session, slot.get_lock_fractions))
    }

    /// Whether `slot`'s session is open (no statement is run to check).
    pub(super) fn is_open(&self, slot: usize) -> bool {
        self.slots[slot].session.is_some()
    }

    /// Whether the first session is open (no statement is run to check).
    pub(super) fn is_connected(&self) -> bool {
        self.slots[0].session.is_some()
    }

    /// `CONNECTION_ID()` of the first session, if it is open (no statement is run).
    pub(super) fn first_connection_id(&self) -> Option<u64> {
        self.slots[0].session.as_ref().map(Session::connection_id)
    }

    /// The connection ids of the open sessions other than `slot`'s.
    pub(super) fn other_sessions(&self, slot: usize) -> Vec<u64> {
        self.slots
            .iter()
            .enumerate()
            .filter(|&(i, _)| i != slot)
            .filter_map(|(_, s)| s.session.as_ref().map(Session::connection_id))
            .collect()
    }

    /// Closes every session; one vacant slot is left.
    pub(super) fn close_all(&mut self) {
        self.slots.truncate(1);
        self.slots[0] = Slot::vacant();
    }

    /// Gives up every session without closing it (a forked child's, which belong to the
    /// parent); one vacant slot is left.
    pub(super) fn abandon_all(&mut self) {
        for slot in self.slots.drain(..) {
            if let Some(s) = slot.session {
                fork::abandon(s);
            }
        }
        self.slots.push(Slot::vacant());
    }

    /// The session of `slot` was lost: the slot is vacant again (opened anew on use).
    pub(super) fn vacate(&mut self, slot: usize) {
        self.slots[slot] = Slot::vacant();
    }

    /// No session holds a lease any more (the locker forgot them all).
    pub(super) fn forget_leases(&mut self) {
        for slot in &mut self.slots {
            slot.leases = 0;
        }
    }

    /// A lease was taken on `slot`.
    pub(super) fn lease_taken(&mut self, slot: usize) {
        self.slots[slot].leases += 1;
    }

    /// A lease on `slot` is gone; `left` are still held. With few left, the extra
    /// sessions that hold none are closed.
    pub(super) fn lease_gone(&mut self, slot: usize, left: usize) {
        let slot = &mut self.slots[slot];
        slot.leases = slot.leases.saturating_sub(1);
        if self.slots.len() > 1 && left < LEASES_PER_SESSION / 2 {
            for slot in self.slots.iter_mut().skip(1).filter(|s| s.leases == 0) {
                slot.session = None;
            }
        }
    }

    /// Where a new lease goes: the first session with room, else a new one, else the
    /// least loaded open one. An extra session is connected here, so that a server that
    /// refuses more connections (`max_user_connections`) costs spreading, not the lease:
    /// the pool then stops spreading.
    pub(super) fn slot_for_new_lease<C: Connector<Session = S>>(&mut self, connector: &mut C) -> usize {
        if !connector.spreads() || self.spreading_refused {
            return self.least_loaded_open_slot();
        }
        let slot = match self.slots.iter().position(|s| s.leases < LEASES_PER_SESSION) {
            Some(i) => i,
            None if self.slots.len() < MAX_SESSIONS => {
                self.slots.push(Slot::vacant());
                self.slots.len() - 1
            }
            None => return self.least_loaded_open_slot(),
        };
        if slot == 0 || self.slots[slot].session.is_some() {
            return slot;
        }
        if self.open(slot, connector, None).is_ok() {
            return slot;
        }
        self.spreading_refused = true;
        self.least_loaded_open_slot()
    }

    /// Slot 0 if nothing else is open (it connects on use).
    fn least_loaded_open_slot(&self) -> usize {
        (0..self.slots.len())
            .filter(|&i| i == 0 || self.slots[i].session.is_some())
            .min_by_key(|&i| self.slots[i].leases)
            .unwrap_or(0)
    }
}

/// Every session a locker uses comes from here, with whether its server waits in
/// GET_LOCK for fractions of a second. GET_LOCK and KILL act on one node of a
/// replicated cluster: such a server is refused for the GET_LOCK-based locks unless the
/// deployment says all lock traffic goes to one node. Native sessions learned what the
/// server is in their setup round trip; others are asked once, unless a cluster is
/// allowed: then they are taken to wait whole seconds only, which is right on every
/// server (only less exact where fractions would do).
fn open<C: Connector>(connector: &mut C, learn: Option<&Table>) -> Result<(C::Session, bool)> {
    let mut session = match learn {
        Some(table) => connector.connect_learning(table)?,
        None => connector.connect()?,
    };
    let topology = match session.topology() {
        Some(known) => Some(known),
        None if connector.allows_cluster() => None,
        None => Some(topology_of(&mut session, &crate::Table::default())?),
    };
    if let Some(topology) = topology.filter(|t| t.is_cluster() && !connector.allows_cluster()) {
        return Err(Error::ClusterNode { name: None, what: topology.describe() });
    }
    Ok((session, topology.is_some_and(|t| t.get_lock_waits_fractions())))
}
