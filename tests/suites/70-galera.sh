#!/usr/bin/env bash
# server: own (a Galera cluster of its own)
# The cluster proof (issue 12): on a real 3-node MariaDB Galera cluster of its own
# (scripts/galera.sh), the lease mode keeps mutual exclusion while nodes die and are cut
# off and holders are killed and frozen, and the GET_LOCK-based locks refuse a cluster
# node unless allowed.
#
#  1. starts the cluster (stopped on exit, whatever happens);
#  2. `cargo test --test cluster` (tests/tests/cluster.rs) against it;
#  3. topology refusal on node 1: SharedLock::lock() throws SharedLockAcquireException
#     caused by ClusterNodeException, and works with mysqllock.allow_cluster=1;
#     `mysqllock run` exits 80, and 0 with --allow-cluster;
#  4. the cluster chaos for CHAOS_GALERA_SECONDS (default 90): six workers (PHP, C and
#     CLI, two per node) take leases while the driver kills -9 and restarts nodes
#     (2, 3, ...), isolates and rejoins nodes (3, 1, ...), kills -9 holders and SIGSTOPs
#     holders past their TTL; `chaos check` must find no overlap, every fault landed (at
#     least CHAOS_GALERA_NODE_FAULTS node kills and isolations, default 2, and
#     CHAOS_GALERA_MIN_FAULTS kills and stops of workers, default 2), and progress after
#     each (after node-restart/node-rejoin: once every node is Primary and Synced again);
#  5. self-test: a ~15 s round in which the PHP worker skips the acquisition
#     (MYSQLLOCK_BREAK=exclusion) must make the checker report two holders at once,
#     and nothing that does not involve the PHP worker.
#
# Steps 2-5 are tests/chaos/cluster.sh's, shared with 72-group-replication.sh.
#
# The argument is the MariaDB the nodes run, which the first line of output names (node 1's
# VERSION() and galera-4's version):
#   mariadb    (the default) Debian 12's 10.11 and galera-4 on the host, scripts/galera.sh
#   mariadb11  sid's 11.8 LTS and galera-4 in the chroot of scripts/sid.sh,
#              scripts/galera11.sh (71-galera-11.8.sh runs this; needs root)
#
# Environment: MYSQLLOCK_ROOT, MYSQLLOCK_BIN; optional CHAOS_GALERA_SECONDS,
# CHAOS_GALERA_NODE_FAULTS, CHAOS_GALERA_MIN_FAULTS, CHAOS_SEED, CHAOS_KEEP=1 keeps files.
set -uo pipefail
cell=${1:-mariadb}
case $cell in
  mariadb) suite=70-galera galera=scripts/galera.sh ;;
  mariadb11) suite=71-galera-11.8 galera=scripts/galera11.sh ;;
  *)
    echo "70-galera: $1: the servers are mariadb (10.11, the default) and mariadb11 (11.8)" >&2
    exit 2
    ;;
esac
root=${MYSQLLOCK_ROOT:?MYSQLLOCK_ROOT is not set (the repository root)}
bin=${MYSQLLOCK_BIN:?MYSQLLOCK_BIN is not set (the target/release directory)}
cd "$root"
seconds=${CHAOS_GALERA_SECONDS:-90}
node_faults=${CHAOS_GALERA_NODE_FAULTS:-2}
min_faults=${CHAOS_GALERA_MIN_FAULTS:-2}
seed=${CHAOS_SEED:-$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')}
suite_start=$SECONDS

fail() {
  echo "$suite: FAILED: $*" >&2
  exit 1
}

# shellcheck source=tests/chaos/suite.sh
. tests/chaos/suite.sh
# shellcheck source=tests/chaos/cluster.sh
. tests/chaos/cluster.sh
if [ "$cell" = mariadb ]; then
  chaos_need gcc php mariadb mariadbd cargo rsync
  [ -e /usr/lib/galera/libgalera_smm.so ] || fail "galera-4 is not installed (scripts/install-deps.sh installs it)"
else
  # The servers, galera-4 and rsync are in the chroot, which galera11.sh checks.
  chaos_need gcc php cargo python3
  [ "$(id -u)" -eq 0 ] || fail "needs root: the nodes run in the chroot of scripts/sid.sh"
fi
so=$bin/libmysqllock_php.so
php -d "extension=$so" -r 'exit(class_exists("Nene\\Kit\\DistributedLock") ? 0 : 1);' \
  || fail "PHP cannot load $so, or it has no Nene\\Kit\\DistributedLock"

work=$(mktemp -d /tmp/mysqllock-galera.XXXXXX)
chmod 755 "$work" # as root the nodes run as mysql, which must reach the cluster dir
finish() {
  local rc=$?
  touch "$work/run/stop" "$work/selftest/stop" 2>/dev/null
  bash "$galera" stop "$work/cluster" >/dev/null 2>&1
  if [ "$rc" = 0 ] && [ "${CHAOS_KEEP:-0}" != 1 ]; then
    rm -rf "$work"
  else
    echo "$suite: files kept in $work"
  fi
  echo "$suite: suite wall time $((SECONDS - suite_start)) s"
}
trap finish EXIT

# 1. The cluster.
bash "$galera" start "$work/cluster" >"$work/start.log" 2>&1 \
  || { tail -20 "$work/start.log"; fail "the Galera cluster did not start"; }
set -a
# shellcheck disable=SC1091
. "$work/cluster/env"
set +a
export MYSQLLOCK_ROOT=$root MYSQLLOCK_BIN=$bin
echo "$suite: cluster of $MYSQLLOCK_GALERA_VERSION ($galera) up in $((SECONDS - suite_start)) s"

# 2. The Rust cluster tests.
cluster_export galera multi "$root/$galera" "$work/cluster" \
  "$MYSQLLOCK_GALERA_DSN1" "$MYSQLLOCK_GALERA_DSN2" "$MYSQLLOCK_GALERA_DSN3"
cluster_rust_tests "$work/cargo-test.log"

# 3. Topology refusal.
cluster_refusals "$work" Galera

# 4. The cluster chaos.
cluster_chaos_setup "$work"
cluster_chaos "$work" galera "$seconds" "$node_faults" "$min_faults"

# 5. Self-test: a broken lock must be caught.
cluster_selftest "$work" galera 1
echo "$suite: lease mode held under cluster faults for PHP, C and CLI callers"
