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
root=$PWD

quick=0
build=1
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) quick=1 ;;
    --no-build) build=0 ;;
    -h|--help) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench/symfony.sh: unknown argument $1 (--quick, --no-build)" >&2; exit 2 ;;
  esac
  shift
done
if [ $quick = 1 ]; then
  rounds=3 per_round=10 contend_s=3 selftest_s=2
else
  rounds=3 per_round=50 contend_s=10 selftest_s=2
fi
procs=4 hold_us=20000

for need in php mariadb /usr/sbin/mariadbd /usr/share/php/Symfony/Component/Lock/autoload.php; do
  if ! command -v "$need" >/dev/null 2>&1 && [ ! -e "$need" ]; then
    echo "bench/symfony.sh: $need is missing (bash scripts/install-deps.sh installs everything)" >&2
    exit 1
  fi
done

SECONDS=0
if [ $build = 1 ]; then
  echo "building (cargo build --release --locked -p mysqllock-php) ..." >&2
  cargo build --release --locked -p mysqllock-php >&2
fi
[ -f target/release/libmysqllock_php.so ] || { echo "bench/symfony.sh: target/release/libmysqllock_php.so is missing" >&2; exit 1; }

work=$(mktemp -d /tmp/mysqllock-symfony-bench.XXXXXX)
cleanup() {
  bash "$root/scripts/mariadb.sh" stop "$work/db" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
# A copy, so that other builds during the run do not change what is measured.
so=$work/libmysqllock_php.so
cp target/release/libmysqllock_php.so "$so"
mkdir -p "$work/runs"

bash scripts/mariadb.sh start "$work/db" >&2
dsn=$(sed -n 's/^MYSQLLOCK_TEST_DSN=//p' "$work/db/env")
export MYSQLLOCK_BENCH_SO=$so MYSQLLOCK_BENCH_DSN=$dsn
bench() { php -d "extension=$so" -d "mysqllock.dsn=$dsn" bench/php/symfony_bench.php "$@"; }
bench setup

version=$(php -r 'require "bench/php/common.php"; echo MySqlLockBench\pdo()->query("SELECT VERSION()")->fetchColumn();')
echo "# Symfony Lock benchmark: $(nproc) CPUs ($(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1)), MariaDB $version, PHP $(php -r 'echo PHP_VERSION;'), symfony/lock $(dpkg-query -W -f='${Version}' php-symfony-lock), commit $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- core php-ext bridges/symfony || echo ' + uncommitted changes'), $(date -u +%F)"
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
overlaps=$(printf '%s\n' "$selftest" | awk -F'|' '{gsub(/ /, "", $(NF-1)); print $(NF-1)}')
if ! [ "${overlaps:-0}" -gt 0 ] 2>/dev/null; then
  echo "bench/symfony.sh: the overlap checker saw no overlap of a store that excludes nothing: its 0s above prove nothing" >&2
  exit 1
fi
echo
echo "total: $SECONDS s"
