#!/usr/bin/env bash
# What a lock + release cycle costs the client: the PHP process's own instructions per
# uncontended cycle, counted by callgrind (valgrind), for SharedLock::lock()->release()
# on the extension's native connection against raw GET_LOCK / RELEASE_LOCK through PDO
# (the floor), and with --baseline DIR for DIR/libmysqllock_php.so too (another build,
# same run). Each variant runs twice, N and 6 N cycles; the difference over 5 N is the
# cost per cycle, start-up and connect taken out. bench/server_cost.sh counts the
# server's side. Instruction counts do not move with the machine's load: this answers
# "what does the extension's code add?" where the timed benches (bench/session.sh) mix
# it with the server's statements and the scheduler.
#
#   bash bench/client_cost.sh                   # 400 and 2,400 cycles, about a minute
#   bash bench/client_cost.sh --cycles N
#   bash bench/client_cost.sh --baseline DIR    # also DIR/libmysqllock_php.so
#   bash bench/client_cost.sh --no-build        # target/release as it is
#
# Exit status 0 when every variant ran (each cycle checks that the lock was taken and let
# go); targets are not asserted.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh

cycles=400
build=1
baseline=
while [ $# -gt 0 ]; do
  case "$1" in
    --cycles) cycles=${2:?--cycles needs a number}; shift ;;
    --baseline) baseline=${2:?--baseline needs a directory}; shift ;;
    --no-build) build=0 ;;
    -h|--help) print_help; exit 0 ;;
    *) unknown_argument "$1" "--cycles N, --baseline DIR, --no-build" ;;
  esac
  shift
done
need_tools php valgrind python3
need_php_modules pdo_mysql
build_packages mysqllock-php
need_built libmysqllock_php.so
[ -z "$baseline" ] || [ -f "$baseline/libmysqllock_php.so" ] || die "$baseline/libmysqllock_php.so is missing"

make_work client-cost
# Copies, so that other builds during the run do not change what is measured.
mkdir -p "$work/now"
cp target/release/libmysqllock_php.so "$work/now/"
sets=(now)
if [ -n "$baseline" ]; then
  mkdir -p "$work/before"
  cp "$baseline/libmysqllock_php.so" "$work/before/"
  sets+=(before)
fi
# scripts/mariadb.sh creates the accounts and the shared_locks table.
start_server
export MYSQLLOCK_BENCH_DSN=$product_dsn

# instructions SET IMPL CYCLES: the whole process's instructions (callgrind's total).
instructions() {
  local set=$1 impl=$2 n=$3 out=$work/cg-$1-$2-$3
  valgrind --tool=callgrind --callgrind-out-file="$out.out" \
    php -d "extension=$work/$set/libmysqllock_php.so" bench/php/client_cost.php "$impl" "$n" "cost-$set-$impl" \
    >"$out.log" 2>&1 || { tail -20 "$out.log" >&2; die "$impl ($set) failed under callgrind"; }
  sed -n 's/^==[0-9]*== Collected : \([0-9]*\)$/\1/p' "$out.log"
}

long=$((cycles * 6))
declare -A per_cycle
for set in "${sets[@]}"; do
  for impl in ext pdo; do
    # The floor is the same PHP and PDO whichever extension is loaded: counted once.
    [ "$impl" = pdo ] && [ "$set" != now ] && continue
    short_count=$(instructions "$set" "$impl" "$cycles")
    long_count=$(instructions "$set" "$impl" "$long")
    per_cycle[$set-$impl]=$(( (long_count - short_count) / (long - cycles) ))
  done
done

floor=${per_cycle[now-pdo]}
ratio() { python3 -c "print(f'{$1 / $floor:.2f}×')"; }
echo "# client instructions per uncontended lock + release cycle: PHP $(php -r 'echo PHP_VERSION;'), $(server_version), $(commit_line core php-ext), $(date -u +%F)"
echo
echo "| cycle | instructions per cycle | against raw |"
echo "|---|---|---|"
echo "| raw \`GET_LOCK(?, 0)\` + \`RELEASE_LOCK(?)\`, PDO (prepared once) | $floor | 1.00× |"
echo "| \`SharedLock::lock(\$n, 5, 60)\` + \`->release()\`, native connection | ${per_cycle[now-ext]} | $(ratio "${per_cycle[now-ext]}") |"
if [ -n "$baseline" ]; then
  echo "| the same, the baseline build (--baseline) | ${per_cycle[before-ext]} | $(ratio "${per_cycle[before-ext]}") |"
fi
echo
echo "Each: callgrind's total for $long cycles minus that for $cycles, over $((long - cycles)); the whole PHP process in user space (PHP, PDO or the extension, libc; the kernel's share is not counted)."
echo "command: bash bench/client_cost.sh --cycles $cycles$([ -n "$baseline" ] && echo " --baseline DIR"); total $SECONDS s"
