#!/usr/bin/env bash
# The benchmark (issue 6): the PHP extension and the Rust core (the C ABI's path) side by
# side with raw GET_LOCK/RELEASE_LOCK through PDO and through the mysql crate, against a
# throwaway MariaDB started here and stopped on exit. Prints one table (bench/RESULTS.md
# explains the figures). The extension and the Rust core connect with ssl-mode=DISABLED,
# like the floors (MYSQLLOCK_BENCH_SSL_MODE, see bench/lib.sh).
#
#   bash bench/run.sh            # full: a few minutes
#   bash bench/run.sh --quick    # under a minute after the build
#   bash bench/run.sh --figures 1,3   # some figures only (1-5, p = the appendix)
#   bash bench/run.sh --no-build      # use target/release as it is
#
# Exit status: 0 when every measurement ran (targets are reported, never asserted),
# non-zero when something failed to build, start or run.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh

quick=()
figures=()
build=1
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) quick=(--quick) ;;
    --figures) figures=(--figures "${2:?--figures needs a list such as 1,3,5}"); shift ;;
    --no-build) build=0 ;;
    -h|--help) print_help; exit 0 ;;
    *) unknown_argument "$1" "--quick, --figures LIST, --no-build" ;;
  esac
  shift
done

need_tools php cargo mariadb mariadb-install-db /usr/sbin/mariadbd python3
need_php_modules pdo_mysql

build_packages mysqllock-bench mysqllock-php mysqllock-cli
need_built mysqllock-bench libmysqllock_php.so mysqllock

make_work run

SECONDS=0
start_server
target/release/mysqllock --dsn "$product_dsn" init >&2
echo "# $ssl_note"

status=0
target/release/mysqllock-bench "${quick[@]}" --dsn "$product_dsn" \
  --php-ext target/release/libmysqllock_php.so --php-dir bench/php --work "$work/runs" "${figures[@]}" || status=$?
echo "total after the build (server start and table included): $SECONDS s"
exit $status
