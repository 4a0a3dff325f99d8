#!/usr/bin/env bash
# server: own (a TLS-only MariaDB and MySQL of its own)
# TLS (issue 22): starts one MariaDB and one MySQL with MYSQLLOCK_SERVER_TLS=require
# (the test CA's certificate for localhost only, require_secure_transport=ON, a REQUIRE
# X509 account; scripts/tls.sh, scripts/mariadb.sh, scripts/mysql.sh), and against each,
# with the server's DIR/env loaded, checks every surface that connects:
#
#   core  cargo test --release --locked -p mysqllock-core --test tls (core/tests/tls.rs)
#   C     tests/c/test_tls.c, built -Werror against include/mysqllock.h and
#         libmysqllock.so, run under valgrind
#   CLI   tests/tls/cli.sh: issue 22's crontab line with its password in an option file
#         on three "nodes" at once, refusals with their reasons, the X509 account, a
#         --dsn password wiped from /proc/PID/cmdline
#   PHP   the PHPUnit group tls of 30-php, 35-symfony and 36-laravel (tests/php/TlsTest.php,
#         tests/bridges/*/TlsTest.php): mysqllock.dsn, configureConnection()'s
#         $additionalDsn, the PDOs the extension and the bridges open
#
# Both servers are stopped on exit, whatever happens. A missing tool is a failure, never
# a skip. MYSQLLOCK_TEST_SERVERS (as for scripts/test.sh) narrows it to one server.
#
# Environment (set by scripts/test.sh): MYSQLLOCK_ROOT (repository), MYSQLLOCK_BIN (where
# `cargo build --release` put libmysqllock.so). Ends with "tls: N passed, N failed".
set -uo pipefail
root=${MYSQLLOCK_ROOT:?MYSQLLOCK_ROOT is not set (the repository root)}
bin=${MYSQLLOCK_BIN:?MYSQLLOCK_BIN is not set (the target/release directory)}
cd "$root" || exit 1
servers=${MYSQLLOCK_TEST_SERVERS:-mariadb mysql}

tally_label=tls
tally_started=$SECONDS
# shellcheck source=tests/suites/lib/tally.sh
. "$root/tests/suites/lib/tally.sh"

for tool in cargo gcc valgrind openssl mariadb mariadb-install-db flock; do
  command -v "$tool" >/dev/null || fail "$tool is not installed (scripts/install-deps.sh installs it)"
done
[ -f "$bin/libmysqllock.so" ] || fail "$bin/libmysqllock.so is missing (run cargo build --release -p mysqllock-ffi)"
[ "$failed" = 0 ] || finish

work=$(mktemp -d /tmp/mysqllock-tls.XXXXXX)
# shellcheck disable=SC2317 # run by the trap
cleanup() {
  local server
  for server in $servers; do
    [ -f "$work/$server/env" ] && bash "scripts/$server.sh" stop "$work/$server" >/dev/null 2>&1
  done
  rm -rf "$work"
}
trap cleanup EXIT

# Both servers start at once (a few seconds each).
declare -A starting
for server in $servers; do
  MYSQLLOCK_SERVER_TLS=require bash "scripts/$server.sh" start "$work/$server" >"$work/$server.start.log" 2>&1 &
  starting[$server]=$!
done
up=()
for server in $servers; do
  if wait "${starting[$server]}"; then
    pass "a TLS-only $server started ($(sed -n 's/^MYSQLLOCK_TEST_PORT=//p' "$work/$server/env"))"
    up+=("$server")
  else
    fail "the TLS-only $server did not start: $(tail -20 "$work/$server.start.log")"
  fi
done

# Runs a check, shows its output, counts its results ("ok - " / "not ok - " lines of the
# C tests, "test NAME ... ok" / "... FAILED" lines of cargo test) and its exit status as
# one more result.
run() { # run LABEL COMMAND...
  local label=$1 out rc
  shift
  out=$work/run.$((passed + failed)).log
  echo "# $label"
  "$@" 2>&1 | tee "$out"
  rc=${PIPESTATUS[0]}
  passed=$((passed + $(grep -c -e '^ok - ' -e '^test .* \.\.\. ok$' "$out")))
  failed=$((failed + $(grep -c -e '^not ok - ' -e '^test .* \.\.\. FAILED$' "$out")))
  case $rc in
    0) pass "$label exits cleanly" ;;
    99) fail "$label: valgrind reports errors" ;;
    *) fail "$label exits with $rc" ;;
  esac
}

# The C test, built once.
cflags=(-std=c11 -Wall -Wextra -Wpedantic -Werror -I "$root/include")
if gcc "${cflags[@]}" -o "$work/test_tls" tests/c/test_tls.c -L "$bin" -lmysqllock -Wl,-rpath,"$bin" \
  -lm -pthread 2>"$work/test_tls.cc.err"; then
  pass "compile tests/c/test_tls.c"
else
  fail "compile tests/c/test_tls.c: $(cat "$work/test_tls.cc.err")"
fi

# ---- One function per surface; each runs with one server's DIR/env loaded. ----

tls_core() { # tls_core SERVER
  run "core/tests/tls.rs on $1" cargo test --release --locked -p mysqllock-core --test tls
}

tls_c() { # tls_c SERVER
  if [ ! -x "$work/test_tls" ]; then
    fail "test_tls on $1: not built"
    return
  fi
  # valgrind-tls.supp: memcheck's false alarms inside ring's assembly (see the file).
  run "tests/c/test_tls.c on $1 (shared library, valgrind)" valgrind -q --error-exitcode=99 \
    --leak-check=full --show-leak-kinds=definite --errors-for-leak-kinds=definite \
    --suppressions=tests/c/valgrind-tls.supp "$work/test_tls"
}

tls_cli() { # tls_cli SERVER
  run "tests/tls/cli.sh on $1" bash tests/tls/cli.sh
}

tls_php() { # tls_php SERVER
  # The PHPUnit group tls of the extension's and the bridges' suites (excluded from their
  # normal runs); each suite's exit status counts.
  local suite
  for suite in 30-php 35-symfony 36-laravel; do
    run "PHPUnit --group tls of $suite on $1" bash "tests/suites/$suite.sh" --group tls
  done
}

for server in "${up[@]}"; do
  echo "# --- $server"
  unset "${!MYSQLLOCK_TEST_@}"
  set -a
  # shellcheck disable=SC1090,SC1091
  . "$work/$server/env"
  set +a
  tls_core "$server"
  tls_c "$server"
  tls_cli "$server"
  tls_php "$server"
done

finish
