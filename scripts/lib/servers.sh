# shellcheck shell=bash
# What the throwaway-server scripts share (sourced by scripts/mariadb.sh, mysql.sh,
# galera.sh and group-replication.sh): free ports, and polling a condition with a deadline.

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
