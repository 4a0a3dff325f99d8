//! Locks on a real 3-node MariaDB Galera cluster (scripts/galera.sh), run by
//! tests/suites/70-galera.sh: GET_LOCK-based locks are refused on a node, the lease mode
//! excludes across nodes, and a node cut off from the cluster answers with a typed error.
//!
//! Not part of `cargo test --workspace` (it needs the cluster): the suite runs it with
//! `--test galera` and MYSQLLOCK_GALERA_DIR set.

#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

use std::process::Command;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use mysqllock_core::{Config, DistributedLock, MysqlSession, NativeLocker, Session};
use mysqllock_tests::unique;

/// Tests that need every node read-lock this; the one that cuts a node off write-locks it,
/// so no other test meets an isolated node by surprise.
static CLUSTER: std::sync::RwLock<()> = std::sync::RwLock::new(());

fn whole_cluster() -> std::sync::RwLockReadGuard<'static, ()> {
    CLUSTER.read().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| {
        panic!("{name} is not set: run through tests/suites/70-galera.sh, or export scripts/galera.sh's DIR/env")
    })
}

fn node_dsn(node: usize) -> String {
    env(&format!("MYSQLLOCK_GALERA_DSN{node}"))
}

fn config(node: usize, params: &str) -> Config {
    Config::from_url(&format!("{}?{params}", node_dsn(node))).unwrap()
}

fn lease(node: usize, table: &str) -> DistributedLock<Config> {
    DistributedLock::native(config(node, &format!("lease_table={table}")))
}

fn galera(args: &[&str]) {
    let root = env("MYSQLLOCK_ROOT");
    let status = Command::new("bash")
        .arg(format!("{root}/scripts/galera.sh"))
        .arg(args[0])
        .arg(env("MYSQLLOCK_GALERA_DIR"))
        .args(&args[1..])
        .status()
        .unwrap();
    assert!(status.success(), "galera.sh {args:?} failed");
}

/// A node cut off from the cluster until dropped, so a failing test still rejoins it and
/// leaves the cluster whole for the others.
struct Isolated(&'static str);

impl Isolated {
    fn node(node: u8) -> Isolated {
        let node = ["1", "2", "3"][usize::from(node - 1)];
        galera(&["isolate", node]);
        Isolated(node)
    }
}

impl Drop for Isolated {
    fn drop(&mut self) {
        galera(&["rejoin", self.0]);
    }
}

/// The lease table, created once through node 1 (DDL replicates to every node).
fn table(name: &str, upgraded: bool) -> String {
    let mut lock = lease(1, name);
    lock.create_table().unwrap();
    if upgraded {
        lock.upgrade_table().unwrap();
    }
    name.to_owned()
}

#[test]
fn every_node_reports_itself_as_a_galera_node() {
    let _cluster = whole_cluster();
    for node in 1..=3 {
        let s = MysqlSession::connect(&config(node, "")).unwrap();
        let topology = s.topology().unwrap();
        assert!(topology.wsrep && topology.is_cluster(), "node {node}: {topology:?}");
    }
}

#[test]
fn a_lease_of_the_shared_locks_protocol_is_refused_on_a_galera_node() {
    let _cluster = whole_cluster();
    let mut locker = NativeLocker::from_config(config(1, ""));
    let err = locker.acquire(&unique("refused"), 0.0, 10.0).unwrap_err();
    assert!(err.is_cluster_node(), "{err}");
    let text = err.to_string();
    assert!(text.contains("Galera") && text.contains("lease mode") && text.contains("allow_cluster"), "{text}");
}

#[test]
fn a_session_lock_is_refused_on_a_galera_node() {
    let _cluster = whole_cluster();
    let mut locker = NativeLocker::from_config(config(2, ""));
    let err = locker.lock_session(&unique("session"), 0.0).unwrap_err();
    assert!(err.is_cluster_node(), "{err}");
}

#[test]
fn allowed_get_lock_locks_work_on_one_node() {
    let _cluster = whole_cluster();
    let mut locker = NativeLocker::from_config(config(1, "allow_cluster=1&table=shared_locks_allowed"));
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
    let t = table("galera_leases", false);
    let r = unique("across");
    let (mut one, mut two, mut three) = (lease(1, &t), lease(2, &t), lease(3, &t));
    assert!(one.acquire(&r, "owner-1", 30.0).unwrap().is_some());
    assert!(two.acquire(&r, "owner-2", 30.0).unwrap().is_none());
    assert!(three.is_held(&r).unwrap(), "node 3 reads node 1's commit (wsrep_sync_wait)");
    assert!(!three.release(&r, "owner-3").unwrap());
    assert!(one.release(&r, "owner-1").unwrap());
    assert!(!three.is_held(&r).unwrap(), "node 3 reads the release at once");
    assert!(two.acquire(&r, "owner-2", 30.0).unwrap().is_some());
}

#[test]
fn simultaneous_acquisitions_from_three_nodes_have_exactly_one_winner() {
    let _cluster = whole_cluster();
    let t = table("galera_leases", false);
    let rounds = 60;
    let barrier = Arc::new(Barrier::new(3));
    let base = unique("race");
    let threads: Vec<_> = (1..=3)
        .map(|node| {
            let (t, barrier, base) = (t.clone(), barrier.clone(), base.clone());
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
    let t = table("galera_leases_fenced", true);
    let r = unique("tokens");
    let mut last = 0;
    for round in 0..9 {
        let node = round % 3 + 1;
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

#[test]
fn a_node_cut_off_from_the_cluster_answers_with_a_typed_error_and_rejoins() {
    let _alone = CLUSTER.write().unwrap_or_else(std::sync::PoisonError::into_inner);
    let t = table("galera_leases", false);
    let r = unique("isolated");
    let mut three = lease(3, &t);
    assert!(!three.is_held(&r).unwrap());
    let isolated = Isolated::node(3);
    let err = three.acquire(&r, "owner-3", 30.0).unwrap_err();
    drop(isolated);
    assert!(err.is_node_not_ready(), "{err}");
    // The other nodes went on; the rejoined node sees their writes and works again.
    let mut one = lease(1, &t);
    assert!(one.acquire(&r, "owner-1", 30.0).unwrap().is_some());
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match three.acquire(&r, "owner-3", 30.0) {
            Ok(got) => {
                assert!(got.is_none(), "node 3 granted a lease node 1 holds");
                break;
            }
            Err(e) if e.is_node_not_ready() && Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(100)); // poll interval while it syncs
            }
            Err(e) => panic!("node 3 after rejoin: {e}"),
        }
    }
}
