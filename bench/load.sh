#!/usr/bin/env bash
# What loading the extension costs (issue 34: ≤ 0.3 ms), against what PHP itself charges:
# `php -r ''` with no extension, with an empty C extension (what loading any shared
# extension costs), with a C twin of mysqllock.so (bench/php/twin.php: its classes,
# methods, arguments, properties, constants, aliases, function and php.ini settings, every
# method doing nothing; what registering this API costs in PHP's own language), and with
# mysqllock.so built with profile dist (the smallest) and release (the tests', and without
# debug info the release archives'). Rows take
# turns round by round (shuffled), pinned to one CPU; each is also given minus the run
# without an extension in the same round (paired), in time, CPU time and page faults.
# No server: nothing connects.
#
# PHP runs with no php.ini and mysqlnd and PDO loaded (as bench/cold.sh), or with
# --php-ini under the php.ini and conf.d this PHP finds (the machine's own configuration,
# every installed module loaded), where PHP's own tables are larger to begin with.
#
#   bash bench/load.sh                   # 300 rounds
#   bash bench/load.sh --runs N          # N rounds (>= 30)
#   bash bench/load.sh --no-build        # use target/dist and target/release as they are
#   bash bench/load.sh --cpu C           # the CPU to pin to (default 0)
#   bash bench/load.sh --php-ini         # under the machine's php.ini, not -n
#   bash bench/load.sh --instructions    # also the instructions of one run of each
#                                        # (valgrind's callgrind; slow)
#
# Exit status: 0 when every measurement ran (the target is reported, never asserted).
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh

runs=300
build=1
cpu=0
instructions=0
php_ini=0
while [ $# -gt 0 ]; do
  case "$1" in
    --runs) runs=${2:?--runs needs a number}; shift ;;
    --no-build) build=0 ;;
    --cpu) cpu=${2:?--cpu needs a CPU number}; shift ;;
    --instructions) instructions=1 ;;
    --php-ini) php_ini=1 ;;
    -h|--help) print_help; exit 0 ;;
    *) unknown_argument "$1" "--runs N, --no-build, --cpu C, --instructions, --php-ini" ;;
  esac
  shift
done
[ "$runs" -ge 30 ] 2>/dev/null || die "--runs must be a number >= 30 (a median and a p90), not $runs"

need_tools php phpize make gcc python3 taskset
[ "$instructions" = 0 ] || need_tools valgrind
need_php_modules pdo_mysql

if [ "$build" = 1 ]; then
  echo "building (cargo build --profile dist / --release --locked -p mysqllock-php) ..." >&2
  cargo build --profile dist --locked -p mysqllock-php >&2
  cargo build --release --locked -p mysqllock-php >&2
fi
for built in target/dist/libmysqllock_php.so target/release/libmysqllock_php.so; do
  [ -f "$built" ] || die "$built is missing (cargo build --profile dist / --release -p mysqllock-php)"
done

make_work load
# Copies, so that other builds during the run do not change what is measured.
for profile in dist release; do
  mkdir -p "$work/$profile"
  cp "target/$profile/libmysqllock_php.so" "$work/$profile/"
done
# The same PHP as every row: mysqlnd and PDO loaded, no php.ini (as bench/cold.sh), or
# the machine's configuration.
no_ini=(php -n -d extension=mysqlnd.so -d extension=pdo.so -d extension=pdo_mysql.so)
bare=("${no_ini[@]}")
[ "$php_ini" = 0 ] || bare=(php)
for twin in empty full; do
  mode=()
  [ "$twin" = full ] || mode=(--empty)
  "${no_ini[@]}" -d "extension=$work/dist/libmysqllock_php.so" bench/php/twin.php "$work/$twin" "${mode[@]}" >&2
  (cd "$work/$twin" && phpize >/dev/null && ./configure --enable-twin >/dev/null && make >/dev/null 2>"$work/$twin.log") \
    || die "building the C $twin extension failed (phpize, configure, make in $work/$twin; $work/$twin.log)"
  strip "$work/$twin/modules/twin.so"
done

python3 - "$runs" "$cpu" "$instructions" "$work" "${bare[@]}" <<'PY'
import os, random, re, statistics, subprocess, sys, time

runs, cpu, instructions, work = int(sys.argv[1]), sys.argv[2], sys.argv[3] == "1", sys.argv[4]
bare = ["taskset", "-c", cpu] + sys.argv[5:]
rows = [
    ("bare", "no extension", bare),
    ("empty", "an empty C extension (registers nothing)", bare + ["-d", f"extension={work}/empty/modules/twin.so"]),
    ("twin", "C twin: mysqllock.so's classes, methods, settings; methods empty", bare + ["-d", f"extension={work}/full/modules/twin.so"]),
    ("dist", "mysqllock.so, profile dist (LTO, one code unit, stripped)", bare + ["-d", f"extension={work}/dist/libmysqllock_php.so"]),
    ("release", "mysqllock.so, profile release (the tests' build; the archives' is it without debug info)", bare + ["-d", f"extension={work}/release/libmysqllock_php.so"]),
]
rows = [(k, label, argv + ["-r", ""]) for k, label, argv in rows]

def once(argv):
    """Wall time (ms), CPU time (ms) and minor page faults of one run, spawn to exit."""
    t0 = time.perf_counter_ns()
    pid = os.posix_spawnp(argv[0], argv, os.environ)
    _, status, usage = os.wait4(pid, 0)
    wall = (time.perf_counter_ns() - t0) / 1e6
    if status != 0:
        sys.exit(f"bench/load.sh: {' '.join(argv)} exited with status {status}")
    return wall, (usage.ru_utime + usage.ru_stime) * 1e3, usage.ru_minflt

for _, _, argv in rows:  # warm the page cache and the loader's
    once(argv)
random.seed(34)
got = {k: [] for k, _, _ in rows}
for _ in range(runs):
    order = list(rows)
    random.shuffle(order)
    for k, _, argv in order:
        got[k].append(once(argv))

def med(xs):
    return statistics.median(xs)

def p90(xs):
    return sorted(xs)[int(len(xs) * 0.9)]

counted = {}
if instructions:
    for k, _, argv in rows:
        out = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null"] + argv[3:],
                             capture_output=True, text=True)
        m = re.search(r"Collected : (\d+)", out.stderr)
        if out.returncode != 0 or not m:
            sys.exit(f"bench/load.sh: callgrind of {k} failed:\n{out.stderr[-2000:]}")
        counted[k] = int(m.group(1))

print(f"| `php -r ''` with | median | p90 | CPU, median | page faults | minus no extension (paired): time | CPU | page faults |" + (" instructions (added) |" if instructions else ""))
print("|---|---|---|---|---|---|---|---|" + ("---|" if instructions else ""))
base = got["bare"]
for k, label, _ in rows:
    xs = got[k]
    wall = [x[0] for x in xs]
    cells = [label, f"{med(wall):.2f} ms", f"{p90(wall):.2f} ms", f"{med(x[1] for x in xs):.2f} ms", f"{med(x[2] for x in xs):.0f}"]
    if k == "bare":
        cells += ["–", "–", "–"]
    else:
        cells += [f"{med(a[0] - b[0] for a, b in zip(xs, base)):+.3f} ms", f"{med(a[1] - b[1] for a, b in zip(xs, base)):+.3f} ms",
                  f"{med(a[2] - b[2] for a, b in zip(xs, base)):+.0f}"]
    if instructions:
        cells.append(f"{counted[k]:,}" if k == "bare" else f"{counted[k]:,} ({counted[k] - counted['bare']:+,})")
    print("| " + " | ".join(cells) + " |")
print()
print(f"{runs} rounds; target (issue 34): mysqllock.so's load ≤ 0.3 ms over no extension.")
PY
echo
config="no php.ini; mysqlnd, pdo, pdo_mysql"
[ "$php_ini" = 0 ] || config="$(php -r 'echo php_ini_loaded_file();') and conf.d, $(php -m | grep -c '^[a-zA-Z]') modules"
flags=$([ "$instructions" = 0 ] || echo ' --instructions')$([ "$php_ini" = 0 ] || echo ' --php-ini')
echo "# $(machine), PHP $(php -r 'echo PHP_VERSION;') ($config), $(commit_line php-ext core), $(date -u +%F); bash bench/load.sh --runs $runs$flags"
echo "$me: took ${SECONDS}s" >&2
