#!/usr/bin/env bash
# The chaos test (issues 5 and 13): mutual exclusion holds under faults, with CLI, PHP
# and C callers contending for the same locks, judged by a checker that does not share
# the mechanism it checks.
#
# Starts its own MariaDB (the driver restarts and crashes it), creates an upgraded lock
# table, builds the C worker, and runs `chaos drive` for CHAOS_SECONDS (default 60):
# six workers (mysqllock run, SharedLock::lock, mysqllock_acquire_ex; with and without
# keep-alive) on two names, TTL 2 s, while the driver kills holders (-9), stops them past
# their TTL, KILLs their sessions and queries, and restarts and crashes the server. Each
# worker journals its own sections on the monotonic clock, the driver journals the
# faults that landed, and `chaos check` proves from those journals alone that no two
# sections of a name overlapped (including sections ended by a failed release, kill -9
# or SIGSTOP), that tokens increased, that every fault kind landed at least
# CHAOS_MIN_FAULTS times (the driver goes on, at most 30 s, with the kinds still short
# when the time is up), and that the run made progress (rules: tests/src/bin/chaos/
# check.rs; format: journal.rs). The holders also write to a fenced resource (`chaos
# guard`), as users would; the checker does not read it. Prints the seed; CHAOS_SEED=N
# replays the same fault schedule. 61-chaos-selftest.sh shows the checker failing on a
# deliberately broken lock.
#
# Environment: MYSQLLOCK_ROOT, MYSQLLOCK_BIN (set by scripts/test.sh); optional
# CHAOS_SECONDS, CHAOS_SEED, CHAOS_RESTARTS (default 2: one clean, one crash),
# CHAOS_FLOOR (acquisitions per second, default 1), CHAOS_FAULT_GAP (seconds between
# faults, default 1,3), CHAOS_MIN_FAULTS (default 2), CHAOS_KEEP=1 keeps the run's files.
set -uo pipefail
root=${MYSQLLOCK_ROOT:?MYSQLLOCK_ROOT is not set (the repository root)}
bin=${MYSQLLOCK_BIN:?MYSQLLOCK_BIN is not set (the target/release directory)}
cd "$root"

seconds=${CHAOS_SECONDS:-60}
seed=${CHAOS_SEED:-$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')}
restarts=${CHAOS_RESTARTS:-2}
floor=${CHAOS_FLOOR:-1}
fault_gap=${CHAOS_FAULT_GAP:-1,3}
min_faults=${CHAOS_MIN_FAULTS:-2}

fail() {
  echo "60-chaos: $*" >&2
  exit 1
}

# shellcheck source=tests/chaos/suite.sh
. tests/chaos/suite.sh
chaos_need gcc php mariadb mariadbd python3
so=$bin/libmysqllock_php.so
php -d "extension=$so" -r 'exit(method_exists("ItsMieger\\MySqlSharedLocks\\SharedLockHandle", "getToken") ? 0 : 1);' \
  || fail "PHP cannot load $so, or it has no SharedLockHandle::getToken()"
grep -q mysqllock_acquire_ex include/mysqllock.h || fail "include/mysqllock.h has no mysqllock_acquire_ex()"
"$bin/mysqllock" run --help | grep -q -- --keep-alive || fail "mysqllock run has no --keep-alive"
php -l tests/chaos/worker.php >/dev/null || fail "tests/chaos/worker.php does not parse"

work=$(mktemp -d /tmp/mysqllock-chaos.XXXXXX)
run=$work/run
finish() {
  local rc=$?
  touch "$run/stop" 2>/dev/null # any worker still looping ends its loop
  bash "$server_script" stop "$work/db" >/dev/null 2>&1
  if [ "$rc" = 0 ] && [ "${CHAOS_KEEP:-0}" != 1 ]; then
    rm -rf "$work"
  else
    echo "60-chaos: the run's files are kept in $work (journals: $run/journals, $run/driver.journal)"
  fi
}
trap finish EXIT

chaos_server "$work/db"
worker_c=$work/chaos-worker-c
chaos_worker_c "$worker_c"

cli=(bash "$root/tests/chaos/worker-cli.sh" "$bin/mysqllock")
php=(php -d "extension=$so" "$root/tests/chaos/worker.php")
echo "60-chaos: seed $seed (CHAOS_SEED=$seed replays it), $seconds s of chaos, $restarts server restarts"
start=$SECONDS
"$bin/chaos" drive --dir "$run" --db-dir "$work/db" --mariadb-script "$server_script" --dsn "$dsn" \
  --seconds "$seconds" --seed "$seed" --restarts "$restarts" --fault-gap "$fault_gap" --min-faults "$min_faults" \
  --worker "cli chaos-a keep-alive ${cli[*]}" \
  --worker "php chaos-a plain ${php[*]}" \
  --worker "c chaos-a keep-alive $worker_c" \
  --worker "cli chaos-b plain ${cli[*]}" \
  --worker "php chaos-b keep-alive ${php[*]}" \
  --worker "c chaos-b plain $worker_c" \
  || fail "the driver failed (see $run/driver.log)"

require=
for kind in kill9 stop stop-group stop-mysqllock kill-session stop-any kill-query; do
  require+=${require:+,}$kind=$min_faults
done
restart_kinds=(restart crash)
for ((i = 0; i < restarts && i < 2; i++)); do
  require+=,${restart_kinds[i]}=1
done
"$bin/chaos" check --dir "$run" --seed "$seed" --kinds cli,php,c --floor "$floor" --require "$require"
verdict=$?
echo "60-chaos: $((SECONDS - start)) s for the run and the check"
rejected=$(grep -c ' rejected$' "$run/guard.log" 2>/dev/null)
echo "60-chaos: the fenced resource rejected ${rejected:-0} stale writes (for information; not judged)"
if [ "$verdict" != 0 ]; then
  echo "60-chaos: FAILED (replay with CHAOS_SEED=$seed); last lines of each worker's log:"
  for log in "$run"/workers/*.log; do
    echo "--- $(basename "$log")"
    tail -5 "$log"
  done
  exit 1
fi
echo "60-chaos: mutual exclusion held under faults for CLI, PHP and C callers"
