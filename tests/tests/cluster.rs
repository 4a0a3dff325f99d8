//! Locks on a real 3-node cluster, run by the cluster suites against each kind:
//! MariaDB Galera (scripts/galera.sh, tests/suites/70-galera.sh) and MySQL Group
//! Replication in single- and multi-primary mode (scripts/group-replication.sh,
//! tests/suites/72-group-replication.sh). GET_LOCK-based locks are refused on a node
//! and work where allowed, the lease mode excludes across nodes, decisive reads see the
//! other nodes' commits, and a node cut off from its cluster answers with a typed error,
//! never from a stale copy.
//!
//! Not part of `cargo test --workspace` (it needs the cluster): the suites run it with
//! `--test cluster` and the environment of tests/chaos/cluster.sh (`cluster_export`):
//! MYSQLLOCK_CLUSTER_KIND (galera, group-replication), MYSQLLOCK_CLUSTER_MODE (multi,
//! or single for a single-primary group), MYSQLLOCK_CLUSTER_SCRIPT,
//! MYSQLLOCK_CLUSTER_DIR and MYSQLLOCK_CLUSTER_DSN1..3.

#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

use std::process::Command;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use mysqllock_core::{Config, DistributedLock, Error, MysqlSession, NativeLocker, Session};
use mysqllock_tests::unique;

/// Tests that need every node read-lock this; the one that cuts a node off write-locks it,
/// so no other test meets an isolated node by surprise.
static CLUSTER: std::sync::RwLock<()> = std::sync::RwLock::new(());

fn whole_cluster() -> std::sync::RwLockReadGuard<'static, ()> {
    CLUSTER.read().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| {
        panic!("{name} is not set: run through tests/suites/70-galera.sh or 72-group-replication.sh")
    })
}

fn galera() -> bool {
    env("MYSQLLOCK_CLUSTER_KIND") == "galera"
}

/// A single-primary group: only its primary takes writes.
fn single_primary() -> bool {
    env("MYSQLLOCK_CLUSTER_MODE") == "single"
}

fn node_dsn(node: usize) -> String {
    env(&format!("MYSQLLOCK_CLUSTER_DSN{node}"))
}

fn config(node: usize, params: &str) -> Config {
    Config::from_url(&format!("{}?{params}", node_dsn(node))).unwrap()
}

fn lease(node: usize, table: &str) -> DistributedLock<Config> {
    DistributedLock::native(config(node, &format!("lease_table={table}")))
}

fn script(args: &[&str]) {
    let status = Command::new("bash")
        .arg(env("MYSQLLOCK_CLUSTER_SCRIPT"))
        .arg(args[0])
        .arg(env("MYSQLLOCK_CLUSTER_DIR"))
        .args(&args[1..])
        .status()
        .unwrap();
    assert!(status.success(), "{} {args:?} failed", env("MYSQLLOCK_CLUSTER_SCRIPT"));
}

/// The nodes that take writes now: all of them, but only the primary of a
/// single-primary group (which moves when its primary leaves), as the first node that
/// answers sees it.
fn writers() -> Vec<usize> {
    writers_seen_by(&[1, 2, 3])
}

/// [`writers`] as the first of `nodes` that answers sees them (a member cut off from its
/// group still takes itself for the primary until it gives up).
fn writers_seen_by(nodes: &[usize]) -> Vec<usize> {
    if !single_primary() {
        return vec![1, 2, 3];
    }
    const PRIMARY: &str = "SELECT MEMBER_PORT FROM performance_schema.replication_group_members \
                           WHERE MEMBER_ROLE = 'PRIMARY' AND MEMBER_STATE = 'ONLINE'";
    for &node in nodes {
        let Ok(mut s) = MysqlSession::connect(&config(node, "")) else { continue };
        let Ok(out) = s.execute(PRIMARY, &[]) else { continue };
        let ports: Vec<u64> = out.rows.iter().filter_map(|r| r.first()?.as_u64()).collect();
        let primary: Vec<usize> =
            (1..=3).filter(|&n| ports.iter().any(|p| node_dsn(n).contains(&format!(":{p}/")))).collect();
        assert_eq!(primary.len(), 1, "node {node} sees the primaries {primary:?} (ports {ports:?})");
        return primary;
    }
    panic!("no node of {nodes:?} tells which member is the primary");
}

/// What a write through a node that does not take writes must answer: a read-only
/// error that says why, never a grant nor a refusal that looks like contention.
fn assert_read_only(node: usize, result: Result<Option<mysqllock_core::Grant>, Error>) {
    match result {
        Err(e) if e.is_read_only() => {
            assert!(e.to_string().contains("secondary of a single-primary Group Replication group"), "{e}");
        }
        other => panic!("node {node} is a secondary: expected a read-only error, got {other:?}"),
    }
}

/// A node cut off from the cluster until dropped, so a failing test still rejoins it and
/// leaves the cluster whole for the others.
struct Isolated(String);

impl Isolated {
    fn node(node: usize) -> Isolated {
        let node = node.to_string();
        script(&["isolate", &node]);
        Isolated(node)
    }
}

impl Drop for Isolated {
    fn drop(&mut self) {
        script(&["rejoin", &self.0]);
    }
}

/// The lease table, created once through a writer (DDL replicates to every node).
fn table(name: &str, upgraded: bool) -> String {
    let mut lock = lease(writers()[0], name);
    lock.create_table().unwrap();
    if upgraded {
        lock.upgrade_table().unwrap();
    }
    name.to_owned()
}

#[test]
fn every_node_reports_itself_as_a_cluster_node() {
    let _cluster = whole_cluster();
    for node in 1..=3 {
        let s = MysqlSession::connect(&config(node, "")).unwrap();
        let topology = s.topology().unwrap();
        let kind = if galera() { topology.wsrep } else { topology.group_replication && topology.group_configured };
        assert!(kind && topology.is_cluster(), "node {node}: {topology:?}");
    }
}

#[test]
fn a_lease_of_the_shared_locks_protocol_is_refused_on_a_cluster_node() {
    let _cluster = whole_cluster();
    let mut locker = NativeLocker::from_config(config(1, ""));
    let err = locker.acquire(&unique("refused"), 0.0, 10.0).unwrap_err();
    assert!(err.is_cluster_node(), "{err}");
    let text = err.to_string();
    let kind = if galera() { "Galera" } else { "Group Replication" };
    assert!(text.contains(kind) && text.contains("lease mode") && text.contains("allow_cluster"), "{text}");
}

#[test]
fn a_session_lock_is_refused_on_a_cluster_node() {
    let _cluster = whole_cluster();
    let mut locker = NativeLocker::from_config(config(2, ""));
    let err = locker.lock_session(&unique("session"), 0.0).unwrap_err();
    assert!(err.is_cluster_node(), "{err}");
}

/// On Group Replication the table `init` makes there is InnoDB: the group refuses writes
/// to the original MyISAM table (3098).
#[test]
fn allowed_get_lock_locks_work_on_one_node() {
    let _cluster = whole_cluster();
    let node = writers()[0];
    let mut locker = NativeLocker::from_config(config(node, "allow_cluster=1&table=shared_locks_allowed"));
    locker.init_table().unwrap();
    let name = unique("allowed");
    locker.acquire(&name, 0.0, 10.0).unwrap();
    locker.release(&name).unwrap();
    locker.lock_session(&name, 0.0).unwrap();
    locker.unlock_session(&name).unwrap();
}

#[test]
fn a_lease_held_through_one_node_is_refused_through_the_others() {
    let _cluster = whole_cluster();
    let t = table("cluster_leases", false);
    let r = unique("across");
    let w = writers()[0];
    let mut lock: Vec<DistributedLock<Config>> = (1..=3).map(|node| lease(node, &t)).collect();
    assert!(lock[w - 1].acquire(&r, "owner-w", 30.0).unwrap().is_some());
    for node in (1..=3).filter(|&n| n != w) {
        let other = lock[node - 1].acquire(&r, &format!("owner-{node}"), 30.0);
        if single_primary() {
            assert_read_only(node, other);
        } else {
            assert!(other.unwrap().is_none(), "node {node} granted a lease node {w} holds");
        }
        assert!(lock[node - 1].is_held(&r).unwrap(), "node {node} reads node {w}'s commit");
        let holder = lock[node - 1].holder(&r).unwrap().unwrap();
        assert_eq!(holder.owner, "owner-w", "node {node}");
        assert_eq!(lock[node - 1].owner(&r).unwrap().as_deref(), Some("owner-w"), "node {node}");
        assert!(lock[node - 1].is_held_by(&r, "owner-w").unwrap(), "node {node}");
    }
    assert!(lock[w - 1].release(&r, "owner-w").unwrap());
    for node in 1..=3 {
        assert!(!lock[node - 1].is_held(&r).unwrap(), "node {node} reads the release at once");
        assert_eq!(lock[node - 1].owner(&r).unwrap(), None, "node {node} reads the release at once");
    }
    let next = *writers().last().unwrap();
    assert!(lock[next - 1].acquire(&r, "owner-next", 30.0).unwrap().is_some());
}

/// Galera settles the race by certification (1213), Group Replication in multi-primary
/// mode too (3101 at commit), and a single-primary group by refusing the secondaries'
/// writes: one winner per round, and no other error.
#[test]
fn simultaneous_acquisitions_from_three_nodes_have_exactly_one_winner() {
    let _cluster = whole_cluster();
    let t = table("cluster_leases", false);
    let rounds = 60;
    let writers = writers();
    let barrier = Arc::new(Barrier::new(3));
    let base = unique("race");
    let threads: Vec<_> = (1..=3)
        .map(|node| {
            let (t, barrier, base) = (t.clone(), barrier.clone(), base.clone());
            let writes = writers.contains(&node);
            std::thread::spawn(move || {
                // Never panic between barriers: the other threads would wait forever.
                let mut lock = lease(node, &t);
                let mut errors = Vec::new();
                if let Err(e) = lock.is_held("warm-up") {
                    errors.push(format!("node {node} warm-up: {e}"));
                }
                let mut won = Vec::new();
                for round in 0..rounds {
                    barrier.wait();
                    match lock.acquire(&format!("{base}-{round}"), &format!("owner-{node}"), 30.0) {
                        Ok(Some(_)) => won.push(round),
                        Ok(None) => {}
                        Err(e) if e.is_read_only() && !writes => {}
                        Err(e) => errors.push(format!("node {node} round {round}: {e}")),
                    }
                }
                (won, errors)
            })
        })
        .collect();
    let (won, errors): (Vec<Vec<usize>>, Vec<Vec<String>>) = threads.into_iter().map(|h| h.join().unwrap()).unzip();
    let errors: Vec<String> = errors.concat();
    assert!(errors.is_empty(), "{errors:?}");
    for round in 0..rounds {
        let winners = won.iter().filter(|w| w.contains(&round)).count();
        assert_eq!(winners, 1, "round {round} had {winners} winners");
    }
}

#[test]
fn tokens_strictly_increase_across_takeovers_through_different_nodes() {
    let _cluster = whole_cluster();
    let t = table("cluster_leases_fenced", true);
    let r = unique("tokens");
    let writers = writers();
    let mut last = 0;
    for round in 0..9 {
        let node = writers[round % writers.len()];
        let mut lock = lease(node, &t);
        let owner = format!("owner-{round}");
        // Through another node, the release may take a moment to be applied there.
        let grant = lock.acquire_waiting(&r, &owner, 30.0, 10.0).unwrap().expect("the previous owner released");
        let token = grant.token.unwrap();
        assert!(token > last, "round {round} on node {node}: token {token} after {last}");
        last = token;
        assert!(lock.release(&r, &owner).unwrap());
    }
}

/// Seconds: longer than the slowest rejoin plus the 60 s the test waits for it.
const OUTLIVES_A_REJOIN: f64 = 600.0;

/// A writer cut off (in a single-primary group: the primary, so the others elect a new
/// one): its writes and its decisive reads fail with a typed error (Galera: 1047 at once;
/// Group Replication: they wait for the majority the member cannot reach, then 3100 and
/// 3797, or 3796 once it has left its group), never a grant nor an answer from its stale
/// copy. The others go on; once back, it reads their writes.
#[test]
fn a_node_cut_off_from_the_cluster_answers_with_a_typed_error_and_rejoins() {
    let _alone = CLUSTER.write().unwrap_or_else(std::sync::PoisonError::into_inner);
    let t = table("cluster_leases", false);
    let r = unique("isolated");
    let victim = if single_primary() { writers()[0] } else { 3 };
    let mut cut = lease(victim, &t);
    assert!(!cut.is_held(&r).unwrap());
    let isolated = Isolated::node(victim);
    let write = cut.acquire(&r, "owner-cut", 30.0);
    let read = cut.is_held(&r);
    let owner = cut.owner(&r);
    // The others go on meanwhile (a single-primary group has elected a new primary).
    let others: Vec<usize> = (1..=3).filter(|&n| n != victim).collect();
    let other = *writers_seen_by(&others).iter().find(|&&n| n != victim).unwrap();
    let mut one = lease(other, &t);
    // Its TTL outlives the rejoin and the poll below: a member still in ERROR 30 s after
    // the cut ended is told to leave and join again (group-replication.sh), and a lease
    // that expired meanwhile would rightly read as free (it did once with 30 s).
    let taken = one.acquire(&r, "owner-other", OUTLIVES_A_REJOIN).unwrap();
    drop(isolated);
    match write {
        Err(e) => assert!(e.is_node_not_ready(), "write through the cut-off node {victim}: {e}"),
        Ok(got) => panic!("node {victim} answered a write while cut off: {got:?}"),
    }
    match read {
        Err(e) => assert!(e.is_node_not_ready(), "read through the cut-off node {victim}: {e}"),
        Ok(held) => panic!("node {victim} answered a decisive read while cut off: {held}"),
    }
    match owner {
        Err(e) => assert!(e.is_node_not_ready(), "owner read through the cut-off node {victim}: {e}"),
        Ok(owner) => panic!("node {victim} named an owner while cut off: {owner:?}"),
    }
    assert!(taken.is_some(), "node {other} could not take the lease while node {victim} was cut off");
    // Back in the cluster, the node reads the others' write and refuses to grant it.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let held = cut.is_held(&r);
        let again = if single_primary() { Ok(None) } else { cut.acquire(&r, "owner-cut", 30.0) };
        match (held, again) {
            (Ok(held), Ok(got)) => {
                assert!(held, "node {victim} after rejoining does not see node {other}'s lease");
                assert!(got.is_none(), "node {victim} granted a lease node {other} holds");
                break;
            }
            (Err(e), _) | (_, Err(e)) if (e.is_node_not_ready() || e.is_read_only()) && Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(100)); // poll interval while it catches up
            }
            (Err(e), _) | (_, Err(e)) => panic!("node {victim} after rejoining: {e}"),
        }
    }
    if single_primary() {
        // The suite's chaos run starts from member 1 as the primary.
        script(&["primary", "1"]);
    }
}
