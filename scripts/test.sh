#!/usr/bin/env bash
# Runs every test of the project against a throwaway MariaDB started here:
# Rust unit and integration tests, cross-process scenarios, the CLI, the PHP extension
# (PHPUnit), the C ABI (gcc + valgrind, PHP FFI, Python ctypes), and the header check.
#
# Each suite is a script that finds the server in MYSQLLOCK_TEST_DSN; a suite that
# needs its own server (restarts) starts one with scripts/mariadb.sh.
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD

bash scripts/install-deps.sh || exit 1
cargo build --release --locked --workspace --all-targets || exit 1

work=$(mktemp -d /tmp/mysqllock-test.XXXXXX)
trap 'bash scripts/mariadb.sh stop "$work/db" >/dev/null 2>&1' EXIT
bash scripts/mariadb.sh start "$work/db" || exit 1
set -a; . "$work/db/env"; set +a
export MYSQLLOCK_ROOT=$root MYSQLLOCK_BIN=$root/target/release

passed=0; failed=0; failures=()
suite() {
  local name=$1; shift
  echo
  echo "=== suite: $name"
  if "$@"; then
    passed=$((passed + 1))
  else
    failed=$((failed + 1)); failures+=("$name")
  fi
}

for s in tests/suites/*.sh; do
  suite "$(basename "$s" .sh)" bash "$s"
done

echo
if [ $failed -gt 0 ]; then
  printf 'failed suites: %s\n' "${failures[*]}"
fi
echo "suites: $passed passed, $failed failed"
[ $failed -eq 0 ]
