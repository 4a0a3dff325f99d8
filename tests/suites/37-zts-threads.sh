#!/usr/bin/env bash
# matrix: php home=zts
# Real threads in one thread-safe PHP process, as FrankenPHP and Apache's worker MPM run
# PHP: tests/zts/threads.c (the ZTS PHP's embed SAPI, libphp.so, linked with pthreads)
# serves 25 requests on each of 4 threads at once, each request with its own request
# startup and shutdown. Each request (tests/zts/request.php) takes SharedLock, SessionLock
# and DistributedLock locks that every thread contends for (each guarding a section that
# must never hold two requests), keeps locks of its own to its end, finds its thread's
# previous request's locks and session gone (checked on a connection of its own) and
# runs on a session no other request had; tests/zts/check.php then finds nothing left
# on the server. Self-test: the same run with the extension's request shutdown taken
# away by the harness (MYSQLLOCK_ZTS_BREAK=rshutdown, what a worker-mode server does)
# must fail, saying which lock outlived its request. Runs on the zts rows of tests/matrix.
set -euo pipefail
# shellcheck source=tests/suites/lib/php.sh
. "$(dirname "$0")/lib/php.sh"

threads=4
requests=25

need_php_modules pdo_mysql
command -v gcc >/dev/null 2>&1 || fail "gcc is missing (apt-get install gcc)"
work=$(mktemp -d "/tmp/mysqllock-$suite.XXXXXX")
trap 'rm -rf "$work"' EXIT

# The harness, against this PHP's embed SAPI.
# shellcheck disable=SC2046 # php-config --includes is a list of -I flags
gcc -std=gnu11 -O2 -Wall -Werror -pthread -o "$work/threads" tests/zts/threads.c \
  $("$zts_prefix/bin/php-config" --includes) -L"$zts_prefix/lib" -lphp -Wl,-rpath,"$zts_prefix/lib" \
  || fail "cannot build tests/zts/threads.c against $zts_prefix"

# The embedded PHP reads its php.ini and then the files of PHP_INI_SCAN_DIR: the extension
# and the test server.
mkdir "$work/ini"
printf 'extension=%s\nmysqllock.dsn="%s"\n' "$so" "$MYSQLLOCK_TEST_DSN" >"$work/ini/mysqllock.ini"
with_ext=(env PHP_INI_SCAN_DIR="$work/ini")
"${with_ext[@]}" "$php" tests/zts/check.php setup || fail "cannot create the test tables"

# run NAME [VAR=VALUE...]: one threaded run in $work/NAME, on lock names of its own; its
# output in $work/NAME.log.
run() {
  local name=$1 prefix
  shift
  prefix="zts-$$-$name-"
  mkdir "$work/$name"
  env PHP_INI_SCAN_DIR="$work/ini" "$@" \
    "$work/threads" "$threads" "$requests" tests/zts/request.php "$work/$name" "$prefix" >"$work/$name.log" 2>&1
}

started=$SECONDS
if ! run threaded; then
  cat "$work/threaded.log"
  fail "the threaded run failed"
fi
cat "$work/threaded.log"
"${with_ext[@]}" "$php" tests/zts/check.php verify "$work/threaded" "zts-$$-threaded-" "$threads" "$requests" \
  || fail "the threaded run left something behind"
echo "$suite: $threads threads x $requests requests in $((SECONDS - started)) s"

# Self-test: without the extension's request shutdown the locks outlive their request.
if run broken MYSQLLOCK_ZTS_BREAK=rshutdown; then
  cat "$work/broken.log"
  fail "self-test: the run without request shutdown passed"
fi
grep -E 'is still held|is still there|still exists' "$work/broken.log" >/dev/null || {
  cat "$work/broken.log"
  fail "self-test: the run without request shutdown failed, but not for a lock that outlived its request"
}
echo "$suite: self-test: without request shutdown the run fails as it must:"
grep -E 'still held|still there|still exists' "$work/broken.log" | head -n 3
"${with_ext[@]}" "$php" tests/zts/check.php clean "zts-$$-broken-" || fail "cannot remove the self-test's rows"
