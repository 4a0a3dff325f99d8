# shellcheck shell=bash disable=SC2154
# (SC2154: $me, $here, $dir, $tls and the like are set by the sourcing script.)
# What scripts/mariadb.sh and scripts/mysql.sh share, so that both give every suite the
# same server to test against: waiting for the server, stopping it, restarting it, the
# accounts, DIR/env and the crashed MyISAM table. What differs (the server binary, where it
# runs, the accounts on each server's own plugins) stays in the two scripts.
#
# The caller sources lib/servers.sh first and defines $me, $here (its directory), $dir,
# $tls, and the functions root_sql (its client as root on DIR's server, arguments passed
# on), launch PORT, check_tls, stop_server and admin_grants USER (below).

# fail_with_log WHAT LOG: says what went wrong, shows the tail of the server's error log
# LOG, and returns 1.
fail_with_log() {
  echo "$me: $1; log follows" >&2
  tail -20 "$2" >&2
  return 1
}

# wait_ready TRIES LOG: until root_sql answers, TRIES times 0.1 s at most.
wait_ready() {
  local _
  for _ in $(seq 1 "$1"); do
    if root_sql -e 'SELECT 1' >/dev/null 2>&1; then
      return 0
    fi
    sleep 0.1
  done
  fail_with_log "server did not become ready" "$2"
}

# stop_pid PIDFILE SHUTDOWN...: runs SHUTDOWN (or kills the server if that fails), waits
# up to 30 s for the process to end (then kill -9) and removes PIDFILE.
stop_pid() {
  local pidfile=$1 pid _
  shift
  [ -f "$pidfile" ] || return 0
  pid=$(cat "$pidfile")
  "$@" >/dev/null 2>&1 || kill "$pid" 2>/dev/null || true
  for _ in $(seq 1 300); do
    kill -0 "$pid" 2>/dev/null || { rm -f "$pidfile"; return 0; }
    sleep 0.1
  done
  kill -9 "$pid" 2>/dev/null || true
  rm -f "$pidfile"
}

# restart_server: the `restart` command: same port and TLS setup as `start` chose (DIR/env
# says), new process.
restart_server() {
  local port
  port=$(sed -n 's/^MYSQLLOCK_TEST_PORT=//p' "$dir/env")
  tls=$(started_tls "$dir")
  stop_server
  launch "$port"
  check_tls
}

# create_accounts: the test database and the accounts on the server's default plugin that
# DIR/env names, and under TLS the X509 one; each gets the caller's admin_grants USER (the
# statements that let a test account see, kill and flush beyond its database).
create_accounts() {
  {
    cat <<'SQL'
CREATE DATABASE IF NOT EXISTS mysqllock_test;
CREATE USER IF NOT EXISTS 'locker'@'127.0.0.1' IDENTIFIED BY 'l0ck-s3cret';
GRANT ALL ON mysqllock_test.* TO 'locker'@'127.0.0.1';
-- The same account over the Unix socket, where the server sees the client as 'localhost'.
CREATE USER IF NOT EXISTS 'locker'@'localhost' IDENTIFIED BY 'l0ck-s3cret';
GRANT ALL ON mysqllock_test.* TO 'locker'@'localhost';
-- An account without a password (it may only log in).
CREATE USER IF NOT EXISTS 'locker_nopw'@'127.0.0.1';
SQL
    admin_grants locker
  } | root_sql
  [ "$tls" = require ] || return 0
  {
    cat <<'SQL'
-- The account that must show a client certificate signed by the test CA.
CREATE USER IF NOT EXISTS 'locker_x509'@'127.0.0.1' IDENTIFIED BY 'l0ck-s3cret' REQUIRE X509;
GRANT ALL ON mysqllock_test.* TO 'locker_x509'@'127.0.0.1';
SQL
    admin_grants locker_x509
  } | root_sql
}

# write_env PORT SECOND_USER [LINE...]: DIR/env (see the scripts' headers). SECOND_USER is
# the account on the server's second plugin (MYSQLLOCK_TEST_ED25519_DSN); the LINEs are
# what only this server's env holds, after it.
write_env() {
  local port=$1 second=$2
  shift 2
  {
    echo "MYSQLLOCK_TEST_DSN=mysql://locker:l0ck-s3cret@127.0.0.1:$port/mysqllock_test"
    echo "MYSQLLOCK_TEST_ED25519_DSN=mysql://$second:l0ck-s3cret@127.0.0.1:$port/mysqllock_test"
    [ $# -eq 0 ] || printf '%s\n' "$@"
    cat <<ENV
MYSQLLOCK_TEST_NO_PASSWORD_DSN=mysql://locker_nopw@127.0.0.1:$port
MYSQLLOCK_TEST_PORT=$port
MYSQLLOCK_TEST_SOCKET=$dir/mysqld.sock
MYSQLLOCK_TEST_DIR=$dir
MYSQLLOCK_TEST_SERVER=${MYSQLLOCK_SERVER_KIND:-${me%.sh}}
MYSQLLOCK_TEST_SERVER_VERSION=$(root_sql -N -e 'SELECT VERSION()' | cut -d' ' -f1)
MYSQLLOCK_SERVER_SCRIPT=$here/$me
ENV
    [ "$tls" != require ] || tls_env "$dir" "$port"
  } >"$dir/env"
}

# crash_table DATADIR DB TABLE: marks the MyISAM table DB.TABLE as crashed, as a server
# crash mid-write leaves it (tests of the automatic repair).
crash_table() {
  local myi="$1/$2/$3.MYI"
  [ -f "$myi" ] || die "$myi does not exist (not a MyISAM table?)"
  # The server must reopen the table to read the header we change; the servers run
  # with --myisam-recover-options=OFF (see launch), so it reports the crash instead of
  # repairing behind the client's back.
  root_sql -e "FLUSH TABLES \`$2\`.\`$3\`"
  # MyISAM's state header: the byte at offset 26 holds the "changed" flags; bit 1 is
  # STATE_CRASHED.
  python3 - "$myi" <<'PY'
import sys
path = sys.argv[1]
with open(path, "r+b") as f:
    f.seek(26)
    flags = f.read(1)[0]
    f.seek(26)
    f.write(bytes([flags | 2]))
PY
}
