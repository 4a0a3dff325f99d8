#!/usr/bin/env bash
# A CLI caller of the chaos test: `mysqllock run` in a loop, its command journaling the
# section it holds (format: tests/src/bin/chaos/journal.rs).
#
#   worker-cli.sh PATH/TO/mysqllock JOURNAL NAME DSN
#
# Started by `chaos drive`, which also sets CHAOS_* (see driver.rs, spawn). Each round:
# `chaos deadline` reads the clocks, then `mysqllock run NAME` (TTL $CHAOS_TTL,
# optionally --keep-alive) runs the section: it journals `acquired` (PID: mysqllock's,
# the command's $PPID, which the lock table records too), writes to the guard (the
# protected resource) under $MYSQLLOCK_TOKEN, holds 50-400 ms, and notes the instant it
# ends, after which mysqllock releases. The section command always exits 0, so
# mysqllock's exit code speaks only of the lock: 0 = released OK, 76 = lost while the
# command ran, 75 = never acquired, 128+N = mysqllock was killed (its release reported
# nothing: the kill ends the section, or the command's end if the command had ended
# already, journaled as `error`), anything else = error. If mysqllock sees the lease
# lost, it sends the command SIGTERM: the command journals `lost`. The loop then
# journals `release` with the instant the command ended. Errors (server restarting,
# session killed) are logged and the loop goes on.
#
# With CHAOS_TOKENS=0 (the original table, which has no tokens: `chaos drive --table
# original`; mysqllock sets no MYSQLLOCK_TOKEN there) TOKEN is the section's identity, the
# MONO_NS of its `acquired` line (see journal.rs), and nothing is written to the guard,
# which needs tokens.
#
# With CHAOS_LEASE=1 (the cluster chaos, tests/suites/70-galera.sh) it runs
# `mysqllock run NAME --lease --ttl TTL --timeout T` on the node DSN names (owner:
# mysqllock's default host:PID:random). mysqllock does not tell its command the local
# deadline, so DEADLINE_NS = the monotonic clock read before mysqllock starts + TTL -
# 0.5 s: the library's own local deadline is counted from before its statement (later)
# with the same 0.5 s margin, so this is never later than the library's promise (it
# may be earlier by mysqllock's start-up and connect time, a few ms: slightly lenient).
# A keep-alive renewal is invisible here: the driver journals a stopped holder's
# deadline from the table. Exit 79 (lease lost, command terminated) and 76 (lost
# while running) are `lost`; 75 = held by another, nothing ran.
#
# MYSQLLOCK_BREAK breaks this worker on purpose, to show that the checker catches it
# (in both modes):
#   exclusion    runs the section without mysqllock, under a made-up token: 1e18 plus
#                the monotonic clock in microseconds, so it increases and lies above
#                every real token (GET_LOCK-mode tokens count up from 1, lease tokens
#                from the microseconds since 1970, about 1.8e15)
#   ignore-loss  journals every release as ok and never journals `lost`
set -u
if [ $# != 4 ]; then
  echo "usage: worker-cli.sh PATH/TO/mysqllock JOURNAL NAME DSN" >&2
  exit 2
fi
mysqllock=$1 journal=$2 name=$3
export MYSQLLOCK_DSN=$4
for var in CHAOS_BIN CHAOS_DIR CHAOS_KEEP_ALIVE CHAOS_SEED CHAOS_WORKER CHAOS_TTL CHAOS_TIMEOUT CHAOS_STOP CHAOS_TOKENS; do
  if [ -z "${!var:-}" ]; then
    echo "worker-cli: $var is not set (run me through chaos drive)" >&2
    exit 2
  fi
done
broken=${MYSQLLOCK_BREAK:-}
case $broken in
  '' | exclusion | ignore-loss) ;;
  *) echo "worker-cli: MYSQLLOCK_BREAK=$broken: expected exclusion or ignore-loss" >&2; exit 2 ;;
esac
RANDOM=$((CHAOS_SEED % 32768))
end_file=$CHAOS_DIR/workers/$CHAOS_WORKER.end
options=(--ttl "$CHAOS_TTL" --timeout "$CHAOS_TIMEOUT")
lease=${CHAOS_LEASE:-0}
if [ "$lease" = 1 ]; then
  options=(--lease --ttl "$CHAOS_TTL" --timeout "$CHAOS_TIMEOUT")
fi
if [ "$CHAOS_KEEP_ALIVE" = 1 ]; then
  options+=(--keep-alive)
fi

# The section. $1 = journal, $2 = end file, $3 = seconds to hold, $4 = DEADLINE_NS,
# $5 = MYSQLLOCK_BREAK. The end file gets "TOKEN MONO_NS" as the command ends (also
# when SIGTERM tells it the lock was lost), for the release line.
# shellcheck disable=SC2016 # expanded by the section's own shell
section='
chaos=$CHAOS_BIN token=${MYSQLLOCK_TOKEN:-} holder=$PPID
# Named here: inside lost() below, $1 and $2 would be the function arguments (none).
journal=$1 end_file=$2 breaking=$5
acquired=$("$chaos" now) || exit 0
if [ "$CHAOS_TOKENS" = 0 ]; then
  token=$acquired # the section identity
elif [ -z "$token" ]; then
  echo "worker-cli: the command got no MYSQLLOCK_TOKEN (is the table upgraded?)" >&2
  exit 0
fi
"$chaos" journal "$1" --at "$acquired" acquired "$MYSQLLOCK_NAME" "$token" "$4" "$holder" || exit 0
# The fenced resource needs tokens: none on the original table.
guard() {
  [ "$CHAOS_TOKENS" = 0 ] || "$chaos" guard "$1" "$MYSQLLOCK_NAME" "$token" "$holder"
}
lost() {
  if [ "$breaking" != ignore-loss ]; then
    "$chaos" journal "$journal" lost "$MYSQLLOCK_NAME" "$token" "$holder"
  fi
  printf "%s %s\n" "$token" "$("$chaos" now)" >"$end_file"
  exit 0
}
trap lost TERM
guard begin
sleep "$3" & # the work done under the lock (the behaviour under test)
wait $!
guard end
printf "%s %s\n" "$token" "$("$chaos" now)" >"$2"
exit 0'

while [ ! -e "$CHAOS_STOP" ]; do
  rm -f "$end_file"
  hold=$(printf '0.%03d' $((50 + RANDOM % 351)))
  if [ "$lease" = 1 ]; then
    deadline=$(($("$CHAOS_BIN" now) + ${CHAOS_TTL%.*} * 1000000000 - 500000000)) || exit 2
  else
    deadline=$("$CHAOS_BIN" deadline "$CHAOS_TTL") || exit 2
  fi
  if [ "$broken" = exclusion ]; then
    holder=$$
    MYSQLLOCK_NAME=$name MYSQLLOCK_TOKEN=$((1000000000000000000 + $("$CHAOS_BIN" now) / 1000)) \
      sh -c "$section" chaos-section "$journal" "$end_file" "$hold" "$deadline" "$broken"
    rc=$?
  else
    "$mysqllock" run "$name" "${options[@]}" -- \
      sh -c "$section" chaos-section "$journal" "$end_file" "$hold" "$deadline" "$broken" &
    holder=$!
    wait "$holder"
    rc=$?
  fi
  case $rc in
    0) result=ok ;;
    76 | 79) result=lost ;;
    75) continue ;; # timed out waiting: nothing ran
    *) result=error ;;
  esac
  if [ "$rc" != 0 ]; then
    echo "worker-cli $CHAOS_WORKER: mysqllock run exited $rc" >&2
  fi
  reported=$result
  if [ "$broken" = ignore-loss ]; then
    reported=ok
  fi
  # A run killed by a signal reported nothing about its release, so the kill ends the
  # section; but a command that had ended before (it wrote the end file) worked under the
  # lock no longer than that, and the lock may have been released and taken by the next
  # holder before the kill: the section ends there, with an unknown (`error`) release.
  if [ -s "$end_file" ]; then
    [ "$rc" -lt 128 ] || reported=error
    read -r token ended <"$end_file"
    "$CHAOS_BIN" journal "$journal" --at "$ended" release "$name" "$token" "$reported" "$holder" \
      || { echo "worker-cli $CHAOS_WORKER: cannot write the journal" >&2; exit 2; }
  fi
  case $result in
    ok | lost) ;;
    *) sleep 0.2 ;; # a pause before trying again, not a wait for anybody
  esac
done
