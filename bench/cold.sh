#!/usr/bin/env bash
# The cold-start benchmark (issue 16): one fresh process that connects, takes a lock,
# releases it and exits, timed from spawn to exit, on a MariaDB started here
# (scripts/mariadb.sh, under a temp dir) and stopped on exit:
#   PHP   `php -r ''` (extension loaded), SharedLock::lock()->release(), SessionLock
#         acquire/release on the extension's native connection, and the floors: raw
#         GET_LOCK / RELEASE_LOCK through PDO, and SharedLock's statements by hand through
#         PDO (bench/php/cold_once.php); each also minus `php -r ''` (paired, round by round)
#   C     bench/c/cold_open.c: open, session_lock, session_unlock, free; against the
#         floor `mariadb --skip-ssl -e "SELECT GET_LOCK(..); SELECT RELEASE_LOCK(..)"`
#         (the client's default is TLS whenever the server offers it, as MySQL 9.7 does)
#   CLI   `mysqllock run NAME --session -- true` against `mariadb -e` and `flock FILE true`
# plus the statements per run as the server counts them. Implementations take turns
# round by round (the order shuffled each round); clients pinned with taskset to CPU A, the server
# to CPU B (--cpus A,B; default 0,1; --cpus A puts the server on A too). The product's
# connections use ssl-mode=DISABLED, like the floors (MYSQLLOCK_BENCH_SSL_MODE, see
# bench/lib.sh).
#
#   bash bench/cold.sh                   # 60 rounds
#   bash bench/cold.sh --runs N          # N rounds (>= 30 for a median and p90)
#   bash bench/cold.sh --no-build        # use target/release as it is
#   bash bench/cold.sh --baseline DIR    # also rows for the libmysqllock_php.so,
#                                        # libmysqllock.so and mysqllock in DIR (an older
#                                        # build), interleaved with these: before/after
#
# Exit status: 0 when every measurement ran (targets are reported, never asserted).
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh

runs=60
build=1
cpus=0,1
baseline=
while [ $# -gt 0 ]; do
  case "$1" in
    --runs) runs=${2:?--runs needs a number}; shift ;;
    --no-build) build=0 ;;
    --cpus) cpus=${2:?--cpus needs A,B or A}; shift ;;
    --baseline) baseline=${2:?--baseline needs a directory}; shift ;;
    -h|--help) print_help; exit 0 ;;
    *) unknown_argument "$1" "--runs N, --no-build, --cpus A,B, --baseline DIR" ;;
  esac
  shift
done

need_tools php mariadb mariadb-install-db /usr/sbin/mariadbd python3 gcc flock taskset
need_php_modules pdo_mysql

SECONDS=0
build_packages mysqllock-ffi mysqllock-php mysqllock-cli
if [ "$build" = 1 ]; then
  # The extension as the release archives ship it (Cargo.toml's profile.dist: no debug
  # info, one code unit, LTO), for the load and the cold script's target.
  echo "building (cargo build --profile dist --locked -p mysqllock-php) ..." >&2
  cargo build --profile dist --locked -p mysqllock-php >&2
fi
builds=(libmysqllock.so libmysqllock_php.so mysqllock)
need_built "${builds[@]}"
[ -f target/dist/libmysqllock_php.so ] || die "target/dist/libmysqllock_php.so is missing (cargo build --profile dist -p mysqllock-php)"
for built in "${builds[@]}"; do
  [ -z "$baseline" ] || [ -f "$baseline/$built" ] || die "$baseline/$built is missing"
done

make_work cold
# Copies, so that other builds during the run do not change what is measured.
sets=(now)
mkdir -p "$work/now"
cp "${builds[@]/#/target/release/}" "$work/now/"
mkdir -p "$work/dist"
cp target/dist/libmysqllock_php.so "$work/dist/"
if [ -n "$baseline" ]; then
  sets+=(before)
  mkdir -p "$work/before"
  cp "${builds[@]/#/$baseline/}" "$work/before/"
fi
for set in "${sets[@]}"; do
  gcc -std=c11 -O2 -Wall -Wextra -Wpedantic -Werror -Iinclude bench/c/cold_open.c \
    -o "$work/$set/cold_open" -L"$work/$set" -lmysqllock -Wl,-rpath,"$work/$set"
done

set_placements "$cpus"
start_server "${pinned[@]}"
[ -z "${cpu_b:-}" ] || taskset -a -p -c "$cpu_b" "$(cat "$work/db/mysqld.pid")" >/dev/null
"$work/now/mysqllock" --dsn "$product_dsn" init >&2
# cold_once.php: the PDO floor takes the server and login from it, SharedLock its ssl-mode too.
export MYSQLLOCK_BENCH_DSN=$product_dsn
export MYSQLLOCK_BENCH_SOCKET=$MYSQLLOCK_TEST_SOCKET
export MYSQLLOCK_BENCH_VARS=Questions,Com_stmt_prepare
u=${MYSQLLOCK_TEST_DSN#mysql://}
db_user=${u%%:*} rest=${u#*:}
db_pass=${rest%%@*}

# The spec: key, label, argv, group, floor (see bench/php/cold_startup.php).
spec=$work/spec.json
python3 - "$spec" "$work" "$root" "$product_dsn" "$MYSQLLOCK_TEST_PORT" "$db_user" "$db_pass" "$cpu_a" "${sets[@]}" <<'PY'
import json, sys
spec_file, work, root, dsn, port, user, password, cpu, *sets = sys.argv[1:]
pin = ["taskset", "-c", cpu]
rows = []
bare = pin + ["php", "-n", "-d", "extension=mysqlnd.so", "-d", "extension=pdo.so", "-d", "extension=pdo_mysql.so"]
def php(set):
    return bare + ["-d", f"extension={work}/{set}/libmysqllock_php.so", "-d", f"mysqllock.dsn=\"{dsn}\""]
# Without the extension: what loading it costs, and the PDO script a user compares with
# (issue 34: the cold SharedLock script, load included, against it).
rows.append(dict(key="bare", label="`php -r ''` without the extension", argv=bare + ["-r", ""], group="bare"))
rows.append(dict(key="empty", label="`php -r ''` (extension loaded)", argv=php("now") + ["-r", ""], group="php"))
rows.append(dict(key="empty-dist", label="`php -r ''` (profile dist: LTO, one code unit, stripped)", argv=php("dist") + ["-r", ""], group="bare"))
rows.append(dict(key="pdo-bare", label="PDO `GET_LOCK` + `RELEASE_LOCK`, without the extension", argv=bare + [f"{root}/bench/php/cold_once.php", "pdo", "cold-pdo-bare"], group="bare"))
# The protocol's own cold floor: the statements a cold SharedLock sends, by hand through PDO.
rows.append(dict(key="protocol-bare", label="the protocol by hand: PDO connect, the claim `INSERT` and the releasing `DELETE` as text, without the extension", argv=bare + [f"{root}/bench/php/cold_once.php", "protocol", "cold-protocol-bare"], group="bare"))
rows.append(dict(key="pdo", label="floor: PDO `GET_LOCK` + `RELEASE_LOCK`", argv=php("now") + [f"{root}/bench/php/cold_once.php", "pdo", "cold-pdo"], group="php"))
for set in sets:
    tag = "" if set == "now" else f" [{set}]"
    at = "" if set == "now" else f"@{set}"
    if set != "now":
        # The baseline's load, against no extension as the dist build's is.
        rows.append(dict(key="empty" + at, label="`php -r ''`" + tag, argv=php(set) + ["-r", ""], group="bare"))
    rows.append(dict(key="shared" + at, label="`SharedLock::lock()->release()`" + tag, argv=php(set) + [f"{root}/bench/php/cold_once.php", "shared", "cold-shared" + at], group="php", floor="pdo"))
    if set == "now":
        rows.append(dict(key="shared-dist", label="`SharedLock::lock()->release()` (profile dist: LTO, one code unit, stripped)", argv=php("dist") + [f"{root}/bench/php/cold_once.php", "shared", "cold-shared-dist"], group="bare"))
    rows.append(dict(key="session" + at, label="`SessionLock` acquire + release" + tag, argv=php(set) + [f"{root}/bench/php/cold_once.php", "session", "cold-session" + at], group="php", floor="pdo"))
rows.append(dict(key="mariadb", label="floor: `mariadb --skip-ssl -e \"SELECT GET_LOCK(…,0); SELECT RELEASE_LOCK(…)\"`",
                 argv=pin + ["mariadb", "--no-defaults", "--skip-ssl", "-h127.0.0.1", f"-P{port}", f"-u{user}", f"-p{password}", "-e",
                             "SELECT GET_LOCK('cold-mariadb',0); SELECT RELEASE_LOCK('cold-mariadb')"], group="server"))
rows.append(dict(key="flock", label="`flock FILE true` (local, no server)", argv=pin + ["flock", f"{work}/flock", "true"], group="local"))
for set in sets:
    tag = "" if set == "now" else f" [{set}]"
    at = "" if set == "now" else f"@{set}"
    rows.append(dict(key="c" + at, label="C ABI: open, `session_lock`, `session_unlock`, free" + tag, argv=pin + [f"{work}/{set}/cold_open", dsn, "cold-c" + at], group="server", floor="mariadb"))
    rows.append(dict(key="cli" + at, label="`mysqllock run NAME --session -- true`" + tag, argv=pin + [f"{work}/{set}/mysqllock", "--dsn", dsn, "run", "cold-cli" + at, "--session", "--", "true"], group="server", floor="mariadb"))
json.dump(rows, open(spec_file, "w"))
PY

echo "# cold start: $(machine), $(server_version), PHP $(php -r 'echo PHP_VERSION;'), $(commit_line core ffi php-ext cli), $(date -u +%F), $ssl_note"
echo
echo "Clients on CPU $cpu_a, server on CPU ${cpu_b:-$cpu_a}. PHP runs with -n (no php.ini) plus mysqlnd, pdo, pdo_mysql and the extension."
echo
echo "| process | median | p90 | CPU (user + system), median | minus \`php -r ''\` (paired) | against the floor | statements per run (server count, with the disconnect) |"
echo "|---|---|---|---|---|---|---|"
php -d "extension=$work/now/libmysqllock_php.so" bench/php/cold_startup.php "$runs" "$spec"
echo
echo "command: bash bench/cold.sh --runs $runs$([ "$cpus" != 0,1 ] && echo " --cpus $cpus")$([ -n "$baseline" ] && echo " --baseline DIR"); total $SECONDS s"
