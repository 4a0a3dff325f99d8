# shellcheck shell=bash disable=SC2154
# (SC2154: $me, $timeout and the like are set by the sourcing script.)
# What the throwaway-server scripts share (sourced by scripts/mariadb.sh, mysql.sh,
# galera.sh and group-replication.sh): failing with a message, running a server program
# (in a chroot or not), free ports, polling a condition with a deadline, and the TLS
# setup. Each script sets $me (its name, the prefix of its messages) before sourcing this.
# What only the standalone servers share is in lib/standalone.sh, what only the clusters
# share in lib/cluster.sh.

# die MESSAGE: says MESSAGE, prefixed with the script's name, and exits 1.
die() {
  echo "$me: $*" >&2
  exit 1
}

# server PROGRAM ARGS...: a server program, on the host or, when the caller's $in_root names
# a chroot (mariadb.sh and galera.sh take it from MYSQLLOCK_SERVER_CHROOT, which
# scripts/mariadb11.sh and galera11.sh set), inside that chroot, through chroot_run (the
# caller sources lib/chroot.sh): its mounts live as long as the program, and it sees
# chroot_run's clean environment.
server() {
  if [ -n "${in_root:-}" ]; then
    chroot_run "$in_root" -- "$@"
  else
    "$@"
  fi
}

# free_ports N: N ports free on 127.0.0.1, all held at once while picking so that none
# repeats.
free_ports() {
  python3 - "$1" <<'PY'
import socket, sys
held = []
for _ in range(int(sys.argv[1])):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    held.append(s)
print(" ".join(str(s.getsockname()[1]) for s in held))
PY
}

# poll WHAT LOGS -- CONDITION...: runs CONDITION until it returns 0; 2 means it never
# will. On failure (or after $timeout seconds) names WHAT, prints the caller's
# print_status and show_logs LOGS, and exits. The caller defines $me (its name for
# messages), $timeout, print_status and show_logs.
poll() {
  local what=$1 logs=$2 rc end=$((SECONDS + timeout))
  shift 3
  while :; do
    rc=0
    "$@" || rc=$?
    [ $rc -ne 0 ] || return 0
    if [ $rc -ne 1 ] || [ $SECONDS -ge $end ]; then
      [ $rc -ne 1 ] || echo "$me: timed out after ${timeout}s waiting for $what" >&2
      print_status >&2
      # shellcheck disable=SC2086
      show_logs $logs
      exit 1
    fi
    sleep 0.2
  done
}

# TLS for scripts/mariadb.sh and mysql.sh (issue 22). `start` with
# MYSQLLOCK_SERVER_TLS=require gives the server scripts/tls.sh's certificates (DIR/tls)
# and require_secure_transport=ON, and an account locker_x509 (REQUIRE X509); `restart`
# keeps what `start` chose (DIR/env says). Unset: no TLS setup, as before.

# server_tls: the TLS setup asked for, "" or "require"; anything else is refused.
server_tls() {
  case ${MYSQLLOCK_SERVER_TLS:-} in
    '' | require) echo "${MYSQLLOCK_SERVER_TLS:-}" ;;
    *)
      echo "$me: MYSQLLOCK_SERVER_TLS=$MYSQLLOCK_SERVER_TLS: the only setting is require (or leave it unset)" >&2
      return 1
      ;;
  esac
}

# started_tls DIR: the TLS setup DIR's server was started with (its env file says).
started_tls() {
  sed -n 's/^MYSQLLOCK_TEST_TLS=//p' "$1/env"
}

# tls_env DIR PORT: what a TLS server's DIR/env holds beyond the usual: the pem files
# (readable by clients), and a URL of the X509 account without TLS keys (tests add
# ssl-cert and ssl-key, or leave them out to see the refusal).
tls_env() {
  cat <<ENV
MYSQLLOCK_TEST_TLS=require
MYSQLLOCK_TEST_TLS_DIR=$1/tls
MYSQLLOCK_TEST_X509_DSN=mysql://locker_x509:l0ck-s3cret@127.0.0.1:$2/mysqllock_test
MYSQLLOCK_TEST_TLS_PORT=$2
ENV
}
