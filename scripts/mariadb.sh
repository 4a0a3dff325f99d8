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
#
# MYSQLLOCK_SERVER_TLS=require (for start; restart keeps it): the server gets the
# certificates of scripts/tls.sh DIR/tls and require_secure_transport=ON (TCP only with
# TLS; the Unix socket counts as secure, so root's client still logs in there), plus the
# account locker_x509@127.0.0.1 (REQUIRE X509, locker's password and grants); DIR/env then
# also has MYSQLLOCK_TEST_TLS=require, MYSQLLOCK_TEST_TLS_DIR, MYSQLLOCK_TEST_X509_DSN and
# MYSQLLOCK_TEST_TLS_PORT (see tls_env in scripts/lib/servers.sh).
set -euo pipefail
# shellcheck source=scripts/lib/servers.sh
. "$(dirname "$0")/lib/servers.sh"

cmd=${1:?usage: mariadb.sh start|stop|restart DIR}
dir=${2:?usage: mariadb.sh start|stop|restart DIR}
here=$(cd "$(dirname "$0")" && pwd)
tls=

launch() {
  local port=$1 tls_options=()
  if [ "$tls" = require ]; then
    tls_options=(--ssl-ca="$dir/tls/ca.pem" --ssl-cert="$dir/tls/server-cert.pem"
      --ssl-key="$dir/tls/server-key.pem" --require-secure-transport=ON)
  fi
  # --no-defaults: never read the machine's my.cnf; everything we rely on is here.
  /usr/sbin/mariadbd --no-defaults --user="$(id -un)" \
    --datadir="$dir/data" --socket="$dir/mysqld.sock" --pid-file="$dir/mysqld.pid" \
    --port="$port" --bind-address=127.0.0.1 --skip-name-resolve --tmpdir="$dir/tmp" \
    --log-error="$dir/error.log" --max-connections=500 "${tls_options[@]}" \
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

# A server that cannot load its certificates starts all the same, without TLS: with
# require_secure_transport it would then refuse every TCP client. Say so now instead.
check_tls() {
  [ "$tls" = require ] || return 0
  local have
  have=$(mariadb --no-defaults -uroot --socket="$dir/mysqld.sock" -N -e 'SELECT @@have_ssl')
  [ "$have" = YES ] && return 0
  echo "mariadb.sh: the server has no TLS (have_ssl=$have) with the certificates of $dir/tls; log follows" >&2
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
    tls=$(server_tls)
    [ "$tls" != require ] || bash "$here/tls.sh" "$dir/tls"
    if [ ! -d "$dir/data/mysql" ]; then
      mariadb-install-db --no-defaults --user="$(id -un)" --datadir="$dir/data" --tmpdir="$dir/tmp" \
        --auth-root-authentication-method=socket >"$dir/install.log" 2>&1 \
        || { cat "$dir/install.log" >&2; exit 1; }
    fi
    port=$(free_ports 1)
    launch "$port"
    check_tls
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
    if [ "$tls" = require ]; then
      "${root_sql[@]}" <<'SQL'
-- The account that must show a client certificate signed by the test CA.
CREATE USER IF NOT EXISTS 'locker_x509'@'127.0.0.1' IDENTIFIED BY 'l0ck-s3cret' REQUIRE X509;
GRANT ALL ON mysqllock_test.* TO 'locker_x509'@'127.0.0.1';
GRANT PROCESS, CONNECTION ADMIN, RELOAD ON *.* TO 'locker_x509'@'127.0.0.1';
SQL
    fi
    cat >"$dir/env" <<ENV
MYSQLLOCK_TEST_DSN=mysql://locker:l0ck-s3cret@127.0.0.1:$port/mysqllock_test
MYSQLLOCK_TEST_ED25519_DSN=mysql://locker_ed:l0ck-s3cret@127.0.0.1:$port/mysqllock_test
MYSQLLOCK_TEST_NO_PASSWORD_DSN=mysql://locker_nopw@127.0.0.1:$port
MYSQLLOCK_TEST_PORT=$port
MYSQLLOCK_TEST_SOCKET=$dir/mysqld.sock
MYSQLLOCK_TEST_DIR=$dir
MYSQLLOCK_TEST_SERVER=mariadb
MYSQLLOCK_SERVER_SCRIPT=$here/mariadb.sh
ENV
    [ "$tls" != require ] || tls_env "$dir" "$port" >>"$dir/env"
    ;;
  stop)
    stop_server
    ;;
  restart)
    port=$(sed -n 's/^MYSQLLOCK_TEST_PORT=//p' "$dir/env")
    tls=$(started_tls "$dir")
    stop_server
    launch "$port"
    check_tls
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
