#!/usr/bin/env bash
# A throwaway 3-node MariaDB Galera cluster for tests and demos, all on 127.0.0.1: every
# node has its own datadir, tmpdir, socket, pid file and error log under DIR/nodeK and its
# own free ports (client, group communication, IST, SST), so any number of clusters and
# standalone servers (scripts/mariadb.sh) can share one machine.
#
#   scripts/galera.sh start DIR      # creates DIR, starts nodes 1..3, writes DIR/env
#   scripts/galera.sh stop DIR       # clean shutdown 3,2,1 (kill -9 after the deadline)
#   scripts/galera.sh kill DIR K     # kill -9 node K, returns once the process is gone
#                                    # (fails if node K was not running)
#   scripts/galera.sh restart DIR K  # (re)starts node K (also after kill) once the others
#                                    # have dropped its old process; it rejoins by IST
#   scripts/galera.sh isolate DIR K  # cuts node K off (gmcast.isolate=1): it goes non-Primary
#   scripts/galera.sh rejoin DIR K   # undoes isolate; node K catches up by IST
#   scripts/galera.sh wait DIR       # until every running node is Primary, Synced and
#                                    # counts all running nodes as its cluster
#   scripts/galera.sh status DIR     # per node: K PID up|down cluster_status local_state size
#
# Every command that changes the cluster returns only once the cluster shows the change
# (polled, with a deadline of MYSQLLOCK_GALERA_TIMEOUT seconds, default 60); on failure
# it prints the tail of the error logs concerned and exits non-zero.
#
# DIR/env holds shell assignments: MYSQLLOCK_GALERA_DSN1..3 (mysql:// URLs of an ordinary
# user with a password, one per node), MYSQLLOCK_GALERA_PORT1..3, MYSQLLOCK_GALERA_SOCKET1..3,
# MYSQLLOCK_GALERA_VERSION (what the nodes run, e.g. "11.8.9-MariaDB-4 from Debian, Galera
# 26.4.27(r...)") and MYSQLLOCK_GALERA_DIR. DIR/cluster is this script's own
# state (ports, cluster name).
#
# Failure detection is made fast, since tests wait for it: a node that stops answering is
# suspected after 3 s (evs.suspect_timeout, default 5 s) and dropped after 5 s at the
# latest (evs.inactive_timeout, default 15 s); keepalives stay at 1 s and liveness is
# checked every 0.5 s (the defaults), so a lost node is seen after about 3-4 s. Lower
# values were not taken: a busy test machine with two CPUs could then miss keepalives and
# split a healthy cluster, which would fail tests for no reason of theirs.
# Joiners get their data by rsync SST (nothing to install beyond rsync) and a restarted
# node catches up by IST from a 32 MB gcache; after kill -9 the node's last position is
# recovered from InnoDB first (mariadbd --wsrep-recover), as the packaged service does,
# so that it too can use IST instead of copying everything again. Each node keeps its
# memory and disk small: 32 MB buffer pool, 16 MB redo log, 32 MB gcache (~80 MB on disk).
# Measured on a 2-CPU VM: start 8-15 s, kill + restart 7-9 s (3-4 s of it waiting for
# the others to notice the death), isolate 4 s, rejoin 5-6 s.
#
# When run as root the servers run as user mysql (node dirs are chowned to it): as root the
# joiner's rsync SST fails with "Permission denied". Otherwise they run as the caller.
# So as root every directory above DIR must be searchable by mysql (mktemp -d makes 0700
# directories: chmod 755 it, or use DIR=$(mktemp -d) itself, which start opens up).
#
# scripts/galera11.sh runs this script for MariaDB 11.8 LTS with sid's galera-4: it sets
# MYSQLLOCK_SCRIPT_NAME and MYSQLLOCK_SERVER_CHROOT, and every server program
# (mariadb-install-db, mariadbd with its rsync SST, --wsrep-recover, the client) then runs
# inside the chroot of scripts/sid.sh, through chroot_run, which binds the host's /tmp
# there for the program alone: DIR must be under /tmp. The chroot's user mysql has a uid
# of its own, so node dirs are chowned to it from inside.
set -euo pipefail
me=${MYSQLLOCK_SCRIPT_NAME:-galera.sh}
# The chroot the server programs run in; empty: the host's.
in_root=${MYSQLLOCK_SERVER_CHROOT:-}
# shellcheck source=scripts/lib/servers.sh
. "$(dirname "$0")/lib/servers.sh"
# shellcheck source=scripts/lib/chroot.sh
. "$(dirname "$0")/lib/chroot.sh"

usage="usage: $me start|stop|wait|status DIR | $me kill|restart|isolate|rejoin DIR K"
cmd=${1:?$usage}
dir=${2:?$usage}
timeout=${MYSQLLOCK_GALERA_TIMEOUT:-60}
provider=/usr/lib/galera/libgalera_smm.so

if [ "$(id -u)" -eq 0 ]; then run_user=mysql; else run_user=$(id -un); fi
# The account mariadb-install-db gives socket access to: root, or the user it ran as.
admin_user=$(id -un)

# For lib/cluster.sh: what the servers are called (in messages and under DIR), their
# program, the whole they form, and what a server in sync is (see synced).
unit=node
daemon=mariadbd
whole=cluster
sync_state="Primary and Synced"
# shellcheck source=scripts/lib/cluster.sh
. "$(dirname "$0")/lib/cluster.sh"

# Installs what is missing on the host (nothing on a warm machine), as
# scripts/install-deps.sh does. What the chroot lacks is not installed here: its packages
# are scripts/sid.sh's list.
ensure_packages() {
  # file that proves a package is present -> Debian package providing it, where the
  # servers run (the host or $in_root)
  declare -A need=(
    [/usr/sbin/mariadbd]=mariadb-server
    [/usr/bin/wsrep_sst_rsync]=mariadb-server
    [/usr/bin/mariadb]=mariadb-client
    [$provider]=galera-4
    [/usr/bin/rsync]=rsync
    # the rsync SST script looks for its daemon's port with ss and uses ps
    [/usr/bin/ss]=iproute2
    [/usr/bin/ps]=procps
  )
  # and on the host, for this script (free_ports, kill_one)
  declare -A host_need=([/usr/bin/python3]=python3 [/usr/bin/ps]=procps)
  local probe missing=()
  for probe in "${!need[@]}"; do
    [ -e "$in_root$probe" ] || missing+=("${need[$probe]}")
  done
  [ -z "$in_root" ] || [ ${#missing[@]} -eq 0 ] \
    || die "the chroot $in_root lacks ${missing[*]}: add them to scripts/sid.sh's package list"
  for probe in "${!host_need[@]}"; do
    [ -e "$probe" ] || missing+=("${host_need[$probe]}")
  done
  [ ${#missing[@]} -gt 0 ] || return 0
  local sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  mapfile -t missing < <(printf '%s\n' "${missing[@]}" | sort -u)
  echo "galera.sh: installing ${missing[*]}" >&2
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
}

# load_cluster: DIR made absolute, and what start wrote to DIR/cluster.
load_cluster() {
  dir=$(cd "$dir" && pwd)
  [ -f "$dir/cluster" ] || die "$dir/cluster not found: no cluster was started in $dir"
  # shellcheck source=/dev/null
  . "$dir/cluster"
}

# Prints node K's mariadbd pid if that process is alive.
pid_of() { live_pid "$dir/node$1/proc.pid" "$dir/node$1/data"; }

sql() {
  local k=$1
  shift
  server timeout 10 mariadb --no-defaults -u"$admin_user" --socket="$dir/node$k/mysqld.sock" \
    --connect-timeout=2 -N -B "$@"
}

# Sets st_status, st_state, st_size for node K ("-" when it does not answer).
read_state() {
  local out
  st_status=- st_state=- st_size=-
  out=$(sql "$1" -e "SHOW GLOBAL STATUS LIKE 'wsrep_%'" 2>/dev/null) || return 0
  read -r st_status st_state st_size < <(awk -F'\t' '
    $1 == "wsrep_cluster_status" { s = $2 }
    $1 == "wsrep_local_state_comment" { l = $2; gsub(/ /, "_", l) }
    $1 == "wsrep_cluster_size" { n = $2 }
    END { print (s == "" ? "-" : s), (l == "" ? "-" : l), (n == "" ? "-" : n) }' <<<"$out")
}

# The state columns of print_status: wsrep_cluster_status wsrep_local_state_comment size
state_fields() {
  read_state "$1"
  echo "$st_status $st_state $st_size"
}

# Conditions for poll --------------------------------------------------------------------

# Node K is Primary and Synced; a node whose process is gone never will be.
synced() {
  still_alive "$1" || return $?
  read_state "$1"
  [ "$st_status" = Primary ] && [ "$st_state" = Synced ]
}

# Every running node is Primary and Synced, and counts all running nodes.
all_synced() {
  local k up
  up=$(running_count) || return $?
  for k in $(running); do
    read_state "$k"
    [ "$st_status" = Primary ] && [ "$st_state" = Synced ] && [ "$st_size" = "$up" ] || return 1
  done
}

# Node K sees itself outside the Primary component, and every other running node sees a
# Primary component without it.
node_isolated() {
  local k=$1 j up
  still_alive "$k" || return $?
  read_state "$k"
  [ "$st_status" != Primary ] && [ "$st_status" != - ] || return 1
  up=$(running | wc -l)
  for j in $(running); do
    [ "$j" != "$k" ] || continue
    read_state "$j"
    [ "$st_status" = Primary ] && [ "$st_size" = $((up - 1)) ] || return 1
  done
}

# Node lifecycle -------------------------------------------------------------------------

server_options() {
  local k=$1 n="$dir/node$1"
  opts=(
    --no-defaults --user="$run_user"
    --datadir="$n/data" --tmpdir="$n/tmp" --socket="$n/mysqld.sock" --pid-file="$n/mysqld.pid"
    --log-error="$n/error.log" --port="${port[$k]}" --bind-address=127.0.0.1
    --skip-name-resolve --max-connections=500 --skip-log-bin
    --innodb-buffer-pool-size=32M --innodb-log-file-size=16M
    --binlog-format=ROW --default-storage-engine=InnoDB --innodb-autoinc-lock-mode=2
    --wsrep-on=ON --wsrep-provider="$provider" --wsrep-cluster-name="$cluster_name"
    --wsrep-cluster-address="gcomm://127.0.0.1:${gcomm[1]},127.0.0.1:${gcomm[2]},127.0.0.1:${gcomm[3]}"
    --wsrep-node-name="node$k" --wsrep-node-address="127.0.0.1:${gcomm[$k]}"
    --wsrep-node-incoming-address="127.0.0.1:${port[$k]}"
    --wsrep-sst-method=rsync --wsrep-sst-receive-address="127.0.0.1:${sst[$k]}"
    --wsrep-provider-options="gmcast.listen_addr=tcp://127.0.0.1:${gcomm[$k]};ist.recv_addr=127.0.0.1:${ist[$k]};gcache.size=32M;evs.keepalive_period=PT1S;evs.inactive_check_period=PT0.5S;evs.suspect_timeout=PT3S;evs.inactive_timeout=PT5S"
  )
  [ -z "${provider_plugin:-}" ] || opts+=(--plugin-wsrep-provider=OFF)
}

# provider_plugin: 1 if the server has the wsrep_provider plugin (MariaDB 11), else empty.
# The plugin turns the provider options into variables of their own (gmcast.isolate is not
# among them) and refuses SET GLOBAL wsrep_provider_options, which isolate and rejoin
# need; Debian's 11.8 loads it by default, so start turns it off where it exists.
provider_plugin() {
  local help
  help=$(server /usr/sbin/mariadbd --no-defaults --verbose --help 2>/dev/null) || true
  if [[ $help == *"Enable or disable wsrep_provider plugin"* ]]; then echo 1; fi
}

prepare_dirs() {
  local k=$1 n="$dir/node$1"
  mkdir -p "$n/data" "$n/tmp"
  if [ "$(id -u)" -eq 0 ]; then
    # inside the chroot, mysql is the chroot's user (its uid differs from the host's)
    server chown -R mysql:mysql "$n"
    server runuser -u mysql -- test -w "$n/data" \
      || die "user mysql cannot write $n/data: every directory above it must be searchable (chmod o+x)"
  fi
}

# After kill -9 grastate.dat holds seqno -1 and the node would need a full SST; InnoDB
# knows the last committed position, so ask it and start from there (IST if possible).
recover_position() {
  local k=$1 n="$dir/node$1" pos
  start_position=()
  [ -f "$n/data/grastate.dat" ] && [ -f "$n/data/ibdata1" ] || return 0
  grep -q '^seqno:[[:space:]]*-1' "$n/data/grastate.dat" || return 0
  server_options "$k"
  rm -f "$n/recover.log"
  server timeout "$timeout" /usr/sbin/mariadbd "${opts[@]}" --log-error="$n/recover.log" --wsrep-recover \
    </dev/null >/dev/null 2>&1 || true
  pos=$(sed -n 's/.*WSREP: Recovered position: *\([0-9a-f-]*:-\{0,1\}[0-9]*\).*/\1/p' "$n/recover.log" 2>/dev/null | tail -n 1)
  case "$pos" in
    '' | *:-1) ;;
    *) start_position=(--wsrep-start-position="$pos") ;;
  esac
}

# launch K [extra mariadbd options]: starts node K's server in its own process group (so
# kill takes the SST helpers with it) and records its pid in DIR/nodeK/proc.pid.
launch() {
  local k=$1
  shift
  server_options "$k"
  rm -f "$dir/node$k/mysqld.sock"
  # setsid and every step of chroot_command exec what follows, so $! is mariadbd's own
  # pid; its mount namespace lives as long as it does.
  if [ -n "$in_root" ]; then
    local chroot_cmd
    chroot_command "$in_root" -- /usr/sbin/mariadbd "${opts[@]}" "$@"
    setsid "${chroot_cmd[@]}" </dev/null >/dev/null 2>&1 &
  else
    setsid /usr/sbin/mariadbd "${opts[@]}" "$@" </dev/null >/dev/null 2>&1 &
  fi
  echo $! >"$dir/node$k/proc.pid"
  disown # not this shell's job: no "Killed" notice when kill_one ends it
}

case "$cmd" in
  start)
    ensure_packages
    mkdir -p "$dir"
    dir=$(cd "$dir" && pwd)
    [ -z "$in_root" ] || [[ $dir == /tmp/* ]] || die "$dir: the chroot shares only /tmp with the host: give a DIR under /tmp"
    if [ -f "$dir/cluster" ]; then
      load_cluster
      [ -z "$(running)" ] || die "a cluster is already running in $dir"
    fi
    [ "$(id -u)" -ne 0 ] || chmod go+x "$dir"
    read -r -a p <<<"$(free_ports 12)"
    {
      echo "cluster_name=mysqllock-$(od -An -N6 -tx1 /dev/urandom | tr -d ' \n')"
      echo "provider_plugin=$(provider_plugin)"
      for k in "${ids[@]}"; do
        i=$(((k - 1) * 4))
        echo "port[$k]=${p[i]} gcomm[$k]=${p[i + 1]} ist[$k]=${p[i + 2]} sst[$k]=${p[i + 3]}"
      done
    } >"$dir/cluster"
    load_cluster
    # A half-started cluster is of no use to anyone and would outlive the test that
    # failed: kill what was started (the logs were shown, the data stays for inspection).
    trap 'rc=$?; [ $rc -eq 0 ] || for j in "${ids[@]}"; do kill_one "$j"; done; exit $rc' EXIT
    for k in "${ids[@]}"; do prepare_dirs "$k"; done
    # Only node 1 needs system tables: the others receive node 1's datadir by SST.
    if [ ! -d "$dir/node1/data/mysql" ]; then
      server mariadb-install-db --no-defaults --user="$run_user" --datadir="$dir/node1/data" \
        --tmpdir="$dir/node1/tmp" --auth-root-authentication-method=socket --skip-test-db \
        --innodb-log-file-size=16M >"$dir/node1/install.log" 2>&1 \
        || { cat "$dir/node1/install.log" >&2; exit 1; }
    fi
    # Node 1 founds the cluster; the others join it one after the other, since one donor
    # serves one SST at a time.
    launch 1 --wsrep-new-cluster
    poll "node1 to bootstrap the cluster" 1 -- synced 1
    for k in 2 3; do
      recover_position "$k"
      launch "$k" ${start_position[@]+"${start_position[@]}"}
      poll "node$k to join" "1 $k" -- synced "$k"
    done
    poll "all three nodes to be $sync_state" "1 2 3" -- all_synced
    sql 1 <<'SQL'
CREATE DATABASE IF NOT EXISTS mysqllock_test;
CREATE USER IF NOT EXISTS 'locker'@'127.0.0.1' IDENTIFIED BY 'l0ck-s3cret';
GRANT ALL ON mysqllock_test.* TO 'locker'@'127.0.0.1';
GRANT PROCESS, CONNECTION ADMIN, RELOAD ON *.* TO 'locker'@'127.0.0.1';
SQL
    # The statements above replicate asynchronously; a causal read on each node returns
    # only once that node has applied them, so the user can log in anywhere at once.
    for k in "${ids[@]}"; do
      [ "$(sql "$k" -e "SET SESSION wsrep_sync_wait=1; SELECT COUNT(*) FROM mysql.global_priv WHERE User='locker' AND Host='127.0.0.1'")" = 1 ] \
        || die "node$k has not received user locker"
    done
    # What the nodes run, for the suites to say: VERSION() and galera-4's version.
    version=$(sql 1 -e "SELECT CONCAT(VERSION(), ', Galera ', VARIABLE_VALUE) FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = 'WSREP_PROVIDER_VERSION'")
    [ -n "$version" ] || die "node1 does not say its version"
    write_env MYSQLLOCK_GALERA_ "MYSQLLOCK_GALERA_VERSION='${version//\'/}'"
    trap - EXIT
    ;;
  stop)
    load_cluster
    # 3, 2, 1: node 1 leaves last, so it is the one marked safe to bootstrap from.
    for k in 3 2 1; do stop_one "$k"; done
    ;;
  restart)
    on_server "${3:-}"
    stop_to_rejoin "$k"
    prepare_dirs "$k"
    recover_position "$k"
    # After kill -9 the others still count the dead process for a few seconds. A new one
    # arriving at the same address meanwhile confuses the membership protocol: measured,
    # the whole cluster went non-Primary for 2 s and the rejoin took 12-16 s. So let the
    # others drop the old process first (the failure detection above, about 3-4 s).
    poll "the running nodes to drop node$k's previous process" "${ids[*]}" -- all_synced
    launch "$k" ${start_position[@]+"${start_position[@]}"}
    back_in_sync "$k" "to rejoin"
    ;;
  isolate | rejoin)
    on_server "${3:-}"
    must_run "$k"
    if [ "$cmd" = isolate ]; then
      sql "$k" -e "SET GLOBAL wsrep_provider_options='gmcast.isolate=1'"
      poll "node$k to drop out of the Primary component" "${ids[*]}" -- node_isolated "$k"
    else
      sql "$k" -e "SET GLOBAL wsrep_provider_options='gmcast.isolate=0'"
      back_in_sync "$k" "to be $sync_state again"
    fi
    ;;
  *)
    # kill, wait, status, and the usage for anything else: the same on both clusters.
    shared_command "$cmd" "${3:-}"
    ;;
esac
