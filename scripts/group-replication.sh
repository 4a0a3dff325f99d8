#!/usr/bin/env bash
# A throwaway 3-member MySQL 9.7 Group Replication group for tests and demos, with the
# commands of scripts/galera.sh, so the cluster suites drive either the same way:
#
#   scripts/group-replication.sh start DIR      # creates DIR, starts members 1..3, writes DIR/env
#   scripts/group-replication.sh stop DIR       # clean shutdown 3,2,1 (kill -9 after the deadline)
#   scripts/group-replication.sh kill DIR K     # kill -9 member K, returns once the process is gone
#                                               # (fails if member K was not running)
#   scripts/group-replication.sh restart DIR K  # (re)starts member K once the others expelled its
#                                               # old process; it rejoins (recovery from the binlog)
#   scripts/group-replication.sh isolate DIR K  # cuts member K off the group (below): the others
#                                               # expel it
#   scripts/group-replication.sh rejoin DIR K   # undoes isolate; member K is ONLINE again
#   scripts/group-replication.sh wait DIR       # until every running member is ONLINE and sees
#                                               # exactly the running members ONLINE
#   scripts/group-replication.sh status DIR     # per member: K PID up|down STATE ROLE online-seen
#   scripts/group-replication.sh primary DIR K  # single-primary: makes member K the primary
#
# MYSQLLOCK_GR_MODE=single (default) or multi at start: single-primary (member 1
# bootstraps and is the first primary; the others are super_read_only secondaries, and
# a new primary is elected when the primary leaves: by member weight, 1 before 2 before
# 3, so tests know which) or multi-primary (every member takes writes; conflicting
# writes are settled by certification at commit). The mode is kept in DIR/cluster for
# the later commands.
#
# Every command that changes the group returns only once the group shows the change
# (polled, with a deadline of MYSQLLOCK_GR_TIMEOUT seconds, default 90); on failure it
# prints the status and the tail of the error logs concerned and exits non-zero.
#
# DIR/env holds shell assignments: MYSQLLOCK_GR_DSN1..3 (mysql:// URLs of `locker`, a
# caching_sha2_password account with all rights on database mysqllock_test, PROCESS,
# CONNECTION_ADMIN and SELECT on performance_schema), MYSQLLOCK_GR_PORT1..3,
# MYSQLLOCK_GR_SOCKET1..3, MYSQLLOCK_GR_MODE and MYSQLLOCK_GR_DIR. DIR/cluster is this
# script's own state (mode, group name, ports).
#
# The servers run in scripts/mysql.sh's Debian sid chroot (Oracle's MySQL 9.7 does not
# run on the host; group_replication.so ships in the same package), which shares the
# host's network: each member has its own client port and group communication (XCom)
# port on 127.0.0.1, and its files under ROOT/srv/mysqllock/gr-ID/memberK (DIR/memberK
# links there; DIR/memberK/mysqld.sock is its socket). GTIDs and the binary log are on
# (Group Replication needs both); a joiner or a restarted member catches up by
# distributed recovery from a donor's binary log, over the account `gr_recovery`
# (caching_sha2_password, so group_replication_recovery_get_public_key=ON: recovery
# connects without TLS and asks for the server's RSA key). Every member starts
# super_read_only and without joining (start_on_boot=OFF): the plugin lifts read-only on
# a primary once it is ONLINE, so a member that is up but not (yet) in the group never
# takes a write that the group does not know about. Memory is kept small: 32 MB buffer
# pool, 16 MB redo log, the smallest XCom message cache (128 MB, a bound, not an
# allocation).
#
# Failure detection: a member that stops answering is suspected by the others after 5 s
# of silence (fixed in Group Replication; XCom sends a heartbeat every second) and
# expelled group_replication_member_expel_timeout later: 0 here (default 5), because
# the group looks at its suspicions about every 15 s, so any wait at all became 16-21 s
# (measured) while 0 expels at the 5 s mark. Five silent seconds are still far more than
# a busy two-CPU machine keeps a healthy member quiet (Galera's scripts/galera.sh waits
# 3-5 s). A member that sees no majority for
# group_replication_unreachable_majority_timeout (10 s here; default 0 = forever) leaves
# the group by itself (ERROR, read-only) and rolls back the transactions that waited for
# the majority (its clients get error 3100, its `BEFORE` reads 3797), instead of
# holding them forever; after that, or once it learns it was expelled, it rejoins on its
# own (group_replication_autorejoin_tries).
#
# The cut (isolate) is a real one: iptables rules on the loopback interface drop member
# K's group communication in both directions, while its client port stays reachable (so
# its clients see what a cut-off member does, as with Galera's gmcast.isolate). XCom
# traffic between two members runs over connections each opens to the other's XCom port
# from an ephemeral port, so ports alone cannot separate K's outgoing connections from
# the others': each member runs as a user of its own (mysqllock-grK, uid 64300+K, added
# to the chroot), and the rules (iptables' owner match) drop whatever another user sends
# to K's XCom port and whatever K's user sends to another member's XCom port. K's own
# connection to its own port stays: XCom tests it before joining. The rules live in an
# iptables chain of the group's own (removed by stop). Dropped packets, not refused
# connections: to both sides the other simply goes silent, as in a network partition.
# Needs root and a kernel with netfilter (iptables is installed when missing). Network
# namespaces would cut as well, but clients would then lose the member too; SIGSTOP of
# mysqld would freeze it rather than cut it off.
#
# Measured on a 2-CPU VM: start 15-17 s (28-32 s while a build ran), kill + restart
# 14-17 s (5 s of it for the others to expel the dead process, up to 8 s for XCom to let
# the new one in), isolate 7 s, rejoin 4-7 s (36 s when the member did not rejoin by
# itself and had to be told, below), primary (a planned switch) under a second, stop
# about 18 s.
set -euo pipefail
me=group-replication.sh
# shellcheck source=scripts/lib/servers.sh
. "$(dirname "$0")/lib/servers.sh"
# shellcheck source=scripts/lib/chroot.sh
. "$(dirname "$0")/lib/chroot.sh"

usage="usage: group-replication.sh start|stop|wait|status DIR | group-replication.sh kill|restart|isolate|rejoin|primary DIR K"
cmd=${1:?$usage}
dir=${2:?$usage}
timeout=${MYSQLLOCK_GR_TIMEOUT:-90}
here=$(cd "$(dirname "$0")" && pwd)
recovery_password=r3c0very-s3cret

# For lib/cluster.sh: what the servers are called (in messages and under DIR), their
# program, the whole they form, and what a server in sync is (see synced).
unit=member
daemon=mysqld
whole=group
sync_state=ONLINE
# shellcheck source=scripts/lib/cluster.sh
. "$(dirname "$0")/lib/cluster.sh"

[ "$(id -u)" -eq 0 ] || die "needs root (chroot, iptables)"

ensure_packages() {
  command -v iptables >/dev/null 2>&1 && command -v python3 >/dev/null 2>&1 && return 0
  echo "group-replication.sh: installing iptables python3" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq iptables python3 >/dev/null
}

# The chroot (made by scripts/mysql.sh) and this group's paths in it.
paths() {
  chroot_root=$(bash "$here/mysql.sh" root)
  id=gr-$(printf '%s' "$dir" | md5sum | cut -c1-16)
  inner=/srv/mysqllock/$id
  outer=$chroot_root$inner
  chain=mlgr-${id:3:12}
}

# load_cluster: DIR made absolute, and what start wrote to DIR/cluster.
load_cluster() {
  dir=$(cd "$dir" && pwd)
  [ -f "$dir/cluster" ] || die "$dir/cluster not found: no group was started in $dir"
  # shellcheck source=/dev/null
  . "$dir/cluster"
  paths
}

user_of() { echo "mysqllock-gr$1"; }
uid_of() { echo $((64300 + $1)); }

# The members' own users in the chroot (once; several groups share them).
ensure_users() {
  local k
  exec 8>"$chroot_root.users.lock"
  flock 8
  for k in "${ids[@]}"; do
    chroot_run "$chroot_root" -- getent passwd "$(user_of "$k")" >/dev/null \
      || chroot_run "$chroot_root" -- useradd --system --no-create-home --home-dir /nonexistent \
        --shell /usr/sbin/nologin --uid "$(uid_of "$k")" --user-group "$(user_of "$k")"
  done
  flock -u 8
}

# Prints member K's mysqld pid if that process is alive.
pid_of() { live_pid "$outer/member$1/mysqld.pid" "$inner/member$1/data"; }

# sql K [mysql client args]: the chroot's client as root on member K's socket, given
# $sql_timeout seconds (default 10). START GROUP_REPLICATION gets the script's whole
# deadline: ending its client while it joins aborts the join halfway, which was seen to
# leave the other members unable to reach each other (both went into the minority).
sql() {
  local k=$1
  shift
  chroot_run "$chroot_root" -- timeout "${sql_timeout:-10}" mysql --no-defaults -uroot \
    --socket="$inner/member$k/mysqld.sock" --connect-timeout=2 -N -B "$@"
}

# Sets st_state, st_role (member K's own view of itself) and st_online (how many members
# K sees ONLINE), st_unreachable (how many it sees UNREACHABLE); "-" when it does not answer.
read_state() {
  local out
  st_state=- st_role=- st_online=- st_unreachable=-
  out=$(sql "$1" -e "SELECT MEMBER_ID = @@server_uuid, MEMBER_STATE, MEMBER_ROLE FROM performance_schema.replication_group_members" 2>/dev/null) || return 0
  read -r st_state st_role st_online st_unreachable < <(awk -F'\t' '
    $1 == 1 { s = $2; r = ($3 == "" ? "-" : $3) }
    $2 == "ONLINE" { n++ }
    $2 == "UNREACHABLE" { u++ }
    END { print (s == "" ? "-" : s), (r == "" ? "-" : r), n + 0, u + 0 }' <<<"$out")
}

# The state columns of print_status: MEMBER_STATE MEMBER_ROLE ONLINE-members-it-sees
state_fields() {
  read_state "$1"
  echo "$st_state $st_role $st_online"
}

# within SECONDS CONDITION...: like poll, but only says whether CONDITION held in time.
within() {
  local end=$((SECONDS + $1))
  shift
  until "$@"; do
    [ $SECONDS -lt $end ] || return 1
    sleep 0.2
  done
}

# Conditions for poll --------------------------------------------------------------------

# Member K is ONLINE; a member whose process is gone never will be.
synced() {
  still_alive "$1" || return $?
  read_state "$1"
  [ "$st_state" = ONLINE ]
}

# Every running member is ONLINE and sees exactly the running members ONLINE.
all_synced() {
  local k up
  up=$(running_count) || return $?
  for k in $(running); do
    read_state "$k"
    [ "$st_state" = ONLINE ] && [ "$st_online" = "$up" ] && [ "$st_unreachable" = 0 ] || return 1
  done
}

# Every running member but K is ONLINE and sees the others but not K; K itself sees
# members UNREACHABLE or has left the group.
member_isolated() {
  local k=$1 j up
  still_alive "$k" || return $?
  up=$(running | wc -l)
  for j in $(running); do
    [ "$j" != "$k" ] || continue
    read_state "$j"
    [ "$st_state" = ONLINE ] && [ "$st_online" = $((up - 1)) ] && [ "$st_unreachable" = 0 ] || return 1
  done
  read_state "$k"
  [ "$st_unreachable" -gt 0 ] 2>/dev/null || [ "$st_state" = ERROR ] || [ "$st_state" = OFFLINE ]
}

# Every running member is ONLINE and sees member K as the primary.
member_primary() {
  local k=$1 j role
  all_synced || return $?
  for j in $(running); do
    role=$(sql "$j" -e "SELECT MEMBER_ROLE FROM performance_schema.replication_group_members WHERE MEMBER_PORT = ${port[$k]}" 2>/dev/null) || return 1
    [ "$role" = PRIMARY ] || return 1
  done
}

# Member lifecycle -----------------------------------------------------------------------

server_options() {
  local k=$1 m="$inner/member$1"
  local seeds="127.0.0.1:${xcom[1]},127.0.0.1:${xcom[2]},127.0.0.1:${xcom[3]}"
  local single=ON everywhere=OFF
  if [ "$mode" = multi ]; then single=OFF everywhere=ON; fi
  opts=(
    --no-defaults --user="$(user_of "$k")"
    --datadir="$m/data" --tmpdir="$m/tmp" --socket="$m/mysqld.sock" --pid-file="$m/mysqld.pid"
    --log-error="$m/error.log" --port="${port[$k]}" --bind-address=127.0.0.1
    --skip-name-resolve --max-connections=500 --mysqlx=OFF --secure-file-priv=
    --innodb-buffer-pool-size=32M --innodb-redo-log-capacity=16M
    --server-id="$k" --group-replication-member-weight=$((80 - 10 * k)) --gtid-mode=ON --enforce-gtid-consistency=ON
    --log-bin="$m/data/binlog" --super-read-only=ON
    --report-host=127.0.0.1 --report-port="${port[$k]}"
    --plugin-load-add=group_replication.so
    --group-replication-group-name="$group_name"
    --group-replication-local-address="127.0.0.1:${xcom[$k]}"
    --group-replication-group-seeds="$seeds"
    --group-replication-start-on-boot=OFF --group-replication-bootstrap-group=OFF
    --group-replication-single-primary-mode=$single
    --group-replication-enforce-update-everywhere-checks=$everywhere
    --group-replication-recovery-get-public-key=ON
    --group-replication-member-expel-timeout=0
    --group-replication-unreachable-majority-timeout=10
    --group-replication-autorejoin-tries=3
    --group-replication-message-cache-size=134217728
  )
}

prepare_member() {
  local k=$1
  mkdir -p "$outer/member$k/data" "$outer/member$k/tmp"
  chown -R "$(uid_of "$k"):$(uid_of "$k")" "$outer/member$k"
  ln -sfn "$outer/member$k" "$dir/member$k"
}

# launch K: starts member K's server (not yet in the group) and waits until it answers.
launch() {
  local k=$1 i
  server_options "$k"
  rm -f "$outer/member$k/mysqld.sock" "$outer/member$k/mysqld.sock.lock" "$outer/member$k/mysqld.pid"
  # setsid + nohup: started from a shell that exits right away, mysqld would die with it.
  # Its mount namespace (chroot_command) lives as long as it does.
  local chroot_cmd
  chroot_command "$chroot_root" -- /usr/sbin/mysqld "${opts[@]}"
  setsid nohup "${chroot_cmd[@]}" </dev/null >/dev/null 2>&1 &
  disown
  for i in $(seq 1 $((timeout * 10))); do
    if sql "$k" -e 'SELECT 1' >/dev/null 2>&1; then return 0; fi
    if [ -f "$outer/member$k/mysqld.pid" ] && ! alive "$k"; then break; fi
    sleep 0.1
  done
  show_logs "$k"
  die "member$k's server did not come up"
}

join() {
  sql_timeout=$timeout sql "$1" -e 'START GROUP_REPLICATION' || { show_logs "$1"; die "START GROUP_REPLICATION failed on member$1"; }
}

# The cut: see the header. Rules are added to and removed from the group's chain. K's
# own connections to its XCom port stay open: XCom tests its local port before joining.
cut_rules() {
  local k=$1 j others=()
  for j in "${ids[@]}"; do [ "$j" = "$k" ] || others+=("${xcom[$j]}"); done
  echo "-p tcp --dport ${xcom[$k]} -m owner ! --uid-owner $(uid_of "$k") -j DROP"
  echo "-p tcp -m owner --uid-owner $(uid_of "$k") -m multiport --dports $(
    IFS=,
    echo "${others[*]}"
  ) -j DROP"
}

ensure_chain() {
  iptables -w -N "$chain" 2>/dev/null || true
  iptables -w -C OUTPUT -o lo -j "$chain" 2>/dev/null || iptables -w -I OUTPUT -o lo -j "$chain"
}

remove_chain() {
  iptables -w -D OUTPUT -o lo -j "$chain" 2>/dev/null || true
  iptables -w -F "$chain" 2>/dev/null || true
  iptables -w -X "$chain" 2>/dev/null || true
}

isolated() {
  local rule
  rule=$(cut_rules "$1" | head -n 1)
  # shellcheck disable=SC2086
  iptables -w -C "$chain" $rule 2>/dev/null
}

# Groups of earlier runs whose host directory is gone and none of whose members runs:
# removed, so the chroot does not grow run after run.
sweep() {
  local d owner k pid
  for d in "$chroot_root"/srv/mysqllock/gr-*/; do
    [ -f "$d/owner" ] || continue
    owner=$(cat "$d/owner")
    [ -d "$owner" ] && continue
    for k in "${ids[@]}"; do
      pid=$(cat "$d/member$k/mysqld.pid" 2>/dev/null) || continue
      kill -0 "$pid" 2>/dev/null && continue 2
    done
    rm -rf "$d"
  done
}

case "$cmd" in
  start)
    ensure_packages
    mode=${MYSQLLOCK_GR_MODE:-single}
    case "$mode" in single | multi) ;; *) die "MYSQLLOCK_GR_MODE=$mode: expected single or multi" ;; esac
    mkdir -p "$dir"
    dir=$(cd "$dir" && pwd)
    if [ -f "$dir/cluster" ]; then
      load_cluster
      [ -z "$(running)" ] || die "a group is already running in $dir"
    fi
    paths
    ensure_users
    sweep
    read -r -a p <<<"$(free_ports 6)"
    {
      echo "mode=$mode"
      echo "group_name=$(python3 -c 'import uuid; print(uuid.uuid4())')"
      for k in "${ids[@]}"; do
        echo "port[$k]=${p[(k - 1) * 2]} xcom[$k]=${p[(k - 1) * 2 + 1]}"
      done
    } >"$dir/cluster"
    load_cluster
    # A half-started group is of no use to anyone and would outlive the test that failed:
    # kill what was started (the logs were shown, the data stays for inspection).
    trap 'rc=$?; [ $rc -eq 0 ] || for j in "${ids[@]}"; do kill_one "$j"; done; exit $rc' EXIT
    rm -rf "$outer"
    mkdir -p "$outer"
    echo "$dir" >"$outer/owner"
    for k in "${ids[@]}"; do
      prepare_member "$k"
      chroot_run "$chroot_root" -- /usr/sbin/mysqld --no-defaults --initialize-insecure --user="$(user_of "$k")" \
        --datadir="$inner/member$k/data" --tmpdir="$inner/member$k/tmp" \
        --innodb-redo-log-capacity=16M >"$dir/install$k.log" 2>&1 \
        || { cat "$dir/install$k.log" >&2; exit 1; }
    done
    ensure_chain
    for k in "${ids[@]}"; do launch "$k"; done
    # The recovery account, on each member by itself (not logged: it is not the group's
    # transaction), and the recovery channel's credentials (kept in the datadir, so a
    # restarted member needs nothing more to rejoin).
    for k in "${ids[@]}"; do
      sql "$k" <<SQL
SET GLOBAL super_read_only = OFF;
SET SQL_LOG_BIN = 0;
CREATE USER 'gr_recovery'@'127.0.0.1' IDENTIFIED BY '$recovery_password';
GRANT REPLICATION SLAVE, CONNECTION_ADMIN, BACKUP_ADMIN, GROUP_REPLICATION_STREAM ON *.* TO 'gr_recovery'@'127.0.0.1';
SET SQL_LOG_BIN = 1;
SET GLOBAL super_read_only = ON;
CHANGE REPLICATION SOURCE TO SOURCE_USER = 'gr_recovery', SOURCE_PASSWORD = '$recovery_password' FOR CHANNEL 'group_replication_recovery';
SQL
    done
    # Member 1 founds the group; the others join one after the other.
    sql_timeout=$timeout sql 1 -e 'SET GLOBAL group_replication_bootstrap_group = ON; START GROUP_REPLICATION; SET GLOBAL group_replication_bootstrap_group = OFF' \
      || { show_logs 1; die "member1 could not bootstrap the group"; }
    poll "member1 to bootstrap the group" 1 -- synced 1
    sql 1 <<'SQL'
CREATE DATABASE IF NOT EXISTS mysqllock_test;
CREATE USER IF NOT EXISTS 'locker'@'127.0.0.1' IDENTIFIED WITH caching_sha2_password BY 'l0ck-s3cret';
GRANT ALL ON mysqllock_test.* TO 'locker'@'127.0.0.1';
GRANT PROCESS, RELOAD, CONNECTION_ADMIN ON *.* TO 'locker'@'127.0.0.1';
GRANT SELECT ON performance_schema.* TO 'locker'@'127.0.0.1';
SQL
    for k in 2 3; do
      join "$k"
      poll "member$k to join" "1 $k" -- synced "$k"
    done
    poll "all three members to be $sync_state" "1 2 3" -- all_synced
    # An ONLINE joiner has applied what the group committed before it joined (recovery
    # ends there), so user locker can log in anywhere at once: checked, not assumed.
    for k in "${ids[@]}"; do
      [ "$(sql "$k" -e "SELECT COUNT(*) FROM mysql.user WHERE User='locker' AND Host='127.0.0.1'")" = 1 ] \
        || die "member$k has not received user locker"
    done
    write_env MYSQLLOCK_GR_ "MYSQLLOCK_GR_MODE=$mode"
    trap - EXIT
    ;;
  stop)
    load_cluster
    # Undo any cut first: a member stopping while cut off would wait for the group.
    remove_chain
    for k in 3 2 1; do stop_one "$k"; done
    ;;
  restart)
    on_server "${3:-}"
    stop_to_rejoin "$k"
    # A member whose old incarnation the group still counts is refused ("already a member
    # with this server_uuid"): let the others expel it first (the failure detection above).
    poll "the running members to expel member$k's previous process" "${ids[*]}" -- all_synced
    prepare_member "$k"
    launch "$k"
    join "$k"
    back_in_sync "$k" "to rejoin"
    ;;
  isolate | rejoin)
    on_server "${3:-}"
    must_run "$k"
    if [ "$cmd" = isolate ]; then
      isolated "$k" && die "member$k is cut off already"
      ensure_chain
      while read -r rule; do
        # shellcheck disable=SC2086
        iptables -w -A "$chain" $rule
      done < <(cut_rules "$k")
      poll "the others to expel member$k" "${ids[*]}" -- member_isolated "$k"
    else
      while read -r rule; do
        # shellcheck disable=SC2086
        iptables -w -D "$chain" $rule 2>/dev/null || true
      done < <(cut_rules "$k")
      # The member learns it was expelled (or has left by itself after
      # unreachable_majority_timeout) and rejoins on its own (autorejoin_tries); should
      # that not happen (its attempts are spent, or the next is minutes away), it is
      # told to leave and join again.
      if ! within 30 synced "$k"; then
        read_state "$k"
        case $st_state in
          ERROR | OFFLINE)
            echo "group-replication.sh: member$k is $st_state 30 s after the cut ended; STOP and START GROUP_REPLICATION" >&2
            sql_timeout=$timeout sql "$k" -e 'STOP GROUP_REPLICATION' || true
            join "$k"
            ;;
        esac
      fi
      back_in_sync "$k" "to be $sync_state again"
    fi
    ;;
  primary)
    on_server "${3:-}"
    [ "$mode" = single ] || die "primary: the group is multi-primary (every member is a primary)"
    if ! member_primary "$k"; then
      uuid=$(sql "$k" -e 'SELECT @@server_uuid') || die "member$k does not answer"
      sql_timeout=$timeout sql "$k" -e "SELECT group_replication_set_as_primary('$uuid')" >/dev/null \
        || { show_logs "$k"; die "member$k could not be made the primary"; }
    fi
    poll "member$k to be the primary" "${ids[*]}" -- member_primary "$k"
    ;;
  *)
    # kill, wait, status, and the usage for anything else: the same on both clusters.
    shared_command "$cmd" "${3:-}"
    ;;
esac
