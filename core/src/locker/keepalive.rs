//! Automatic lease renewal from a background thread with its own connection.
//!
//! The holder may be busy (a PHP script cannot renew while it runs its job), so a thread
//! renews on its behalf: the renewal names the holder's session id and succeeds only
//! while that session owns the row and holds the GET_LOCK, so the thread can extend a
//! lease but never create or resurrect one. It stops when told (release, request end,
//! drop), when the maximum hold time is reached, or at the first failure, which it
//! records for the holder to report.
//!
//! The holder learns that the lease is lost from the clock alone, without waiting for
//! the thread: once the last renewal's start plus the TTL, less [`LOCAL_MARGIN`], has
//! passed, [`KeepAlive::failure`] says so even while the thread still waits on a server
//! that stopped answering. So a holder on a silent network stops its job before the lease
//! can end on the server and be taken over.

use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

use super::sql::Sql;
use crate::session::{OpenSession, Session};

/// Renew when this fraction of the TTL has passed since the last renewal: two chances
/// to retry before the lease would run out.
const RENEW_FRACTION: f64 = 1.0 / 3.0;
/// A renewal statement (or connect) may take this long before the thread gives up on
/// its connection and retries with a new one; bounded so release never waits long.
pub(crate) const IO_TIMEOUT: Duration = Duration::from_secs(5);
/// How long stopping waits for the thread to finish, once no renewal is in flight (one
/// in flight is waited for first: up to two statements of [`IO_TIMEOUT`] each); a thread
/// still running after that is left to end on its own, so exit is never blocked.
const JOIN_WAIT: Duration = Duration::from_secs(1);
/// How much sooner than its last renewal's start plus the TTL the lease counts as lost
/// here: the server stores whole seconds (`UNIX_TIMESTAMP()`), so the lease may end up
/// to a second earlier on the server, and the holder needs a moment to stop its job
/// (half a second, as the lease mode's local deadline). At most a quarter of the TTL,
/// so a short TTL still leaves its renewals time to succeed.
const LOCAL_MARGIN: Duration = Duration::from_millis(1500);

/// What the thread renews, on sessions of its own, and for how long.
pub(crate) struct Plan {
    /// Opens the thread's sessions (the connector's [`keep_alive`](crate::Connector::keep_alive),
    /// bounded by [`IO_TIMEOUT`]).
    pub open: OpenSession,
    pub sql: Arc<Sql>,
    pub name: String,
    /// The holder's `CONNECTION_ID()`.
    pub owner: u64,
    pub ttl: i64,
    /// Whole seconds from acquisition after which renewals stop (the lease then ends
    /// at most `ttl` later, and never past acquisition + `max_hold`).
    pub max_hold: i64,
}

#[derive(Default)]
struct State {
    stop: bool,
}

/// What the thread found, kept apart from [`State`], whose lock a renewal holds while it
/// waits for the server: the holder reads this without waiting for a renewal.
struct Outcome {
    failure: Option<String>,
    /// The lease is known to last until at least this instant, less the margin (the
    /// last renewal's start plus the TTL); `None` once renewals stopped at max-hold, when
    /// the lease runs out by design.
    secured_until: Option<Instant>,
    /// Why the last renewal failed, for the failure's message.
    last_error: String,
}

impl Outcome {
    /// The failure: the one recorded, or the lease's local deadline passed (then
    /// recorded for good, and the thread stops renewing: a lease given up here is not
    /// renewed behind the holder's back).
    fn failure(&mut self) -> Option<String> {
        if self.failure.is_none() && self.secured_until.is_some_and(|t| Instant::now() >= t) {
            let why = if self.last_error.is_empty() { "no renewal was answered" } else { &self.last_error };
            self.failure = Some(format!("the lease could not be renewed before it would run out ({why})"));
        }
        self.failure.clone()
    }
}

struct Shared {
    state: Mutex<State>,
    wake: Condvar,
    outcome: Mutex<Outcome>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn outcome(&self) -> MutexGuard<'_, Outcome> {
        self.outcome.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The holder's side of a keep-alive thread. Dropping it stops the thread.
pub(crate) struct KeepAlive {
    shared: Arc<Shared>,
    finished: mpsc::Receiver<()>,
    thread: Option<thread::JoinHandle<()>>,
}

impl KeepAlive {
    pub fn start(plan: Plan) -> std::io::Result<KeepAlive> {
        let ttl = Duration::from_secs(u64::try_from(plan.ttl).unwrap_or(1));
        let outcome = Outcome {
            failure: None,
            secured_until: Some(Instant::now() + ttl - margin(ttl)),
            last_error: String::new(),
        };
        let shared = Arc::new(Shared {
            state: Mutex::new(State::default()),
            wake: Condvar::new(),
            outcome: Mutex::new(outcome),
        });
        let (done, finished) = mpsc::channel();
        let thread_shared = Arc::clone(&shared);
        let mut plan = plan;
        let thread = thread::Builder::new().name(format!("mysqllock-keepalive-{}", plan.name)).spawn(move || {
            renew_until_stopped(&thread_shared, &mut plan);
            drop(plan);
            let _ = done.send(());
        })?;
        Ok(KeepAlive { shared, finished, thread: Some(thread) })
    }

    /// Why renewing failed, if it did: the lease must be treated as lost.
    pub fn failure(&self) -> Option<String> {
        self.shared.outcome().failure()
    }

    /// Stops the thread. Once this returns no renewal is in flight or will start (the
    /// flag is set under the lock a renewal holds), so a release that follows cannot
    /// be undone by a late renewal. Waits briefly for the thread to end, and when it
    /// has, joins it: once this returns the thread is gone, not merely finishing (a
    /// caller may count its threads, or unload the library). A thread still waiting on
    /// a silent server past [`JOIN_WAIT`] is left to end on its own.
    pub fn stop(mut self) {
        self.shared.lock().stop = true;
        self.shared.wake.notify_all();
        if self.finished.recv_timeout(JOIN_WAIT).is_ok() {
            // It sent its last message: nothing is left for it but to return.
            if let Some(thread) = self.thread.take() {
                let _ = thread.join();
            }
        }
    }

    /// For a forked child: the thread does not exist here, and its lock may have been
    /// held at the fork, so touch nothing.
    pub fn abandon(self) {
        crate::fork::abandon(self);
    }
}

impl Drop for KeepAlive {
    fn drop(&mut self) {
        self.shared.lock().stop = true;
        self.shared.wake.notify_all();
    }
}

fn renew_until_stopped(shared: &Shared, plan: &mut Plan) {
    let started = Instant::now();
    let ttl = Duration::from_secs(u64::try_from(plan.ttl).unwrap_or(1));
    let interval = ttl.mul_f64(RENEW_FRACTION).max(Duration::from_millis(100));
    let max_hold = Duration::from_secs(u64::try_from(plan.max_hold).unwrap_or(0));
    let mut session: Option<Box<dyn Session + Send>> = None;
    let mut next = started + interval;
    loop {
        {
            let mut state = shared.lock();
            loop {
                if state.stop {
                    return;
                }
                let now = Instant::now();
                if now >= next {
                    break;
                }
                state = shared.wake.wait_timeout(state, next - now).unwrap_or_else(PoisonError::into_inner).0;
            }
        }
        if started.elapsed() >= max_hold {
            // The lease runs out on its own: the holder asked for no more.
            shared.outcome().secured_until = None;
            return;
        }
        if shared.outcome().failure().is_some() {
            return;
        }
        if session.is_none() {
            match (plan.open)() {
                Ok(s) => session = Some(s),
                Err(e) => {
                    shared.outcome().last_error = e.chain();
                    next = Instant::now() + interval.min(Duration::from_secs(1));
                    continue;
                }
            }
        }
        let Some(s) = session.as_mut() else { continue };
        let attempt = Instant::now();
        match renew_once(shared, s.as_mut(), plan) {
            Renewal::Renewed => {
                let mut outcome = shared.outcome();
                // Not once the holder was told the lease is lost: that stays so.
                if outcome.failure.is_none() {
                    outcome.secured_until = Some(attempt + ttl - margin(ttl));
                }
                next = attempt + interval;
            }
            Renewal::Stopped => return,
            Renewal::Lost => {
                let reason = "the lease was no longer this session's when the keep-alive renewed it".to_owned();
                shared.outcome().failure = Some(reason);
                return;
            }
            Renewal::Failed(e) => {
                shared.outcome().last_error = e;
                session = None;
                next = Instant::now() + interval.min(Duration::from_secs(1));
            }
        }
    }
}

/// [`LOCAL_MARGIN`], or a quarter of the TTL if that is less.
fn margin(ttl: Duration) -> Duration {
    LOCAL_MARGIN.min(ttl / 4)
}

enum Renewal {
    Renewed,
    Stopped,
    Lost,
    Failed(String),
}

/// One renewal, run while holding the state lock so `stop` cannot slip in between.
fn renew_once(shared: &Shared, session: &mut dyn Session, plan: &Plan) -> Renewal {
    let state = shared.lock();
    if state.stop {
        return Renewal::Stopped;
    }
    let params = [plan.ttl.into(), plan.max_hold.into(), plan.name.as_str().into(), plan.owner.into()];
    let changed = match session.execute(&plan.sql.renew, &params) {
        Ok(out) => out.affected_rows == 1,
        Err(e) => return Renewal::Failed(e.to_string()),
    };
    if changed {
        return Renewal::Renewed;
    }
    // Nothing changed: either the lease is already as long as allowed, or not ours.
    match session.execute(&plan.sql.owns, &[plan.name.as_str().into(), plan.owner.into()]) {
        Ok(out) if out.first(0).as_i64() == Some(1) => Renewal::Renewed,
        Ok(_) => Renewal::Lost,
        Err(e) => Renewal::Failed(e.to_string()),
    }
}
