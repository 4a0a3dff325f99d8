#!/usr/bin/env bash
# server: own (a Galera cluster of its own)
# The cluster proof (issue 12): on a real 3-node MariaDB Galera cluster of its own
# (scripts/galera.sh), the lease mode keeps mutual exclusion while nodes die and are cut
# off and holders are killed and frozen, and the GET_LOCK-based locks refuse a cluster
# node unless allowed.
#
#  1. starts the cluster (stopped on exit, whatever happens);
#  2. `cargo test --test galera` (tests/tests/galera.rs) against it;
#  3. topology refusal on node 1: SharedLock::lock() throws SharedLockAcquireException
#     caused by ClusterNodeException, and works with mysqllock.allow_cluster=1;
#     `mysqllock run` exits 80, and 0 with --allow-cluster;
#  4. the cluster chaos: `chaos drive --lease` for CHAOS_GALERA_SECONDS (default 90):
#     six workers (PHP DistributedLock, C mysqllock_lease_*, `mysqllock run --lease`,
#     two of each), two per node, on two resources, TTL 3 s, while the driver kills -9
#     and restarts nodes, isolates and rejoins nodes, kills -9 holders and SIGSTOPs
#     holders past their TTL (4-5 s). `chaos check` judges the journals alone: no two
#     sections of a resource overlap, tokens strictly increase, every fault kind landed
#     (at least CHAOS_GALERA_NODE_FAULTS node kills and isolations, default 2, and
#     CHAOS_GALERA_MIN_FAULTS kills and stops of workers, default 2), and some worker
#     acquired after each fault landed (after node-restart/node-rejoin: once every node
#     is Primary and Synced again);
#  5. self-test: a ~15 s round in which the PHP worker skips the acquisition
#     (MYSQLLOCK_BREAK=exclusion) must make the checker report two holders at once,
#     and nothing that does not involve the PHP worker.
#
# Environment: MYSQLLOCK_ROOT, MYSQLLOCK_BIN; optional CHAOS_GALERA_SECONDS,
# CHAOS_GALERA_NODE_FAULTS, CHAOS_GALERA_MIN_FAULTS, CHAOS_SEED, CHAOS_KEEP=1 keeps files.
set -uo pipefail
root=${MYSQLLOCK_ROOT:?MYSQLLOCK_ROOT is not set (the repository root)}
bin=${MYSQLLOCK_BIN:?MYSQLLOCK_BIN is not set (the target/release directory)}
cd "$root"
seconds=${CHAOS_GALERA_SECONDS:-90}
node_faults=${CHAOS_GALERA_NODE_FAULTS:-2}
min_faults=${CHAOS_GALERA_MIN_FAULTS:-2}
seed=${CHAOS_SEED:-$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')}
suite_start=$SECONDS

fail() {
  echo "70-galera: FAILED: $*" >&2
  exit 1
}

# shellcheck source=tests/chaos/suite.sh
. tests/chaos/suite.sh
chaos_need gcc php mariadb mariadbd cargo rsync
[ -e /usr/lib/galera/libgalera_smm.so ] || fail "galera-4 is not installed (scripts/install-deps.sh installs it)"
so=$bin/libmysqllock_php.so
php -d "extension=$so" -r 'exit(class_exists("Nene\\Kit\\DistributedLock") ? 0 : 1);' \
  || fail "PHP cannot load $so, or it has no Nene\\Kit\\DistributedLock"

work=$(mktemp -d /tmp/mysqllock-galera.XXXXXX)
chmod 755 "$work" # as root the nodes run as mysql, which must reach the cluster dir
finish() {
  local rc=$?
  touch "$work/run/stop" "$work/selftest/stop" 2>/dev/null
  bash scripts/galera.sh stop "$work/cluster" >/dev/null 2>&1
  if [ "$rc" = 0 ] && [ "${CHAOS_KEEP:-0}" != 1 ]; then
    rm -rf "$work"
  else
    echo "70-galera: files kept in $work"
  fi
  echo "70-galera: suite wall time $((SECONDS - suite_start)) s"
}
trap finish EXIT

# 1. The cluster.
bash scripts/galera.sh start "$work/cluster" >"$work/start.log" 2>&1 \
  || { tail -20 "$work/start.log"; fail "the Galera cluster did not start"; }
set -a
# shellcheck disable=SC1091
. "$work/cluster/env"
set +a
export MYSQLLOCK_ROOT=$root MYSQLLOCK_BIN=$bin
echo "70-galera: cluster up in $((SECONDS - suite_start)) s"

# 2. The Rust cluster tests.
# A deadline, so a test stuck on a wedged cluster fails the suite instead of CI's run.
timeout 600 cargo test --release --locked -p mysqllock-tests --test galera >"$work/cargo-test.log" 2>&1 \
  || { tail -30 "$work/cargo-test.log"; fail "cargo test --test galera failed or ran over 600 s"; }
grep -E '^test result' "$work/cargo-test.log" | sed 's/^/70-galera: galera.rs: /'

# 3. Topology refusal.
with_param() { case $1 in *\?*) echo "$1&$2" ;; *) echo "$1?$2" ;; esac; }
MYSQLLOCK_DSN=$(with_param "$MYSQLLOCK_GALERA_DSN1" allow_cluster=1) "$bin/mysqllock" init >/dev/null \
  || fail "mysqllock init (shared_locks) through allow_cluster=1 failed"
# shellcheck disable=SC2016 # PHP code
shared_lock='
use ItsMieger\MySqlSharedLocks\SharedLock;
$u = parse_url(getenv("DSN1"));
SharedLock::configureConnection($u["host"], ltrim($u["path"], "/"), urldecode($u["user"]),
    urldecode($u["pass"] ?? ""), "utf8mb4", $u["port"]);
try {
    $lock = SharedLock::lock("x", 0, 10);
} catch (\ItsMieger\MySqlSharedLocks\Exception\SharedLockAcquireException $e) {
    $p = $e->getPrevious();
    echo "threw ", get_class($e), " caused by ", $p === null ? "nothing" : get_class($p), "\n";
    exit($p instanceof \ItsMieger\MySqlSharedLocks\Exception\ClusterNodeException ? 10 : 11);
}
$lock->release();
echo "locked and released\n";
exit(0);'
out=$(DSN1=$MYSQLLOCK_GALERA_DSN1 php -d "extension=$so" -d "mysqllock.dsn=$MYSQLLOCK_GALERA_DSN1" -r "$shared_lock" 2>&1)
rc=$?
[ "$rc" = 10 ] || fail "SharedLock::lock() on a Galera node: expected ClusterNodeException inside SharedLockAcquireException, got exit $rc: $out"
echo "70-galera: SharedLock::lock() on node 1 refused: $out"
out=$(DSN1=$MYSQLLOCK_GALERA_DSN1 php -d "extension=$so" -d "mysqllock.dsn=$MYSQLLOCK_GALERA_DSN1" \
  -d mysqllock.allow_cluster=1 -r "$shared_lock" 2>&1)
rc=$?
[ "$rc" = 0 ] || fail "SharedLock::lock() with mysqllock.allow_cluster=1: exit $rc: $out"
echo "70-galera: with mysqllock.allow_cluster=1: $out"
MYSQLLOCK_DSN=$MYSQLLOCK_GALERA_DSN1 "$bin/mysqllock" run x -- true 2>"$work/run80.err"
rc=$?
[ "$rc" = 80 ] || fail "mysqllock run on a Galera node exited $rc, expected 80: $(cat "$work/run80.err")"
MYSQLLOCK_DSN=$MYSQLLOCK_GALERA_DSN1 "$bin/mysqllock" run --allow-cluster x -- true \
  || fail "mysqllock run --allow-cluster on a Galera node exited $?"
echo "70-galera: mysqllock run on node 1: exit 80 refused, 0 with --allow-cluster"

# 4. The cluster chaos.
MYSQLLOCK_DSN=$MYSQLLOCK_GALERA_DSN1 "$bin/mysqllock" init --lease --upgrade >/dev/null \
  || fail "mysqllock init --lease --upgrade failed"
worker_c=$work/chaos-worker-c
chaos_worker_c "$worker_c"
cli="bash $root/tests/chaos/worker-cli.sh $bin/mysqllock"
php_w="php -d extension=$so $root/tests/chaos/worker.php"
dsns=$MYSQLLOCK_GALERA_DSN1,$MYSQLLOCK_GALERA_DSN2,$MYSQLLOCK_GALERA_DSN3

drive() { # DIR SECONDS NODE_FAULTS FAULTS WORKER_SPEC...
  local dir=$1 secs=$2 nf=$3 faults=$4
  shift 4
  local specs=()
  for spec in "$@"; do specs+=(--worker "$spec"); done
  "$bin/chaos" drive --lease --dir "$dir" --db-dir "$work/cluster" --mariadb-script "$root/scripts/galera.sh" \
    --dsn "$MYSQLLOCK_GALERA_DSN1" --node-dsns "$dsns" --node-faults "$nf" --restarts 0 \
    --ttl 3 --stop-seconds 4,5 --fault-gap 1.5,3 --seconds "$secs" --seed "$seed" --faults "$faults" "${specs[@]}"
}

echo "70-galera: seed $seed (CHAOS_SEED=$seed replays the worker-fault schedule), $seconds s of cluster chaos"
chaos_start=$SECONDS
drive "$work/run" "$seconds" "$node_faults" kill9,stop,stop-group \
  "php galera-a node1 $php_w" "c galera-a node2 $worker_c" "cli galera-a node3 $cli" \
  "c galera-b node1 $worker_c" "cli galera-b node2 $cli" "php galera-b node3 $php_w" \
  >"$work/drive.log" 2>&1 || { cat "$work/drive.log"; fail "the driver failed (see $work/run/driver.log)"; }
require=node-kill=$node_faults,node-restart=$node_faults,node-isolate=$node_faults,node-rejoin=$node_faults
require+=,kill9=$min_faults,stop=$min_faults,stop-group=1
"$bin/chaos" check --dir "$work/run" --seed "$seed" --kinds cli,php,c --floor 1 --require "$require" \
  --progress-after node-kill,node-restart,node-isolate,node-rejoin,kill9,stop,stop-group | tee "$work/check.log"
verdict=${PIPESTATUS[0]}
echo "70-galera: cluster chaos: $((SECONDS - chaos_start)) s for the run and the check"
if [ "$verdict" != 0 ]; then
  for log in "$work"/run/workers/*.log; do
    echo "--- $(basename "$log")"
    tail -5 "$log"
  done
  CHAOS_KEEP=1
  fail "the cluster chaos check failed (replay with CHAOS_SEED=$seed)"
fi

# 5. Self-test: a broken lock must be caught.
drive "$work/selftest" 15 0 none \
  "php galera-s node1 env MYSQLLOCK_BREAK=exclusion $php_w" "c galera-s node2 $worker_c" "cli galera-s node3 $cli" \
  >"$work/selftest-drive.log" 2>&1 || { cat "$work/selftest-drive.log"; fail "the self-test driver failed"; }
"$bin/chaos" check --dir "$work/selftest" --floor 0 >"$work/selftest-check.log" 2>&1
verdict=$?
caught=$(grep -E -m1 'VIOLATION: galera-s: two holders at once .*\bphp-1 token' "$work/selftest-check.log")
stray=$(grep -E '^  (VIOLATION|FAILED):' "$work/selftest-check.log" | grep -vE '\bphp-1 token')
if [ "$verdict" != 1 ] || [ -z "$caught" ] || [ -n "$stray" ]; then
  cat "$work/selftest-check.log"
  fail "self-test: with MYSQLLOCK_BREAK=exclusion in the PHP worker the checker did not report php-1 alone as a second holder (exit $verdict)"
fi
echo "70-galera: self-test: MYSQLLOCK_BREAK=exclusion (PHP) caught:"
grep -E -A3 -m1 'VIOLATION: galera-s' "$work/selftest-check.log"
grep -E 'sections checked|violations:' "$work/selftest-check.log" | sed 's/^/70-galera: self-test: /'
echo "70-galera: lease mode held under cluster faults for PHP, C and CLI callers"
