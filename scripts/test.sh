#!/usr/bin/env bash
# Runs every test of the project against a throwaway MariaDB 10.11 and a throwaway
# Oracle MySQL 9.7 started here: Rust unit and integration tests, cross-process scenarios,
# the CLI, the PHP extension (PHPUnit), the bridges, the C ABI (gcc + valgrind, PHP FFI,
# Python ctypes), the chaos suites, and the header check.
#
# Each suite is a script that finds its server in MYSQLLOCK_TEST_DSN (and the server's
# kind in MYSQLLOCK_TEST_SERVER, its script in MYSQLLOCK_SERVER_SCRIPT); it runs once per
# server, as NAME@mariadb and NAME@mysql. A suite whose header says `# server: none`
# (lint, header) or `# server: own` (it starts its own cluster) runs once. A suite that
# needs a fresh server (restarts) starts one of the same kind with that script.
#
#   bash scripts/test.sh                 # everything, both servers
#   MYSQLLOCK_TEST_SERVERS=mysql bash scripts/test.sh   # one server's runs (and the
#                                        # server-less suites)
#   bash scripts/test.sh 30-php 40-c     # only the suites named
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD
servers=${MYSQLLOCK_TEST_SERVERS:-mariadb mysql}

bash scripts/install-deps.sh || exit 1
cargo build --release --locked --workspace --all-targets || exit 1

work=$(mktemp -d /tmp/mysqllock-test.XXXXXX)
stop_servers() {
  local server
  for server in $servers; do
    bash "scripts/$server.sh" stop "$work/$server" >/dev/null 2>&1
  done
}
trap stop_servers EXIT
for server in $servers; do
  bash "scripts/$server.sh" start "$work/$server" || { echo "could not start the $server test server"; exit 1; }
done
export MYSQLLOCK_ROOT=$root MYSQLLOCK_BIN=$root/target/release

passed=0; failed=0; failures=()
suite() {
  local name=$1; shift
  local started=$SECONDS
  echo
  echo "=== suite: $name"
  if "$@"; then
    passed=$((passed + 1))
  else
    failed=$((failed + 1)); failures+=("$name")
  fi
  echo "=== suite: $name: $((SECONDS - started)) s"
}

# A suite runs in a subshell with one server's env file loaded.
with_server() {
  local server=$1; shift
  (set -a; . "$work/$server/env"; set +a; "$@")
}

selected=("$@")
wanted() {
  [ ${#selected[@]} -eq 0 ] && return 0
  local want
  for want in "${selected[@]}"; do [ "$want" = "$1" ] && return 0; done
  return 1
}

for s in tests/suites/*.sh; do
  name=$(basename "$s" .sh)
  wanted "$name" || continue
  kind=$(sed -n 's/^# server: \([a-z]*\).*/\1/p' "$s" | head -n 1)
  if [ "$kind" = none ] || [ "$kind" = own ]; then
    suite "$name" bash "$s"
    continue
  fi
  for server in $servers; do
    suite "$name@$server" with_server "$server" bash "$s"
  done
done

echo
if [ $failed -gt 0 ]; then
  printf 'failed suites: %s\n' "${failures[*]}"
fi
echo "suites: $passed passed, $failed failed"
[ $failed -eq 0 ]
