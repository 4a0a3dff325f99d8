#!/usr/bin/env bash
# server: own (a throwaway MariaDB of its own, or the one MYSQLLOCK_TEST_DSN names)
# The release archives (scripts/package.sh), for every target of the manifest: built,
# checksummed, every binary of the target's ELF machine and at the manifest's glibc floor
# (and both checks refuse a host-built binary), each extension archive unpacked in an
# empty directory and loaded by the PHP of its home (8.2 on the host; 8.4 and 8.5 in the
# chroot of scripts/sid.sh; arm64 Debian's PHP in the trees of scripts/trees.sh, under
# qemu-user), where it takes and releases a lock that another connection sees and names
# the archive PIE would look for (also for a tag like 1.0.0-RC1); the CLI from each target's
# archive runs a crontab line and passes its exit code on; C programs link each target's
# archived library (shared and static; a cross gcc for arm64) and lock; composer.json
# declares PIE's download methods. What is tested where is the manifest's data: nothing
# here names a target or a PHP version.
#
# Environment: MYSQLLOCK_ROOT (repository), MYSQLLOCK_BIN (the host's `cargo build
# --release`, whose binaries the floor check must refuse), optionally MYSQLLOCK_TEST_DSN.
# Ends with "package: N passed, N failed".
# shellcheck disable=SC2154 # the manifest's values are set by eval (package_manifest.py)
set -uo pipefail
root=${MYSQLLOCK_ROOT:?}
bin=${MYSQLLOCK_BIN:-$root/target/release}
dist=${MYSQLLOCK_DIST:-$root/dist}
export MYSQLLOCK_DIST=$dist
cd "$root" || exit 1

tally_label=package
tally_started=$SECONDS
# shellcheck source=tests/suites/lib/tally.sh
. "$root/tests/suites/lib/tally.sh"

# Missing tools are failures, never skips.
for tool in gcc unzip tar objdump readelf python3 mariadb sha256sum; do
  command -v "$tool" >/dev/null || fail "$tool is not installed (scripts/install-deps.sh installs it)"
done
[ "$failed" = 0 ] || finish

# The suite's files live under the repository's target/, not /tmp (which other work on the
# machine may empty meanwhile): the sid chroot sees the repository at its own path, and
# run_in binds it into the trees, so a path means the same on every side.
mkdir -p "$root/target"
work=$(mktemp -d "$root/target/package-test.XXXXXX")
server_dir=
# shellcheck disable=SC2317 # called by the trap
cleanup() {
  [ -z "$server_dir" ] || bash scripts/mariadb.sh stop "$server_dir" >/dev/null 2>&1
  rm -rf "$work"
}
trap cleanup EXIT

mapfile -t archives < <(bash scripts/package.sh list)
[ ${#archives[@]} -gt 0 ] || { fail "scripts/package.sh list names no archive"; finish; }
# A tag with capitals, as PIE sees it (its archive names are the same ones, lowercased).
rc_tag=1.0.0-RC1
eval "$(python3 scripts/lib/package_manifest.py build "$root" "$rc_tag")" || { fail "the manifest cannot be read"; finish; }
rc_files=("${e_file[@]}")
eval "$(python3 scripts/lib/package_manifest.py build "$root")" || { fail "the manifest cannot be read"; finish; }
# selected I: target I is tested: all of them, unless MYSQLLOCK_PACKAGE_TARGETS (which
# scripts/package.sh also reads) names some, for development; such a run says so.
selected() {
  [ -z "${MYSQLLOCK_PACKAGE_TARGETS:-}" ] && return 0
  case " $MYSQLLOCK_PACKAGE_TARGETS " in *" ${t_name[$1]} "*) return 0 ;; esac
  return 1
}
[ -z "${MYSQLLOCK_PACKAGE_TARGETS:-}" ] \
  || echo "# only the targets MYSQLLOCK_PACKAGE_TARGETS names: $MYSQLLOCK_PACKAGE_TARGETS (not a release's run)"
for i in "${!t_name[@]}"; do
  selected "$i" || continue
  php_list=()
  for j in "${!e_file[@]}"; do [ "${e_target[$j]}" = "$i" ] && php_list+=("${e_php[$j]}@${e_home[$j]}"); done
  echo "# cell: tag $tag, ${t_name[$i]} (${t_triple[$i]}, toolchain ${t_toolchain[$i]}): PHP ${php_list[*]}"
done

# cc_for ARCH LIBC: the C compiler that builds programs for ARCH and LIBC here.
cc_for() {
  case $1-$2 in
    x86_64-glibc) echo gcc ;;
    arm64-glibc) echo aarch64-linux-gnu-gcc ;;
    x86_64-musl) echo musl-gcc ;;
    *) return 1 ;;
  esac
}
for i in "${!t_name[@]}"; do
  if ! selected "$i" || [ -z "${t_lib[$i]}" ]; then continue; fi
  if ! cc=$(cc_for "${t_arch[$i]}" "${t_libc[$i]}"); then
    fail "no C compiler is known for ${t_arch[$i]} with ${t_libc[$i]}"
  elif ! command -v "$cc" >/dev/null; then
    fail "$cc is not installed (scripts/install-deps.sh installs it)"
  fi
done
[ "$failed" = 0 ] || finish

# kind_of HOME: how the manifest's HOME is reached (host, sid, tree, src).
declare -A home_kind=()
for j in "${!e_file[@]}"; do home_kind[${e_home[$j]}]=${e_kind[$j]}; done

# run_in HOME CMD...: CMD where the PHP of HOME lives: this machine (also for a PHP built
# from source here), the sid chroot or a tree (another architecture's through qemu-user).
# The repository (and so $work) is at its own path there.
run_in() {
  local home=$1
  shift
  case ${home_kind[$home]:-host} in
    host|src) "$@" ;;
    sid) bash scripts/sid.sh run "$@" ;;
    tree) bash scripts/trees.sh run "$home" --bind "$root" -- "$@" ;;
  esac
}

# php_of HOME MINOR: the php command of that PHP where run_in runs it.
php_of() {
  local script
  case ${home_kind[$1]} in
    src)
      script=$(python3 scripts/lib/package_manifest.py built-by "$root" "$1") || return 1
      echo "$(bash "$script" prefix "$1")/bin/php"
      ;;
    *) echo "php$2" ;;
  esac
}

# ldd_in HOME LIBC PROGRAM: the libraries PROGRAM loads, as its own loader lists them.
ldd_in() {
  if [ "$2" = musl ]; then
    run_in "$1" /lib/ld-musl-x86_64.so.1 --list "$3"
  else
    run_in "$1" ldd "$3"
  fi
}

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
grep -E ' built in |needs|is (AArch64|Advanced)' "$work/package.log" | sed 's/^/# /'

for line in "${archives[@]}"; do
  file=${line##* }
  if [ -s "$dist/$file" ]; then
    pass "dist/$file exists ($(stat -c %s "$dist/$file") bytes)"
  else
    fail "dist/$file is missing"
  fi
done
if (cd "$dist" && sha256sum --check --strict --quiet "$checksums") >"$work/sums.out" 2>&1 \
  && [ "$(wc -l <"$dist/$checksums")" -eq $((${#archives[@]} - 1)) ]; then
  pass "$checksums lists every archive and matches it"
else
  fail "$checksums does not match the archives: $(cat "$work/sums.out")"
fi

# --- the audits can fail -------------------------------------------------------------------
# The host's own build links against Debian 12's glibc (2.36): the floor check must refuse
# it; it is an x86-64 binary: the machine check must refuse it as arm64.
if [ ! -x "$bin/mysqllock" ]; then
  fail "$bin/mysqllock is missing (cargo build --release -p mysqllock-cli): the refusals cannot be shown"
else
  if out=$(bash scripts/package.sh check-glibc "$bin/mysqllock" 2>&1); then
    fail "the glibc check accepted the host-built $bin/mysqllock: $out"
  elif grep -q "above the floor GLIBC_$glibc" <<<"$out"; then
    pass "the glibc check refuses the host-built binary: $out"
  else
    fail "the glibc check failed for another reason: $out"
  fi
  if out=$(bash scripts/package.sh check-elf arm64 "$bin/mysqllock" 2>&1); then
    fail "the machine check accepted the host-built $bin/mysqllock as arm64: $out"
  elif grep -q "X86-64, not AArch64" <<<"$out"; then
    pass "the machine check refuses an x86-64 binary as arm64: $out"
  else
    fail "the machine check failed for another reason: $out"
  fi
fi

# audit WHAT ARCH LIBC FILE: FILE, as unpacked from its archive, is an ELF file for ARCH and
# needs glibc <= the floor (glibc) or is linked for musl alone (musl).
audit() {
  local out
  if out=$(bash scripts/package.sh check-elf "$2" "$4" 2>&1); then
    pass "$1: ${out##*/}"
  else
    fail "$1: $out"
  fi
  case $3 in
    glibc|musl)
      if out=$(bash scripts/package.sh "check-$3" "$4" 2>&1); then
        pass "$1: ${out##*/}"
      else
        fail "$1: $out"
      fi
      ;;
    *) fail "$1: no audit is known for the libc $3" ;;
  esac
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
  # shellcheck disable=SC1091 # written by mariadb.sh start
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
# The chroots and trees see the host's network: 127.0.0.1 is the same server there.
export MYSQLLOCK_DSN=$dsn
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

# wait_for FILE TEXT PID: polls (60 s at most: PHP under qemu starts slowly) until FILE has
# the line TEXT; fails early when PID has ended.
wait_for() {
  local end=$((SECONDS + 60))
  while ! grep -qx "$2" "$1" 2>/dev/null; do
    kill -0 "$3" 2>/dev/null || return 1
    [ $SECONDS -lt $end ] || return 1
    sleep 0.05 # the poll interval
  done
}

# The crontab line's job: says "held" in OUT, waits (60 s at most) for the file GO, then
# exits 7, which `mysqllock run` must pass on. POSIX sh, for every target's own shell.
cat >"$work/job.sh" <<'SH'
#!/bin/sh
out=$1 go=$2 tries=0
echo held >"$out"
while [ ! -e "$go" ]; do
  tries=$((tries + 1))
  [ "$tries" -le 1200 ] || exit 99
  sleep 0.05 # the poll interval of this bounded wait (1200 tries) for the test's go
done
exit 7
SH

# first_home I: the home of target I's first extension archive: where its CLI and C
# programs run (this machine for x86_64, the arm64 tree for arm64).
first_home() {
  local j
  for j in "${!e_file[@]}"; do
    [ "${e_target[$j]}" = "$1" ] && { echo "${e_home[$j]}"; return 0; }
  done
  return 1
}

# --- the CLI, per target ------------------------------------------------------------------
for i in "${!t_name[@]}"; do
  if ! selected "$i" || [ -z "${t_cli[$i]}" ]; then continue; fi
  target=${t_name[$i]}
  home=$(first_home "$i")
  cli_dir=$work/cli-$target
  mkdir -p "$cli_dir"
  cli_archive=${t_cli[$i]}
  cli_root=${cli_archive%.tar.gz}
  if tar -xzf "$dist/$cli_archive" -C "$cli_dir" \
    && [ "$(tar -tzf "$dist/$cli_archive" | sort | tr '\n' ' ')" = "$cli_root/ $cli_root/mysqllock " ]; then
    pass "$cli_archive holds $cli_root/mysqllock"
  else
    fail "$cli_archive does not unpack to $cli_root/mysqllock: $(tar -tzf "$dist/$cli_archive" | tr '\n' ' ')"
    continue
  fi
  cli=$cli_dir/$cli_root/mysqllock
  audit "the archived CLI ($target)" "${t_arch[$i]}" "${t_libc[$i]}" "$cli"
  if run_in "$home" "$cli" --no-defaults init >"$work/init.out" 2>&1; then
    pass "the archived CLI ($target, run in $home) creates the lock table (init)"
  else
    fail "mysqllock init ($target, in $home): $(cat "$work/init.out")"
  fi
  name=package-cli-$target-$$
  out=$cli_dir/job.out go=$cli_dir/job.go
  run_in "$home" "$cli" --no-defaults run "$name" --timeout 0 --ttl 60 -- sh "$work/job.sh" "$out" "$go" \
    >"$cli_dir/run.out" 2>&1 &
  pid=$!
  if wait_for "$out" held "$pid"; then
    seen=$(held_by "$name")
    if [ "$seen" = "1 1" ]; then
      pass "while the crontab job ran under the $target CLI, another connection saw $name held by its session"
    else
      fail "the job under the $target CLI ran, but another connection sees '$seen' for $name"
    fi
  else
    fail "the $target CLI did not start the job: $(cat "$cli_dir/run.out")"
  fi
  touch "$go"
  rc=0
  wait "$pid" || rc=$?
  if [ $rc -eq 7 ]; then
    pass "mysqllock run ($target) passes the job's exit code through (7)"
  else
    fail "mysqllock run ($target) exited $rc, not the job's 7: $(cat "$cli_dir/run.out")"
  fi
  if released "$name"; then
    pass "$name is free after the run"
  else
    fail "$name is still held after the run: $(held_by "$name")"
  fi
done

# --- the extension, one archive per PHP -----------------------------------------------------
# The PHP asks PIE's question itself: which archive names fit me (for this tag and for
# the tag RC)? As PIE does (src/Platform/PrePackagedBinaryAssetName.php): .zip then .tgz,
# then both with -nts/-zts spelled out, "-debug" before the thread safety, each name
# lowercased whole; the architecture in PIE's spelling (x86_64, or arm64 for what
# php_uname('m') calls aarch64: never aarch64 in the name), the libc
# musl when this php runs on musl's loader (PIE asks `ldd ls`, which says the same on a
# real system; here a musl PHP runs on a glibc machine, whose ldd cannot read it).
# It then locks NAME, says "held", waits (bounded) until the file GO exists, unlocks and
# says "released".
cat >"$work/lock.php" <<'PHP'
<?php
use ItsMieger\MySqlSharedLocks\SharedLock;

[, $name, $go, $ext, $tag, $rc] = $argv;
$machine = php_uname('m');
$arch = in_array($machine, ['arm64', 'aarch64'], true) ? 'arm64' : (PHP_INT_SIZE === 4 ? 'x86' : 'x86_64');
// The libc this PHP runs on, from the files mapped into it: a musl loader merely
// installed beside glibc (Debian's musl-tools) must not make a glibc PHP ask for musl.
// musl's loader is its libc: /lib/ld-musl-x86_64.so.1 on Alpine, which the maps show as
// the file the link names, /usr/lib/x86_64-linux-musl/libc.so on Debian.
$maps = (string) file_get_contents('/proc/self/maps');
$libc = preg_match('~/(ld-musl-[^/\s]+|libc\.musl-[^/\s]+|[^/\s]+-linux-musl/libc\.so)$~m', $maps) ? 'musl' : 'glibc';
$debug = PHP_DEBUG ? '-debug' : '';
foreach ([$tag, $rc] as $version) {
    $names = [];
    foreach ([PHP_ZTS ? '-zts' : '', PHP_ZTS ? '-zts' : '-nts'] as $ts) {
        foreach (['zip', 'tgz'] as $format) {
            $names[] = strtolower(sprintf('php_%s-%s_php%d.%d-%s-%s-%s%s%s.%s', $ext, $version,
                PHP_MAJOR_VERSION, PHP_MINOR_VERSION, $arch, PHP_OS_FAMILY, $libc, $debug, $ts, $format));
        }
    }
    echo implode(' ', array_values(array_unique($names))), "\n";
}
if (!extension_loaded($ext)) {
    fwrite(STDERR, "$ext is not loaded\n");
    exit(2);
}
printf("%s %s %s\n", PHP_VERSION, phpversion($ext), $machine);
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

for j in "${!e_file[@]}"; do
  i=${e_target[$j]}
  selected "$i" || continue
  minor=${e_php[$j]} home=${e_home[$j]} zip_name=${e_file[$j]} target=${t_name[$i]}
  what="PHP $minor ($target, $home)"
  dir=$work/$target-php$minor
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
  audit "$ext.so for $what" "${t_arch[$i]}" "${t_libc[$i]}" "$dir/$ext.so"

  name=package-$target-php$minor-$$
  go=$dir/go
  php=$(php_of "$home" "$minor") || { fail "$what: no php for home $home"; continue; }
  run_in "$home" "$php" -d "extension=$dir/$ext.so" -d "mysqllock.dsn=$dsn" \
    "$work/lock.php" "$name" "$go" "$ext" "$tag" "$rc_tag" >"$dir/out" 2>"$dir/err" &
  pid=$!
  if wait_for "$dir/out" held "$pid"; then
    seen=$(held_by "$name")
    if [ "$seen" = "1 1" ]; then
      pass "$what ($(sed -n 3p "$dir/out")) holds $name: another connection sees its row and GET_LOCK"
    else
      fail "$what said held, but another connection sees '$seen' for $name"
    fi
  else
    fail "$what did not take $name: $(cat "$dir/out" "$dir/err")"
  fi
  touch "$go"
  rc=0
  wait "$pid" || rc=$?
  if [ $rc -eq 0 ] && grep -qx released "$dir/out" && released "$name"; then
    pass "$what released $name (exit 0; the row and the GET_LOCK are gone)"
  else
    fail "$what: exit $rc, $(tr '\n' ' ' <"$dir/out") $(cat "$dir/err"); the lock: '$(held_by "$name")'"
  fi
  # PIE takes its first candidate that the release has: ours must be the first.
  for line in 1 2; do
    if [ $line = 1 ]; then want=$zip_name for_tag=$tag; else want=${rc_files[$j]} for_tag=$rc_tag; fi
    read -r -a candidates < <(sed -n "${line}p" "$dir/out")
    if [ "${candidates[0]:-}" = "$want" ]; then
      pass "$what: PIE's first name for tag $for_tag is exactly $want"
    else
      fail "$what: PIE's names for tag $for_tag are '${candidates[*]:-}', the archive is $want"
    fi
  done
done

# --- the C library, per target ----------------------------------------------------------------
for i in "${!t_name[@]}"; do
  if ! selected "$i" || [ -z "${t_lib[$i]}" ]; then continue; fi
  target=${t_name[$i]}
  home=$(first_home "$i")
  cc=$(cc_for "${t_arch[$i]}" "${t_libc[$i]}")
  lib_dir=$work/c-$target
  mkdir -p "$lib_dir"
  lib_archive=${t_lib[$i]}
  lib_root=${lib_archive%.tar.gz}
  want="$lib_root/ $lib_root/include/ $lib_root/include/mysqllock.h $lib_root/lib/ $lib_root/lib/libmysqllock.a $lib_root/lib/libmysqllock.so "
  if tar -xzf "$dist/$lib_archive" -C "$lib_dir" && [ "$(tar -tzf "$dist/$lib_archive" | sort | tr '\n' ' ')" = "$want" ]; then
    pass "$lib_archive holds lib/libmysqllock.{so,a} and include/mysqllock.h"
  else
    fail "$lib_archive holds $(tar -tzf "$dist/$lib_archive" | tr '\n' ' ')"
    continue
  fi
  lib=$lib_dir/$lib_root
  audit "the archived libmysqllock.so ($target)" "${t_arch[$i]}" "${t_libc[$i]}" "$lib/lib/libmysqllock.so"
  if out=$(bash scripts/package.sh check-elf "${t_arch[$i]}" "$lib/lib/libmysqllock.a" 2>&1); then
    pass "the archived libmysqllock.a ($target): ${out##*/}"
  else
    fail "the archived libmysqllock.a ($target): $out"
  fi
  cflags=(-std=c11 -Wall -Wextra -Wpedantic -Werror -I "$lib/include")
  for kind in shared static; do
    if [ $kind = shared ]; then
      # shellcheck disable=SC2054 # the commas are the linker option's
      link=(-L "$lib/lib" -lmysqllock -Wl,-rpath,"$lib/lib")
    else
      link=("$lib/lib/libmysqllock.a" -lm -pthread -ldl)
    fi
    link_cc=$cc
    if [ $kind = static ] && [ "${t_libc[$i]}" = musl ]; then
      # The static library needs an unwinder (Rust's panics unwind): on a musl system gcc's
      # own libgcc (Alpine's is musl's). Debian's musl-gcc borrows gcc 12's libgcc_eh.a,
      # built for glibc (undefined reference to _dl_find_object), so this link is zig cc's
      # for musl (package.sh's wrapper) with LLVM's libunwind.
      link_cc=${MYSQLLOCK_PACKAGE_CACHE:-/var/cache/mysqllock/package}/bin/zigcc-${t_triple[$i]/-unknown-/-}
      link+=(-lunwind)
    fi
    name=package-c-$target-$kind-$$
    program=$lib_dir/example-$kind
    if ! "$link_cc" "${cflags[@]}" -o "$program" tests/c/example.c "${link[@]}" 2>"$work/gcc.err"; then
      fail "tests/c/example.c does not build against the $target archive ($kind, $link_cc): $(cat "$work/gcc.err")"
      continue
    fi
    if ! out=$(bash scripts/package.sh check-elf "${t_arch[$i]}" "$program" 2>&1); then
      fail "the $kind example built by $link_cc is not ${t_arch[$i]}: $out"
    fi
    # (ldd's output is read whole: grep -q quitting early would make ldd's SIGPIPE fail the
    # pipeline under pipefail.)
    if [ $kind = shared ]; then
      linked=$(ldd_in "$home" "${t_libc[$i]}" "$program" 2>&1)
      grep -qF "$lib/lib/libmysqllock.so" <<<"$linked" \
        || fail "the shared example ($target) does not load the archived libmysqllock.so: $linked"
    fi
    rc=0
    run_in "$home" "$program" "$dsn" "$name" >"$work/example.out" 2>&1 || rc=$?
    if [ $rc -eq 0 ] && grep -qx "running $name" "$work/example.out" && grep -qx "done" "$work/example.out" \
      && released "$name"; then
      pass "a C program (${link_cc##*/}) linked against the $target library ($kind) locks and releases $name (run in $home)"
    else
      fail "the C example ($target, $kind, in $home) exited $rc: $(cat "$work/example.out")"
    fi
  done
done

# --- composer.json: PIE's download methods --------------------------------------------------
methods=$(python3 -c 'import json; print(json.dumps(json.load(open("composer.json"))["php-ext"].get("download-url-method")))')
if [ "$methods" = '["pre-packaged-binary", "composer-default"]' ]; then
  pass "composer.json: pre-packaged binaries first, the source build as the fallback"
else
  fail "composer.json php-ext.download-url-method is $methods"
fi
# Debian 12's Composer (2.5) predates php-ext in its schema; sid's knows it.
# (sid.sh run passes only the project's MYSQLLOCK_* variables in: Composer's goes through env.)
if out=$(bash scripts/sid.sh run env COMPOSER_ROOT_VERSION="$tag" composer validate --strict 2>&1); then
  pass "composer validate --strict (Composer $(bash scripts/sid.sh run composer --version 2>/dev/null | awk '{print $3}'))"
else
  fail "composer validate --strict: $out"
fi

finish
