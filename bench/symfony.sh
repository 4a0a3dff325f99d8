#!/usr/bin/env bash
# The Symfony Lock benchmark (issue 15): what a Symfony user sees first,
# LockFactory::createLock($r)->acquire(true) / release(), on MySqlLockStore (SharedLock
# mode and lease mode) and on Symfony's own PdoStore (its lock_keys table), all on one
# MariaDB started here (scripts/mariadb.sh, stopped on exit):
#   1. hand-off latency: the holder's release() returned -> the already blocked waiter's
#      acquire(true) returned (hrtime in both processes), stores alternating round by round
#   2. 4 processes contending on one resource: acquisitions/s, shares, fewest/most, the
#      longest single acquire(true), and overlaps counted from the workers' own journals
#      (with a self-test on a store that excludes nothing, which must show overlaps)
# Prints Markdown tables, the commands behind them and the total time. Uses the Debian
# php-symfony-lock (scripts/install-deps.sh).
#
#   bash bench/symfony.sh              # full: 3 rounds x 50 hand-offs per store, 10 s contention
#   bash bench/symfony.sh --quick      # 3 x 10 hand-offs, 3 s contention
#   bash bench/symfony.sh --no-build   # use target/release/libmysqllock_php.so as it is
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh

quick_and_build_options "$@"
if [ $quick = 1 ]; then
  rounds=3 per_round=10 contend_s=3 selftest_s=2
else
  rounds=3 per_round=50 contend_s=10 selftest_s=2
fi
procs=4 hold_us=20000

need_tools php mariadb /usr/sbin/mariadbd /usr/share/php/Symfony/Component/Lock/autoload.php
need_php_modules pdo_mysql

SECONDS=0
build_packages mysqllock-php
need_built libmysqllock_php.so

make_work symfony
# A copy, so that other builds during the run do not change what is measured.
so=$work/libmysqllock_php.so
cp target/release/libmysqllock_php.so "$so"
mkdir -p "$work/runs"

start_server
export MYSQLLOCK_BENCH_SO=$so MYSQLLOCK_BENCH_DSN=$dsn
bench() { php -d "extension=$so" -d "mysqllock.dsn=\"$product_dsn\"" bench/php/symfony_bench.php "$@"; }
bench setup

echo "# Symfony Lock benchmark: $(machine), $(server_version), PHP $(php -r 'echo PHP_VERSION;'), symfony/lock $(dpkg-query -W -f='${Version}' php-symfony-lock), $(commit_line core php-ext bridges/symfony), $(date -u +%F), $ssl_note"
echo
echo "## 1. Hand-off: holder's release() returned -> blocked waiter's acquire(true) returned ($rounds rounds x $per_round per store, holder holds $((hold_us / 1000)) ms + random 0-100 ms)"
echo
echo "\$ bench/php/symfony_bench.php handoff shared,lease,pdo $rounds $per_round $hold_us"
echo
echo "| store | median | p90 | hand-offs |"
echo "|---|---|---|---|"
bench handoff shared,lease,pdo "$rounds" "$per_round" "$hold_us" | bench table
echo
echo "## 2. $procs processes, one resource, ${contend_s} s each: acquire(true), release at once, again"
echo
echo "\$ bench/php/symfony_bench.php contend STORE $procs $contend_s DIR"
echo
echo "| store | acquisitions/s | shares | fewest / most | longest acquire(true) | overlaps |"
echo "|---|---|---|---|---|---|"
for store in shared lease pdo; do
  bench contend "$store" "$procs" "$contend_s" "$work/runs"
done
selftest=$(bench contend none "$procs" "$selftest_s" "$work/runs")
echo "$selftest"
require_overlaps "$selftest" "a store that excludes nothing"
echo
echo "total: $SECONDS s"
