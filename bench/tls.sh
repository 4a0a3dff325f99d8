#!/usr/bin/env bash
# The TLS benchmark (issue 22): what encryption costs, against PDO over TLS on the same
# server, in one run, on a server started here with TLS required
# (MYSQLLOCK_SERVER_TLS=require scripts/mariadb.sh or scripts/mysql.sh: a test CA, a
# certificate for `localhost`, require_secure_transport=ON):
#   cold  one fresh process that connects, takes a lock, releases it and exits (the
#         driver of bench/cold.sh): PDO over TLS (the floor: encrypted, certificate not
#         verified, as ssl-mode=REQUIRED), SessionLock and SharedLock with
#         ssl-mode=REQUIRED, SessionLock with VERIFY_IDENTITY (to `localhost` over TCP,
#         the chain and the name checked), and the C ABI with REQUIRED; each also minus
#         `php -r ''`
#   warm  the uncontended cycle on an open connection (bench/php/tls_cycles.php):
#         SessionLock against raw GET_LOCK/RELEASE_LOCK through PDO, both over TLS
#
#   bash bench/tls.sh                  # MariaDB; MYSQLLOCK_BENCH_SERVER=mysql for MySQL 9.7
#   bash bench/tls.sh --runs N         # cold rounds (default 40, at least 30)
#   bash bench/tls.sh --no-build       # use target/release as it is
#
# Exit status: 0 when every measurement ran (targets are reported, never asserted).
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh

runs=40
build=1
while [ $# -gt 0 ]; do
  case "$1" in
    --runs) runs=${2:?--runs needs a number}; shift ;;
    --no-build) build=0 ;;
    -h|--help) print_help; exit 0 ;;
    *) unknown_argument "$1" "--runs N, --no-build" ;;
  esac
  shift
done

need_tools php openssl python3 gcc taskset
need_php_modules pdo_mysql

SECONDS=0
build_packages mysqllock-ffi mysqllock-php
builds=(libmysqllock.so libmysqllock_php.so)
need_built "${builds[@]}"
make_work tls
cp "${builds[@]/#/target/release/}" "$work/"
gcc -std=c11 -O2 -Wall -Wextra -Wpedantic -Werror -Iinclude bench/c/cold_open.c \
  -o "$work/cold_open" -L"$work" -lmysqllock -Wl,-rpath,"$work"

set_placements 0,1
MYSQLLOCK_SERVER_TLS=require start_server "${pinned[@]}"
[ -n "${MYSQLLOCK_TEST_TLS_DIR:-}" ] || die "the server script did not start a TLS server (no MYSQLLOCK_TEST_TLS_DIR)"
ca=$MYSQLLOCK_TEST_TLS_DIR/ca.pem
[ -z "${cpu_b:-}" ] || taskset -a -p -c "$cpu_b" "$(cat "$work/db/mysqld.pid")" >/dev/null
required="$MYSQLLOCK_TEST_DSN?ssl-mode=REQUIRED"
identity="${MYSQLLOCK_TEST_DSN/@127.0.0.1:/@localhost:}?ssl-mode=VERIFY_IDENTITY&ssl-ca=$ca"
export MYSQLLOCK_BENCH_DSN=$MYSQLLOCK_TEST_DSN MYSQLLOCK_BENCH_PDO_SSL_CA=$ca
export MYSQLLOCK_BENCH_VARS=Questions,Com_stmt_prepare

spec=$work/spec.json
python3 - "$spec" "$work" "$root" "$required" "$identity" "$cpu_a" <<'PY'
import json, sys
spec_file, work, root, required, identity, cpu = sys.argv[1:]
pin = ["taskset", "-c", cpu]
def php(dsn):
    return pin + ["php", "-n", "-d", "extension=mysqlnd.so", "-d", "extension=pdo.so", "-d", "extension=pdo_mysql.so",
                  "-d", f"extension={work}/libmysqllock_php.so", "-d", f"mysqllock.dsn=\"{dsn}\""]
once = f"{root}/bench/php/cold_once.php"
rows = [
    dict(key="empty", label="`php -r ''` (extension loaded)", argv=php(required) + ["-r", ""], group="php"),
    dict(key="pdo", label="floor: PDO over TLS, `GET_LOCK` + `RELEASE_LOCK`", argv=php(required) + [once, "pdo", "tls-pdo"], group="php"),
    dict(key="session", label="`SessionLock`, `ssl-mode=REQUIRED`", argv=php(required) + [once, "session", "tls-session"], group="php", floor="pdo"),
    dict(key="identity", label="`SessionLock`, `ssl-mode=VERIFY_IDENTITY`", argv=php(identity) + [once, "session", "tls-identity"], group="php", floor="pdo"),
    dict(key="c", label="C ABI open, `session_lock`, `session_unlock`, free, `REQUIRED`", argv=pin + [f"{work}/cold_open", required, "tls-c"], group="server"),
]
json.dump(rows, open(spec_file, "w"))
PY

echo "# TLS: $(machine), $(server_version), PHP $(php -r 'echo PHP_VERSION;'), $(commit_line core ffi php-ext), $(date -u +%F)"
echo
echo "Clients on CPU $cpu_a, server on CPU ${cpu_b:-$cpu_a}; every connection below is encrypted (the server requires it)."
echo
echo "## Cold start, one fresh process each ($runs rounds)"
echo
echo "| process | median | p90 | CPU (user + system), median | minus \`php -r ''\` (paired) | against the floor | statements per run (server count, with the disconnect) |"
echo "|---|---|---|---|---|---|---|"
php -d "extension=$work/libmysqllock_php.so" bench/php/cold_startup.php "$runs" "$spec"
echo
echo "## The uncontended cycle on an open connection"
echo
echo "| implementation | median per cycle | p90 | against PDO over TLS |"
echo "|---|---|---|---|"
MYSQLLOCK_BENCH_EXT=$work/libmysqllock_php.so MYSQLLOCK_BENCH_TLS_URL=$required \
  MYSQLLOCK_BENCH_DSN=$MYSQLLOCK_TEST_DSN \
  taskset -c "$cpu_a" php -n -d extension=mysqlnd.so -d extension=pdo.so -d extension=pdo_mysql.so \
  -d "extension=$work/libmysqllock_php.so" bench/php/tls_cycles.php 200 20
echo
echo "command: MYSQLLOCK_BENCH_SERVER=$bench_server bash bench/tls.sh --runs $runs; total $SECONDS s"
