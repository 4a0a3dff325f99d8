# shellcheck shell=bash
# What the chaos suites (tests/suites/60-chaos.sh, 61-chaos-selftest.sh, 70-galera.sh)
# share, sourced once they have set root (the repository, also the working directory),
# bin (target/release) and fail MESSAGE. server_script is the test server's own script
# (from its env file), so a suite's own server is of the same kind.
server_script=${MYSQLLOCK_SERVER_SCRIPT:-}

# chaos_need TOOL...: every tool is installed and the artefacts the workers run are
# built. Missing tools are failures, never skips: a green suite must mean "tested".
chaos_need() {
  local tool file
  for tool in "$@"; do
    command -v "$tool" >/dev/null || [ -x "/usr/sbin/$tool" ] \
      || fail "$tool is not installed (scripts/install-deps.sh installs it)"
  done
  for file in chaos mysqllock libmysqllock.so libmysqllock_php.so; do
    [ -f "$bin/$file" ] || fail "$bin/$file is missing (run cargo build --release --workspace)"
  done
}

# chaos_server DIR [original]: starts the suite's own server in DIR, of the test server's
# kind ($MYSQLLOCK_SERVER_SCRIPT: scripts/mariadb.sh or scripts/mysql.sh), and creates an
# upgraded lock table, or with `original` the original package's table (no tokens, no
# holder pids: `chaos drive --table original`); sets dsn.
chaos_server() {
  [ -n "$server_script" ] || fail "MYSQLLOCK_SERVER_SCRIPT is not set (export the test server's DIR/env)"
  bash "$server_script" start "$1" >/dev/null || fail "the suite's server did not start in $1 ($server_script)"
  dsn=$(sed -n 's/^MYSQLLOCK_TEST_DSN=//p' "$1/env")
  chaos_table "${2:-upgraded}"
}

# chaos_table upgraded|original: (re)creates the lock table on $dsn's server, empty.
chaos_table() {
  local init=(init --upgrade)
  [ "$1" = original ] && init=(init)
  # shellcheck disable=SC2016 # PHP's variables, in PHP's quotes
  php -r '
    $u = parse_url($argv[1]);
    $pdo = new PDO("mysql:host=" . $u["host"] . ";port=" . $u["port"] . ";dbname=" . ltrim($u["path"], "/"),
      rawurldecode($u["user"]), rawurldecode($u["pass"] ?? ""), [PDO::ATTR_ERRMODE => PDO::ERRMODE_EXCEPTION]);
    $pdo->exec("DROP TABLE IF EXISTS shared_locks");' "$dsn" || fail "cannot drop the lock table on $dsn"
  MYSQLLOCK_DSN=$dsn "$bin/mysqllock" "${init[@]}" >/dev/null || fail "mysqllock ${init[*]} failed"
}

# chaos_worker_c OUT: compiles the C worker (tests/chaos/worker.c) against libmysqllock.
chaos_worker_c() {
  gcc -std=c11 -Wall -Wextra -Wpedantic -Werror -I include -o "$1" tests/chaos/worker.c \
    -L "$bin" -lmysqllock -Wl,-rpath,"$bin" -lm -pthread || fail "tests/chaos/worker.c does not compile"
}
