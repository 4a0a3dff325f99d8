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
root=$PWD

quick=0
build=1
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) quick=1 ;;
    --no-build) build=0 ;;
    -h|--help) sed -n '2,/^set /{/^#/p}' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench/laravel.sh: unknown argument $1 (--quick, --no-build)" >&2; exit 2 ;;
  esac
  shift
done
if [ $quick = 1 ]; then
  handoffs=20 rounds=1 contend_s=3 slices=1 selftest_s=2
else
  handoffs=50 rounds=3 contend_s=10 slices=5 selftest_s=2
fi
procs=4
impls=ours,ours250,database

for tool in php mariadb mariadb-install-db /usr/sbin/mariadbd; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "bench/laravel.sh: $tool is missing (bash scripts/install-deps.sh installs everything)" >&2
    exit 1
  fi
done
if ! php -m | grep -qx pdo_mysql; then
  echo "bench/laravel.sh: PHP's pdo_mysql is missing (apt-get install php8.2-mysql)" >&2
  exit 1
fi
laravel=/usr/share/php/Illuminate/Foundation/Application.php
if [ ! -f $laravel ]; then
  echo "bench/laravel.sh: Laravel is missing (apt-get install php-laravel-framework)" >&2
  exit 1
fi

SECONDS=0
if [ $build = 1 ]; then
  echo "building (cargo build --release --locked -p mysqllock-php) ..." >&2
  cargo build --release --locked -p mysqllock-php >&2
fi
[ -f target/release/libmysqllock_php.so ] || { echo "bench/laravel.sh: target/release/libmysqllock_php.so is missing" >&2; exit 1; }

work=$(mktemp -d /tmp/mysqllock-laravel-bench.XXXXXX)
cleanup() {
  bash "$root/scripts/mariadb.sh" stop "$work/db" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
# A copy, so that other builds during the run do not change what is measured.
so=$work/libmysqllock_php.so
cp target/release/libmysqllock_php.so "$so"
export MYSQLLOCK_BENCH_SO=$so

bash scripts/mariadb.sh start "$work/db" >&2
dsn=$(sed -n 's/^MYSQLLOCK_TEST_DSN=//p' "$work/db/env")
export MYSQLLOCK_BENCH_DSN=$dsn

# Prints a command, then runs it.
run() {
  printf '$'
  printf ' %q' "$@"
  printf '\n\n'
  "$@"
}
php_ext() {
  php -d "extension=$so" -d "mysqllock.dsn=$dsn" "$@"
}

version=$(php -r 'require "bench/php/common.php"; echo MySqlLockBench\pdo()->query("SELECT VERSION()")->fetchColumn();')
laravel_version=$(sed -n "s/.*const VERSION = '\([^']*\)'.*/\1/p" $laravel)
echo "# Laravel Cache::lock() benchmark: $(nproc) CPUs ($(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1)), MariaDB $version, PHP $(php -r 'echo PHP_VERSION;'), Laravel $laravel_version, commit $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- core php-ext bridges/laravel || echo ' + uncommitted changes in core/php-ext/bridges'), $(date -u +%F)"
echo
php_ext bench/php/laravel_handoff.php setup
echo "## 1. Hand-off: the holder's release() call -> the blocked waiter's block() returns"
echo
run php -d "extension=$so" -d "mysqllock.dsn=$dsn" bench/php/laravel_handoff.php drive "$impls" "$handoffs" "$rounds"
echo
echo "## 2. $procs processes contending on one name"
echo
run php -d "extension=$so" -d "mysqllock.dsn=$dsn" bench/php/laravel_contend.php drive "$impls" "$procs" "$contend_s" "$slices" "$work"
echo
echo "Overlap check self-test (a lock that excludes nothing must show overlaps):"
echo
selftest=$(php_ext bench/php/laravel_contend.php drive broken "$procs" "$selftest_s" 1 "$work")
echo "$selftest"
overlaps=$(printf '%s\n' "$selftest" | tail -1 | awk -F'|' '{gsub(/ /, "", $(NF-1)); print $(NF-1)}')
if ! [ "${overlaps:-0}" -gt 0 ] 2>/dev/null; then
  echo "bench/laravel.sh: the overlap check saw no overlap of a lock that excludes nothing: its 0s above prove nothing" >&2
  exit 1
fi
echo
echo "total: ${SECONDS} s"
