# shellcheck shell=bash
# What the cluster suites (tests/suites/70-galera.sh, 72-group-replication.sh) share:
# the Rust cluster tests, the refusal of the GET_LOCK-based locks on a node, the lease
# chaos run with its check, and the checker's self-test. Sourced after
# tests/chaos/suite.sh, once root, bin, fail MESSAGE and suite (the name messages start
# with) are set and cluster_export has run.

# cluster_export KIND MODE SCRIPT DIR DSN1 DSN2 DSN3: the cluster under test, for these
# functions and for tests/tests/cluster.rs. KIND is galera or group-replication; MODE is
# multi (every node takes writes) or single (a single-primary group).
cluster_export() {
  export MYSQLLOCK_CLUSTER_KIND=$1 MYSQLLOCK_CLUSTER_MODE=$2 MYSQLLOCK_CLUSTER_SCRIPT=$3 MYSQLLOCK_CLUSTER_DIR=$4
  export MYSQLLOCK_CLUSTER_DSN1=$5 MYSQLLOCK_CLUSTER_DSN2=$6 MYSQLLOCK_CLUSTER_DSN3=$7
  export MYSQLLOCK_ROOT=$root MYSQLLOCK_BIN=$bin
}

# cluster_rust_tests LOG: `cargo test --test cluster` (tests/tests/cluster.rs) against it.
cluster_rust_tests() {
  # A deadline, so a test stuck on a wedged cluster fails the suite instead of CI's run.
  timeout 600 cargo test --release --locked -p mysqllock-tests --test cluster >"$1" 2>&1 \
    || { tail -30 "$1"; fail "cargo test --test cluster failed or ran over 600 s (log: $1)"; }
  grep -E '^test result' "$1" | sed "s/^/$suite: cluster.rs: /"
}

# cluster_refusals WORK WHAT: on node 1 (which must take writes), SharedLock::lock()
# throws SharedLockAcquireException caused by ClusterNodeException whose message names
# WHAT ("Galera", "Group Replication"), and locks with mysqllock.allow_cluster=1;
# `mysqllock run` exits 80 naming WHAT, and 0 with --allow-cluster.
cluster_refusals() {
  local work=$1 what=$2 so=$bin/libmysqllock_php.so out rc
  local dsn=$MYSQLLOCK_CLUSTER_DSN1 allowed
  case $dsn in *\?*) allowed="$dsn&allow_cluster=1" ;; *) allowed="$dsn?allow_cluster=1" ;; esac
  MYSQLLOCK_DSN=$allowed "$bin/mysqllock" init >/dev/null \
    || fail "mysqllock init (shared_locks) through allow_cluster=1 failed"
  # shellcheck disable=SC2016 # PHP code
  local shared_lock='
use ItsMieger\MySqlSharedLocks\SharedLock;
$u = parse_url(getenv("DSN1"));
SharedLock::configureConnection($u["host"], ltrim($u["path"], "/"), urldecode($u["user"]),
    urldecode($u["pass"] ?? ""), "utf8mb4", $u["port"]);
try {
    $lock = SharedLock::lock("x", 0, 10);
} catch (\ItsMieger\MySqlSharedLocks\Exception\SharedLockAcquireException $e) {
    $p = $e->getPrevious();
    echo "threw ", get_class($e), " caused by ", $p === null ? "nothing" : get_class($p), "\n";
    if ($p !== null && !str_contains($p->getMessage(), getenv("WHAT"))) {
        echo "but its message does not name ", getenv("WHAT"), ": ", $p->getMessage(), "\n";
        exit(12);
    }
    exit($p instanceof \ItsMieger\MySqlSharedLocks\Exception\ClusterNodeException ? 10 : 11);
}
$lock->release();
echo "locked and released\n";
exit(0);'
  out=$(DSN1=$dsn WHAT=$what php -d "extension=$so" -d "mysqllock.dsn=$dsn" -r "$shared_lock" 2>&1)
  rc=$?
  [ "$rc" = 10 ] || fail "SharedLock::lock() on a $what node: expected ClusterNodeException inside SharedLockAcquireException, got exit $rc: $out"
  echo "$suite: SharedLock::lock() on node 1 refused: $out"
  out=$(DSN1=$dsn WHAT=$what php -d "extension=$so" -d "mysqllock.dsn=$dsn" -d mysqllock.allow_cluster=1 \
    -r "$shared_lock" 2>&1)
  rc=$?
  [ "$rc" = 0 ] || fail "SharedLock::lock() with mysqllock.allow_cluster=1: exit $rc: $out"
  echo "$suite: with mysqllock.allow_cluster=1: $out"
  MYSQLLOCK_DSN=$dsn "$bin/mysqllock" run x -- true 2>"$work/run80.err"
  rc=$?
  [ "$rc" = 80 ] || fail "mysqllock run on a $what node exited $rc, expected 80: $(cat "$work/run80.err")"
  grep -q "$what" "$work/run80.err" || fail "mysqllock run's refusal does not name $what: $(cat "$work/run80.err")"
  MYSQLLOCK_DSN=$dsn "$bin/mysqllock" run --allow-cluster x -- true \
    || fail "mysqllock run --allow-cluster on a $what node exited $?"
  echo "$suite: mysqllock run on node 1: exit 80 refused (naming $what), 0 with --allow-cluster"
}

# The lease chaos. cluster_chaos_setup WORK: the upgraded lease table and the workers.
cluster_chaos_setup() {
  MYSQLLOCK_DSN=$MYSQLLOCK_CLUSTER_DSN1 "$bin/mysqllock" init --lease --upgrade >/dev/null \
    || fail "mysqllock init --lease --upgrade failed"
  worker_c=$1/chaos-worker-c
  chaos_worker_c "$worker_c"
  worker_cli="bash $root/tests/chaos/worker-cli.sh $bin/mysqllock"
  worker_php="php -d extension=$bin/libmysqllock_php.so $root/tests/chaos/worker.php"
}

# cluster_drive DIR SECONDS NODE_FAULTS FAULTS [--driver-option VALUE]... -- WORKER_SPEC...
cluster_drive() {
  local dir=$1 secs=$2 nf=$3 faults=$4 specs=() options=()
  shift 4
  while [ $# -gt 0 ] && [ "$1" != -- ]; do
    options+=("$1")
    shift
  done
  shift
  for spec in "$@"; do specs+=(--worker "$spec"); done
  "$bin/chaos" drive --lease --dir "$dir" --db-dir "$MYSQLLOCK_CLUSTER_DIR" \
    --cluster-script "$MYSQLLOCK_CLUSTER_SCRIPT" --dsn "$MYSQLLOCK_CLUSTER_DSN1" \
    --node-dsns "$MYSQLLOCK_CLUSTER_DSN1,$MYSQLLOCK_CLUSTER_DSN2,$MYSQLLOCK_CLUSTER_DSN3" \
    --node-faults "$nf" --restarts 0 --ttl 3 --stop-seconds 4,5 --fault-gap 1.5,3 --seconds "$secs" \
    --seed "$seed" --faults "$faults" ${options[@]+"${options[@]}"} "${specs[@]}"
}

# cluster_chaos WORK LABEL SECONDS NODE_FAULTS MIN_FAULTS [DRIVER_OPTION VALUE]...
# [-- WORKER_SPEC...]: PHP DistributedLock, C mysqllock_lease_* and `mysqllock run
# --lease` workers on LABEL-a and LABEL-b, TTL 3 s, for SECONDS, while the driver kills
# -9 and restarts nodes, isolates and rejoins nodes (NODE_FAULTS of each), kills -9
# holders and SIGSTOPs holders past their TTL (4-5 s). `chaos check` judges the journals
# alone: no two sections of a resource overlap, tokens strictly increase, every fault
# kind landed (node faults NODE_FAULTS times, worker kills and stops MIN_FAULTS times),
# and some worker acquired after each fault landed. The workers (specs as `chaos drive
# --worker` takes them, without the program, which the kind names) are by default six,
# two per node and two of each kind: node 1 PHP and CLI, node 2 C and PHP, node 3 CLI
# and C.
cluster_chaos() {
  local work=$1 label=$2 secs=$3 nf=$4 min=$5 verdict log require start=$SECONDS options=() specs=()
  shift 5
  while [ $# -gt 0 ] && [ "$1" != -- ]; do
    options+=("$1")
    shift
  done
  [ $# -eq 0 ] || shift
  [ $# -gt 0 ] || set -- "php a node1" "cli b node1" "c a node2" "php b node2" "cli a node3" "c b node3"
  local kind name node program
  for spec in "$@"; do
    read -r kind name node <<<"$spec"
    case $kind in php) program=$worker_php ;; c) program=$worker_c ;; cli) program=$worker_cli ;; esac
    specs+=("$kind $label-$name $node $program")
  done
  echo "$suite: seed $seed (CHAOS_SEED=$seed replays the worker-fault schedule), $secs s of cluster chaos"
  cluster_drive "$work/run" "$secs" "$nf" kill9,stop,stop-group ${options[@]+"${options[@]}"} -- "${specs[@]}" \
    >"$work/drive.log" 2>&1 || { cat "$work/drive.log"; fail "the driver failed (see $work/run/driver.log)"; }
  require=node-kill=$nf,node-restart=$nf,node-isolate=$nf,node-rejoin=$nf
  require+=,kill9=$min,stop=$min,stop-group=1
  "$bin/chaos" check --dir "$work/run" --seed "$seed" --kinds cli,php,c --floor 1 --require "$require" \
    --progress-after node-kill,node-restart,node-isolate,node-rejoin,kill9,stop,stop-group | tee "$work/check.log"
  verdict=${PIPESTATUS[0]}
  echo "$suite: cluster chaos: $((SECONDS - start)) s for the run and the check"
  if [ "$verdict" != 0 ]; then
    for log in "$work"/run/workers/*.log; do
      echo "--- $(basename "$log")"
      tail -5 "$log"
    done
    CHAOS_KEEP=1
    fail "the cluster chaos check failed (replay with CHAOS_SEED=$seed)"
  fi
}

# cluster_selftest WORK LABEL NODE: a ~15 s round on NODE (one that takes writes) in
# which the PHP worker skips the acquisition (MYSQLLOCK_BREAK=exclusion) beside a C and
# a CLI worker: the checker must report two holders at once, and nothing that does not
# involve the PHP worker.
cluster_selftest() {
  local work=$1 label=$2 node=$3 verdict caught stray
  cluster_drive "$work/selftest" 15 0 none -- \
    "php $label-s node$node env MYSQLLOCK_BREAK=exclusion $worker_php" \
    "c $label-s node$node $worker_c" "cli $label-s node$node $worker_cli" \
    >"$work/selftest-drive.log" 2>&1 || { cat "$work/selftest-drive.log"; fail "the self-test driver failed"; }
  "$bin/chaos" check --dir "$work/selftest" --floor 0 >"$work/selftest-check.log" 2>&1
  verdict=$?
  caught=$(grep -E -m1 "VIOLATION: $label-s: two holders at once .*\\bphp-1 token" "$work/selftest-check.log")
  stray=$(grep -E '^  (VIOLATION|FAILED):' "$work/selftest-check.log" | grep -vE '\bphp-1 token')
  if [ "$verdict" != 1 ] || [ -z "$caught" ] || [ -n "$stray" ]; then
    cat "$work/selftest-check.log"
    fail "self-test: with MYSQLLOCK_BREAK=exclusion in the PHP worker the checker did not report php-1 alone as a second holder (exit $verdict)"
  fi
  echo "$suite: self-test: MYSQLLOCK_BREAK=exclusion (PHP) caught:"
  grep -E -A3 -m1 "VIOLATION: $label-s" "$work/selftest-check.log"
  grep -E 'sections checked|violations:' "$work/selftest-check.log" | sed "s/^/$suite: self-test: /"
}
