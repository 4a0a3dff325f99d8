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
# Implementations take turns round by round (the order rotating), so all see the same
# machine. The server and every client run on one CPU (taskset), see --no-pin.
#
#   bash bench/session.sh              # about 15 s after the build
#   bash bench/session.sh --quick      # fewer cycles and runs, about 5 s
#   bash bench/session.sh --no-build   # use target/release as it is
#   bash bench/session.sh --no-pin     # let the scheduler place server and clients
#   bash bench/session.sh --cpu N      # pin to CPU N instead of 0
#
# Exit status: 0 when every measurement ran (targets are reported, never asserted),
# non-zero when something failed to build, start or run, or was missing (an extension
# without \MySqlLock\SessionLock, a CLI without `run --session`: the rest still runs).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

quick=0
build=1
cpu=0
pin=1
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) quick=1 ;;
    --no-build) build=0 ;;
    --no-pin) pin=0 ;;
    --cpu) cpu=${2:?--cpu needs a CPU number}; shift ;;
    -h|--help) sed -n '2,25p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench/session.sh: unknown argument $1 (--quick, --no-build, --no-pin, --cpu N)" >&2; exit 2 ;;
  esac
  shift
done
# rounds x block = timed cycles per implementation; count = cycles for the statements.
if [ $quick = 1 ]; then
  rounds=200 block=10 warm=200 count=500 runs=30
else
  rounds=1000 block=10 warm=1000 count=2000 runs=100
fi

for tool in php mariadb mariadb-install-db /usr/sbin/mariadbd python3 gcc flock taskset; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "bench/session.sh: $tool is missing (bash scripts/install-deps.sh installs everything)" >&2
    exit 1
  fi
done
for module in pdo_mysql mysqli; do
  if ! php -m | grep -qx "$module"; then
    echo "bench/session.sh: PHP's $module is missing (apt-get install php8.2-mysql)" >&2
    exit 1
  fi
done

SECONDS=0
if [ $build = 1 ]; then
  echo "building (cargo build --release --locked -p mysqllock-ffi -p mysqllock-php -p mysqllock-cli) ..." >&2
  cargo build --release --locked -p mysqllock-ffi -p mysqllock-php -p mysqllock-cli >&2
fi
for built in libmysqllock.so libmysqllock_php.so mysqllock; do
  [ -f "target/release/$built" ] || { echo "bench/session.sh: target/release/$built is missing" >&2; exit 1; }
done

work=$(mktemp -d /tmp/mysqllock-session-bench.XXXXXX)
cleanup() {
  bash "$root/scripts/mariadb.sh" stop "$work/db" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
# Copies, so that other builds during the run do not change what is measured.
cp target/release/libmysqllock.so target/release/libmysqllock_php.so target/release/mysqllock "$work/"
so=$work/libmysqllock_php.so
gcc -std=c11 -O2 -Wall -Wextra -Wpedantic -Werror -Iinclude bench/c/session_cycles.c \
  -o "$work/session_cycles" -L"$work" -lmysqllock -Wl,-rpath,"$work"

if [ $pin = 1 ]; then
  pinned=(taskset -c "$cpu")
  placement="server and every client pinned to CPU $cpu (taskset -c $cpu)"
else
  pinned=()
  placement="not pinned (the scheduler places server threads and clients)"
fi
"${pinned[@]}" bash scripts/mariadb.sh start "$work/db" >&2
set -a
. "$work/db/env"
set +a
"$work/mysqllock" --dsn "$MYSQLLOCK_TEST_DSN" init >&2
export MYSQLLOCK_BENCH_DSN=$MYSQLLOCK_TEST_DSN
export MYSQLLOCK_BENCH_SOCKET=$MYSQLLOCK_TEST_SOCKET
export MYSQLLOCK_BENCH_VARS=Questions,Com_stmt_prepare
php_ext=("${pinned[@]}" php -d "extension=$so" -d "mysqllock.dsn=$MYSQLLOCK_TEST_DSN")

version=$(php -r 'require "bench/php/common.php"; echo MySqlLockBench\pdo()->query("SELECT VERSION()")->fetchColumn();')
machine="$(nproc) CPUs ($(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1)), MariaDB $version, PHP $(php -r 'echo PHP_VERSION;'), commit $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- core ffi php-ext cli || echo ' + uncommitted changes in core/ffi/php-ext/cli'), $(date -u +%F)"

# Each part writes table rows ("| ...") and notes; a part that could not run entirely
# leaves its message on stderr and a non-zero status, and the others still run.
status=0
part() {
  local out=$1 rc=0
  shift
  "${php_ext[@]}" "$@" >"$out" || rc=$?
  [ $rc = 0 ] || { echo "bench/session.sh: exit $rc from $1 ${2:-}" >&2; status=1; }
}
part "$work/a" bench/php/session_cycles.php "$rounds" "$block" "$warm" "$count" "$work/session_cycles"
part "$work/b" bench/php/session_startup.php "$runs" "$work/mysqllock" "$work/flock"
part "$work/c0" bench/php/session_lease.php capture "$work/captured.json"
part "$work/c" bench/php/session_lease.php time "$work/captured.json" "$rounds" "$block" "$warm" "$count"

rows() { grep '^|' "$1" || true; }
notes() { grep -v '^|' "$1" || true; }
echo "# session locks and the lease protocol's own floor: $machine; $placement"
echo
echo "| implementation | median | p90 | ratio (of medians; paired = median of per-round ratios) | statements | target |"
echo "|---|---|---|---|---|---|"
echo "| **A. session lock, uncontended lock + release, per cycle** | | | | | |"
rows "$work/a"
echo "| **B. start-up: one process that takes a session lock and exits, wall time** | | | | | |"
rows "$work/b"
echo "| **C. SharedLock protocol, uncontended lock + release, per cycle** | | | | | |"
rows "$work/c"
echo
cat "$work/c0"
notes "$work/a"
notes "$work/b"
notes "$work/c"
echo
echo "command: bash bench/session.sh$([ $quick = 1 ] && echo ' --quick')$([ $pin = 0 ] && echo ' --no-pin')$([ "$cpu" != 0 ] && echo " --cpu $cpu"); total $SECONDS s (build and server start included)"
exit $status
