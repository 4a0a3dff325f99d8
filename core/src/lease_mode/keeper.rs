//! [`LeaseKeeper`]: a thread that renews one lease until stopped, and the jitter that
//! spreads retries.

use super::*;

/// A small generator for backoff jitter: spreads waiters that lost the same race so they
/// do not all come back at the same instant. Not for anything that needs randomness.
pub(super) struct Jitter(pub(super) u64);

impl Jitter {
    pub(super) fn new() -> Jitter {
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
        Jitter((nanos as u64) ^ (u64::from(std::process::id()) << 32) | 1)
    }

    /// `d` scaled by a factor in [0.5, 1.5).
    pub(super) fn spread(&mut self, d: Duration) -> Duration {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        d.mul_f64(0.5 + (self.0 % 1000) as f64 / 1000.0)
    }
}

/// Keeps one lease alive from a thread of its own, on a session of its own, renewing it
/// every third of its TTL, and tells when it is lost: a renewal refused (the lease was
/// taken over), or the local deadline passed without a successful renewal (the database
/// unreachable, a cluster node out of the primary component for too long).
pub struct LeaseKeeper {
    shared: std::sync::Arc<(parking_lot::Mutex<KeeperState>, parking_lot::Condvar)>,
    thread: Option<std::thread::JoinHandle<()>>,
}

#[derive(Debug)]
pub(super) struct KeeperState {
    deadline: Instant,
    token: Option<u64>,
    lost: Option<String>,
    stop: bool,
}

impl LeaseKeeper {
    /// Starts renewing `owner`'s lease on `resource` (just granted as `grant`) every
    /// `ttl / 3` seconds on a native session to `config`'s server.
    pub fn start(config: Config, resource: &str, owner: &str, ttl: f64, grant: Grant) -> Result<LeaseKeeper> {
        // Any TTL acquire took (limits::duration stops at 1e9 seconds, which leases pass).
        let period = Duration::try_from_secs_f64(ttl).map_err(|e| Error::invalid("ttl", e.to_string()))? / 3;
        let shared = std::sync::Arc::new((
            parking_lot::Mutex::new(KeeperState {
                deadline: grant.deadline,
                token: grant.token,
                lost: None,
                stop: false,
            }),
            parking_lot::Condvar::new(),
        ));
        let (resource, owner) = (resource.to_owned(), owner.to_owned());
        let state = shared.clone();
        let thread = std::thread::Builder::new()
            .name("mysqllock-lease".into())
            .spawn(move || keep(config, &resource, &owner, ttl, period, &state))
            .map_err(|e| Error::invalid("keep-alive", format!("cannot start its thread: {e}")))?;
        Ok(LeaseKeeper { shared, thread: Some(thread) })
    }

    /// The current local deadline (moves forward with each renewal).
    pub fn deadline(&self) -> Instant {
        self.shared.0.lock().deadline
    }

    pub fn token(&self) -> Option<u64> {
        self.shared.0.lock().token
    }

    /// Why the lease is lost, once it is: refused renewal, or deadline passed.
    pub fn lost(&self) -> Option<String> {
        let state = self.shared.0.lock();
        if let Some(why) = &state.lost {
            return Some(why.clone());
        }
        (Instant::now() >= state.deadline).then(|| "the local deadline passed without a successful renewal".to_owned())
    }

    /// Stops renewing (the caller then releases the lease, or lets it run out).
    pub fn stop(mut self) {
        self.halt();
    }

    fn halt(&mut self) {
        {
            let mut state = self.shared.0.lock();
            state.stop = true;
            self.shared.1.notify_all();
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for LeaseKeeper {
    fn drop(&mut self) {
        self.halt();
    }
}

pub(super) fn keep(
    config: Config,
    resource: &str,
    owner: &str,
    ttl: f64,
    period: Duration,
    shared: &(parking_lot::Mutex<KeeperState>, parking_lot::Condvar),
) {
    let (lock, wake) = shared;
    let mut lease = DistributedLock::native(config);
    let mut next = Instant::now() + period;
    loop {
        {
            let mut state = lock.lock();
            while !state.stop && Instant::now() < next {
                wake.wait_until(&mut state, next);
            }
            if state.stop {
                return;
            }
            if Instant::now() >= state.deadline {
                state.lost = Some("the local deadline passed without a successful renewal".into());
                return;
            }
        }
        match lease.renew(resource, owner, ttl) {
            Ok(Some(grant)) => {
                let mut state = lock.lock();
                state.deadline = grant.deadline;
                state.token = grant.token.or(state.token);
                next = Instant::now() + period;
            }
            Ok(None) => {
                lock.lock().lost = Some("a renewal was refused: the lease expired or another owner took it".into());
                return;
            }
            // The database is unreachable or the node is not ready: try again soon, until
            // the deadline says the lease can no longer be trusted.
            Err(_) => next = Instant::now() + (period / 4).max(Duration::from_millis(50)),
        }
    }
}
