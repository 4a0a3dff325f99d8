#!/usr/bin/env bash
# Every figure issue 16 asks for, from one run: each against its floor, in the benches'
# own floor | extension | ratio tables, one after the other on this machine:
#   bench/handoff.sh  hand-off measured the user's way, 4-process contention
#   bench/session.sh  uncontended lock + release (session locks, SharedLock and its own
#                     floor, the C ABI), CLI start-up against `mariadb -e` and flock
#   bench/cold.sh     cold start (PHP extension vs PDO minus `php -r ''`, C ABI, CLI) and
#                     statements per connect
# Each starts and stops its own server, MariaDB and then MySQL 9.7 (MYSQLLOCK_BENCH_SERVERS=
# "mariadb" or "mysql" runs one); the build runs once, here.
# Like for like by default: the floors (PDO, mysqli, `mariadb --skip-ssl`) connect in the
# clear, and so do the product's connections (ssl-mode=DISABLED); under the product's own
# default, PREFERRED, every one of them to MySQL 9.7 (which makes its own certificates)
# would be encrypted. MYSQLLOCK_BENCH_SSL_MODE=PREFERRED measures that (TLS against plain);
# bench/tls.sh measures TLS against PDO over TLS.
#
#   bash bench/floor.sh            # about 5 minutes after the build
#   bash bench/floor.sh --quick    # about a minute: fewer samples, same tables
#
# Exit status: 0 when every bench ran (targets are reported, never asserted).
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh  # MYSQLLOCK_BENCH_SSL_MODE checked, $ssl_note

quick=()
case "${1:-}" in
  "") ;;
  --quick) quick=(--quick) ;;
  -h|--help) sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  *) echo "bench/floor.sh: unknown argument $1 (--quick)" >&2; exit 2 ;;
esac

echo "building (cargo build --release -p mysqllock-php -p mysqllock-ffi -p mysqllock-cli) ..." >&2
cargo build --release --locked -p mysqllock-php -p mysqllock-ffi -p mysqllock-cli >&2

SECONDS=0
echo "# bench/floor.sh$([ ${#quick[@]} = 1 ] && echo ' --quick'): commit $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- core ffi cli php-ext || echo ' + uncommitted changes'), $(date -u +%Y-%m-%d), $(nproc) CPUs, $ssl_note"
status=0
targets=$(mktemp)
# Each bench on MariaDB, then on MySQL 9.7 (MYSQLLOCK_BENCH_SERVER; scripts/mysql.sh).
for server in ${MYSQLLOCK_BENCH_SERVERS:-mariadb mysql}; do
for bench in handoff session cold; do
  echo
  echo "## bench/$bench.sh on $server"
  if [ "$bench" = cold ]; then
    # cold.sh has no --quick; 30 rounds is its minimum for a median and p90.
    args=(--no-build)
    if [ ${#quick[@]} = 1 ]; then args+=(--runs 30); fi
  else
    args=(--no-build "${quick[@]}")
  fi
  out=$(mktemp)
  MYSQLLOCK_BENCH_SERVER=$server bash "bench/$bench.sh" "${args[@]}" >"$out" || { echo "bench/$bench.sh on $server failed" >&2; status=1; }
  cat "$out"
  # Issue 34's targets, for the summary below.
  grep -E 'target.*: (met|not met)' "$out" | grep -vE '^\|' | sed "s|^|$server, $bench.sh: |" >>"$targets" || true
  rm -f "$out"
done
done
echo
echo "## every target of this run"
echo
sed 's/^/- /' "$targets"
rm -f "$targets"
echo
echo "total $SECONDS s after the build"
exit $status
