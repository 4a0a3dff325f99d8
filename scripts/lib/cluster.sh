# shellcheck shell=bash disable=SC2154
# (SC2154: $me, $unit, $dir and the like are set by the sourcing script.)
# What scripts/galera.sh and scripts/group-replication.sh share, so that the cluster
# suites can drive either the same way: the three servers' processes (is K running, stop
# it, kill it), the status lines, the error logs, DIR/env, the waits of the commands, and
# the commands that are the same on both (kill, wait, status). How a server is started,
# asked for its state and joined to the others stays in the two scripts.
#
# The caller sources lib/servers.sh first and defines $me, $unit (what its servers are
# called in messages and under DIR: node, member), $daemon (the server's program),
# $whole (what they form: cluster, group), $sync_state (what a server in sync is), $dir,
# $timeout, $usage, and the functions pid_of K (K's pid if it is alive; see live_pid),
# sql K [ARGS] (its client as root on K's socket), state_fields K (the last three columns
# of K's status line), load_cluster (DIR made absolute, DIR/cluster loaded), synced K
# (a condition for poll: K is in sync) and all_synced (every running server is, and
# counts the others).

# The servers, by number.
ids=(1 2 3)

# check_id K: K names one of the servers.
check_id() {
  case "${1:-}" in
    1 | 2 | 3) ;;
    *) die "$unit must be 1, 2 or 3 ($usage)" ;;
  esac
}

# live_pid PIDFILE DATADIR: prints the pid in PIDFILE if that process is alive (a zombie
# is not) and still the server of DATADIR (not a recycled pid).
live_pid() {
  local pid state
  [ -f "$1" ] || return 1
  pid=$(cat "$1" 2>/dev/null) || return 1
  [ -n "$pid" ] && [ -r "/proc/$pid/stat" ] || return 1
  state=$(sed 's/^.*) //' "/proc/$pid/stat" 2>/dev/null | cut -d' ' -f1) || return 1
  [ "$state" != Z ] || return 1
  # grep reads to the end (no -q): quitting at the match would let tr die of SIGPIPE on a
  # command line longer than one read of /proc (4 KB; the chroot's launcher, before it
  # execs the server, has one), and pipefail would call a live server gone.
  tr '\0' '\n' <"/proc/$pid/cmdline" 2>/dev/null | grep -xF -- "--datadir=$2" >/dev/null || return 1
  echo "$pid"
}

alive() { pid_of "$1" >/dev/null; }

# The numbers of the servers whose process runs, one a line.
running() {
  local k
  for k in "${ids[@]}"; do
    if alive "$k"; then echo "$k"; fi
  done
}

# still_alive K: for conditions of poll: 2 (it never will hold) once K's process is gone.
still_alive() {
  alive "$1" || { echo "$me: $unit$1's $daemon exited" >&2; return 2; }
}

# running_count: how many servers run; 2 (for poll: never) with a message when none does.
running_count() {
  local up
  up=$(running | wc -l)
  [ "$up" -gt 0 ] || { echo "$me: no $unit is running" >&2; return 2; }
  echo "$up"
}

process_gone() { ! alive "$1"; }

# One line per server: K PID up|down and the caller's three state_fields ("-" when down).
print_status() {
  local k pid
  for k in "${ids[@]}"; do
    if pid=$(pid_of "$k"); then
      echo "$k $pid up $(state_fields "$k")"
    else
      echo "$k - down - - -"
    fi
  done
}

show_logs() {
  local k
  for k in "$@"; do
    echo "--- $unit$k: tail of $dir/$unit$k/error.log" >&2
    tail -n 25 "$dir/$unit$k/error.log" >&2 2>/dev/null || true
  done
}

# stop_one K: a clean SHUTDOWN, kill -9 after $timeout seconds.
stop_one() {
  local k=$1 pid
  pid=$(pid_of "$k") || return 0
  sql "$k" -e 'SHUTDOWN' >/dev/null 2>&1 || kill "$pid" 2>/dev/null || true
  local end=$((SECONDS + timeout))
  while alive "$k" && [ $SECONDS -lt $end ]; do sleep 0.2; done
  if alive "$k"; then
    echo "$me: $unit$k did not shut down within ${timeout}s; kill -9" >&2
    kill_one "$k"
  fi
}

# kill_one K: kill -9, of K's whole process group when K leads one (the servers are
# started with setsid, so helpers such as Galera's SST scripts go with them); returns once
# the process is gone.
kill_one() {
  local k=$1 pid pgid
  pid=$(pid_of "$k") || return 0
  pgid=$(ps -o pgid= -p "$pid" | tr -d ' ')
  if [ "$pgid" = "$pid" ]; then kill -9 -- "-$pid" 2>/dev/null || true; else kill -9 "$pid" 2>/dev/null || true; fi
  poll "$unit$k's process to exit" "" -- process_gone "$k"
}

# write_env PREFIX [LINE...]: DIR/env, whole or not at all: PREFIX{DSN,PORT,SOCKET}K of
# each server (user locker on its port), the LINEs, and PREFIX DIR.
write_env() {
  local prefix=$1 k
  shift
  {
    for k in "${ids[@]}"; do
      echo "${prefix}DSN$k=mysql://locker:l0ck-s3cret@127.0.0.1:${port[$k]}/mysqllock_test"
      echo "${prefix}PORT$k=${port[$k]}"
      echo "${prefix}SOCKET$k=$dir/$unit$k/mysqld.sock"
    done
    [ $# -eq 0 ] || printf '%s\n' "$@"
    echo "${prefix}DIR=$dir"
  } >"$dir/env.tmp"
  mv "$dir/env.tmp" "$dir/env"
}

# The commands (see the scripts' headers) ------------------------------------------------

# on_server K: how the commands on one server start: K checked, DIR/cluster loaded (the
# caller's load_cluster), $k set to K.
on_server() {
  check_id "$1"
  load_cluster
  k=$1
}

# stop_to_rejoin K: the restart command's first step: server K stopped if it runs, and
# one of the others running for it to join.
stop_to_rejoin() {
  stop_one "$1"
  [ -n "$(running)" ] || die "no $unit of $dir is running for $unit$1 to join; use start"
}

must_run() {
  alive "$1" || die "$unit$1 is not running"
}

# back_in_sync K WHAT: polls until server K is in sync again (the caller's synced; WHAT
# says what it does meanwhile, for the timeout message) and then the whole cluster
# (all_synced).
back_in_sync() {
  poll "$unit$1 $2" "${ids[*]}" -- synced "$1"
  poll "the $whole to be $sync_state" "${ids[*]}" -- all_synced
}

# shared_command CMD [K]: the commands that are the same on both clusters, kill, wait and
# status; any other CMD gets the usage and exit 2.
shared_command() {
  case "$1" in
    kill)
      on_server "$2"
      # Killing a server that is down kills nothing: a caller counting kills must hear so.
      must_run "$k"
      kill_one "$k"
      ;;
    wait)
      load_cluster
      poll "every running $unit to be $sync_state" "${ids[*]}" -- all_synced
      ;;
    status)
      load_cluster
      print_status
      ;;
    *)
      echo "$usage" >&2
      exit 2
      ;;
  esac
}
