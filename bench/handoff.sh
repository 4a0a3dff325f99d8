#!/usr/bin/env bash
# Issue 16's hand-off and contention, measured the way a user meets them, against the floor
# (raw GET_LOCK / RELEASE_LOCK through PDO), on a MariaDB started here (scripts/mariadb.sh,
# under a temp dir) and stopped on exit (bench/php/handoff_user.php does the measuring):
#   hand-off: two PHP processes; the waiter is blocked in SharedLock::lock($n, 30, 60) (the
#     holder polls the server's process list until the waiter's connection is in 'User
#     lock'), the holder holds ~50 ms and calls ->release(); sample = waiter's lock()
#     return - holder's release() call, both hrtime(true); ROUNDS x N hand-offs per kind,
#     extension and floor taking turns hand-off by hand-off in the same two processes.
#   contention: 4 PHP processes on one name for SECONDS, lock -> release in a loop, each
#     journaling its own wait start / got / release start; acquisitions/s, fewest/most per
#     process, longest wait, overlapping holds (from the journals, not the lock). Raw,
#     the protocol by hand and the extension take turns run by run (the order rotating).
# Three columns each: raw GET_LOCK / RELEASE_LOCK through PDO (the floor of any lock on
# MySQL), the protocol's own floor (the extension's statements written by hand through
# PDO: bench/php/handoff_user.php, class Floor) and the extension; `target` lines (issue
# 34: hand-off <= raw + 0.2 ms, 4 processes >= 0.6x raw) close the output.
# Pinned like bench/session.sh: placement "one", server and clients on CPU A; placement
# "two", clients on CPU A and the server on CPU B. The extension connects with
# ssl-mode=DISABLED, like the PDO floor (MYSQLLOCK_BENCH_SSL_MODE, see bench/lib.sh).
#
#   bash bench/handoff.sh                # 3 x 50 hand-offs, 2 x 10 s contention runs per kind
#   bash bench/handoff.sh --quick        # 3 x 20 hand-offs, 1 x 3 s
#   bash bench/handoff.sh --no-build     # use target/release as it is
#   bash bench/handoff.sh --cpus A,B     # default 0,1; --cpus A: CPU A only
#   bash bench/handoff.sh --only handoff # or contention
#
# Exit status 0 when everything ran (targets are reported, not asserted).
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh

quick=0 build=1 cpus=0,1 only=all
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) quick=1 ;;
    --no-build) build=0 ;;
    --cpus) cpus=${2:?--cpus needs A,B or A}; shift ;;
    --only) only=${2:?--only needs handoff or contention}; shift ;;
    -h|--help) print_help; exit 0 ;;
    *) unknown_argument "$1" "--quick, --no-build, --cpus A,B, --only handoff|contention" ;;
  esac
  shift
done
if [ $quick = 1 ]; then rounds=3 n=20 runs=1 seconds=3; else rounds=3 n=50 runs=2 seconds=10; fi
hold_ms=50 workers=4

need_tools php mariadb mariadb-install-db /usr/sbin/mariadbd taskset
need_php_modules pdo_mysql

SECONDS=0
build_packages mysqllock-php mysqllock-cli
need_built libmysqllock_php.so mysqllock

make_work handoff
# Copies, so that builds by others during the run do not change what is measured.
cp target/release/libmysqllock_php.so target/release/mysqllock "$work/"
export MYSQLLOCK_BENCH_EXT=$work/libmysqllock_php.so

set_placements "$cpus"
start_server "${pinned[@]}"
server_pid=$(cat "$work/db/mysqld.pid")
"$work/mysqllock" --dsn "$product_dsn" init >&2
# The PDO floor takes the server and login from it, the extension its ssl-mode too.
export MYSQLLOCK_BENCH_DSN=$product_dsn
php_ext=("${pinned[@]}" php -d "extension=$MYSQLLOCK_BENCH_EXT" -d display_errors=stderr bench/php/handoff_user.php)

load=$(cut -d' ' -f1-3 /proc/loadavg)
echo "# hand-off and contention, the user's way: $(machine), $(server_version), PHP $(php -r 'echo PHP_VERSION;'), $(commit_line core php-ext), $(date -u +%F), $ssl_note, load average before: $load"

# Contention: one run of KIND, WORKERS processes, SECONDS; prints handoff_user.php's summary line.
contend() {
  local kind=$1 tag=$2 start files=() pids=() i
  start=$(( $(php -r 'echo hrtime(true);') + 700000000 ))
  for i in $(seq 1 $workers); do
    files+=("$work/journal.$tag.$i")
    "${php_ext[@]}" worker "$kind" "contend-$tag" "$start" "$seconds" "$work/journal.$tag.$i" &
    pids+=($!)
  done
  for i in "${pids[@]}"; do wait "$i"; done
  "${php_ext[@]}" contention "$kind" "$seconds" "${files[@]}"
}

for placement in "${placements[@]}"; do
  taskset -a -p -c "${server_cpu[$placement]}" "$server_pid" >/dev/null
  echo
  echo "## placement: ${placement_name[$placement]}"
  echo
  echo "| metric | raw PDO | the protocol by hand (PDO) | extension | extension against raw; against the protocol |"
  echo "|---|---|---|---|---|"
  if [ "$only" != contention ]; then
    "${php_ext[@]}" handoff "$rounds" "$n" "$hold_ms" "handoff-$placement" >"$work/handoff.$placement"
    grep -v '^target:' "$work/handoff.$placement"
    sed -n "s/^target: \(.*\)/target [${placement_name[$placement]}]: \1/p" "$work/handoff.$placement" >>"$work/targets"
  fi
  if [ "$only" != handoff ]; then
    : >"$work/contention.$placement"
    kinds=(pdo floor ext)
    for run in $(seq 1 $runs); do
      for k in 0 1 2; do
        kind=${kinds[$(( (k + run) % 3 ))]}
        contend "$kind" "$placement-$kind-$run" >>"$work/contention.$placement"
      done
    done
    # Totals over the runs per kind; paired ratio = median over runs of ext rate / pdo rate.
    awk -v w=$workers -v s=$seconds -v where="${placement_name[$placement]}" -v targets="$work/targets" '
      { for (i = 2; i <= NF; i++) { split($i, kv, "="); v[$1, kv[1]] = kv[2] }
        k = $1; n[k]++; total[k] += v[k, "total"]; rate[k, n[k]] = v[k, "rate"]
        if (!(k in share) || v[k, "share"] < share[k]) share[k] = v[k, "share"]
        if (v[k, "longest_ns"] > longest[k]) longest[k] = v[k, "longest_ns"]
        overlaps[k] += v[k, "overlaps"]; counts[k] = counts[k] " " v[k, "counts"] }
      END {
        rp = total["pdo"] / n["pdo"] / s; rf = total["floor"] / n["floor"] / s; re = total["ext"] / n["ext"] / s
        paired = ""
        for (i = 1; i <= n["ext"]; i++) paired = paired sprintf(" %.2f", rate["ext", i] / rate["pdo", i])
        printf "| contention, %d processes, one name, %d x %g s: acquisitions/s | %\047d | %\047d | %\047d | %.2f× raw (runs:%s); %.2f× the protocol |\n", w, n["ext"], s, rp, rf, re, re / rp, paired, re / rf
        printf "| contention: fewest / most acquisitions per process (worst run) | %.3f | %.3f | %.3f | |\n", share["pdo"], share["floor"], share["ext"]
        printf "| contention: longest wait | %.1f ms | %.1f ms | %.1f ms | %.2f× raw |\n", longest["pdo"] / 1e6, longest["floor"] / 1e6, longest["ext"] / 1e6, longest["ext"] / longest["pdo"]
        printf "| contention: overlapping holds (from the journals) | %d | %d | %d | |\n", overlaps["pdo"], overlaps["floor"], overlaps["ext"]
        printf "| contention: acquisitions per process, each run | %s | %s | %s | |\n", counts["pdo"], counts["floor"], counts["ext"]
        printf "target [%s]: %d processes >= 0.6x raw: %s (%.2fx; the protocol by hand %.2fx)\n", where, w, re / rp >= 0.6 ? "met" : "not met", re / rp, rf / rp >> targets
      }' "$work/contention.$placement"
  fi
done
echo
[ ! -s "$work/targets" ] || cat "$work/targets"
echo
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "command: bash bench/handoff.sh$([ $quick = 1 ] && echo ' --quick')$([ "$cpus" != 0,1 ] && echo " --cpus $cpus")$([ "$only" != all ] && echo " --only $only"); total $SECONDS s (build and server start included)"
