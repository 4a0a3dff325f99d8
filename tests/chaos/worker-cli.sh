#!/usr/bin/env bash
# A CLI caller of the chaos test: `mysqllock run` in a loop, its command writing to the
# guard (the protected resource) under $MYSQLLOCK_TOKEN.
#
#   worker-cli.sh PATH/TO/mysqllock
#
# Started by `chaos drive`, which sets CHAOS_* and MYSQLLOCK_DSN. Each round: run the
# section under the lock (TTL $CHAOS_TTL, optionally --keep-alive), then record what
# the release reported, read from mysqllock's exit code: 0 = released OK, 76 = the
# lock was lost while the command ran. The section command always exits 0 (also when
# the guard rejects it), so the exit code speaks only of the lock. The holder pid the
# guard sees is mysqllock's own (the command's $PPID; the lock table records the same).
# Errors (server restarting, session killed) are logged and the loop goes on.
set -u
mysqllock=${1:?usage: worker-cli.sh PATH/TO/mysqllock}
for var in CHAOS_DIR CHAOS_GUARD CHAOS_NAME CHAOS_KEEP_ALIVE CHAOS_SEED CHAOS_WORKER CHAOS_TTL CHAOS_TIMEOUT \
  CHAOS_STOP MYSQLLOCK_DSN; do
  if [ -z "${!var:-}" ]; then
    echo "worker-cli: $var is not set (run me through chaos drive)" >&2
    exit 2
  fi
done
RANDOM=$((CHAOS_SEED % 32768))
token_file=$CHAOS_DIR/workers/$CHAOS_WORKER.token
options=(--ttl "$CHAOS_TTL" --timeout "$CHAOS_TIMEOUT")
if [ "$CHAOS_KEEP_ALIVE" = 1 ]; then
  options+=(--keep-alive)
fi

# The section: remember the token for the release record, write to the guard, hold a
# while, write again. $1 = token file, $2 = seconds to hold.
# shellcheck disable=SC2016 # expanded by the section's own shell
section='
printf "%s\n" "${MYSQLLOCK_TOKEN:-}" >"$1"
if "$CHAOS_GUARD" guard begin "$MYSQLLOCK_NAME" "${MYSQLLOCK_TOKEN:-none}" "$PPID"; then
  sleep "$2"
  "$CHAOS_GUARD" guard end "$MYSQLLOCK_NAME" "${MYSQLLOCK_TOKEN:-none}" "$PPID"
fi
exit 0'

while [ ! -e "$CHAOS_STOP" ]; do
  rm -f "$token_file"
  hold=$(printf '0.%03d' $((50 + RANDOM % 351)))
  "$mysqllock" run "$CHAOS_NAME" "${options[@]}" -- sh -c "$section" chaos-section "$token_file" "$hold" &
  holder=$!
  wait "$holder"
  rc=$?
  token=$(cat "$token_file" 2>/dev/null)
  case $rc in
    0) result=ok ;;
    76) result=lost ;;
    75) continue ;; # timed out waiting: nothing ran
    *) result=error ;;
  esac
  if [ "$rc" != 0 ]; then
    echo "worker-cli $CHAOS_WORKER: mysqllock run exited $rc (token ${token:-none})" >&2
  fi
  # A run killed by a signal reported nothing about its release.
  if [ -n "$token" ] && [ "$rc" -lt 128 ]; then
    "$CHAOS_GUARD" guard release "$CHAOS_NAME" "$token" "$holder" "$result" \
      || { echo "worker-cli $CHAOS_WORKER: the guard failed" >&2; exit 2; }
  elif [ "$rc" = 0 ]; then
    echo "worker-cli $CHAOS_WORKER: the command got no MYSQLLOCK_TOKEN (is the table upgraded?)" >&2
  fi
  case $result in
    ok | lost) ;;
    *) sleep 0.2 ;;
  esac
done
