#!/usr/bin/env bash
# The Laravel benchmark (issue 15): Cache::lock()->block() on the mysqllock driver
# (bridges/laravel, lease mode on the extension's own connection) against Laravel's own
# DatabaseLock (the `database` cache store's cache_locks table), on one MariaDB started
# here and stopped on exit, with Debian's Laravel 8.83:
#   1. hand-off latency: a holder releases, a waiter blocked in block() returns
#      (median/p90 over HANDOFFS x 3 rounds, implementations taking turns)
#   2. 4 processes contending on one name for 10 s each, in 5 turns of 2 s that rotate
#      between the implementations so that all see the same load from other work on the
#      machine (acquisitions/s, fairness, the longest a process went without, overlaps by an
#      independent check on the monotonic clock, which must see the overlaps of a
#      deliberately broken lock)
#
#   bash bench/laravel.sh              # full: about 3 minutes after the build
#   bash bench/laravel.sh --quick      # 20 hand-offs x 1 round, 3 s contention in 1 turn
#   bash bench/laravel.sh --no-build   # use target/release/libmysqllock_php.so as it is
#
# Exit status: 0 when every measurement ran (nothing is asserted about the figures),
# non-zero when something failed to build, start or run.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh

quick_and_build_options "$@"
if [ $quick = 1 ]; then
  handoffs=20 rounds=1 contend_s=3 slices=1 selftest_s=2
else
  handoffs=50 rounds=3 contend_s=10 slices=5 selftest_s=2
fi
procs=4
impls=ours,ours250,database

need_tools php mariadb mariadb-install-db /usr/sbin/mariadbd
need_php_modules pdo_mysql
laravel=/usr/share/php/Illuminate/Foundation/Application.php
[ -f $laravel ] || die "Laravel is missing (apt-get install php-laravel-framework)"

SECONDS=0
build_packages mysqllock-php
need_built libmysqllock_php.so

make_work laravel
# A copy, so that other builds during the run do not change what is measured.
so=$work/libmysqllock_php.so
cp target/release/libmysqllock_php.so "$so"
export MYSQLLOCK_BENCH_SO=$so

start_server
export MYSQLLOCK_BENCH_DSN=$dsn

php_ext() {
  php -d "extension=$so" -d "mysqllock.dsn=\"$product_dsn\"" "$@"
}

laravel_version=$(sed -n "s/.*const VERSION = '\([^']*\)'.*/\1/p" $laravel)
echo "# Laravel Cache::lock() benchmark: $(machine), $(server_version), PHP $(php -r 'echo PHP_VERSION;'), Laravel $laravel_version, $(commit_line core php-ext bridges/laravel), $(date -u +%F), $ssl_note"
echo
php_ext bench/php/laravel_handoff.php setup
echo "## 1. Hand-off: the holder's release() call -> the blocked waiter's block() returns"
echo
run php -d "extension=$so" -d "mysqllock.dsn=\"$product_dsn\"" bench/php/laravel_handoff.php drive "$impls" "$handoffs" "$rounds"
echo
echo "## 2. $procs processes contending on one name"
echo
run php -d "extension=$so" -d "mysqllock.dsn=\"$product_dsn\"" bench/php/laravel_contend.php drive "$impls" "$procs" "$contend_s" "$slices" "$work"
echo
echo "Overlap check self-test (a lock that excludes nothing must show overlaps):"
echo
selftest=$(php_ext bench/php/laravel_contend.php drive broken "$procs" "$selftest_s" 1 "$work")
echo "$selftest"
require_overlaps "$selftest" "a lock that excludes nothing"
echo
echo "total: ${SECONDS} s"
