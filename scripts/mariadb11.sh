#!/usr/bin/env bash
# A throwaway MariaDB 11.8 LTS (Debian 13's and most new installs' MariaDB), with the same
# commands and DIR/env as scripts/mariadb.sh (MYSQLLOCK_TEST_SERVER=mariadb: it is the same
# kind of server), run inside the Debian sid chroot of scripts/sid.sh, which Debian 12
# lacks the package for. DIR must be under /tmp, which the chroot shares with the host.
#
#   scripts/mariadb11.sh start|stop|restart|crash-table|sql DIR ...   # as mariadb.sh
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# Called from inside the sid chroot (a PHP suite of the matrix marking a table crashed),
# the server programs are right here. From inside another chroot sid.sh says it cannot.
if [ "${MYSQLLOCK_IN_CHROOT:-}" = sid ]; then
  MYSQLLOCK_SERVER_CHROOT=
else
  MYSQLLOCK_SERVER_CHROOT=$(bash "$here/sid.sh" root)
fi
MYSQLLOCK_SCRIPT_NAME=mariadb11.sh
# The kind of server, for tests that tell MariaDB from MySQL (lib/standalone.sh).
MYSQLLOCK_SERVER_KIND=mariadb
export MYSQLLOCK_SERVER_CHROOT MYSQLLOCK_SCRIPT_NAME MYSQLLOCK_SERVER_KIND
exec bash "$here/mariadb.sh" "$@"
