#!/usr/bin/env bash
# The chaos checker's self-test (issue 13): a checker that never fails proves nothing,
# so this suite breaks the lock on purpose in each surface and requires `chaos check`
# to report two holders at once, naming the broken worker.
#
# For each surface (PHP extension, C library, CLI) and each way to break it, a short
# chaos round on a name of its own: the broken worker of that surface (MYSQLLOCK_BREAK,
# read by tests/chaos/worker.*) contends with a correct worker of each other surface.
#   exclusion    the broken worker never calls acquire and "holds" at once (no faults)
#   ignore-loss  the broken worker reports every release as OK and never reports a loss,
#                while the driver stops it past its TTL or kills its session (faults
#                aimed at it only), so others take the lock over in the meantime
# The three surfaces of one break run at once (three drivers on one server; each
# driver only ever signals its own workers). The suite fails if any round's checker
# stays green, reports no overlap involving the broken worker, or reports anything (a
# violation, a failure) that does not involve the broken worker: the correct workers
# must stay correct.
#
# Then one mixed round on the original package's table (no tokens: `chaos drive --table
# original`, as 62-chaos-mixed.sh runs): a worker running the original package's protocol
# (tests/chaos/worker-original.php) broken with MYSQLLOCK_BREAK=exclusion, against a
# correct one of its own kind and the PHP, C and CLI workers of mysqllock, judged the
# same way.
#
# Environment: MYSQLLOCK_ROOT, MYSQLLOCK_BIN (set by scripts/test.sh); optional
# SELFTEST_SECONDS (exclusion rounds, default 6; ignore-loss rounds twice that),
# CHAOS_KEEP=1 keeps the run's files.
set -uo pipefail
root=${MYSQLLOCK_ROOT:?MYSQLLOCK_ROOT is not set (the repository root)}
bin=${MYSQLLOCK_BIN:?MYSQLLOCK_BIN is not set (the target/release directory)}
cd "$root"
seconds=${SELFTEST_SECONDS:-6}

fail() {
  echo "61-chaos-selftest: $*" >&2
  exit 1
}

# shellcheck source=tests/chaos/suite.sh
. tests/chaos/suite.sh
chaos_need gcc php mariadb mariadbd python3

work=$(mktemp -d /tmp/mysqllock-selftest.XXXXXX)
finish() {
  local rc=$?
  bash "$server_script" stop "$work/db" >/dev/null 2>&1
  if [ "$rc" = 0 ] && [ "${CHAOS_KEEP:-0}" != 1 ]; then
    rm -rf "$work"
  else
    echo "61-chaos-selftest: the runs' files are kept in $work"
  fi
}
trap finish EXIT

chaos_server "$work/db"
worker_c=$work/chaos-worker-c
chaos_worker_c "$worker_c"

# The worker command of a surface, optionally broken: "KIND MODE PROGRAM ARGS...".
worker() {
  local kind=$1 broken=$2 env=()
  [ -n "$broken" ] && env=(env "MYSQLLOCK_BREAK=$broken")
  case $kind in
    cli) echo "cli plain ${env[*]} bash $root/tests/chaos/worker-cli.sh $bin/mysqllock" ;;
    php) echo "php plain ${env[*]} php -d extension=$bin/libmysqllock_php.so $root/tests/chaos/worker.php" ;;
    c) echo "c plain ${env[*]} $worker_c" ;;
    original) echo "original plain ${env[*]} php $root/tests/chaos/worker-original.php" ;;
  esac
}

surfaces=(php c cli)
start=$SECONDS
failures=0
for broken in exclusion ignore-loss; do
  if [ "$broken" = exclusion ]; then
    faults=(--faults none --seconds "$seconds")
  else
    faults=(--faults stop,stop-group,kill-session --fault-gap 0.5,1 --seconds $((seconds * 2)))
  fi
  pids=()
  for surface in "${surfaces[@]}"; do
    name=selftest-$surface-$broken
    specs=()
    read -r kind mode program <<<"$(worker "$surface" "$broken")"
    specs+=(--worker "$kind $name $mode $program")
    for other in "${surfaces[@]}"; do
      if [ "$other" != "$surface" ]; then
        read -r kind mode program <<<"$(worker "$other" "")"
        specs+=(--worker "$kind $name $mode $program")
      fi
    done
    "$bin/chaos" drive --dir "$work/$name" --db-dir "$work/db" --mariadb-script "$server_script" \
      --dsn "$dsn" --restarts 0 --seed "$RANDOM" --victims "$surface" "${faults[@]}" "${specs[@]}" \
      >"$work/$name.drive" 2>&1 &
    pids+=($!)
  done
  for i in "${!pids[@]}"; do
    wait "${pids[i]}" || fail "the driver of selftest-${surfaces[i]}-$broken failed: $(tail -3 "$work/selftest-${surfaces[i]}-$broken.drive")"
  done
  for surface in "${surfaces[@]}"; do
    name=selftest-$surface-$broken
    "$bin/chaos" check --dir "$work/$name" --floor 0 >"$work/$name.check" 2>&1
    verdict=$?
    # The broken worker is the first of its round: label SURFACE-1.
    caught=$(grep -E -m1 "VIOLATION: $name: two holders at once .*\b$surface-1 token" "$work/$name.check")
    stray=$(grep -E '^  (VIOLATION|FAILED):' "$work/$name.check" | grep -vE "\b$surface-1 token")
    if [ "$verdict" = 1 ] && [ -n "$caught" ] && [ -z "$stray" ]; then
      echo "61-chaos-selftest: $surface with MYSQLLOCK_BREAK=$broken caught:"
      echo "  ${caught#  }"
    else
      failures=$((failures + 1))
      echo "61-chaos-selftest: FAILED: $surface with MYSQLLOCK_BREAK=$broken was not caught alone (checker exit $verdict):"
      sed 's/^/    /' "$work/$name.check"
    fi
  done
done

# The mixed round on the original table: the broken original worker is the first (label
# original-1), a correct one the last.
chaos_table original
broken=exclusion name=selftest-original-$broken specs=()
for spec in "original $broken" "php" "c" "cli" "original"; do
  read -r surface breaking <<<"$spec"
  read -r kind mode program <<<"$(worker "$surface" "${breaking:-}")"
  specs+=(--worker "$kind $name $mode $program")
done
"$bin/chaos" drive --dir "$work/$name" --db-dir "$work/db" --mariadb-script "$server_script" \
  --dsn "$dsn" --table original --restarts 0 --seed "$RANDOM" --faults none --seconds "$seconds" "${specs[@]}" \
  >"$work/$name.drive" 2>&1 || fail "the driver of $name failed: $(tail -3 "$work/$name.drive")"
"$bin/chaos" check --dir "$work/$name" --floor 0 >"$work/$name.check" 2>&1
verdict=$?
caught=$(grep -E -m1 "VIOLATION: $name: two holders at once .*\boriginal-1 token" "$work/$name.check")
stray=$(grep -E '^  (VIOLATION|FAILED):' "$work/$name.check" | grep -vE "\boriginal-1 token")
if [ "$verdict" = 1 ] && [ -n "$caught" ] && [ -z "$stray" ] && grep -q 'rule 2 (tokens increase) is off' "$work/$name.check"; then
  echo "61-chaos-selftest: original (mixed, original table) with MYSQLLOCK_BREAK=$broken caught:"
  echo "  ${caught#  }"
else
  failures=$((failures + 1))
  echo "61-chaos-selftest: FAILED: original with MYSQLLOCK_BREAK=$broken was not caught alone (checker exit $verdict):"
  sed 's/^/    /' "$work/$name.check"
fi

echo "61-chaos-selftest: $((SECONDS - start)) s for $((${#surfaces[@]} * 2 + 1)) broken rounds"
[ "$failures" = 0 ] || fail "$failures broken rounds were not caught by the checker"
echo "61-chaos-selftest: the checker caught every broken surface"
