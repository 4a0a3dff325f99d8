#!/usr/bin/env bash
# What each way of taking and releasing a lock costs the server: MariaDB's own
# instructions per lock + release cycle, counted by callgrind (valgrind), for raw
# GET_LOCK / RELEASE_LOCK, the statements the extension sends (prepared, as text, the
# waiter's batch), the waiter's statements prepared instead, and the release that writes
# nothing with its takeover claim (issue 34's item 1, built, measured and not kept: branch
# left-rows-experiment). Instruction counts do not move with the machine's load, so this
# answers "how much can this protocol cost less?" where the timed benches cannot on a busy
# machine; on one CPU (server and clients together, bench/session.sh's first columns) a
# cycle's latency and a contended name's throughput follow these counts.
#
#   bash bench/server_cost.sh              # 200 cycles per variant, a few minutes
#   bash bench/server_cost.sh --cycles N
#
# It starts a throwaway MariaDB with scripts/mariadb.sh (accounts, table), stops it, runs
# the same datadir under valgrind --tool=callgrind on another port and drives it with
# bench/php/server_cost.php. Needs valgrind (callgrind_control) and PHP with pdo_mysql.
# Exit status 0 when every variant ran and did its part (each cycle checks that the lock
# was taken and let go).
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh

cycles=200
while [ $# -gt 0 ]; do
  case "$1" in
    --cycles) cycles=${2:?--cycles needs a number}; shift ;;
    -h|--help) print_help; exit 0 ;;
    *) unknown_argument "$1" "--cycles N" ;;
  esac
  shift
done
[ "$bench_server" = mariadb ] || die "only MariaDB runs under valgrind here (MYSQLLOCK_BENCH_SERVER=$bench_server)"
need_tools php valgrind callgrind_control mariadb-install-db /usr/sbin/mariadbd
need_php_modules pdo_mysql

make_work server-cost
start_server
version=$(server_version)
bash "$server_script" stop "$work/db" >&2

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
prefix=$work/callgrind.out
# Valgrind cannot map InnoDB's default buffer pool reservation, nor does it follow native AIO.
valgrind --tool=callgrind --callgrind-out-file="$prefix" /usr/sbin/mariadbd --no-defaults --user=root \
  --datadir="$work/db/data" --socket="$work/cg.sock" --port="$port" --bind-address=127.0.0.1 --skip-name-resolve \
  --tmpdir="$work/db/tmp" --skip-log-bin --innodb-buffer-pool-size=32M --innodb-buffer-pool-size-max=32M \
  --innodb-use-native-aio=0 >"$work/valgrind.log" 2>&1 &
valgrind_pid=$!
trap 'kill "$valgrind_pid" 2>/dev/null; wait "$valgrind_pid" 2>/dev/null; cleanup' EXIT
deadline=$((SECONDS + 600))
until mariadb --no-defaults -h127.0.0.1 -P"$port" -ulocker -pl0ck-s3cret -e 'SELECT 1' >/dev/null 2>&1; do
  kill -0 "$valgrind_pid" 2>/dev/null || { tail -20 "$work/valgrind.log" >&2; die "mariadbd under valgrind ended"; }
  [ $SECONDS -lt $deadline ] || die "mariadbd under valgrind did not answer within 600 s"
  sleep 1
done

echo "# server instructions per lock + release cycle: $version under callgrind, PHP $(php -r 'echo PHP_VERSION;') (PDO), $(commit_line core), $(date -u +%F)"
echo
echo "| statements of one cycle | statements | server instructions per cycle | against raw |"
echo "|---|---|---|---|"
php bench/php/server_cost.php "$port" "$valgrind_pid" "$prefix" "$cycles"
echo
echo "$cycles cycles per variant, after 5 untimed ones, each on a connection of its own; counters zeroed and dumped around them (callgrind_control)."
echo "command: bash bench/server_cost.sh$([ "$cycles" != 200 ] && echo " --cycles $cycles"); total $SECONDS s"
