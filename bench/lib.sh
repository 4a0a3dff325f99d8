# What the bench scripts share (sourced by bench/*.sh after `cd` to the repository root):
# checks for tools, PHP modules and builds, the work directory and its server stopped on
# exit, CPU placements, the machine line, and the overlap checker's self-test verdict.
# Every failure names the script ($me) and exits non-zero.

me=bench/$(basename "$0")
root=$PWD
# The server the bench starts: MYSQLLOCK_BENCH_SERVER=mariadb (the default) or mysql
# (Oracle's MySQL 9.7, scripts/mysql.sh).
bench_server=${MYSQLLOCK_BENCH_SERVER:-mariadb}
case "$bench_server" in
  mariadb|mysql) ;;
  *) echo "$me: MYSQLLOCK_BENCH_SERVER is $bench_server, not mariadb or mysql" >&2; exit 2 ;;
esac
server_script=$root/scripts/$bench_server.sh
# The TLS mode of the product's own connections (the extension's native connection, the C
# ABI, the CLI, the Rust core) in the benches that measure it against a floor (handoff.sh,
# session.sh, cold.sh, run.sh): MYSQLLOCK_BENCH_SSL_MODE, DISABLED unless set. The floors
# (PDO, mysqli, the `mysql` crate, the `mariadb` client with --skip-ssl) connect in the
# clear, and MySQL 9.7 offers TLS with certificates it makes itself, so under the product's
# own default (PREFERRED) every product connection to it would be encrypted and the ratios
# would be TLS against plain. MYSQLLOCK_BENCH_SSL_MODE=PREFERRED measures that; bench/tls.sh
# measures TLS like for like (PDO over TLS as the floor) and ignores this knob. On a server
# without a certificate (the MariaDB the benches start) DISABLED and PREFERRED are the same.
bench_ssl_mode=${MYSQLLOCK_BENCH_SSL_MODE:-DISABLED}
case "$bench_ssl_mode" in
  DISABLED|PREFERRED|REQUIRED|VERIFY_CA|VERIFY_IDENTITY) ;;
  *) echo "$me: MYSQLLOCK_BENCH_SSL_MODE is $bench_ssl_mode, not DISABLED, PREFERRED, REQUIRED, VERIFY_CA or VERIFY_IDENTITY" >&2; exit 2 ;;
esac
# For the output's header: what was compared.
ssl_note="product connections ssl-mode=$bench_ssl_mode (MYSQLLOCK_BENCH_SSL_MODE), floors unencrypted"

die() {
  echo "$me: $*" >&2
  exit 1
}

# An argument the script does not know; $2 lists the ones it does.
unknown_argument() {
  echo "$me: unknown argument $1${2:+ ($2)}" >&2
  exit 2
}

# The script's leading comment block, as its --help.
print_help() {
  sed -n '2,/^set /{/^#/p}' "$0" | sed 's/^# \{0,1\}//'
}

# The options of a script that takes only --quick and --no-build: sets $quick (0/1) and
# $build (1/0).
quick_and_build_options() {
  quick=0
  build=1
  while [ $# -gt 0 ]; do
    case "$1" in
      --quick) quick=1 ;;
      --no-build) build=0 ;;
      -h|--help) print_help; exit 0 ;;
      *) unknown_argument "$1" "--quick, --no-build" ;;
    esac
    shift
  done
}

# Each argument: a command on PATH or an existing file.
need_tools() {
  local tool
  for tool in "$@"; do
    command -v "$tool" >/dev/null 2>&1 || [ -e "$tool" ] \
      || die "$tool is missing (bash scripts/install-deps.sh installs everything)"
  done
}

# PHP modules, from `php -m` read once: `php -m | grep -q` can fail under pipefail when
# grep exits first and php dies of SIGPIPE.
need_php_modules() {
  local modules module
  modules=$(php -m)
  for module in "$@"; do
    grep -qx "$module" <<<"$modules" || die "PHP's $module is missing (apt-get install php8.2-mysql)"
  done
}

# cargo build --release --locked -p PKG... unless the script was given --no-build ($build=0).
build_packages() {
  [ "${build:-1}" = 1 ] || return 0
  local args=() pkg
  for pkg in "$@"; do args+=(-p "$pkg"); done
  echo "building (cargo build --release --locked ${args[*]}) ..." >&2
  cargo build --release --locked "${args[@]}" >&2
}

# Each argument must be in target/release.
need_built() {
  local built
  for built in "$@"; do
    [ -f "target/release/$built" ] || die "target/release/$built is missing"
  done
}

# $work: a fresh directory /tmp/mysqllock-NAME-bench.*; on exit the server in $work/db
# (and a Galera cluster in $work/galera) is stopped and the directory removed.
make_work() {
  work=$(mktemp -d "/tmp/mysqllock-$1-bench.XXXXXX")
  trap cleanup EXIT
  trap 'exit 130' INT TERM
}
cleanup() {
  bash "$server_script" stop "$work/db" >/dev/null 2>&1 || true
  if [ -f "$work/galera/cluster" ]; then
    bash "$root/scripts/galera.sh" stop "$work/galera" >/dev/null 2>&1 || true
  fi
  rm -rf "$work"
}

# Starts the server in $work/db (the arguments, e.g. taskset -c 0, before the command) and
# exports its env (MYSQLLOCK_TEST_DSN, _PORT, _SOCKET); $dsn is its DSN, $product_dsn the
# same with ?ssl-mode=$bench_ssl_mode for the product's connections (the floors read only
# the host, port, login and database of a URL, never its query).
start_server() {
  "$@" bash "$server_script" start "$work/db" >&2
  set -a
  . "$work/db/env"
  set +a
  dsn=$MYSQLLOCK_TEST_DSN
  case "$dsn" in
    *\?*) product_dsn="$dsn&ssl-mode=$bench_ssl_mode" ;;
    *) product_dsn="$dsn?ssl-mode=$bench_ssl_mode" ;;
  esac
}

# The server's name and version, asked over its socket.
server_version() {
  case "$bench_server" in
    mariadb) echo "MariaDB $(mariadb --no-defaults -uroot --socket="$MYSQLLOCK_TEST_SOCKET" -N -e 'SELECT VERSION()')" ;;
    mysql) echo "MySQL $(bash "$server_script" sql "$work/db" -N -e 'SELECT VERSION()')" ;;
  esac
}

# "N CPUs (model)" of this machine.
machine() {
  echo "$(nproc) CPUs ($(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1))"
}

# "commit ABC", plus a note when the given directories have uncommitted changes.
commit_line() {
  local dirs
  dirs=$(IFS=/; echo "$*")
  echo "commit $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- "$@" || echo " + uncommitted changes in $dirs")"
}

# Placements from --cpus A,B (or A): "one", the server and every client on CPU A (round
# trips without a CPU wake-up); with B also "two", the clients on CPU A and the server on
# CPU B (every round trip wakes the other CPU). Left to the scheduler, each connection's
# server thread lands on either for seconds at a time, and one connection's cycles cost 6
# times another's. Sets cpu_a, cpu_b, placements, server_cpu, placement_name and pinned
# (the prefix that runs a client on CPU A).
set_placements() {
  IFS=, read -r cpu_a cpu_b <<<"$1"
  declare -gA server_cpu=([one]=$cpu_a) placement_name=([one]="server and clients on CPU $cpu_a")
  placements=(one)
  if [ -n "${cpu_b:-}" ]; then
    placements+=(two)
    server_cpu[two]=$cpu_b
    placement_name[two]="clients on CPU $cpu_a, server on CPU $cpu_b"
  fi
  pinned=(taskset -c "$cpu_a")
}

# Prints a command, then runs it.
run() {
  printf '$'
  printf ' %q' "$@"
  printf '\n\n'
  "$@"
}

# The overlap checker's self-test: $1 is the table a run on $2 (something that excludes
# nothing) printed; its last row's next-to-last cell must count overlaps, or the checker's
# 0s elsewhere prove nothing.
require_overlaps() {
  local overlaps
  overlaps=$(printf '%s\n' "$1" | tail -1 | awk -F'|' '{gsub(/ /, "", $(NF-1)); print $(NF-1)}')
  [ "${overlaps:-0}" -gt 0 ] 2>/dev/null \
    || die "the overlap checker saw no overlap of $2: its 0s above prove nothing"
}
