#!/usr/bin/env bash
# What loading the extension costs (issue 34: ≤ 0.3 ms), against what PHP itself charges:
# `php -r ''` with no extension, with an empty C extension (what loading any shared
# extension costs), with a C twin of mysqllock.so (bench/php/twin.php: its classes,
# methods, arguments, properties, constants, aliases, function and php.ini settings, every
# method doing nothing; what registering this API costs in PHP's own language), and with
# mysqllock.so built with profile dist (the smallest) and release (the tests' build; the
# release archives are it without debug info). Rows take turns round by round (shuffled),
# pinned to one CPU, under the same small environment (PATH and LANG only: glibc tidies its
# free lists at exit past a threshold the environment's size moves, so the counts of one
# shell are not another's); each is also given minus the run without an extension in the
# same round (paired), in time, CPU time and page faults (callgrind's runs carry
# valgrind's own variables besides). Before the rounds each row must load what it names
# and neither of the others (the empty twin no class, the full one its classes), without a
# word on stdout or stderr (PHP only warns about an extension it cannot load). No server:
# nothing connects.
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
#   bash bench/load.sh --instructions    # also the instructions of one run of each, and
#                                        # over the empty extension (callgrind; slow)
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

need_tools php phpize make gcc strip python3 taskset
[ "$instructions" = 0 ] || need_tools valgrind
need_php_modules pdo_mysql

SECONDS=0
build_packages mysqllock-php
if [ "$build" = 1 ]; then
  echo "building (cargo build --profile dist --locked -p mysqllock-php) ..." >&2
  cargo build --profile dist --locked -p mysqllock-php >&2
fi
need_built libmysqllock_php.so
[ -f target/dist/libmysqllock_php.so ] || die "target/dist/libmysqllock_php.so is missing (cargo build --profile dist -p mysqllock-php)"

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
  # The generated C must compile without a warning (one would be the generator's mistake).
  if ! (cd "$work/$twin" && phpize && ./configure --enable-twin && make CFLAGS="-O2 -Wall -Wextra -Werror") >"$work/$twin.log" 2>&1; then
    tail -n 40 "$work/$twin.log" >&2
    die "building the C $twin extension failed (phpize, configure, make; the log's end above)"
  fi
  strip "$work/$twin/modules/twin.so"
done

# The header describes PHP as the rows run it: under their environment (PHPRC and
# PHP_INI_SCAN_DIR, say, would otherwise name another configuration).
rows_php() { env -i PATH="$PATH" LANG=C php "$@" </dev/null; }
config="no php.ini; mysqlnd, pdo, pdo_mysql"
[ "$php_ini" = 0 ] || config="$(rows_php -r 'echo php_ini_loaded_file(), " and conf.d, ", count(get_loaded_extensions()), " modules";')"
flags=$([ "$build" = 1 ] || echo ' --no-build')$([ "$cpu" = 0 ] || echo " --cpu $cpu")$([ "$instructions" = 0 ] || echo ' --instructions')$([ "$php_ini" = 0 ] || echo ' --php-ini')
echo "# load: $(machine), PHP $(rows_php -r 'echo PHP_VERSION;') ($config), $(commit_line php-ext core bench), $(date -u +%F)"
echo

python3 - "$runs" "$cpu" "$instructions" "$work" "${bare[@]}" <<'PY'
import math, os, random, re, statistics, subprocess, sys, time

runs, cpu, instructions, work = int(sys.argv[1]), sys.argv[2], sys.argv[3] == "1", sys.argv[4]
bare = ["taskset", "-c", cpu] + sys.argv[5:]
# key, label, the extension it adds (None: none), the module that must then be loaded,
# and what else must hold of it (PHP)
twin_classes = "count((new ReflectionExtension('twin'))->getClassNames())"
rows = [
    ("bare", "no extension", None, None, "true"),
    ("empty", "an empty C extension (registers nothing)", f"{work}/empty/modules/twin.so", "twin", f"{twin_classes} === 0"),
    ("twin", "C twin: mysqllock.so's classes, methods, settings; methods empty", f"{work}/full/modules/twin.so", "twin", f"{twin_classes} > 0"),
    ("dist", "mysqllock.so, profile dist (LTO, one code unit, stripped)", f"{work}/dist/libmysqllock_php.so", "mysqllock", "true"),
    ("release", "mysqllock.so, profile release (the tests' build; the archives: it without debug info)", f"{work}/release/libmysqllock_php.so", "mysqllock", "true"),
]
env = {"PATH": os.environ["PATH"], "LANG": "C"}

def argv_of(extension, code=""):
    return bare + (["-d", f"extension={extension}"] if extension else []) + ["-r", code]

# Each row loads what it names and nothing of the others, silently: a load PHP refused
# (it only warns, and exits 0) would otherwise be timed as a cheap success.
for key, _, extension, module, also in rows:
    loaded = "true" if module is None else f"extension_loaded({module!r}) && {also}"
    absent = " && ".join(f"!extension_loaded({m!r})" for m in ("twin", "mysqllock") if m != module)
    code = f"exit(({loaded}) && {absent} ? 0 : 3);"
    check = subprocess.run(argv_of(extension, code), env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True)
    if check.returncode != 0 or check.stdout or check.stderr:
        sys.exit(f"bench/load.sh: the row '{key}' does not load what it names (exit {check.returncode}):\n{check.stdout}{check.stderr}")

rows = [(key, label, argv_of(extension)) for key, label, extension, _, _ in rows]
devnull = [(os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0)]

def once(argv):
    """Wall time (ms), CPU time (ms) and minor page faults of one run, spawn to exit."""
    t0 = time.perf_counter_ns()
    pid = os.posix_spawnp(argv[0], argv, env, file_actions=devnull)
    _, status, usage = os.wait4(pid, 0)
    wall = (time.perf_counter_ns() - t0) / 1e6
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"bench/load.sh: {' '.join(argv)} exited with {os.waitstatus_to_exitcode(status)}")
    return wall, (usage.ru_utime + usage.ru_stime) * 1e3, usage.ru_minflt

for _, _, argv in rows:  # warm the page cache
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
    """Nearest rank, as bench/src/stats.rs."""
    return sorted(xs)[math.ceil(0.9 * len(xs)) - 1]

counted = {}
if instructions:
    for k, _, argv in rows:
        out = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null"] + argv[3:],
                             env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True)
        m = re.search(r"Collected : (\d+)", out.stderr)
        if out.returncode != 0 or not m:
            sys.exit(f"bench/load.sh: callgrind of {k} failed:\n{out.stderr[-2000:]}")
        counted[k] = int(m.group(1))

extra = " instructions | added | over the empty extension |" if instructions else ""
print(f"| `php -r ''` with | median | p90 | CPU, median | page faults | minus no extension (paired): time | CPU | page faults |{extra}")
print("|---|---|---|---|---|---|---|---|" + ("---|---|---|" if instructions else ""))
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
        cells.append(f"{counted[k]:,}")
        cells.append("–" if k == "bare" else f"{counted[k] - counted['bare']:+,}")
        cells.append("–" if k in ("bare", "empty") else f"{counted[k] - counted['empty']:+,}")
    print("| " + " | ".join(cells) + " |")
print()
print(f"{runs} rounds, one of each per round, the order shuffled each round (after one untimed run of each)")
print("target (issue 34): mysqllock.so's load ≤ 0.3 ms over no extension")
PY
echo
echo "command: bash bench/load.sh --runs $runs$flags; total ${SECONDS} s"
