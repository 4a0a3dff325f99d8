#!/usr/bin/env bash
# The benchmark (issue 6): the PHP extension and the Rust core (the C ABI's path) side by
# side with raw GET_LOCK/RELEASE_LOCK through PDO and through the mysql crate, against a
# throwaway MariaDB started here and stopped on exit. Prints one table (bench/RESULTS.md
# explains the figures).
#
#   bash bench/run.sh            # full: a few minutes
#   bash bench/run.sh --quick    # under a minute after the build
#   bash bench/run.sh --figures 1,3   # some figures only (1-5, p = the appendix)
#
# Exit status: 0 when every measurement ran (targets are reported, never asserted),
# non-zero when something failed to build, start or run.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

quick=()
figures=()
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) quick=(--quick) ;;
    --figures) figures=(--figures "${2:?--figures needs a list such as 1,3,5}"); shift ;;
    -h|--help) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench/run.sh: unknown argument $1 (--quick, --figures LIST)" >&2; exit 2 ;;
  esac
  shift
done

for tool in php cargo mariadb mariadb-install-db /usr/sbin/mariadbd python3; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "bench/run.sh: $tool is missing (bash scripts/install-deps.sh installs everything)" >&2
    exit 1
  fi
done
if ! php -m | grep -qx pdo_mysql; then
  echo "bench/run.sh: PHP's pdo_mysql is missing (apt-get install php8.2-mysql)" >&2
  exit 1
fi

echo "building (cargo build --release -p mysqllock-bench -p mysqllock-php -p mysqllock-cli) ..." >&2
cargo build --release -p mysqllock-bench -p mysqllock-php -p mysqllock-cli >&2

work=$(mktemp -d /tmp/mysqllock-bench.XXXXXX)
cleanup() {
  bash "$root/scripts/mariadb.sh" stop "$work/db" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

SECONDS=0
bash scripts/mariadb.sh start "$work/db" >&2
set -a; . "$work/db/env"; set +a
target/release/mysqllock --dsn "$MYSQLLOCK_TEST_DSN" init >&2

status=0
target/release/mysqllock-bench "${quick[@]}" --dsn "$MYSQLLOCK_TEST_DSN" \
  --php-ext target/release/libmysqllock_php.so --php-dir bench/php --work "$work/runs" "${figures[@]}" || status=$?
echo "total after the build (server start and table included): $SECONDS s"
exit $status
