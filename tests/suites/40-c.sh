#!/usr/bin/env bash
# The C ABI: C programs built with -Werror and run under valgrind (against the shared
# and the static library), the header through PHP's FFI and Python's ctypes, and
# exclusion between C processes and PHP-extension processes.
#
# Environment (set by scripts/test.sh): MYSQLLOCK_TEST_DSN of a running server,
# MYSQLLOCK_ROOT (repository), MYSQLLOCK_BIN (where `cargo build --release` put
# libmysqllock.so / .a). Ends with "c-abi: N passed, N failed".
set -uo pipefail
root=${MYSQLLOCK_ROOT:?}
bin=${MYSQLLOCK_BIN:?}
dsn=${MYSQLLOCK_TEST_DSN:?}
cd "$root"

tally_label=c-abi
# shellcheck source=tests/suites/lib/tally.sh
. "$root/tests/suites/lib/tally.sh"

# Missing tools are failures, never skips: a green suite must mean "tested".
for tool in gcc valgrind php python3 mariadb; do
  command -v "$tool" >/dev/null || fail "$tool is not installed (scripts/install-deps.sh installs it)"
done
for lib in libmysqllock.so libmysqllock.a freezeproxy; do
  [ -f "$bin/$lib" ] || fail "$bin/$lib is missing (run cargo build --release --workspace)"
done
[ "$failed" = 0 ] || finish

work=$(mktemp -d /tmp/mysqllock-c.XXXXXX)
trap 'rm -rf "$work"' EXIT

# The lock table, with the original package's SQL (SPEC §4), created with the stock
# client so this suite does not depend on the CLI.
if [[ $dsn =~ ^mysql://([^:@/]+):([^@]*)@([^:/]+):([0-9]+)/([^?]+) ]]; then
  if MYSQL_PWD=${BASH_REMATCH[2]} mariadb --no-defaults -h "${BASH_REMATCH[3]}" -P "${BASH_REMATCH[4]}" \
    -u "${BASH_REMATCH[1]}" "${BASH_REMATCH[5]}" 2>"$work/mariadb.err" <<'SQL'
CREATE TABLE IF NOT EXISTS `shared_locks` (
  `name` varchar(64) NOT NULL, `connection_id` bigint(20) NOT NULL,
  `created` bigint(20) NOT NULL, `ttl` bigint(20) NOT NULL,
  `lock_acquired` tinyint(1) NOT NULL, UNIQUE KEY `shared_locks_ix1` (`name`)
) ENGINE=MyISAM DEFAULT CHARSET=latin1
SQL
  then pass "the shared_locks table exists"
  else fail "creating the shared_locks table: $(cat "$work/mariadb.err")"; finish
  fi
else
  fail "MYSQLLOCK_TEST_DSN is not mysql://user:password@host:port/database"
  finish
fi

# Build: the header must compile on its own and every test with the strictest flags.
cflags=(-std=c11 -Wall -Wextra -Wpedantic -Werror -I "$root/include")
shared=(-L "$bin" -lmysqllock -Wl,-rpath,"$bin" -lm -pthread)
static=("$bin/libmysqllock.a" -lm -pthread -ldl)
build() { # build NAME LINK-FLAGS...
  local name=$1; shift
  if gcc "${cflags[@]}" -o "$work/$name" "tests/c/$name.c" "$@" 2>"$work/$name.cc.err"; then
    pass "compile tests/c/$name.c"
  else
    fail "compile tests/c/$name.c: $(cat "$work/$name.cc.err")"
  fi
}
if echo '#include "mysqllock.h"' | gcc "${cflags[@]}" -fsyntax-only -x c - 2>"$work/header.err"; then
  pass "include/mysqllock.h compiles on its own with -Wall -Wextra -Wpedantic -Werror"
else
  fail "include/mysqllock.h does not compile: $(cat "$work/header.err")"
fi
# The documentation shows the example that runs here, not a copy that could rot: the
# first ```c block of docs/c.md is tests/c/example.c, byte for byte.
if awk '/^```c$/ {on = 1; next} /^```$/ && on {exit} on' docs/c.md | cmp -s - tests/c/example.c; then
  pass "docs/c.md shows tests/c/example.c verbatim"
else
  fail "docs/c.md's example differs from tests/c/example.c (or docs/c.md is missing)"
fi
build test_api "${shared[@]}"
build test_fencing "${shared[@]}"
build test_lease "${shared[@]}"
build test_recovery "${shared[@]}"
build test_silence "${shared[@]}"
build lockctl "${shared[@]}"
build test_fork "${static[@]}"
build example "${static[@]}"

# On MySQL the connections are encrypted (ssl-mode PREFERRED, and MySQL makes its own
# certificates): tests/c/valgrind-tls.supp says why ring's TLS records are suppressed.
valgrind=(valgrind -q --error-exitcode=99 --leak-check=full --show-leak-kinds=definite
  --errors-for-leak-kinds=definite --suppressions="$MYSQLLOCK_ROOT/tests/c/valgrind-tls.supp")

# Runs a test program, shows and counts its "ok" / "not ok" lines, and counts its exit
# status as one more result (99 = valgrind found memory errors or definite leaks).
run() { # run LABEL COMMAND...
  local label=$1 out=$work/$1.out err=$work/$1.err rc; shift
  echo "# $label"
  "$@" 2>"$err" | tee "$out"
  rc=${PIPESTATUS[0]}
  passed=$((passed + $(grep -c '^ok - ' "$out")))
  failed=$((failed + $(grep -c '^not ok - ' "$out")))
  case $rc in
    0) pass "$label exits cleanly" ;;
    99) fail "$label: valgrind reports errors"; cat "$err" ;;
    *) fail "$label exits with $rc"; tail -20 "$err" ;;
  esac
}

export MYSQLLOCK_TEST_DSN=$dsn
[ -x "$work/test_api" ] && run "test_api (shared library, valgrind)" "${valgrind[@]}" "$work/test_api"
[ -x "$work/test_fencing" ] && run "test_fencing (shared library, valgrind)" "${valgrind[@]}" "$work/test_fencing"
[ -x "$work/test_lease" ] && run "test_lease (shared library, valgrind)" "${valgrind[@]}" "$work/test_lease"
[ -x "$work/test_recovery" ] && run "test_recovery (shared library, valgrind)" "${valgrind[@]}" "$work/test_recovery"
# Not under valgrind: its slowdown would eat into the timing bounds under test.
[ -x "$work/test_silence" ] && MYSQLLOCK_BIN=$bin run "test_silence (shared library)" "$work/test_silence"
# The suppressions cover only what a forked child sees of the parent's keep-alive thread
# (see the file); the parent's side of keep-alive is checked by test_fencing without them.
[ -x "$work/test_fork" ] && run "test_fork (static library, valgrind)" "${valgrind[@]}" \
  --suppressions=tests/c/valgrind-fork.supp "$work/test_fork"
if [ -x "$work/example" ]; then
  run "example (static library, valgrind)" "${valgrind[@]}" "$work/example" "$dsn" "c-$$-example"
  grep -qx done "$work/example (static library, valgrind).out" \
    && pass "the documented example runs its job" || fail "the documented example did not print done"
fi

export MYSQLLOCK_LIB=$bin/libmysqllock.so MYSQLLOCK_HEADER=$root/include/mysqllock.h
run "Python ctypes" python3 tests/c/ffi_ctypes.py
run "PHP FFI" php -d ffi.enable=1 tests/c/ffi_php.php

if [ -x "$work/lockctl" ]; then
  LOCKCTL=$work/lockctl run "C and PHP extension exclude each other" bash tests/c/cross_php.sh
fi

finish
