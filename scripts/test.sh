#!/usr/bin/env bash
# Runs every test of the project against throwaway servers started here (MariaDB 10.11,
# Oracle MySQL 9.7, MariaDB 11.8): Rust unit and integration tests, cross-process
# scenarios, the CLI, the PHP extension (PHPUnit) on every PHP of the matrix, the bridges,
# the C ABI (gcc + valgrind, PHP FFI, Python ctypes), the chaos suites, and the header check.
#
# tests/matrix says which servers there are and which PHP (with which Symfony, Laravel and
# PHPUnit) runs against which. Each suite is a script that finds its server in
# MYSQLLOCK_TEST_DSN (and the server's kind in MYSQLLOCK_TEST_SERVER, its script in
# MYSQLLOCK_SERVER_SCRIPT); it runs once per server, as NAME@SERVER. A suite whose header
# says `# matrix: php` runs once per row of the matrix instead, as NAME@SERVER/phpX.Y (a
# ZTS row's as phpX.Y-zts), with the row in its environment (tests/suites/lib/php.sh);
# `# matrix: php home=zts` runs on the rows of that home only. A suite whose header says
# `# server: none` (lint, header) or `# server: own` (it starts its own servers) runs once.
# A suite that needs a fresh server (restarts) starts one of the same kind with that script.
#
#   bash scripts/test.sh                 # everything, every server
#   MYSQLLOCK_TEST_SERVERS=mysql bash scripts/test.sh   # the runs on the servers named
#                                        # (and the server-less suites)
#   bash scripts/test.sh 30-php 40-c     # only the suites named
#   MYSQLLOCK_TEST_JOBS=1 bash scripts/test.sh   # one suite at a time (default: 2 at a
#                                        # time, never two on one server)
#
# At the end, once the servers are stopped, the run fails if any mount is left under the
# cache directories (scripts/lib/chroot.sh, cache_dirs): in the host's mount namespace, or
# in the namespace of a process of this run still alive (MYSQLLOCK_TEST_RUN in its
# environment), so that the cache can be deleted without reaching a host file (issue 37).
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD
me=test.sh
# shellcheck source=scripts/lib/servers.sh
. scripts/lib/servers.sh
# shellcheck source=scripts/lib/chroot.sh
. scripts/lib/chroot.sh
# The matrix's rows (comments and blank lines dropped), and its servers in order of first
# mention, less those MYSQLLOCK_TEST_SERVERS leaves out.
rows=$(sed -e 's/#.*//' -e '/^[[:space:]]*$/d' tests/matrix)
servers=
for server in $(awk '!seen[$1]++ { print $1 }' <<<"$rows"); do
  case " ${MYSQLLOCK_TEST_SERVERS:-$server} " in
    *" $server "*) servers="$servers $server" ;;
  esac
done
[ -n "$servers" ] || { echo "no server of tests/matrix is in MYSQLLOCK_TEST_SERVERS=${MYSQLLOCK_TEST_SERVERS:-}"; exit 1; }
# A suite named that does not exist would run nothing and pass.
for name in "$@"; do
  [ -f "tests/suites/$name.sh" ] || { echo "no suite $name (tests/suites/$name.sh)"; exit 1; }
done

bash scripts/install-deps.sh || exit 1
cargo build --release --locked --workspace --all-targets || exit 1

work=$(mktemp -d /tmp/mysqllock-test.XXXXXX)
# Every process of this run carries it, chroot_run's commands too: the final check below
# tells this run's leftovers from those of another run on the same machine.
export MYSQLLOCK_TEST_RUN=$work
stop_servers() {
  local server
  for server in $servers; do
    bash "scripts/$server.sh" stop "$work/$server" >/dev/null 2>&1
  done
}
trap stop_servers EXIT
for server in $servers; do
  bash "scripts/$server.sh" start "$work/$server" || { echo "could not start the $server test server"; exit 1; }
done
export MYSQLLOCK_ROOT=$root MYSQLLOCK_BIN=$root/target/release

# A suite runs in a subshell with one server's env file loaded.
with_server() {
  local server=$1; shift
  (set -a; . "$work/$server/env"; set +a; "$@")
}

# with_row SERVER PHP HOME SYMFONY LARAVEL PHPUNIT CMD...: CMD with SERVER's env file and
# the matrix row in the environment.
with_row() {
  local server=$1
  (set -a; . "$work/$server/env"
   MYSQLLOCK_PHP=$2 MYSQLLOCK_PHP_HOME=$3 MYSQLLOCK_SYMFONY=$4 MYSQLLOCK_LARAVEL=$5 MYSQLLOCK_PHPUNIT=$6
   set +a; shift 6; "$@")
}

selected=("$@")
wanted() {
  [ ${#selected[@]} -eq 0 ] && return 0
  local want
  for want in "${selected[@]}"; do [ "$want" = "$1" ] && return 0; done
  return 1
}

# The runs to make, in the order of tests/suites/: a name, the server it uses (runs on one
# server must not overlap: some count the server's sessions or crash its lock table; a
# suite with its own servers shares nothing) and the command.
job_names=(); job_servers=(); job_commands=()
job() {
  local name=$1 server=$2
  shift 2
  job_names+=("$name"); job_servers+=("$server"); job_commands+=("$(printf '%q ' "$@")")
}
for s in tests/suites/*.sh; do
  name=$(basename "$s" .sh)
  wanted "$name" || continue
  kind=$(sed -n 's/^# server: \([a-z]*\).*/\1/p' "$s" | head -n 1)
  if [ "$kind" = none ] || [ "$kind" = own ]; then
    job "$name" "own:$name" bash "$s"
    continue
  fi
  if grep -q '^# matrix: php' "$s"; then
    # `# matrix: php home=H`: only the rows whose PHP lives in H (a suite that needs a
    # thread-safe PHP runs on the zts rows).
    only_home=$(sed -n 's/^# matrix: php home=\([a-z]*\).*/\1/p' "$s" | head -n 1)
    # fd 3: a suite reading its standard input must not eat the rows.
    while read -r -u 3 server php home symfony laravel phpunit; do
      case " $servers " in *" $server "*) ;; *) continue ;; esac
      [ -z "$only_home" ] || [ "$home" = "$only_home" ] || continue
      # A thread-safe PHP is named as such (php8.2-zts), beside the NTS one of the version.
      label=php$php
      [ "$home" != zts ] || label=$label-zts
      job "$name@$server/$label" "$server" with_row "$server" "$php" "$home" "$symfony" "$laravel" "$phpunit" bash "$s"
    done 3<<<"$rows"
    continue
  fi
  for server in $servers; do
    job "$name@$server" "$server" with_server "$server" bash "$s"
  done
done

# MYSQLLOCK_TEST_JOBS runs at a time (default 2, the machine's cores: most of a suite's
# time is spent waiting for servers, processes and timeouts), never two on one server.
# Each run's output is kept and printed whole when it ends.
parallel=${MYSQLLOCK_TEST_JOBS:-2}
logs=$work/logs
mkdir -p "$logs"
passed=0; failed=0; failures=()
pending=("${!job_names[@]}")
declare -A running=() busy=()
start_job() {
  local i=$1
  # Through a pipe, as a terminal or CI's log would be: a test that opens /dev/stdout anew
  # writes at the start of a regular file, over what came before.
  (
    started=$SECONDS
    eval "${job_commands[$i]}" </dev/null 2>&1 | cat >"$logs/$i.log"
    echo "${PIPESTATUS[0]} $((SECONDS - started))" >"$logs/$i.end"
  ) &
  running[$!]=$i
  busy[${job_servers[$i]}]=1
}
report_job() {
  local i=$1 rc seconds
  read -r rc seconds <"$logs/$i.end" || { rc=1; seconds=?; }
  echo
  echo "=== suite: ${job_names[$i]}"
  cat "$logs/$i.log"
  # A run whose last line has no newline (PHPUnit's progress dots) still ends its line.
  [ -z "$(tail -c 1 "$logs/$i.log")" ] || echo
  if [ "$rc" = 0 ]; then
    passed=$((passed + 1))
  else
    failed=$((failed + 1)); failures+=("${job_names[$i]}")
  fi
  echo "=== suite: ${job_names[$i]}: $seconds s"
}
while [ ${#pending[@]} -gt 0 ] || [ ${#running[@]} -gt 0 ]; do
  while [ ${#running[@]} -lt "$parallel" ]; do
    pick=
    for k in "${!pending[@]}"; do
      [ -z "${busy[${job_servers[${pending[$k]}]}]:-}" ] && { pick=$k; break; }
    done
    [ -n "$pick" ] || break
    start_job "${pending[$pick]}"
    unset "pending[$pick]"
  done
  finished=
  wait -n -p finished
  [ -n "$finished" ] && [ -n "${running[$finished]:-}" ] || continue
  i=${running[$finished]}
  unset "running[$finished]" "busy[${job_servers[$i]}]"
  report_job "$i"
done

stop_servers
trap - EXIT
# No mount outlives the run: the cache stays removable without reaching a host file.
mapfile -t cache < <(cache_dirs)
leftovers=$(chroot_leftovers "MYSQLLOCK_TEST_RUN=$work" "${cache[@]}")
echo
if [ $failed -gt 0 ]; then
  printf 'failed suites: %s\n' "${failures[*]}"
fi
echo "suites: $passed passed, $failed failed"
if [ -n "$leftovers" ]; then
  echo "failed: mounts left under the cache directories after the run (${cache[*]}):"
  echo "$leftovers"
  exit 1
fi
echo "no mount left under the cache directories (${cache[*]})"
[ $failed -eq 0 ]
