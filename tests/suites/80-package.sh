#!/usr/bin/env bash
# server: own (a throwaway MariaDB of its own, or the one MYSQLLOCK_TEST_DSN names)
# The release archives (scripts/package.sh): built, checksummed, every binary at the
# manifest's glibc floor (and the check refuses the host-built binaries, which need more),
# each extension archive unpacked in an empty directory and loaded by the PHP it is named
# for (8.2 on the host; 8.4 and 8.5 in the chroot of scripts/sid.sh), where it takes and
# releases a lock that another connection sees; the CLI from its archive runs a crontab
# line; C programs link the archived library (shared and static) and lock; composer.json
# declares PIE's download methods.
#
# Environment: MYSQLLOCK_ROOT (repository), MYSQLLOCK_BIN (the host's `cargo build
# --release`, whose binaries the floor check must refuse), optionally MYSQLLOCK_TEST_DSN.
# Ends with "package: N passed, N failed".
set -uo pipefail
root=${MYSQLLOCK_ROOT:?}
bin=${MYSQLLOCK_BIN:-$root/target/release}
dist=${MYSQLLOCK_DIST:-$root/dist}
export MYSQLLOCK_DIST=$dist
cd "$root"

tally_label=package
# shellcheck source=tests/suites/lib/tally.sh
. "$root/tests/suites/lib/tally.sh"

# Missing tools are failures, never skips.
for tool in gcc unzip tar objdump python3 mariadb sha256sum; do
  command -v "$tool" >/dev/null || fail "$tool is not installed (scripts/install-deps.sh installs it)"
done
[ "$failed" = 0 ] || finish

work=$(mktemp -d /tmp/mysqllock-package.XXXXXX)
server_dir=
cleanup() {
  [ -n "$server_dir" ] && bash scripts/mariadb.sh stop "$server_dir" >/dev/null 2>&1
  rm -rf "$work"
}
trap cleanup EXIT

mapfile -t archives < <(bash scripts/package.sh list)
[ ${#archives[@]} -gt 0 ] || { fail "scripts/package.sh list names no archive"; finish; }
eval "$(python3 scripts/lib/package_manifest.py "$root")" || { fail "the manifest cannot be read"; finish; }
echo "# cell: tag $tag, PHP ${php_versions[*]} (${php_places[*]}), $triple, glibc <= $glibc"

# --- the build ---------------------------------------------------------------------------
started=$SECONDS
rc=0
bash scripts/package.sh >"$work/package.log" 2>&1 || rc=$?
if [ $rc -eq 0 ]; then
  pass "scripts/package.sh built the archives in $((SECONDS - started)) s"
else
  tail -25 "$work/package.log"
  fail "scripts/package.sh failed (exit $rc)"
  finish
fi
grep 'needs' "$work/package.log" | sed 's/^/# /'

for line in "${archives[@]}"; do
  file=${line##* }
  [ -s "$dist/$file" ] && pass "dist/$file exists ($(stat -c %s "$dist/$file") bytes)" \
    || fail "dist/$file is missing"
done
if (cd "$dist" && sha256sum --check --strict --quiet "$checksums") >"$work/sums.out" 2>&1 \
  && [ "$(wc -l <"$dist/$checksums")" -eq $((${#archives[@]} - 1)) ]; then
  pass "$checksums lists every archive and matches it"
else
  fail "$checksums does not match the archives: $(cat "$work/sums.out")"
fi

# --- the glibc floor check can fail ------------------------------------------------------
# The host's own build links against Debian 12's glibc (2.36): the check must refuse it.
if [ ! -x "$bin/mysqllock" ]; then
  fail "$bin/mysqllock is missing (cargo build --release -p mysqllock-cli): the refusal cannot be shown"
elif out=$(bash scripts/package.sh check-glibc "$bin/mysqllock" 2>&1); then
  fail "the glibc check accepted the host-built $bin/mysqllock: $out"
elif grep -q "above the floor GLIBC_$glibc" <<<"$out"; then
  pass "the glibc check refuses the host-built binary: $out"
else
  fail "the glibc check failed for another reason: $out"
fi

# check_floor WHAT FILE: FILE, as unpacked from its archive, needs glibc <= the floor.
check_floor() {
  local out
  if out=$(bash scripts/package.sh check-glibc "$2" 2>&1); then
    pass "$1: ${out##*/}"
  else
    fail "$1: $out"
  fi
}

# --- a server ------------------------------------------------------------------------------
if [ -z "${MYSQLLOCK_TEST_DSN:-}" ]; then
  server_dir=$work/mariadb
  if ! bash scripts/mariadb.sh start "$server_dir" >"$work/mariadb.log" 2>&1; then
    cat "$work/mariadb.log"
    fail "the test server did not start"
    finish
  fi
  set -a
  . "$server_dir/env"
  set +a
fi
dsn=$MYSQLLOCK_TEST_DSN
if [[ $dsn =~ ^mysql://([^:@/]+):([^@]*)@([^:/]+):([0-9]+)/([^?]+) ]]; then
  db_user=${BASH_REMATCH[1]} db_password=${BASH_REMATCH[2]} db_host=${BASH_REMATCH[3]}
  db_port=${BASH_REMATCH[4]} db_name=${BASH_REMATCH[5]}
else
  fail "MYSQLLOCK_TEST_DSN is not mysql://user:password@host:port/database"
  finish
fi
# sql STATEMENT: one statement on a connection of its own, tab-separated, no headers.
sql() {
  MYSQL_PWD=$db_password mariadb --no-defaults -N -B -h "$db_host" -P "$db_port" -u "$db_user" \
    "$db_name" -e "$1"
}
# held_by NAME: "lock_acquired holder-holds-its-GET_LOCK" of NAME's row, as another
# connection sees it ("1 1" while a live session holds it; nothing once released).
held_by() {
  sql "SELECT lock_acquired, IS_USED_LOCK(CAST(name AS CHAR)) <=> connection_id
       FROM shared_locks WHERE name = '$1'" | tr '\t' ' '
}
released() {
  [ -z "$(held_by "$1")" ] && [ "$(sql "SELECT IS_USED_LOCK('$1') IS NULL")" = 1 ]
}

# --- the CLI --------------------------------------------------------------------------------
cli_dir=$work/cli
mkdir -p "$cli_dir"
cli_root=${cli_archive%.tar.gz}
if tar -xzf "$dist/$cli_archive" -C "$cli_dir" \
  && [ "$(tar -tzf "$dist/$cli_archive" | sort | tr '\n' ' ')" = "$cli_root/ $cli_root/mysqllock " ]; then
  pass "$cli_archive holds $cli_root/mysqllock"
else
  fail "$cli_archive does not unpack to $cli_root/mysqllock: $(tar -tzf "$dist/$cli_archive" | tr '\n' ' ')"
fi
cli=$cli_dir/$cli_root/mysqllock
check_floor "the archived CLI" "$cli"
if MYSQLLOCK_DSN=$dsn "$cli" --no-defaults init >"$work/init.out" 2>&1; then
  pass "the archived CLI creates the lock table (init)"
else
  fail "mysqllock init: $(cat "$work/init.out")"
fi
# A crontab line: the job looks at the lock from its own connection, then exits 7.
cat >"$work/job.sh" <<'SH'
#!/bin/sh
MYSQL_PWD=$DB_PASSWORD mariadb --no-defaults -N -B -h "$DB_HOST" -P "$DB_PORT" -u "$DB_USER" "$DB_NAME" \
  -e "SELECT connection_id, lock_acquired, IS_USED_LOCK(CAST(name AS CHAR)) FROM shared_locks WHERE name = '$MYSQLLOCK_NAME'" \
  >"$JOB_OUT" || exit 99
exit 7
SH
name=package-cli-$$
rc=0
MYSQLLOCK_DSN=$dsn DB_PASSWORD=$db_password DB_HOST=$db_host DB_PORT=$db_port DB_USER=$db_user \
  DB_NAME=$db_name JOB_OUT=$work/job.out \
  "$cli" --no-defaults run "$name" --timeout 0 --ttl 60 -- sh "$work/job.sh" >"$work/run.out" 2>&1 || rc=$?
seen=$(tr '\t' ' ' <"$work/job.out" 2>/dev/null)
if [ $rc -eq 7 ]; then
  pass "mysqllock run passes the job's exit code through (7)"
else
  fail "mysqllock run exited $rc, not the job's 7: $(cat "$work/run.out")"
fi
if [[ $seen =~ ^([0-9]+)\ 1\ ([0-9]+)$ ]] && [ "${BASH_REMATCH[1]}" = "${BASH_REMATCH[2]}" ]; then
  pass "while the job ran, another connection saw $name held by session ${BASH_REMATCH[1]}"
else
  fail "while the job ran, another connection saw '$seen' for $name, not a held lock"
fi
released "$name" && pass "$name is free after the run" || fail "$name is still held after the run: $(held_by "$name")"

# --- the extension, one archive per PHP -----------------------------------------------------
# The PHP asks PIE's question itself: which archive name fits me? It then locks NAME, says
# "held", waits (bounded) until the file GO exists, unlocks and says "released".
cat >"$work/lock.php" <<'PHP'
<?php
use ItsMieger\MySqlSharedLocks\SharedLock;

[, $name, $go, $ext, $tag] = $argv;
$libc = glob('/lib/ld-musl-*') ? 'musl' : 'glibc';
printf("php_%s-%s_php%d.%d-%s-%s-%s%s%s.zip\n", $ext, $tag, PHP_MAJOR_VERSION, PHP_MINOR_VERSION,
    php_uname('m'), strtolower(PHP_OS_FAMILY), $libc, PHP_DEBUG ? '-debug' : '', PHP_ZTS ? '-zts' : '');
if (!extension_loaded($ext)) {
    fwrite(STDERR, "$ext is not loaded\n");
    exit(2);
}
printf("%s %s\n", PHP_VERSION, phpversion($ext));
SharedLock::lock($name, 5, 60);
echo "held\n";
$deadline = microtime(true) + 60;
while (!file_exists($go)) {
    if (microtime(true) > $deadline) {
        fwrite(STDERR, "nobody looked at the lock within 60 s\n");
        exit(3);
    }
    usleep(20000); // the poll interval of this deadline-bounded wait for the test's go
}
SharedLock::unlock($name);
echo "released\n";
PHP

# wait_for FILE TEXT PID: polls (30 s at most) until FILE has the line TEXT; fails early
# when PID has ended.
wait_for() {
  local end=$((SECONDS + 30))
  while ! grep -qx "$2" "$1" 2>/dev/null; do
    kill -0 "$3" 2>/dev/null || return 1
    [ $SECONDS -lt $end ] || return 1
    sleep 0.05 # the poll interval
  done
}

for i in "${!php_versions[@]}"; do
  minor=${php_versions[$i]}
  zip_name=${ext_archives[$i]}
  dir=$work/php$minor
  mkdir -p "$dir"
  if ! unzip -q "$dist/$zip_name" -d "$dir"; then
    fail "$zip_name does not unzip"
    continue
  fi
  if [ "$(unzip -Z1 "$dist/$zip_name" | tr '\n' ' ')" = "$ext.so " ]; then
    pass "$zip_name holds $ext.so at its root, nothing else"
  else
    fail "$zip_name holds $(unzip -Z1 "$dist/$zip_name" | tr '\n' ' '), not $ext.so alone"
  fi
  check_floor "$ext.so for PHP $minor" "$dir/$ext.so"

  case ${php_places[$i]} in
    host) php=("php$minor") ;;
    sid) php=(bash scripts/sid.sh run "php$minor") ;;
  esac
  name=package-php$minor-$$
  go=$dir/go
  "${php[@]}" -d "extension=$dir/$ext.so" -d "mysqllock.dsn=$dsn" \
    "$work/lock.php" "$name" "$go" "$ext" "$tag" >"$dir/out" 2>"$dir/err" &
  pid=$!
  if wait_for "$dir/out" held "$pid"; then
    seen=$(held_by "$name")
    [ "$seen" = "1 1" ] \
      && pass "PHP $minor ($(sed -n 2p "$dir/out")) holds $name: another connection sees its row and GET_LOCK" \
      || fail "PHP $minor said held, but another connection sees '$seen' for $name"
  else
    fail "PHP $minor did not take $name: $(cat "$dir/out" "$dir/err")"
  fi
  touch "$go"
  rc=0
  wait "$pid" || rc=$?
  if [ $rc -eq 0 ] && grep -qx released "$dir/out" && released "$name"; then
    pass "PHP $minor released $name (exit 0; the row and the GET_LOCK are gone)"
  else
    fail "PHP $minor: exit $rc, $(tr '\n' ' ' <"$dir/out") $(cat "$dir/err"); the lock: '$(held_by "$name")'"
  fi
  wanted=$(head -n 1 "$dir/out")
  [ "$wanted" = "$zip_name" ] && pass "PHP $minor asks for exactly $zip_name (PIE's name for it)" \
    || fail "PHP $minor asks for '$wanted', the archive is $zip_name"
done

# --- the C library ---------------------------------------------------------------------------
lib_dir=$work/c
mkdir -p "$lib_dir"
lib_root=${lib_archive%.tar.gz}
want="$lib_root/ $lib_root/include/ $lib_root/include/mysqllock.h $lib_root/lib/ $lib_root/lib/libmysqllock.a $lib_root/lib/libmysqllock.so "
if tar -xzf "$dist/$lib_archive" -C "$lib_dir" && [ "$(tar -tzf "$dist/$lib_archive" | sort | tr '\n' ' ')" = "$want" ]; then
  pass "$lib_archive holds lib/libmysqllock.{so,a} and include/mysqllock.h"
else
  fail "$lib_archive holds $(tar -tzf "$dist/$lib_archive" | tr '\n' ' ')"
fi
lib=$lib_dir/$lib_root
check_floor "the archived libmysqllock.so" "$lib/lib/libmysqllock.so"
cflags=(-std=c11 -Wall -Wextra -Wpedantic -Werror -I "$lib/include")
for kind in shared static; do
  if [ $kind = shared ]; then
    link=(-L "$lib/lib" -lmysqllock -Wl,-rpath,"$lib/lib")
  else
    link=("$lib/lib/libmysqllock.a" -lm -pthread -ldl)
  fi
  name=package-c-$kind-$$
  if ! gcc "${cflags[@]}" -o "$work/example-$kind" tests/c/example.c "${link[@]}" 2>"$work/gcc.err"; then
    fail "tests/c/example.c does not build against the archive ($kind): $(cat "$work/gcc.err")"
    continue
  fi
  # (ldd's output is read whole: grep -q quitting early would make ldd's SIGPIPE fail the
  # pipeline under pipefail.)
  if [ $kind = shared ] && ! grep -qF "$lib/lib/libmysqllock.so" <<<"$(ldd "$work/example-$kind")"; then
    fail "the shared example does not load the archived libmysqllock.so: $(ldd "$work/example-$kind")"
  fi
  rc=0
  "$work/example-$kind" "$dsn" "$name" >"$work/example.out" 2>&1 || rc=$?
  if [ $rc -eq 0 ] && grep -qx "running $name" "$work/example.out" && grep -qx done "$work/example.out" \
    && released "$name"; then
    pass "a C program linked against the archived library ($kind) locks and releases $name"
  else
    fail "the C example ($kind) exited $rc: $(cat "$work/example.out")"
  fi
done

# --- composer.json: PIE's download methods --------------------------------------------------
methods=$(python3 -c 'import json; print(json.dumps(json.load(open("composer.json"))["php-ext"].get("download-url-method")))')
[ "$methods" = '["pre-packaged-binary", "composer-default"]' ] \
  && pass "composer.json: pre-packaged binaries first, the source build as the fallback" \
  || fail "composer.json php-ext.download-url-method is $methods"
# Debian 12's Composer (2.5) predates php-ext in its schema; sid's knows it.
# (sid.sh run passes only the project's MYSQLLOCK_* variables in: Composer's goes through env.)
if out=$(bash scripts/sid.sh run env COMPOSER_ROOT_VERSION="$tag" composer validate --strict 2>&1); then
  pass "composer validate --strict (Composer $(bash scripts/sid.sh run composer --version 2>/dev/null | awk '{print $3}'))"
else
  fail "composer validate --strict: $out"
fi

finish
