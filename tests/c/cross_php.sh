#!/usr/bin/env bash
# A process using the C API and a process using the PHP extension exclude each other
# on the same lock name, in both directions, and a waiter on either side gets the lock
# once the other side releases it.
#
# Environment: MYSQLLOCK_TEST_DSN, MYSQLLOCK_BIN (libmysqllock_php.so), LOCKCTL (the
# compiled tests/c/lockctl.c; run under valgrind like every C test). Prints "ok - ..." /
# "not ok - ..." lines; exits 1 if any check failed. Set by tests/suites/40-c.sh.
set -uo pipefail
: "${MYSQLLOCK_TEST_DSN:?}" "${MYSQLLOCK_BIN:?}" "${LOCKCTL:?path to the compiled lockctl}"
here=$(cd "$(dirname "$0")" && pwd)
ext=$MYSQLLOCK_BIN/libmysqllock_php.so

failures=0
check() { # check NAME COMMAND...: one result line for the command's success
  local name=$1; shift
  if "$@"; then echo "ok - cross: $name"; else echo "not ok - cross: $name"; failures=$((failures + 1)); fi
}

if [ ! -f "$ext" ]; then
  echo "not ok - cross: the PHP extension $ext does not exist, so C/PHP exclusion was NOT tested (build php-ext, then re-run)"
  exit 1
fi

php=(php -d "extension=$ext" "$here/cross_php.php")
if ! php -d "extension=$ext" -r 'exit(class_exists("ItsMieger\\MySqlSharedLocks\\SharedLock") ? 0 : 1);'; then
  echo "not ok - cross: $ext does not register ItsMieger\\MySqlSharedLocks\\SharedLock yet, so C/PHP exclusion was NOT tested"
  exit 1
fi
# valgrind-tls.supp: on MySQL the connections are encrypted by default (see the file).
lockctl=(valgrind -q --error-exitcode=99 --leak-check=full --show-leak-kinds=definite
  --errors-for-leak-kinds=definite --suppressions="$(dirname "$0")/valgrind-tls.supp" "$LOCKCTL")
holder_pid=
trap '[ -n "$holder_pid" ] && kill "$holder_pid" 2>/dev/null' EXIT

# Runs COMMAND as a coprocess that holds a lock; succeeds once it printed "held".
start_holder() {
  coproc HOLDER { exec "$@"; }
  holder_pid=$HOLDER_PID
  local line=
  read -r -t 60 line <&"${HOLDER[0]}"
  [ "$line" = held ]
}

# Tells the holder to release, and succeeds if it did and exited cleanly.
stop_holder() {
  local line= rc
  [ -n "${HOLDER[1]:-}" ] || { echo "# the holder is gone" >&2; return 1; }
  echo release >&"${HOLDER[1]}"
  read -r -t 60 line <&"${HOLDER[0]}"
  wait "$holder_pid"; rc=$?
  holder_pid=
  [ "$line" = released ] && [ "$rc" = 0 ]
}

# Succeeds once some server session waits in a GET_LOCK on NAME (the process list shows
# the waiter's statement, where a queued name is a hex literal); fails after 20 s.
[[ $MYSQLLOCK_TEST_DSN =~ ^mysql://([^:@/]+):([^@]*)@([^:/]+):([0-9]+)/([^?]+) ]] || {
  echo "not ok - cross: MYSQLLOCK_TEST_DSN is not mysql://user:password@host:port/database"; exit 1; }
sql=(mariadb --no-defaults -N -B -h "${BASH_REMATCH[3]}" -P "${BASH_REMATCH[4]}" -u "${BASH_REMATCH[1]}" "${BASH_REMATCH[5]}")
db_password=${BASH_REMATCH[2]}
wait_queued() { # wait_queued NAME
  local hex deadline=$((SECONDS + 20)) n
  hex=$(printf %s "$1" | od -An -tx1 | tr -d ' \n' | tr a-f A-F)
  while [ $SECONDS -lt $deadline ]; do
    n=$(MYSQL_PWD=$db_password "${sql[@]}" -e "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE STATE = 'User lock' AND INFO LIKE '%$hex%'")
    [ "$n" = 1 ] && return 0
    sleep 0.05 # the poll interval of this wait helper
  done
  echo "# no session ever queued for $1" >&2
  return 1
}

# Runs COMMAND, and succeeds if it printed EXPECTED and exited with CODE.
outputs() { # outputs EXPECTED CODE COMMAND...
  local expected=$1 code=$2 out rc; shift 2
  out=$("$@"); rc=$?
  [ "$out" = "$expected" ] && [ "$rc" = "$code" ] || { echo "# got \"$out\", exit $rc" >&2; false; }
}

name="cross-$$-c-holds"
check "a C program holds a lock" start_holder "${lockctl[@]}" hold "$name" 60
check "the PHP extension's lock() throws SharedLockTimeoutException meanwhile" \
  outputs timeout 3 "${php[@]}" try "$name" 0
"${php[@]}" try "$name" 20 >"$LOCKCTL.php-waiter" & waiter=$!
check "the PHP waiter queues for the lock the C program holds" wait_queued "$name"
check "the C program releases" stop_holder
check "a waiting PHP lock() gets it after the C release" wait "$waiter"
check "... and says so" grep -qx acquired "$LOCKCTL.php-waiter"

name="cross-$$-php-holds"
check "a PHP process holds a lock" start_holder "${php[@]}" hold "$name" 60
check "a C acquire gets MYSQLLOCK_TIMEOUT meanwhile" \
  outputs MYSQLLOCK_TIMEOUT 3 "${lockctl[@]}" try "$name" 0
"${lockctl[@]}" try "$name" 20 >"$LOCKCTL.c-waiter" & waiter=$!
check "the C waiter queues for the lock the PHP process holds" wait_queued "$name"
check "the PHP process unlocks" stop_holder
check "a waiting C acquire gets it after the PHP unlock" wait "$waiter"
check "... and says so" grep -qx MYSQLLOCK_OK "$LOCKCTL.c-waiter"

rm -f "$LOCKCTL.php-waiter" "$LOCKCTL.c-waiter"
[ "$failures" = 0 ]
