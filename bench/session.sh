#!/usr/bin/env bash
# The session-lock benchmark (issue 14), one table from one run, on a MariaDB started
# here (scripts/mariadb.sh, under a temp dir) and stopped on exit:
#   A. session locks (GET_LOCK only), uncontended lock + release per cycle: raw GET_LOCK /
#      RELEASE_LOCK through PDO and mysqli (the floors), \MySqlLock\SessionLock on the
#      extension's native connection, on a mysqli and on a PDO, and the C ABI
#      (bench/c/session_cycles.c); median, p90, ratio, statements per cycle (server count)
#   B. start-up: `mysqllock run NAME --session -- true` against `mariadb -e` with GET_LOCK
#      and RELEASE_LOCK, `flock FILE true` and `php -r` with PDO; wall time per process
#   C. the SharedLock protocol (SharedLock::lock + release) against its own floor, the
#      statements it sends captured from the server's general log and replayed through
#      PDO, and against raw GET_LOCK
# Implementations take turns round by round, so all see the same machine (cycles: the
# order rotating; start-ups (B): the order shuffled each round, as a rotation keeps each
# process behind the same neighbour). Everything runs twice, pinned with taskset:
# server and clients on CPU A (first columns: targets are judged there, where a round
# trip costs least and any overhead shows most), then clients on CPU A and the server
# on CPU B (every round trip wakes the other CPU; second columns). The product's
# connections (the extension's native one, the C ABI, the CLI) use ssl-mode=DISABLED,
# like the floors (MYSQLLOCK_BENCH_SSL_MODE, see bench/lib.sh).
#
#   bash bench/session.sh              # about 20 s after the build
#   bash bench/session.sh --quick      # fewer cycles and runs, about 6 s
#   bash bench/session.sh --no-build   # use target/release as it is
#   bash bench/session.sh --cpus A,B   # CPUs A and B (default 0,1); --cpus A: CPU A only
#
# Exit status: 0 when every measurement ran (targets are reported, never asserted),
# non-zero when something failed to build, start or run, or was missing (an extension
# without \MySqlLock\SessionLock, a CLI without `run --session`: the rest still runs).
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh

quick=0
build=1
cpus=0,1
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) quick=1 ;;
    --no-build) build=0 ;;
    --cpus) cpus=${2:?--cpus needs A,B or A}; shift ;;
    -h|--help) print_help; exit 0 ;;
    *) unknown_argument "$1" "--quick, --no-build, --cpus A,B" ;;
  esac
  shift
done
# rounds x block = timed cycles per implementation; count = cycles for the statements.
if [ $quick = 1 ]; then
  rounds=200 block=10 warm=200 count=500 runs=30
else
  rounds=1000 block=10 warm=1000 count=2000 runs=100
fi

need_tools php mariadb mariadb-install-db /usr/sbin/mariadbd python3 gcc flock taskset
need_php_modules pdo_mysql mysqli

SECONDS=0
build_packages mysqllock-ffi mysqllock-php mysqllock-cli
need_built libmysqllock.so libmysqllock_php.so mysqllock

make_work session
# Copies, so that other builds during the run do not change what is measured.
cp target/release/libmysqllock.so target/release/libmysqllock_php.so target/release/mysqllock "$work/"
so=$work/libmysqllock_php.so
gcc -std=c11 -O2 -Wall -Wextra -Wpedantic -Werror -Iinclude bench/c/session_cycles.c \
  -o "$work/session_cycles" -L"$work" -lmysqllock -Wl,-rpath,"$work"

set_placements "$cpus"
start_server "${pinned[@]}"
server_pid=$(cat "$work/db/mysqld.pid")
"$work/mysqllock" --dsn "$product_dsn" init >&2
# The floors take the server and login from it; the C ABI and the CLI the whole URL, the
# extension's SharedLock its ssl-mode (common.php's productTls()).
export MYSQLLOCK_BENCH_DSN=$product_dsn
export MYSQLLOCK_BENCH_SOCKET=$MYSQLLOCK_TEST_SOCKET
export MYSQLLOCK_BENCH_VARS=Questions,Com_stmt_prepare
# Quoted: an unquoted `=` in an ini value (the query's) is a syntax error.
php_ext=("${pinned[@]}" php -d "extension=$so" -d "mysqllock.dsn=\"$product_dsn\"")

machine="$(machine), $(server_version), PHP $(php -r 'echo PHP_VERSION;'), $(commit_line core ffi php-ext cli), $(date -u +%F), $ssl_note"

# Each part writes table rows ("| ...") and notes; a part that could not run entirely
# leaves its message on stderr and a non-zero status, and the others still run.
status=0
part() {
  local out=$1 rc=0
  shift
  "${php_ext[@]}" "$@" >"$out" || rc=$?
  [ $rc = 0 ] || { echo "$me: exit $rc from $1 ${2:-}" >&2; status=1; }
}
part "$work/captured" bench/php/session_lease.php capture "$work/captured.json"
for placement in "${placements[@]}"; do
  # The server's threads, present and future (new ones inherit from the thread that
  # creates them), on the placement's CPU.
  taskset -a -p -c "${server_cpu[$placement]}" "$server_pid" >/dev/null
  part "$work/a.$placement" bench/php/session_cycles.php "$rounds" "$block" "$warm" "$count" "$work/session_cycles"
  part "$work/b.$placement" bench/php/session_startup.php "$runs" "$work/mysqllock" "$work/flock"
  part "$work/c.$placement" bench/php/session_lease.php time "$work/captured.json" "$rounds" "$block" "$warm" "$count"
done

# The rows of a part: those of the first placement, with the median and the ratio of the
# second one (same label) as two more columns.
rows() {
  if [ ${#placements[@]} = 1 ]; then
    grep '^|' "$work/$1.${placements[0]}"
    return
  fi
  awk -F ' [|] ' '
    NR == FNR { median[$1] = $2; ratio[$1] = $4; next }
    /^[|]/ { print $1 " | " $2 " | " $3 " | " $4 " | " median[$1] " | " ratio[$1] " | " $5 " | " $6 }
  ' "$work/$1.${placements[1]}" "$work/$1.${placements[0]}"
}
notes() {
  local placement
  for placement in "${placements[@]}"; do
    { grep -v '^|' "$work/$1.$placement" || true; } | sed "s/^/[${placement_name[$placement]}] /"
  done
}
# A section's heading row, as wide as the table.
heading() {
  local cells=" | | | | | |"
  [ ${#placements[@]} = 1 ] || cells+=" | |"
  echo "| **$1**$cells"
}
echo "# session locks and the lease protocol's own floor: $machine"
echo
if [ ${#placements[@]} = 1 ]; then
  echo "Placement: ${placement_name[one]}. Ratios: of the medians, and paired (the median of the per-round ratios)."
  echo
  echo "| implementation | median | p90 | ratio | statements | target |"
  echo "|---|---|---|---|---|---|"
else
  echo "Placement: ${placement_name[one]}; the two columns after it: ${placement_name[two]}. Ratios: of the medians, and paired (the median of the per-round ratios)."
  echo
  echo "| implementation | median | p90 | ratio | server on CPU ${server_cpu[two]}: median | server on CPU ${server_cpu[two]}: ratio | statements | target |"
  echo "|---|---|---|---|---|---|---|---|"
fi
heading "A. session lock, uncontended lock + release, per cycle"
rows a
heading "B. start-up: one process that takes a session lock and exits, wall time"
rows b
heading "C. SharedLock protocol, uncontended lock + release, per cycle"
rows c
echo
cat "$work/captured"
notes a
notes b
notes c
echo
echo "command: bash bench/session.sh$([ $quick = 1 ] && echo ' --quick')$([ "$cpus" != 0,1 ] && echo " --cpus $cpus"); total $SECONDS s (build and server start included)"
exit $status
