#!/usr/bin/env bash
# The CLI against a TLS-only server (tests/suites/45-tls.sh runs it with the server's
# DIR/env loaded): issue 22's crontab line, credentials in an option file, certificates
# checked, and the password never shown. Prints "ok - " / "not ok - " lines; exits 1 when
# one failed.
#
# Environment: MYSQLLOCK_BIN (target/release), the server's MYSQLLOCK_TEST_DSN,
# MYSQLLOCK_TEST_TLS_DIR, MYSQLLOCK_TEST_X509_DSN.
set -uo pipefail
bin=${MYSQLLOCK_BIN:?}
tls=${MYSQLLOCK_TEST_TLS_DIR:?MYSQLLOCK_TEST_TLS_DIR is not set: start the server with MYSQLLOCK_SERVER_TLS=require}
dsn=${MYSQLLOCK_TEST_DSN:?}
x509=${MYSQLLOCK_TEST_X509_DSN:?}
mysqllock=$bin/mysqllock

failures=0
ok() { echo "ok - $1"; }
not_ok() { echo "not ok - $1"; failures=$((failures + 1)); }
check() { # check LABEL CONDITION...
  local label=$1
  shift
  if "$@"; then ok "$label"; else not_ok "$label"; fi
}

work=$(mktemp -d /tmp/mysqllock-tls-cli.XXXXXX)
trap 'rm -rf "$work"' EXIT
# No ~/.my.cnf of the machine's user takes part.
export HOME=$work/home
mkdir -p "$HOME"

# mysql://user:password@127.0.0.1:port/db, taken apart for the option file.
rest=${dsn#mysql://}
user=${rest%%:*}
rest=${rest#*:}
password=${rest%%@*}
rest=${rest#*@}
port=${rest#*:}
port=${port%%/*}
database=${rest#*/}

cnf=$work/cron.cnf
cat >"$cnf" <<CNF
[client]
user = $user
password = "$password"
host = localhost
port = $port
database = $database
ssl-mode = VERIFY_IDENTITY
ssl-ca = $tls/ca.pem
CNF
chmod 600 "$cnf"

# The lock table, over TLS with the file's settings.
if "$mysqllock" --defaults-extra-file="$cnf" init >"$work/init.out" 2>&1; then
  ok "init over VERIFY_IDENTITY with every setting from an option file"
else
  not_ok "init over VERIFY_IDENTITY with every setting from an option file: $(cat "$work/init.out")"
fi

# Waits until FILE exists, for at most 30 s.
wait_for() {
  local i
  for i in $(seq 1 300); do
    [ -e "$1" ] && return 0
    sleep 0.1
  done
  return 1
}

# Issue 22's crontab line on three "nodes" at once: the password only in the option
# file. The job that runs holds the lock until the test lets it go, so the other two
# meet it held; each job appends to the same file, which counts the runs.
runs=$work/runs
release=$work/release
pids=()
for node in 1 2 3; do
  "$mysqllock" --defaults-extra-file="$cnf" run nightly-report -- \
    sh -c "echo node-$node >> '$runs'; while [ ! -e '$release' ]; do sleep 0.05; done" \
    >"$work/node-$node.out" 2>&1 &
  pids+=($!)
done
if wait_for "$runs"; then
  ok "one node's job started"
else
  not_ok "no node's job started within 30 s: $(cat "$work"/node-*.out)"
fi
# While the job runs: nobody's command line shows the password.
shown=0
for pid in "${pids[@]}"; do
  if [ -r "/proc/$pid/cmdline" ] && tr '\0' ' ' <"/proc/$pid/cmdline" | grep -qF -- "$password"; then
    shown=1
  fi
done
check "no node's /proc/PID/cmdline shows the password" [ $shown = 0 ]
# The two others give up at once (the lock is held; --timeout 0 is the default).
codes=()
for i in 1 2 3; do
  pid=${pids[$((i - 1))]}
  if [ "$(grep -c . "$runs")" -ge 1 ] && ! grep -q "node-$i" "$runs"; then
    wait "$pid"
    codes+=("$?")
  fi
done
touch "$release"
for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null; done
check "exactly one of three nodes ran the job ($(tr '\n' ' ' <"$runs"))" [ "$(grep -c . "$runs")" = 1 ]
check "the two other nodes exited 75 (held elsewhere): ${codes[*]}" [ "${codes[*]}" = "75 75" ]

# Refusals, each with its reason, exit 69, and no password in the message.
refused() { # refused LABEL EXPECTED_TEXT ARGS...
  local label=$1 expected=$2 out rc
  shift 2
  out=$work/refused.out
  "$mysqllock" "$@" status >"$out" 2>&1
  rc=$?
  if [ $rc = 69 ] && grep -qF -- "$expected" "$out" && ! grep -qF -- "$password" "$out"; then
    ok "$label"
  else
    not_ok "$label: exit $rc (want 69), want \"$expected\" and no password in: $(cat "$out")"
  fi
}
refused "a wrong CA is refused, naming the CA file" "wrong-ca.pem" \
  --defaults-extra-file="$cnf" --ssl-ca="$tls/wrong-ca.pem"
refused "VERIFY_IDENTITY to 127.0.0.1 (the certificate is for localhost) is refused, naming the host" \
  "not for 127.0.0.1" --defaults-extra-file="$cnf" --dsn "mysql://127.0.0.1:$port/$database"
refused "ssl-mode=DISABLED on a TLS-only server is refused, naming TLS and ssl-mode" "ssl-mode=REQUIRED" \
  --defaults-extra-file="$cnf" --ssl-mode=DISABLED
refused "the X509 account without a client certificate is refused, naming ssl-cert" "ssl-cert" \
  --dsn "$x509?ssl-mode=REQUIRED"

# VERIFY_CA to 127.0.0.1: the chain checked, not the name.
if "$mysqllock" --defaults-extra-file="$cnf" --dsn "mysql://127.0.0.1:$port/$database" --ssl-mode=VERIFY_CA \
  status >"$work/ca.out" 2>&1; then
  ok "VERIFY_CA to 127.0.0.1 connects"
else
  not_ok "VERIFY_CA to 127.0.0.1 connects: $(cat "$work/ca.out")"
fi

# The X509 account with its certificate, from the command line.
if "$mysqllock" --dsn "$x509" --ssl-mode=VERIFY_CA --ssl-ca="$tls/ca.pem" --ssl-cert="$tls/client-cert.pem" \
  --ssl-key="$tls/client-key.pem" run x509-job -- true >"$work/x509.out" 2>&1; then
  ok "the X509 account runs a job with --ssl-cert and --ssl-key"
else
  not_ok "the X509 account runs a job with --ssl-cert and --ssl-key: $(cat "$work/x509.out")"
fi

# A password in --dsn: wiped from the process's command line while its job runs.
flag=$work/wiped-job
"$mysqllock" --dsn "$dsn?ssl-mode=REQUIRED" run wiped-job -- \
  sh -c "touch '$flag.started'; while [ ! -e '$flag.go' ]; do sleep 0.05; done" >"$work/wiped.out" 2>&1 &
pid=$!
if wait_for "$flag.started"; then
  cmdline=$(tr '\0' ' ' <"/proc/$pid/cmdline")
  check "a --dsn password is gone from /proc/PID/cmdline while the job runs" \
    bash -c '! grep -qF -- "$1" <<<"$2" && grep -qF -- "@127.0.0.1:" <<<"$2"' _ "$password" "$cmdline"
else
  not_ok "the --dsn job did not start: $(cat "$work/wiped.out")"
fi
touch "$flag.go"
wait "$pid"
check "the --dsn job exited 0 and warned about the password on the command line" \
  bash -c '[ "$1" = 0 ] && grep -q "password in --dsn" "$2"' _ "$?" "$work/wiped.out"

[ $failures = 0 ]
