#!/usr/bin/env bash
# A throwaway Oracle MySQL 9.7 for tests and demos, with the same commands and the same
# DIR/env as scripts/mariadb.sh, so every suite can run against either server.
#
#   scripts/mysql.sh start DIR     # creates DIR, starts the server, writes DIR/env
#   scripts/mysql.sh stop DIR      # clean shutdown; the datadir stays until the next start
#   scripts/mysql.sh restart DIR   # same port and data, new process (fault tests)
#   scripts/mysql.sh crash-table DIR DB TABLE   # as in mariadb.sh
#   scripts/mysql.sh root          # prepares the chroot (below) and prints its path
#   scripts/mysql.sh sql DIR [ARGS...]  # the chroot's mysql client as root on DIR's server
#   scripts/mysql.sh clean         # removes the chroot, every datadir in it with it
#                                  # (refused while a server runs in it)
#
# Debian 12 has no MySQL package, and sid's (Oracle's MySQL 9.7 LTS) needs a newer glibc
# than the host's, so the server runs in a Debian sid chroot made by debootstrap once
# (about 2 minutes) and kept under /var/cache/mysqllock (MYSQLLOCK_MYSQL_ROOT overrides),
# so later runs pay nothing. Every program enters it through chroot_run
# (scripts/lib/chroot.sh): the server's mounts (/proc, /dev, /tmp) live in a mount
# namespace of its own, as long as it runs. The chroot shares the host's network: host
# programs reach the server on 127.0.0.1:PORT. Its files live inside the chroot, under
# ROOT/srv/mysqllock/ID (ID derived from DIR); DIR/server is a symlink to them, DIR/mysqld.sock
# to its socket, so a host client takes --socket=DIR/mysqld.sock, and DIR/mysqld.pid to its
# pid file (the pid is the host's: the chroot shares the process table), where
# mariadb.sh keeps it, so a test that crashes the server finds it on either.
#
# DIR/env holds what mariadb.sh's does, for accounts on MySQL's plugins:
#   MYSQLLOCK_TEST_DSN            caching_sha2_password (MySQL's default, the only one new
#                                 accounts get on 9.x: there is no mysql_native_password)
#   MYSQLLOCK_TEST_SHA256_DSN     sha256_password (deprecated, still in 9.7; also
#                                 locker_sha@localhost, for the Unix socket)
#   MYSQLLOCK_TEST_SHA256_NO_PASSWORD_DSN  sha256_password, an account without a password
#   MYSQLLOCK_TEST_ED25519_DSN    the sha256_password account again (the name is
#                                 mariadb.sh's: its account on the server's second
#                                 plugin; MySQL 9.7 has no ed25519)
#   MYSQLLOCK_TEST_NO_PASSWORD_DSN  an account without a password (caching_sha2_password)
# plus MYSQLLOCK_TEST_PORT, MYSQLLOCK_TEST_SOCKET (where locker@localhost and
# locker_sha@localhost log in), MYSQLLOCK_TEST_DIR,
# MYSQLLOCK_TEST_SERVER=mysql and MYSQLLOCK_SERVER_SCRIPT (this script).
#
# MYSQLLOCK_SERVER_TLS=require (for start; restart keeps it): as in mariadb.sh, the
# certificates of scripts/tls.sh DIR/tls (copied into the chroot, ROOT/srv/mysqllock/ID/tls,
# in place of the ones the server made itself), require_secure_transport=ON, the account
# locker_x509@127.0.0.1 (REQUIRE X509) and the same four more lines in DIR/env.
set -euo pipefail
me=mysql.sh
# shellcheck source=scripts/lib/servers.sh
. "$(dirname "$0")/lib/servers.sh"
# shellcheck source=scripts/lib/standalone.sh
. "$(dirname "$0")/lib/standalone.sh"
# shellcheck source=scripts/lib/chroot.sh
. "$(dirname "$0")/lib/chroot.sh"

here=$(cd "$(dirname "$0")" && pwd)
chroot_root=$mysql_root

# The chroot with mysqld (lib/chroot.sh makes it once).
install_mysql() {
  chroot_apt "$1" update &&
  chroot_apt "$1" install --no-install-recommends mysql-server-core mysql-client
}

ensure_root() {
  chroot_ensure "$chroot_root" "MySQL 9.7" install_mysql
}

# The server's own directory inside the chroot, for the host directory $dir.
instance_paths() {
  id=$(printf '%s' "$dir" | md5sum | cut -c1-16)
  inner=/srv/mysqllock/$id
  outer=$chroot_root$inner
}

# Datadirs of earlier runs whose host directory is gone (removed at their end) and whose
# server is not running: removed, so the cache does not grow run after run.
sweep() {
  local d owner
  for d in "$chroot_root"/srv/mysqllock/*/; do
    [ -f "$d/owner" ] || continue
    owner=$(cat "$d/owner")
    [ -d "$owner" ] && continue
    [ -f "$d/mysqld.pid" ] && kill -0 "$(cat "$d/mysqld.pid")" 2>/dev/null && continue
    rm -rf "$d"
  done
}

# chroot_run's clean environment keeps out a caller's MYSQL_PWD (a test's, for its own
# account), which would be tried for root, who has none: the server would refuse it.
root_sql() {
  chroot_run "$chroot_root" -- mysql --no-defaults -uroot --socket="$inner/mysqld.sock" "$@"
}

launch() {
  local port=$1 tls_options=()
  if [ "$tls" = require ]; then
    tls_options=(--ssl-ca="$inner/tls/ca.pem" --ssl-cert="$inner/tls/server-cert.pem"
      --ssl-key="$inner/tls/server-key.pem" --require-secure-transport=ON)
  fi
  rm -f "$outer/mysqld.sock" "$outer/mysqld.sock.lock"
  # --no-defaults: never read a my.cnf; everything we rely on is here. setsid + nohup:
  # started from a shell that exits right away, mysqld would die with it; its mount
  # namespace (chroot_command) lives as long as it does.
  # --user=root: the chroot is ours alone, and its datadir lives only inside it.
  local chroot_cmd
  chroot_command "$chroot_root" -- /usr/sbin/mysqld --no-defaults --user=root \
    --datadir="$inner/data" --socket="$inner/mysqld.sock" --pid-file="$inner/mysqld.pid" \
    --port="$port" --bind-address=127.0.0.1 --skip-name-resolve --tmpdir="$inner/tmp" \
    --log-error="$inner/error.log" --max-connections=500 --mysqlx=OFF --secure-file-priv= "${tls_options[@]}" \
    --innodb-buffer-pool-size=32M --innodb-redo-log-capacity=16M --skip-log-bin \
    --myisam-recover-options=OFF
  setsid nohup "${chroot_cmd[@]}" >/dev/null 2>&1 </dev/null &
  # myisam-recover-options=OFF: a crashed lock table is reported to the client, so the
  # library's own repair is what the tests see (as with mariadb.sh).
  wait_ready 600 "$outer/error.log"
}

# The test CA's certificates where the chrooted server can read them.
install_tls() {
  [ "$tls" = require ] || return 0
  bash "$here/tls.sh" "$dir/tls"
  mkdir -p "$outer/tls"
  cp "$dir/tls/ca.pem" "$dir/tls/server-cert.pem" "$dir/tls/server-key.pem" "$outer/tls/"
}

# A server whose certificates do not load may start without TLS (and then refuse every
# TCP client): the certificate it serves must be the test CA's, or the start fails here.
check_tls() {
  [ "$tls" = require ] || return 0
  local serving
  serving=$(root_sql -N -e "SHOW GLOBAL STATUS LIKE 'Current_tls_cert'" | cut -f2)
  [ "$serving" = "$inner/tls/server-cert.pem" ] && return 0
  fail_with_log "the server serves ${serving:-no certificate}, not $inner/tls/server-cert.pem" "$outer/error.log"
}

stop_server() {
  stop_pid "$outer/mysqld.pid" root_sql -e 'SHUTDOWN'
}

# What a test account may do beyond its database (create_accounts).
admin_grants() {
  cat <<SQL
GRANT PROCESS, RELOAD ON *.* TO '$1'@'127.0.0.1';
-- KILL of another account's session; status --session reads performance_schema.
GRANT CONNECTION_ADMIN ON *.* TO '$1'@'127.0.0.1';
GRANT SELECT ON performance_schema.* TO '$1'@'127.0.0.1';
SQL
}

cmd=${1:?usage: mysql.sh start|stop|restart|crash-table|sql DIR | mysql.sh root|clean}
case "$cmd" in
  root)
    ensure_root
    echo "$chroot_root"
    exit 0
    ;;
  clean)
    chroot_clean "$chroot_root"
    exit 0
    ;;
esac
dir=${2:?usage: mysql.sh start|stop|restart|crash-table|sql DIR}
tls=

case "$cmd" in
  start)
    ensure_root
    mkdir -p "$dir"
    dir=$(cd "$dir" && pwd)
    tls=$(server_tls)
    instance_paths
    sweep
    mkdir -p "$outer/tmp"
    echo "$dir" >"$outer/owner"
    ln -sfn "$outer" "$dir/server"
    if [ ! -d "$outer/data/mysql" ]; then
      chroot_run "$chroot_root" -- /usr/sbin/mysqld --no-defaults --initialize-insecure --user=root \
        --datadir="$inner/data" --tmpdir="$inner/tmp" >"$dir/install.log" 2>&1 \
        || { cat "$dir/install.log" >&2; exit 1; }
    fi
    install_tls
    port=$(free_ports 1)
    launch "$port"
    check_tls
    ln -sfn "$outer/mysqld.sock" "$dir/mysqld.sock"
    ln -sfn "$outer/mysqld.pid" "$dir/mysqld.pid"
    create_accounts
    root_sql <<'SQL'
CREATE USER IF NOT EXISTS 'locker_sha'@'127.0.0.1' IDENTIFIED WITH sha256_password BY 'l0ck-s3cret';
GRANT ALL ON mysqllock_test.* TO 'locker_sha'@'127.0.0.1';
CREATE USER IF NOT EXISTS 'locker_sha'@'localhost' IDENTIFIED WITH sha256_password BY 'l0ck-s3cret';
GRANT ALL ON mysqllock_test.* TO 'locker_sha'@'localhost';
CREATE USER IF NOT EXISTS 'locker_sha_nopw'@'127.0.0.1' IDENTIFIED WITH sha256_password;
SQL
    write_env "$port" locker_sha \
      "MYSQLLOCK_TEST_SHA256_DSN=mysql://locker_sha:l0ck-s3cret@127.0.0.1:$port/mysqllock_test" \
      "MYSQLLOCK_TEST_SHA256_NO_PASSWORD_DSN=mysql://locker_sha_nopw@127.0.0.1:$port"
    ;;
  stop)
    dir=$(cd "$dir" && pwd)
    instance_paths
    stop_server
    ;;
  restart)
    dir=$(cd "$dir" && pwd)
    instance_paths
    restart_server
    ;;
  sql)
    dir=$(cd "$dir" && pwd)
    instance_paths
    shift 2
    root_sql "$@"
    ;;
  crash-table)
    db=${3:?usage: mysql.sh crash-table DIR DB TABLE}
    table=${4:?usage: mysql.sh crash-table DIR DB TABLE}
    dir=$(cd "$dir" && pwd)
    instance_paths
    crash_table "$outer/data" "$db" "$table"
    ;;
  *)
    echo "usage: mysql.sh start|stop|restart|crash-table|sql DIR | mysql.sh root|clean" >&2
    exit 2
    ;;
esac
