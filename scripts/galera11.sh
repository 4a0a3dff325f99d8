#!/usr/bin/env bash
# A throwaway 3-node Galera cluster of MariaDB 11.8 LTS with Debian sid's galera-4, with the
# same commands and DIR/env as scripts/galera.sh, which it runs: every server program runs
# inside the Debian sid chroot of scripts/sid.sh (Debian 12 lacks the packages). DIR must
# be under /tmp, which the chroot shares with the host. Needs root (the chroot).
#
#   scripts/galera11.sh start|stop|wait|status DIR | kill|restart|isolate|rejoin DIR K
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
MYSQLLOCK_SERVER_CHROOT=$(bash "$here/sid.sh" root)
MYSQLLOCK_SCRIPT_NAME=galera11.sh
export MYSQLLOCK_SERVER_CHROOT MYSQLLOCK_SCRIPT_NAME
exec bash "$here/galera.sh" "$@"
