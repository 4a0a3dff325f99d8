#!/usr/bin/env bash
# A throwaway MariaDB for tests and demos: own datadir under a temp dir, 127.0.0.1 only,
# its own free port and socket, so any number of runs can share one machine.
#
#   scripts/mariadb.sh start DIR   # creates DIR, starts the server, writes DIR/env
#   scripts/mariadb.sh stop DIR    # clean shutdown; the datadir stays for inspection
#   scripts/mariadb.sh restart DIR # same port and data, new process (fault tests)
#   scripts/mariadb.sh crash-table DIR DB TABLE
#                                  # marks a MyISAM table as crashed, as a server crash
#                                  # mid-write leaves it (tests of the automatic repair)
#   scripts/mariadb.sh sql DIR [ARGS...]  # the mariadb client as root on DIR's server
#
# DIR/env holds shell assignments: MYSQLLOCK_TEST_DSN (a mysql:// URL of an ordinary
# user with a password), MYSQLLOCK_TEST_ED25519_DSN (the same on the ed25519 plugin),
# MYSQLLOCK_TEST_NO_PASSWORD_DSN (an account without a password), MYSQLLOCK_TEST_PORT,
# MYSQLLOCK_TEST_SOCKET (where the account locker@localhost logs in too), MYSQLLOCK_TEST_DIR,
# MYSQLLOCK_TEST_SERVER=mariadb
# and MYSQLLOCK_SERVER_SCRIPT (this script; scripts/mysql.sh writes the same for MySQL).
set -euo pipefail
# shellcheck source=scripts/lib/servers.sh
. "$(dirname "$0")/lib/servers.sh"

cmd=${1:?usage: mariadb.sh start|stop|restart DIR}
dir=${2:?usage: mariadb.sh start|stop|restart DIR}


launch() {
  local port=$1
  # --no-defaults: never read the machine's my.cnf; everything we rely on is here.
  /usr/sbin/mariadbd --no-defaults --user="$(id -un)" \
    --datadir="$dir/data" --socket="$dir/mysqld.sock" --pid-file="$dir/mysqld.pid" \
    --port="$port" --bind-address=127.0.0.1 --skip-name-resolve --tmpdir="$dir/tmp" \
    --log-error="$dir/error.log" --max-connections=500 \
    --innodb-buffer-pool-size=32M --skip-log-bin --myisam-recover-options=OFF >/dev/null 2>&1 &
  # myisam-recover-options=OFF: a crashed lock table is reported to the client, as on
  # MySQL, so the library's own repair is what the tests see.
  local i
  for i in $(seq 1 300); do
    if mariadb --no-defaults -uroot --socket="$dir/mysqld.sock" -e 'SELECT 1' >/dev/null 2>&1; then
      return 0
    fi
    sleep 0.1
  done
  echo "mariadb.sh: server did not become ready; log follows" >&2
  tail -20 "$dir/error.log" >&2
  return 1
}

stop_server() {
  [ -f "$dir/mysqld.pid" ] || return 0
  local pid
  pid=$(cat "$dir/mysqld.pid")
  mariadb-admin --no-defaults -uroot --socket="$dir/mysqld.sock" shutdown >/dev/null 2>&1 || kill "$pid" 2>/dev/null || true
  local i
  for i in $(seq 1 300); do
    kill -0 "$pid" 2>/dev/null || { rm -f "$dir/mysqld.pid"; return 0; }
    sleep 0.1
  done
  kill -9 "$pid" 2>/dev/null || true
  rm -f "$dir/mysqld.pid"
}

case "$cmd" in
  start)
    # Its own tmpdir: servers sharing /tmp remove each other's temporary tables
    # (a parallel mariadb-install-db then fails with "Can't find file '/tmp/#sql-...'").
    mkdir -p "$dir/tmp"
    dir=$(cd "$dir" && pwd)
    if [ ! -d "$dir/data/mysql" ]; then
      mariadb-install-db --no-defaults --user="$(id -un)" --datadir="$dir/data" --tmpdir="$dir/tmp" \
        --auth-root-authentication-method=socket >"$dir/install.log" 2>&1 \
        || { cat "$dir/install.log" >&2; exit 1; }
    fi
    port=$(free_ports 1)
    launch "$port"
    root_sql=(mariadb --no-defaults -uroot --socket="$dir/mysqld.sock")
    if [ -z "$("${root_sql[@]}" -N -e "SELECT 1 FROM information_schema.PLUGINS WHERE PLUGIN_NAME = 'ed25519'")" ]; then
      "${root_sql[@]}" -e "INSTALL SONAME 'auth_ed25519'"
    fi
    "${root_sql[@]}" <<'SQL'
CREATE DATABASE IF NOT EXISTS mysqllock_test;
CREATE USER IF NOT EXISTS 'locker'@'127.0.0.1' IDENTIFIED BY 'l0ck-s3cret';
GRANT ALL ON mysqllock_test.* TO 'locker'@'127.0.0.1';
-- The same account over the Unix socket, where the server sees the client as 'localhost'.
CREATE USER IF NOT EXISTS 'locker'@'localhost' IDENTIFIED BY 'l0ck-s3cret';
GRANT ALL ON mysqllock_test.* TO 'locker'@'localhost';
-- An account without a password (it may only log in).
CREATE USER IF NOT EXISTS 'locker_nopw'@'127.0.0.1';
GRANT PROCESS, CONNECTION ADMIN, RELOAD ON *.* TO 'locker'@'127.0.0.1';
-- An account on another authentication plugin than mysql_native_password: the
-- connection falls back from the project's own wire client to the mysql crate.
CREATE USER IF NOT EXISTS 'locker_ed'@'127.0.0.1' IDENTIFIED VIA ed25519 USING PASSWORD('l0ck-s3cret');
GRANT ALL ON mysqllock_test.* TO 'locker_ed'@'127.0.0.1';
SQL
    cat >"$dir/env" <<ENV
MYSQLLOCK_TEST_DSN=mysql://locker:l0ck-s3cret@127.0.0.1:$port/mysqllock_test
MYSQLLOCK_TEST_ED25519_DSN=mysql://locker_ed:l0ck-s3cret@127.0.0.1:$port/mysqllock_test
MYSQLLOCK_TEST_NO_PASSWORD_DSN=mysql://locker_nopw@127.0.0.1:$port
MYSQLLOCK_TEST_PORT=$port
MYSQLLOCK_TEST_SOCKET=$dir/mysqld.sock
MYSQLLOCK_TEST_DIR=$dir
MYSQLLOCK_TEST_SERVER=mariadb
MYSQLLOCK_SERVER_SCRIPT=$(cd "$(dirname "$0")" && pwd)/mariadb.sh
ENV
    ;;
  stop)
    stop_server
    ;;
  restart)
    port=$(sed -n 's/^MYSQLLOCK_TEST_PORT=//p' "$dir/env")
    stop_server
    launch "$port"
    ;;
  sql)
    shift 2
    mariadb --no-defaults -uroot --socket="$dir/mysqld.sock" "$@"
    ;;
  crash-table)
    db=${3:?usage: mariadb.sh crash-table DIR DB TABLE}
    table=${4:?usage: mariadb.sh crash-table DIR DB TABLE}
    myi="$dir/data/$db/$table.MYI"
    [ -f "$myi" ] || { echo "mariadb.sh: $myi does not exist (not a MyISAM table?)" >&2; exit 1; }
    # The server must reopen the table to read the header we change; the servers run
    # with --myisam-recover-options=OFF (see launch), so it reports the crash instead of
    # repairing behind the client's back.
    mariadb --no-defaults -uroot --socket="$dir/mysqld.sock" -e "FLUSH TABLES \`$db\`.\`$table\`"
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
    ;;
  *)
    echo "usage: mariadb.sh start|stop|restart|crash-table|sql DIR" >&2
    exit 2
    ;;
esac
