#!/usr/bin/env bash
# The mixed chaos test (issue 34): processes still running the original package
# (its-mieger/mysql-shared-locks) and mysqllock's callers lock the same names on the
# original package's table (5 columns: no tokens, no holder pids), under the faults of
# 60-chaos, and mutual exclusion holds between all of them.
#
# Starts its own server of the test server's kind (the driver restarts and crashes it),
# creates the original table (`mysqllock init`), builds the C worker, and runs `chaos
# drive --table original` for CHAOS_SECONDS (default 40) with ten workers on two names:
# per name one `mysqllock run`, one SharedLock::lock() (the PHP extension on its native
# connection) and one mysqllock_acquire_ex() (C), keep-alive on one name and plain on the
# other, and two processes running the original package's protocol (tests/chaos/
# worker-original.php, a model of it for interop tests, in a PHP without the
# extension). On this table mysqllock releases a name it took before by letting go of
# its GET_LOCK and leaving the row (issue 34), which the original's cleanup and every
# other caller must read as free. The driver finds holders through their sessions'
# sockets (no holder_pid here), kills them (-9), stops them past their TTL, KILLs their
# sessions and their waiting GET_LOCKs, and restarts and crashes the server; at the end
# it locks every name once itself (--final-probe). `chaos check` then proves from the
# journals alone that no two sections of a name overlapped, that every fault kind landed
# at least CHAOS_MIN_FAULTS times, that every kind of caller (cli, php, c, original)
# completed sections — each at least CHAOS_KIND_FLOOR per second (none starved by the
# others) and at least the share CHAOS_OK_SHARE of its acquisitions (a lock that reports
# acquisitions it does not hold and learns so at release fails here, even with no
# overlap) — and that every name was acquired again within CHAOS_PROGRESS_WITHIN seconds
# of every fault (no wedged name). Without tokens, rule 2 (tokens increase) and
# the fenced guard are off (tests/src/bin/chaos/journal.rs says why); 60-chaos keeps them
# on the upgraded table. 61-chaos-selftest.sh shows this checker catching a broken
# original-package worker in such a run.
#
# Environment: MYSQLLOCK_ROOT, MYSQLLOCK_BIN (set by scripts/test.sh); optional
# CHAOS_SECONDS, CHAOS_SEED, CHAOS_RESTARTS (default 2), CHAOS_FLOOR (acquisitions per
# second, default 1), CHAOS_FAULT_GAP (default 1,3), CHAOS_MIN_FAULTS (default 2),
# CHAOS_PROGRESS_WITHIN (seconds, default 20), CHAOS_KIND_FLOOR (sections released ok per
# second and kind, default 0.1), CHAOS_OK_SHARE (default 0.5), CHAOS_KEEP=1 keeps the
# run's files.
set -uo pipefail
root=${MYSQLLOCK_ROOT:?MYSQLLOCK_ROOT is not set (the repository root)}
bin=${MYSQLLOCK_BIN:?MYSQLLOCK_BIN is not set (the target/release directory)}
cd "$root" || exit 1

seconds=${CHAOS_SECONDS:-40}
seed=${CHAOS_SEED:-$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')}
restarts=${CHAOS_RESTARTS:-2}
floor=${CHAOS_FLOOR:-1}
fault_gap=${CHAOS_FAULT_GAP:-1,3}
min_faults=${CHAOS_MIN_FAULTS:-2}
within=${CHAOS_PROGRESS_WITHIN:-20}
kind_floor=${CHAOS_KIND_FLOOR:-0.1}
ok_share=${CHAOS_OK_SHARE:-0.5}

fail() {
  echo "62-chaos-mixed: $*" >&2
  exit 1
}

# shellcheck source=tests/chaos/suite.sh
. tests/chaos/suite.sh
chaos_need gcc php mariadb mariadbd python3
so=$bin/libmysqllock_php.so
php -d "extension=$so" -r 'exit(class_exists("ItsMieger\\MySqlSharedLocks\\SharedLock") ? 0 : 1);' \
  || fail "PHP cannot load $so"
php -r 'exit(extension_loaded("pdo_mysql") ? 0 : 1);' || fail "PHP has no pdo_mysql (php8.2-mysql ships it)"
for script in worker.php worker-original.php original-model.php; do
  php -l "tests/chaos/$script" >/dev/null || fail "tests/chaos/$script does not parse"
done

work=$(mktemp -d /tmp/mysqllock-chaos-mixed.XXXXXX)
run=$work/run
finish() {
  local rc=$?
  touch "$run/stop" 2>/dev/null # any worker still looping ends its loop
  bash "$server_script" stop "$work/db" >/dev/null 2>&1
  if [ "$rc" = 0 ] && [ "${CHAOS_KEEP:-0}" != 1 ]; then
    rm -rf "$work"
  else
    echo "62-chaos-mixed: the run's files are kept in $work (journals: $run/journals, $run/driver.journal)"
  fi
}
trap finish EXIT

chaos_server "$work/db" original
worker_c=$work/chaos-worker-c
chaos_worker_c "$worker_c"

cli=(bash "$root/tests/chaos/worker-cli.sh" "$bin/mysqllock")
php=(php -d "extension=$so" "$root/tests/chaos/worker.php")
# Without the extension (the worker refuses to run where php.ini loads it).
original=(php "$root/tests/chaos/worker-original.php")
php -r 'exit(extension_loaded("mysqllock") ? 1 : 0);' || fail "php loads mysqllock without being asked (php.ini): the original's workers must run without it"
echo "62-chaos-mixed: seed $seed (CHAOS_SEED=$seed replays it), $seconds s of chaos on the original table, $restarts server restarts"
start=$SECONDS
"$bin/chaos" drive --dir "$run" --db-dir "$work/db" --mariadb-script "$server_script" --dsn "$dsn" \
  --table original --final-probe \
  --seconds "$seconds" --seed "$seed" --restarts "$restarts" --fault-gap "$fault_gap" --min-faults "$min_faults" \
  --worker "cli chaos-a keep-alive ${cli[*]}" \
  --worker "php chaos-a plain ${php[*]}" \
  --worker "c chaos-a keep-alive $worker_c" \
  --worker "original chaos-a plain ${original[*]}" \
  --worker "original chaos-a plain ${original[*]}" \
  --worker "cli chaos-b plain ${cli[*]}" \
  --worker "php chaos-b keep-alive ${php[*]}" \
  --worker "c chaos-b plain $worker_c" \
  --worker "original chaos-b plain ${original[*]}" \
  --worker "original chaos-b plain ${original[*]}" \
  || fail "the driver failed (see $run/driver.log)"

faults=(kill9 stop stop-group stop-mysqllock kill-session stop-any kill-query)
require=
for kind in "${faults[@]}"; do
  require+=${require:+,}$kind=$min_faults
done
restart_kinds=(restart crash)
for ((i = 0; i < restarts && i < 2; i++)); do
  require+=,${restart_kinds[i]}=1
  faults+=("${restart_kinds[i]}")
done
progress_after=$(IFS=,; echo "${faults[*]}")
"$bin/chaos" check --dir "$run" --seed "$seed" --kinds cli,php,c,original --floor "$floor" --require "$require" \
  --kind-floor "$kind_floor" --ok-share "$ok_share" --progress-after "$progress_after" --progress-within "$within"
verdict=$?
echo "62-chaos-mixed: $((SECONDS - start)) s for the run and the check"
if [ "$verdict" != 0 ]; then
  echo "62-chaos-mixed: FAILED (replay with CHAOS_SEED=$seed); last lines of each worker's log:"
  for log in "$run"/workers/*.log; do
    echo "--- $(basename "$log")"
    tail -5 "$log"
  done
  exit 1
fi
echo "62-chaos-mixed: mutual exclusion held under faults between the original package and mysqllock's CLI, PHP and C callers"
