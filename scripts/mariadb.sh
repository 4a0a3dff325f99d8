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
#
# scripts/mariadb11.sh runs this script for MariaDB 11.8 LTS (Debian sid's, in the chroot of
# scripts/sid.sh): it sets MYSQLLOCK_SCRIPT_NAME and MYSQLLOCK_SERVER_CHROOT (prefixed, so
# that nothing in a caller's environment turns them on by chance), and every server
# program then runs inside that chroot (through chroot_run: in a mount namespace of its own,
# where the host's /tmp is bound, so DIR, under /tmp, means the same inside).
set -euo pipefail
me=${MYSQLLOCK_SCRIPT_NAME:-mariadb.sh}
# The chroot the server programs run in; empty: the host's.
in_root=${MYSQLLOCK_SERVER_CHROOT:-}
# shellcheck source=scripts/lib/servers.sh
. "$(dirname "$0")/lib/servers.sh"
# shellcheck source=scripts/lib/standalone.sh
. "$(dirname "$0")/lib/standalone.sh"
# shellcheck source=scripts/lib/chroot.sh
. "$(dirname "$0")/lib/chroot.sh"

cmd=${1:?usage: $me start|stop|restart DIR}
dir=${2:?usage: $me start|stop|restart DIR}
here=$(cd "$(dirname "$0")" && pwd)
tls=

# Root's client over the Unix socket, without TLS: MariaDB's clients from 11.4 on want TLS
# by default, and a 10.11 server without certificates has none (Debian 13's 11.8 client,
# in the trixie chroot, against the host's 10.11); the socket counts as secure anyway.
root_sql() {
  server mariadb --no-defaults --skip-ssl -uroot --socket="$dir/mysqld.sock" "$@"
}

launch() {
  local port=$1 tls_options=()
  if [ "$tls" = require ]; then
    tls_options=(--ssl-ca="$dir/tls/ca.pem" --ssl-cert="$dir/tls/server-cert.pem"
      --ssl-key="$dir/tls/server-key.pem" --require-secure-transport=ON)
  fi
  # --no-defaults: never read the machine's my.cnf; everything we rely on is here.
  server /usr/sbin/mariadbd --no-defaults --user="$(id -un)" \
    --datadir="$dir/data" --socket="$dir/mysqld.sock" --pid-file="$dir/mysqld.pid" \
    --port="$port" --bind-address=127.0.0.1 --skip-name-resolve --tmpdir="$dir/tmp" \
    --log-error="$dir/error.log" --max-connections=500 "${tls_options[@]}" \
    --innodb-buffer-pool-size=32M --skip-log-bin --myisam-recover-options=OFF >/dev/null 2>&1 &
  # myisam-recover-options=OFF: a crashed lock table is reported to the client, as on
  # MySQL, so the library's own repair is what the tests see.
  wait_ready 300 "$dir/error.log"
}

# A server that cannot load its certificates starts all the same, without TLS: with
# require_secure_transport it would then refuse every TCP client. Say so now instead.
check_tls() {
  [ "$tls" = require ] || return 0
  local have
  have=$(root_sql -N -e 'SELECT @@have_ssl')
  [ "$have" = YES ] && return 0
  fail_with_log "the server has no TLS (have_ssl=$have) with the certificates of $dir/tls" "$dir/error.log"
}

stop_server() {
  stop_pid "$dir/mysqld.pid" server mariadb-admin --no-defaults --skip-ssl -uroot --socket="$dir/mysqld.sock" shutdown
}

# What a test account may do beyond its database (create_accounts).
admin_grants() {
  echo "GRANT PROCESS, CONNECTION ADMIN, RELOAD ON *.* TO '$1'@'127.0.0.1';"
}

case "$cmd" in
  start)
    # Its own tmpdir: servers sharing /tmp remove each other's temporary tables
    # (a parallel mariadb-install-db then fails with "Can't find file '/tmp/#sql-...'").
    mkdir -p "$dir/tmp"
    dir=$(cd "$dir" && pwd)
    [ -z "$in_root" ] || [[ $dir == /tmp/* ]] || die "$dir: the chroot shares only /tmp with the host: give a DIR under /tmp"
    tls=$(server_tls)
    [ "$tls" != require ] || bash "$here/tls.sh" "$dir/tls"
    if [ ! -d "$dir/data/mysql" ]; then
      server mariadb-install-db --no-defaults --user="$(id -un)" --datadir="$dir/data" --tmpdir="$dir/tmp" \
        --auth-root-authentication-method=socket >"$dir/install.log" 2>&1 \
        || { cat "$dir/install.log" >&2; exit 1; }
    fi
    port=$(free_ports 1)
    launch "$port"
    check_tls
    if [ -z "$(root_sql -N -e "SELECT 1 FROM information_schema.PLUGINS WHERE PLUGIN_NAME = 'ed25519'")" ]; then
      root_sql -e "INSTALL SONAME 'auth_ed25519'"
    fi
    create_accounts
    root_sql <<'SQL'
-- An account on another authentication plugin than mysql_native_password: MariaDB
-- switches the login to ed25519, which the core's client follows.
CREATE USER IF NOT EXISTS 'locker_ed'@'127.0.0.1' IDENTIFIED VIA ed25519 USING PASSWORD('l0ck-s3cret');
GRANT ALL ON mysqllock_test.* TO 'locker_ed'@'127.0.0.1';
SQL
    write_env "$port" locker_ed
    ;;
  stop)
    stop_server
    ;;
  restart)
    restart_server
    ;;
  sql)
    shift 2
    root_sql "$@"
    ;;
  crash-table)
    db=${3:?usage: mariadb.sh crash-table DIR DB TABLE}
    table=${4:?usage: mariadb.sh crash-table DIR DB TABLE}
    crash_table "$dir/data" "$db" "$table"
    ;;
  *)
    echo "usage: $me start|stop|restart|crash-table|sql DIR" >&2
    exit 2
    ;;
esac
