#!/usr/bin/env bash
# The main job, end to end: three "nodes" run the same crontab line at the same moment,
#
#   mysqllock run monthly-invoices --timeout 0 --ttl 60 -- generate-invoices
#
# against one throwaway MariaDB, and exactly one of them generates the invoices.
# The others exit 75 ("held elsewhere") without running the job. Then the same with a
# PHP cron script written for the original package, run with extension=mysqllock.so.
#
# Exits 0 only if, both times, exactly one node ran the job and the other two skipped.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install-deps.sh
cargo build --release --locked -p mysqllock-cli -p mysqllock-php
bin=$PWD/target/release

work=$(mktemp -d /tmp/mysqllock-demo.XXXXXX)
cleanup() {
  bash scripts/mariadb.sh stop "$work/db" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
bash scripts/mariadb.sh start "$work/db"
set -a; . "$work/db/env"; set +a
mkdir "$work/bin"
export MYSQLLOCK_DSN=$MYSQLLOCK_TEST_DSN PATH="$bin:$work/bin:$PATH"

nodes=(node-a node-b node-c)

# The job being guarded: it knows nothing about locks. Two seconds of "work" is far
# longer than it takes the other nodes to start and be turned away.
cat >"$work/bin/generate-invoices" <<'JOB'
#!/bin/sh
echo "$NODE: generating invoices (lock $MYSQLLOCK_NAME, session $MYSQLLOCK_CONNECTION_ID)"
sleep 2
echo "$NODE: invoices done"
JOB
chmod +x "$work/bin/generate-invoices"

echo
echo "== mysqllock init"
mysqllock init

# Runs the crontab line as node $1; its output is prefixed with the node's name and
# kept in $work/$1.log, its exit code in $work/$1.rc.
run_node() {
  local node=$1
  {
    NODE=$node mysqllock run monthly-invoices --timeout 0 --ttl 60 -- generate-invoices \
      && echo 0 >"$work/$node.rc" || echo $? >"$work/$node.rc"
  } 2>&1 | sed -u "s/^/[$node] /" | tee "$work/$node.log"
}

# PHP path: the same scenario as a PHP cron script written for the original package
# (examples/generate-invoices.php), run by three PHP processes with the extension loaded
# instead of the Composer package. Exactly one generates; the others log and skip.
php_workers=0 php_skipped=0
php_path() {
  echo
  echo "== PHP: three nodes run examples/generate-invoices.php at once (extension=mysqllock.so)"
  local n pids=()
  for n in "${nodes[@]}"; do
    php -d extension="$bin/libmysqllock_php.so" examples/generate-invoices.php "$n" \
      >"$work/php-$n.log" 2>&1 &
    pids+=($!)
  done
  wait "${pids[@]}" || true
  for n in "${nodes[@]}"; do
    sed "s/^/[php $n] /" "$work/php-$n.log"
    if grep -q "generating invoices" "$work/php-$n.log"; then
      php_workers=$((php_workers + 1))
    elif grep -q "another node holds the lock" "$work/php-$n.log"; then
      php_skipped=$((php_skipped + 1))
    fi
  done
  echo "-- PHP: $php_workers node(s) generated, $php_skipped skipped"
}

echo
echo "== three nodes run the same crontab line at once"
pids=()
for n in "${nodes[@]}"; do
  run_node "$n" &
  pids+=($!)
done
sleep 0.5
echo "-- mysqllock status, while the job runs:"
mysqllock status
wait "${pids[@]}"

echo
echo "== summary"
workers=0 turned_away=0
for n in "${nodes[@]}"; do
  rc=$(cat "$work/$n.rc")
  case $rc in
    0)
      workers=$((workers + 1))
      echo "$n did the work (exit 0)"
      ;;
    75)
      turned_away=$((turned_away + 1))
      echo "$n did not run the job (exit 75): $(grep -o 'mysqllock: .*' "$work/$n.log")"
      ;;
    *)
      echo "$n failed (exit $rc): $(cat "$work/$n.log")"
      ;;
  esac
done
echo "-- mysqllock status, afterwards:"
mysqllock status

php_path

if [ "$workers" -eq 1 ] && [ "$turned_away" -eq 2 ] && [ "$php_workers" -eq 1 ] && [ "$php_skipped" -eq 2 ]; then
  echo "OK: exactly one node generated the invoices, through the CLI and through PHP"
else
  echo "FAILED: CLI $workers ran / $turned_away turned away, PHP $php_workers ran / $php_skipped skipped (expected 1 and 2 each)" >&2
  exit 1
fi
