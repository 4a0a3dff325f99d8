#!/usr/bin/env bash
# The lease-mode benchmark (issue 12): Nene\Kit\DistributedLock against a hand-written
# floor (the very statements the lease protocol sends, through PDO) and raw GET_LOCK,
# measured in one run, on servers started here and stopped on exit:
#   1. standalone MariaDB (scripts/mariadb.sh): acquire + release per cycle, median/p90
#   2. standalone: 4 processes contending on one resource (acquisitions/s, fairness,
#      overlaps by an independent check on the monotonic clock)
#   3. a 3-node Galera cluster (scripts/galera.sh), all clients on node 1: acquire + release
# Prints Markdown tables, the commands that made them and the total time.
#
#   bash bench/lease.sh              # full: about a minute after the build
#   bash bench/lease.sh --quick      # fewer cycles, 5 s contention
#   bash bench/lease.sh --no-build   # use target/release/libmysqllock_php.so as it is
#
# Exit status: 0 when every measurement ran (targets are reported, never asserted),
# non-zero when something failed to build, start or run (including the overlap
# checker's self-test not seeing the overlaps of a deliberately broken lock).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

quick=0
build=1
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) quick=1 ;;
    --no-build) build=0 ;;
    -h|--help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench/lease.sh: unknown argument $1 (--quick, --no-build)" >&2; exit 2 ;;
  esac
  shift
done
if [ $quick = 1 ]; then
  cycles=300 warm=50 galera_cycles=200 galera_warm=30 contend_s=5 selftest_s=2
else
  cycles=2000 warm=200 galera_cycles=2000 galera_warm=200 contend_s=10 selftest_s=3
fi
procs=4

for tool in php mariadb mariadb-install-db /usr/sbin/mariadbd python3; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "bench/lease.sh: $tool is missing (bash scripts/install-deps.sh installs everything)" >&2
    exit 1
  fi
done
if ! php -m | grep -qx pdo_mysql; then
  echo "bench/lease.sh: PHP's pdo_mysql is missing (apt-get install php8.2-mysql)" >&2
  exit 1
fi

SECONDS=0
if [ $build = 1 ]; then
  echo "building (cargo build --release --locked -p mysqllock-php) ..." >&2
  cargo build --release --locked -p mysqllock-php >&2
fi
[ -f target/release/libmysqllock_php.so ] || { echo "bench/lease.sh: target/release/libmysqllock_php.so is missing" >&2; exit 1; }

work=$(mktemp -d /tmp/mysqllock-lease-bench.XXXXXX)
# As root the Galera nodes run as user mysql, which must reach DIR (see scripts/galera.sh).
chmod 755 "$work"
cleanup() {
  bash "$root/scripts/mariadb.sh" stop "$work/db" >/dev/null 2>&1 || true
  [ -f "$work/galera/cluster" ] && bash "$root/scripts/galera.sh" stop "$work/galera" >/dev/null 2>&1
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
# A copy, so that other builds during the run do not change what is measured.
so=$work/libmysqllock_php.so
cp target/release/libmysqllock_php.so "$so"
mkdir -p "$work/runs"
export MYSQLLOCK_BENCH_SO=$so

# Prints a command, then runs it.
run() {
  printf '$'
  printf ' %q' "$@"
  printf '\n\n'
  "$@"
}
# php with the extension, mysqllock.dsn and MYSQLLOCK_BENCH_DSN on one server ($1).
php_on() {
  local dsn=$1
  shift
  MYSQLLOCK_BENCH_DSN=$dsn run php -d "extension=$so" -d "mysqllock.dsn=$dsn" "$@"
}

# ---- standalone ------------------------------------------------------------------------
bash scripts/mariadb.sh start "$work/db" >&2
dsn=$(sed -n 's/^MYSQLLOCK_TEST_DSN=//p' "$work/db/env")
version=$(MYSQLLOCK_BENCH_DSN=$dsn php -r 'require "bench/php/common.php"; echo MySqlLockBench\pdo()->query("SELECT VERSION()")->fetchColumn();')
echo "# lease mode benchmark: $(nproc) CPUs ($(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1)), MariaDB $version, PHP $(php -r 'echo PHP_VERSION;'), commit $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- core php-ext || echo ' + uncommitted changes in core/php-ext'), $(date -u +%F)"
echo
echo "## 1. Standalone MariaDB on 127.0.0.1: lease acquire + release (one connection per implementation; rounds rotate the order)"
echo
MYSQLLOCK_BENCH_DSN=$dsn php -d "extension=$so" bench/php/lease.php setup >&2
php_on "$dsn" bench/php/lease.php time "$cycles" "$warm" ext,pdo,floor,raw
echo
echo "## 2. Standalone MariaDB: $procs processes contending on one resource"
echo
php_on "$dsn" bench/php/lease_contend.php drive ext,floor "$procs" "$contend_s" "$work/runs"
echo
echo "Overlap checker self-test (a lock that excludes nothing must show overlaps):"
echo
selftest=$(php_on "$dsn" bench/php/lease_contend.php drive broken "$procs" "$selftest_s" "$work/runs")
echo "$selftest"
overlaps=$(printf '%s\n' "$selftest" | tail -1 | awk -F'|' '{gsub(/ /, "", $(NF-1)); print $(NF-1)}')
if ! [ "${overlaps:-0}" -gt 0 ] 2>/dev/null; then
  echo "bench/lease.sh: the overlap checker saw no overlap of a lock that excludes nothing: its 0s above prove nothing" >&2
  exit 1
fi
bash scripts/mariadb.sh stop "$work/db" >&2

# ---- Galera ----------------------------------------------------------------------------
echo
echo "## 3. 3-node Galera cluster on 127.0.0.1: lease acquire + release, every client on node 1 (each acquire and each release is a replicated commit)"
echo
bash scripts/galera.sh start "$work/galera" >&2
gdsn=$(sed -n 's/^MYSQLLOCK_GALERA_DSN1=//p' "$work/galera/env")
MYSQLLOCK_BENCH_DSN=$gdsn php -d "extension=$so" bench/php/lease.php setup >&2
php_on "$gdsn" bench/php/lease.php time "$galera_cycles" "$galera_warm" ext,pdo,floor
bash scripts/galera.sh stop "$work/galera" >&2
rm -f "$work/galera/cluster"

echo
echo "total: $SECONDS s (build, servers and cluster included)"
