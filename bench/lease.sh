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
. bench/lib.sh

quick_and_build_options "$@"
if [ $quick = 1 ]; then
  cycles=300 warm=50 galera_cycles=200 galera_warm=30 contend_s=5 selftest_s=2
else
  cycles=2000 warm=200 galera_cycles=2000 galera_warm=200 contend_s=10 selftest_s=3
fi
procs=4

need_tools php mariadb mariadb-install-db /usr/sbin/mariadbd python3
need_php_modules pdo_mysql

SECONDS=0
build_packages mysqllock-php
need_built libmysqllock_php.so

make_work lease
# As root the Galera nodes run as user mysql, which must reach DIR (see scripts/galera.sh).
chmod 755 "$work"
# A copy, so that other builds during the run do not change what is measured.
so=$work/libmysqllock_php.so
cp target/release/libmysqllock_php.so "$so"
mkdir -p "$work/runs"
export MYSQLLOCK_BENCH_SO=$so

# php with the extension on one server: MYSQLLOCK_BENCH_DSN=$1 for the floors, and
# mysqllock.dsn=$2 for the extension's own connection (with the ssl-mode of $ssl_note).
php_on() {
  local dsn=$1 product=$2
  shift 2
  MYSQLLOCK_BENCH_DSN=$dsn run php -d "extension=$so" -d "mysqllock.dsn=\"$product\"" "$@"
}

# ---- standalone ------------------------------------------------------------------------
start_server
echo "# lease mode benchmark: $(machine), $(server_version), PHP $(php -r 'echo PHP_VERSION;'), $(commit_line core php-ext), $(date -u +%F), $ssl_note"
echo
echo "## 1. Standalone MariaDB on 127.0.0.1: lease acquire + release (one connection per implementation; rounds rotate the order)"
echo
MYSQLLOCK_BENCH_DSN=$dsn php -d "extension=$so" bench/php/lease.php setup >&2
php_on "$dsn" "$product_dsn" bench/php/lease.php time "$cycles" "$warm" ext,pdo,floor,raw
echo
echo "## 2. Standalone MariaDB: $procs processes contending on one resource"
echo
php_on "$dsn" "$product_dsn" bench/php/lease_contend.php drive ext,floor "$procs" "$contend_s" "$work/runs"
echo
echo "Overlap checker self-test (a lock that excludes nothing must show overlaps):"
echo
selftest=$(php_on "$dsn" "$product_dsn" bench/php/lease_contend.php drive broken "$procs" "$selftest_s" "$work/runs")
echo "$selftest"
require_overlaps "$selftest" "a lock that excludes nothing"
bash "$server_script" stop "$work/db" >&2

# ---- Galera ----------------------------------------------------------------------------
echo
echo "## 3. 3-node Galera cluster on 127.0.0.1: lease acquire + release, every client on node 1 (each acquire and each release is a replicated commit)"
echo
bash scripts/galera.sh start "$work/galera" >&2
gdsn=$(sed -n 's/^MYSQLLOCK_GALERA_DSN1=//p' "$work/galera/env")
MYSQLLOCK_BENCH_DSN=$gdsn php -d "extension=$so" bench/php/lease.php setup >&2
php_on "$gdsn" "$gdsn" bench/php/lease.php time "$galera_cycles" "$galera_warm" ext,pdo,floor
bash scripts/galera.sh stop "$work/galera" >&2
rm -f "$work/galera/cluster"

echo
echo "total: $SECONDS s (build, servers and cluster included)"
