#!/usr/bin/env bash
# A throwaway MariaDB 11.8 LTS (Debian 13's and most new installs' MariaDB), with the same
# commands and DIR/env as scripts/mariadb.sh (MYSQLLOCK_TEST_SERVER=mariadb: it is the same
# kind of server), run inside the Debian sid chroot of scripts/sid.sh, which Debian 12
# lacks the package for. DIR must be under /tmp, which the chroot shares with the host.
#
#   scripts/mariadb11.sh start|stop|restart|crash-table|sql DIR ...   # as mariadb.sh
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# Called from inside the chroot (a PHP suite of the matrix restarting its server), the
# server programs are right here.
if [ "${MYSQLLOCK_IN_SID:-}" = 1 ]; then
  in_root=
else
  in_root=$(bash "$here/sid.sh" root)
fi
me=mariadb11.sh
# The kind of server, for tests that tell MariaDB from MySQL (lib/standalone.sh).
server_kind=mariadb
export in_root me server_kind
exec bash "$here/mariadb.sh" "$@"
