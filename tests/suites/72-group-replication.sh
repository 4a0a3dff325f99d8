#!/usr/bin/env bash
# server: own (Group Replication groups of its own)
# The Group Replication proof (issue 21): on a real 3-member MySQL 9.7 group of its own
# (scripts/group-replication.sh), first single-primary, then multi-primary, the lease
# mode keeps mutual exclusion while members die and are cut off and holders are killed
# and frozen, and the GET_LOCK-based locks refuse a member unless allowed. Per mode:
#
#  1. starts the group (stopped before the next mode and on exit, whatever happens);
#  2. `cargo test --test cluster` (tests/tests/cluster.rs) against it: refusals, lease
#     exclusion across members, one winner among simultaneous acquisitions
#     (certification's 3101 in multi-primary mode, the secondaries' read-only refusal in
#     single-primary mode), decisive reads that see the others' commits, and a cut-off
#     member that answers with typed errors, never from its stale copy;
#  3. topology refusal on member 1: SharedLock::lock() throws SharedLockAcquireException
#     caused by ClusterNodeException naming Group Replication, and works with
#     mysqllock.allow_cluster=1; `mysqllock run` exits 80, and 0 with --allow-cluster;
#  4. the cluster chaos for CHAOS_GR_SECONDS (default 60): six workers (PHP, C and CLI,
#     two per member) take leases while the driver kills -9 and restarts member 1 and
#     isolates and rejoins member 2 (CHAOS_GR_NODE_FAULTS of each, default 1), kills -9
#     holders and SIGSTOPs holders past their TTL. In the single-primary group both hit
#     the primary: member 1 is the first, the member weights make member 2 the next one
#     and member 1 the one after it, so the kill forces a failover with a backlog and the
#     cut leaves a primary alone in its minority; the workers on secondaries meet
#     read-only refusals all along. `chaos check` must find no overlap, every fault
#     landed (worker kills and stops CHAOS_GR_MIN_FAULTS times, default 2), and progress
#     after each (after node-restart/node-rejoin: once every member is ONLINE again);
#  5. self-test: a ~15 s round on member 1 (made the primary again first) in which the
#     PHP worker skips the acquisition (MYSQLLOCK_BREAK=exclusion) must make the checker
#     report two holders at once, and nothing that does not involve the PHP worker.
#
# Steps 2-5 are tests/chaos/cluster.sh's, shared with 70-galera.sh. Needs root (the
# chroot of scripts/mysql.sh, iptables).
#
# Environment: MYSQLLOCK_ROOT, MYSQLLOCK_BIN; optional CHAOS_GR_MODES (default
# "single multi"), CHAOS_GR_SECONDS, CHAOS_GR_NODE_FAULTS, CHAOS_GR_MIN_FAULTS,
# CHAOS_SEED, CHAOS_KEEP=1 keeps files.
set -uo pipefail
root=${MYSQLLOCK_ROOT:?MYSQLLOCK_ROOT is not set (the repository root)}
bin=${MYSQLLOCK_BIN:?MYSQLLOCK_BIN is not set (the target/release directory)}
cd "$root"
modes=${CHAOS_GR_MODES:-single multi}
seconds=${CHAOS_GR_SECONDS:-60}
node_faults=${CHAOS_GR_NODE_FAULTS:-1}
min_faults=${CHAOS_GR_MIN_FAULTS:-2}
seed=${CHAOS_SEED:-$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')}
suite_start=$SECONDS
suite=72-group-replication
gr=$root/scripts/group-replication.sh

fail() {
  echo "$suite: FAILED: $*" >&2
  exit 1
}

# shellcheck source=tests/chaos/suite.sh
. tests/chaos/suite.sh
# shellcheck source=tests/chaos/cluster.sh
. tests/chaos/cluster.sh
chaos_need gcc php cargo python3
[ "$(id -u)" -eq 0 ] || fail "needs root: the MySQL chroot (scripts/mysql.sh) and iptables for the cut"
php -d "extension=$bin/libmysqllock_php.so" -r 'exit(class_exists("Nene\\Kit\\DistributedLock") ? 0 : 1);' \
  || fail "PHP cannot load $bin/libmysqllock_php.so, or it has no Nene\\Kit\\DistributedLock"

work=$(mktemp -d /tmp/mysqllock-gr.XXXXXX)
group=
finish() {
  local rc=$?
  touch "$work"/*/run/stop "$work"/*/selftest/stop 2>/dev/null
  [ -z "$group" ] || bash "$gr" stop "$group" >/dev/null 2>&1
  if [ "$rc" = 0 ] && [ "${CHAOS_KEEP:-0}" != 1 ]; then
    rm -rf "$work"
  else
    echo "$suite: files kept in $work"
  fi
  echo "$suite: suite wall time $((SECONDS - suite_start)) s"
}
trap finish EXIT

for mode in $modes; do
  mode_start=$SECONDS
  dir=$work/$mode
  mkdir -p "$dir"
  suite=72-group-replication[$mode]

  # 1. The group.
  group=$dir/group
  MYSQLLOCK_GR_MODE=$mode bash "$gr" start "$group" >"$dir/start.log" 2>&1 \
    || { tail -20 "$dir/start.log"; fail "the $mode-primary group did not start"; }
  set -a
  # shellcheck disable=SC1091
  . "$group/env"
  set +a
  echo "$suite: group up in $((SECONDS - mode_start)) s"

  # 2. The Rust cluster tests (they leave member 1 the primary of a single-primary group).
  cluster_export group-replication "$mode" "$gr" "$group" "$MYSQLLOCK_GR_DSN1" "$MYSQLLOCK_GR_DSN2" "$MYSQLLOCK_GR_DSN3"
  cluster_rust_tests "$dir/cargo-test.log"

  # 3. Topology refusal.
  cluster_refusals "$dir" "Group Replication"

  # 4. The cluster chaos, aimed at the primary (see the header).
  cluster_chaos_setup "$dir"
  if [ "$mode" = single ]; then
    # Only the primary's workers take leases: members 1 and 2 (the primaries in turn)
    # hold three of them each, on both resources, so two holders stopped at once
    # (as the driver may) leave one that can take over; member 3 keeps two to show
    # the secondaries' refusals.
    cluster_chaos "$dir" "gr-$mode" "$seconds" "$node_faults" "$min_faults" --kill-nodes 1 --isolate-nodes 2 -- \
      "php a node1" "cli a node1" "c b node1" "c a node2" "php b node2" "cli b node2" "cli a node3" "c b node3"
  else
    cluster_chaos "$dir" "gr-$mode" "$seconds" "$node_faults" "$min_faults" --kill-nodes 1 --isolate-nodes 2
  fi

  # 5. Self-test: a broken lock must be caught.
  if [ "$mode" = single ]; then
    bash "$gr" primary "$group" 1 >/dev/null || fail "member 1 could not be made the primary for the self-test"
  fi
  cluster_selftest "$dir" "gr-$mode" 1

  bash "$gr" stop "$group" >/dev/null 2>&1 || fail "the $mode-primary group did not stop"
  group=
  echo "$suite: lease mode held under group faults for PHP, C and CLI callers ($((SECONDS - mode_start)) s)"
done
