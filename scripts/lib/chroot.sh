# shellcheck shell=bash disable=SC2154,SC2034
# (SC2154: $me is set by the sourcing script; SC2034: the caches' places are for it.)
# Debian chroots for what Debian 12 lacks (sid ones, and a trixie one for Debian 13's PHP
# stack), and the caches kept beside them (sourced by scripts/sid.sh, trixie.sh, mysql.sh,
# package.sh, cache.sh, test.sh and the server scripts that run in a chroot; lib/servers.sh
# first, for die). Each chroot is made once by debootstrap and
# kept under /var/cache/mysqllock, so later runs pay nothing; its package list is
# remembered inside it, and a chroot made for an older list gets the missing packages on
# its next use instead of being rebuilt. Several suites may need a chroot at the same time:
# the first builds or extends it under a lock, the others wait for it.
#
# The rule: a chroot is entered only through chroot_run (or chroot_command), whose mounts
# live in a mount namespace of the command's own and end with it. Nothing of the host is
# ever mounted under the cache in the host's own namespace, so `rm -rf --one-file-system`
# of a cache (chroot_clean) cannot reach a host file, and a run killed with SIGKILL leaves
# no mount behind. Older scripts bound /tmp, /dev, the toolchain and the repository there
# for good: chroot_sweep takes such leftovers off on a chroot's next use.

mirror=${MYSQLLOCK_DEBIAN_MIRROR:-http://deb.debian.org/debian}

# Where the caches live (docs/operations.md, "Caches"; scripts/cache.sh lists and removes
# them). The fuzz builds' place is decided by tests/suites/15-fuzz.sh the same way.
cache_dir=/var/cache/mysqllock
sid_root=${MYSQLLOCK_SID_ROOT:-$cache_dir/sid-php}
trixie_root=${MYSQLLOCK_TRIXIE_ROOT:-$cache_dir/trixie-php}
mysql_root=${MYSQLLOCK_MYSQL_ROOT:-$cache_dir/sid-mysql}
package_cache=${MYSQLLOCK_PACKAGE_CACHE:-$cache_dir/package}
trees_dir=${MYSQLLOCK_TREES_DIR:-$cache_dir}
fuzz_cache=${MYSQLLOCK_FUZZ_TARGET_DIR:-$cache_dir/fuzz-target}

# The host's own tools, whatever the caller's PATH says.
chroot_host_path=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

# chroot_run ROOT [--bind PATH]... [--cwd DIR] [--set NAME=VALUE]... -- CMD ARGS...: CMD
# inside ROOT, in a mount namespace of its own (unshare --mount --propagation private), where
# /proc, /dev (with its submounts), /tmp and each PATH of the host (a directory, at the same
# path) are mounted for CMD alone: the kernel takes them away when CMD and whatever it
# started have ended, even on kill -9, and the host's namespace never sees them, so an
# `rm -rf --one-file-system` of the cache cannot descend into the host's files even while
# CMD runs. A PATH ROOT already sees (through its /tmp) is not bound again. CMD runs in DIR
# (default /) and exits with its own status; 125 when the mounts could not be made.
#
# CMD sees a clean environment, never the caller's, so that a TMPDIR, LD_PRELOAD, locale
# or proxy of the caller's shell means nothing inside ROOT (issue 35: a TMPDIR the chroot
# lacks broke ca-certificates' postinst). It gets exactly:
#   PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
#   HOME=/root  LANG=C.UTF-8  TMPDIR=/tmp
#   every MYSQLLOCK_* variable of the caller (the suites' rows, servers and paths:
#     MYSQLLOCK_TEST_DSN and the other MYSQLLOCK_TEST_*, MYSQLLOCK_PHP*, MYSQLLOCK_ROOT,
#     MYSQLLOCK_BIN, MYSQLLOCK_SERVER_*, MYSQLLOCK_SYMFONY*, MYSQLLOCK_LARAVEL, ...)
#   and the --set ones, last, so they win over the above (chroot_cargo sets its PATH).
# Anything else a command needs inside is handed over with --set by its caller (sid.sh run
# does so for a short, named list).
chroot_run() {
  local chroot_cmd
  chroot_command "$@" || return
  "${chroot_cmd[@]}"
}

# chroot_command ROOT [options] -- CMD ARGS...: what chroot_run runs, as the array
# chroot_cmd, for a caller that must exec it or put setsid, nohup or & in front of it.
# Every step of it execs the next (env, unshare, bash, chroot, env), so the process is CMD
# itself in the end: its pid is the one the caller started, as a server script's pid file
# and kill expect.
chroot_command() {
  local root=$1 cwd=/ binds=() sets=() name
  shift
  if [[ $root != /* ]] || [ "$root" = / ]; then
    die "chroot_run: the root must be an absolute path other than / (got '$root')"
  fi
  [ -x "$root/usr/bin/env" ] || die "chroot_run: $root is not a chroot (it has no /usr/bin/env)"
  while [ $# -gt 0 ] && [ "$1" != -- ]; do
    case $1 in
      --bind)
        if [[ ${2:-} != /* ]] || [ ! -d "$2" ]; then
          die "chroot_run: --bind needs an absolute path of a host directory (got '${2:-}')"
        fi
        binds+=("$2")
        shift 2
        ;;
      --cwd) cwd=${2:?chroot_run: --cwd needs a directory}; shift 2 ;;
      --set)
        [[ ${2:-} =~ ^[A-Za-z_][A-Za-z0-9_]*= ]] || die "chroot_run: --set needs NAME=VALUE (got '${2:-}')"
        sets+=("$2")
        shift 2
        ;;
      *) die "chroot_run: unknown option $1" ;;
    esac
  done
  [ "${1:-}" = -- ] || die "chroot_run: no -- before the command"
  shift
  [ $# -gt 0 ] || die "chroot_run: no command"
  local env=(PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root
             LANG=C.UTF-8 TMPDIR=/tmp)
  for name in $(compgen -e); do
    case $name in MYSQLLOCK_*) env+=("$name=${!name}") ;; esac
  done
  env+=(${sets[@]+"${sets[@]}"})
  # The host side runs with a clean environment too: the caller's TMPDIR or PATH must not
  # steer mount, mkdir or chroot either.
  # shellcheck disable=SC2016 # the script is for the inner bash
  chroot_cmd=(/usr/bin/env -i PATH="$chroot_host_path" /usr/bin/unshare --mount --propagation private --
    /bin/bash -euc '
      root=$1 cwd=$2 nbinds=$3 nenv=$4
      shift 4
      fail() { echo "chroot_run: $*" >&2; exit 125; }
      mkdir -p "$root/proc" "$root/dev" "$root/tmp"
      mount -t proc proc "$root/proc" || fail "cannot mount /proc in $root"
      mount --rbind /dev "$root/dev" || fail "cannot bind /dev into $root"
      mount --bind /tmp "$root/tmp" || fail "cannot bind /tmp into $root"
      while [ "$nbinds" -gt 0 ]; do
        mkdir -p "$root$1"
        [ "$root$1" -ef "$1" ] || mount --bind "$1" "$root$1" || fail "cannot bind $1 into $root"
        shift; nbinds=$((nbinds - 1))
      done
      env=()
      while [ "$nenv" -gt 0 ]; do env+=("$1"); shift; nenv=$((nenv - 1)); done
      exec chroot "$root" /usr/bin/env -i -C "$cwd" "${env[@]}" "$@"
    ' chroot_run "$root" "$cwd" "${#binds[@]}" "${#env[@]}" ${binds[@]+"${binds[@]}"} "${env[@]}" "$@")
}

# Mounts and the processes behind them ----------------------------------------------------

# chroot_host_mounts DIR: the mount points strictly under DIR in the caller's mount
# namespace (the host's, for the scripts), deepest first, one a line.
chroot_host_mounts() {
  local dir
  dir=$(realpath -m -- "$1")
  awk -v d="$dir/" 'index($5, d) == 1 { print $5 }' /proc/self/mountinfo | chroot_decode | sort -r
}

# chroot_ns_mounts DIR: "PID MOUNT" for every mount strictly under DIR in any mount
# namespace of the machine (the host's and those of commands still running in chroot_run),
# one PID per namespace. A namespace is read from its own root (nsenter), since a chrooted
# process's /proc/PID/mountinfo shows only what lies under its root, relative to it.
chroot_ns_mounts() {
  local dir pid
  dir=$(realpath -m -- "$1")
  # shellcheck disable=SC2016 # awk's own $5
  for pid in $(stat -L -c '%i %n' /proc/[0-9]*/ns/mnt 2>/dev/null | awk '!seen[$1]++ { split($2, p, "/"); print p[3] }'); do
    # A namespace without awk (the kernel's kdevtmpfs thread has one of its own, holding
    # only /dev) cannot hold a mount of the caches: its failure is not this function's.
    nsenter -t "$pid" -m awk -v d="$dir/" -v pid="$pid" 'index($5, d) == 1 { print pid, $5 }' /proc/self/mountinfo \
      2>/dev/null | chroot_decode || true
  done
}

# mountinfo writes a space, tab, newline and backslash in a path as \040, \011, \012, \134.
chroot_decode() {
  local line
  while IFS= read -r line; do printf '%b\n' "$line"; done
}

# chroot_users DIR [host]: "PID COMMAND" of each process whose root directory is DIR (a
# command or server in that chroot); with `host`, only those in the caller's own mount
# namespace, which is where no command of chroot_run ever is: such a process was started
# by an older script and relies on the mounts it left under DIR.
chroot_users() {
  local dir=$1 only_host=${2:-} p
  [ -d "$dir" ] || return 0
  for p in /proc/[0-9]*; do
    [ "$p/root" -ef "$dir" ] || continue
    [ -z "$only_host" ] || [ "$p/ns/mnt" -ef /proc/self/ns/mnt ] || continue
    echo "${p#/proc/} $(tr '\0' ' ' <"$p/cmdline" 2>/dev/null | cut -c1-100)"
  done
}

# chroot_sweep DIR: takes every mount left under DIR in the host's namespace off (lazily,
# deepest first): the binds and /proc mounts of older scripts, which stayed after their
# command ended. Left alone, with a message, while a process of such a script still runs
# in DIR and relies on them. The caller holds DIR's lock.
chroot_sweep() {
  local dir=$1 users mounts m _
  [ -n "$(chroot_host_mounts "$dir")" ] || return 0
  users=$(chroot_users "$dir" host)
  if [ -n "$users" ]; then
    echo "$me: mounts left under $dir stay for now: an older script's processes still run there, in the host's mounts:" >&2
    # shellcheck disable=SC2001 # every line, not the first
    sed 's/^/  /' <<<"$users" >&2
    return 0
  fi
  for _ in 1 2 3 4 5; do
    mapfile -t mounts < <(chroot_host_mounts "$dir")
    [ ${#mounts[@]} -gt 0 ] || return 0
    echo "$me: taking off ${#mounts[@]} mount(s) an earlier run left under $dir: ${mounts[*]}" >&2
    for m in "${mounts[@]}"; do umount -l -- "$m" 2>/dev/null || true; done
  done
  die "mounts under $dir could not be taken off: $(chroot_host_mounts "$dir" | tr '\n' ' ')"
}

# cache_dirs: the cache directories (those of lib/chroot.sh's callers, the trees of
# scripts/trees.sh named by the release manifest, and the .tmp where each is built), one a
# line.
cache_dirs() {
  local lib tree
  lib=$(dirname "${BASH_SOURCE[0]}")
  printf '%s\n' "$sid_root" "$sid_root.tmp" "$trixie_root" "$trixie_root.tmp" "$mysql_root" "$mysql_root.tmp" \
    "$package_cache" "$fuzz_cache"
  for tree in $(python3 "$lib/package_manifest.py" trees "$lib/../.."); do
    printf '%s\n' "$trees_dir/$tree" "$trees_dir/$tree.tmp"
  done
}

# chroot_leftovers MARKER DIR...: what a run that has ended left mounted under the DIRs, one
# line each (nothing: nothing left): every mount there in the caller's (the host's) mount
# namespace, and every mount there in the namespace of a process whose environment holds
# MARKER (NAME=VALUE), a command of the run that still lives, with the mounts chroot_run
# made for it. Other namespaces belong to other runs on the same machine.
chroot_leftovers() {
  local marker=$1 dir pid mount
  shift
  for dir in "$@"; do
    chroot_host_mounts "$dir" | sed 's/^/in the host'"'"'s mount namespace: /'
    chroot_ns_mounts "$dir" | while read -r pid mount; do
      ! [ "/proc/$pid/ns/mnt" -ef /proc/self/ns/mnt ] || continue
      # No -q: grep reads to the end, so tr cannot die of SIGPIPE on an environment longer
      # than one read of /proc (4 KB) and, under pipefail, hide a leftover of this run.
      tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | grep -xF -- "$marker" >/dev/null || continue
      echo "in the mount namespace of pid $pid ($(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | cut -c1-80)): $mount"
    done
  done
}

# chroot_lock DIR SECONDS: DIR's lock (DIR.lock) on fd 9, waiting SECONDS at most.
chroot_lock() {
  mkdir -p "$(dirname "$1")"
  exec 9>"$1.lock"
  flock -w "$2" 9 || die "$1 stayed locked for $2 s (another run builds or removes it: $1.log)"
}

chroot_unlock() {
  flock -u 9
  exec 9>&-
}

# chroot_clean DIR: removes the cache DIR (a chroot or a build cache), DIR.tmp, DIR.log and
# its lock files, never anything outside it: under DIR's lock, mounts left by older scripts are
# taken off first, then `rm -rf --one-file-system`. Refuses, saying why, while a process
# runs in DIR (a server of that chroot, a suite's command) or any mount namespace still
# has a mount under it.
chroot_clean() {
  local dir users mounts
  dir=$(realpath -m -- "${1:?chroot_clean: no directory}")
  case $dir in
    / | /var | /var/cache | /tmp | /var/tmp | /home | /root | /usr | /etc)
      die "refusing to remove $dir: not a cache directory" ;;
  esac
  if [ ! -e "$dir" ] && [ ! -e "$dir.tmp" ]; then
    rm -f "$dir.log" "$dir.lock"
    echo "$me: $dir does not exist: nothing to remove"
    return 0
  fi
  chroot_lock "$dir" 60
  users=$(chroot_users "$dir"; [ ! -d "$dir.tmp" ] || chroot_users "$dir.tmp")
  [ -z "$users" ] || die "refusing to remove $dir: these processes run in it (stop its servers first):
$users"
  chroot_sweep "$dir"
  [ ! -d "$dir.tmp" ] || chroot_sweep "$dir.tmp"
  mounts=$(chroot_ns_mounts "$dir"; chroot_ns_mounts "$dir.tmp")
  # shellcheck disable=SC2001 # every line, not the first
  [ -z "$mounts" ] || die "refusing to remove $dir: mounts remain under it (the mount namespace of PID: MOUNT):
$(sed 's/^\([0-9]*\) /  \1: /' <<<"$mounts")"
  rm -rf --one-file-system -- "$dir" "$dir.tmp" || die "removing $dir failed (a mount appeared under it?)"
  # With the log, the lock files of the scripts that use DIR (group-replication.sh's
  # DIR.users.lock; DIR.bind.lock of older scripts).
  rm -f -- "$dir.log" "$dir".*.lock
  echo "$me: removed $dir"
  rm -f -- "$dir.lock"
  chroot_unlock
}

# Building -------------------------------------------------------------------------------

# chroot_ensure ROOT LABEL INSTALL [SUITE]: ROOT exists, a Debian SUITE (sid by default),
# with what INSTALL (a function taking ROOT, whose steps are chained with &&: it is called
# with ||, where set -e does not act) installs. The list INSTALL installs is what `declare -f INSTALL` prints: when that
# changes, INSTALL runs again on the existing chroot. The first use after an older script
# left mounts under ROOT takes them off (chroot_sweep), under ROOT's lock, before anything
# else.
chroot_ensure() {
  local root=$1 label=$2 install=$3 suite=${4:-sid} want
  want=$(declare -f "$install" | md5sum | cut -c1-32)
  if [ "$(cat "$root/.mysqllock-packages" 2>/dev/null)" = "$want" ] \
     && [ -z "$(chroot_host_mounts "$root")" ]; then
    return 0
  fi
  [ "$(id -u)" -eq 0 ] || die "building the $label chroot needs root (debootstrap, chroot)"
  # A first build takes minutes (one debootstrap and the packages); an hour is a hang.
  chroot_lock "$root" 3600
  chroot_sweep "$root"
  if [ "$(cat "$root/.mysqllock-packages" 2>/dev/null)" != "$want" ]; then
    if [ ! -x "$root/usr/bin/apt-get" ]; then
      chroot_bootstrap "$root" "$label" "$suite"
    fi
    echo "$me: installing the $label packages in $root (log: $root.log)" >&2
    "$install" "$root" >>"$root.log" 2>&1 \
      || { tail -20 "$root.log" >&2; die "installing the $label packages in $root failed (log: $root.log)"; }
    echo "$want" >"$root/.mysqllock-packages"
  fi
  chroot_unlock
}

# chroot_bootstrap ROOT LABEL SUITE: a minimal Debian SUITE in ROOT (for sid also
# experimental, pinned low as Debian ships it), made in ROOT.tmp and moved into place when
# complete. debootstrap mounts
# /proc and /sys in its target while it works: it runs in a mount namespace of its own, so
# those mounts end with it even when it is killed.
chroot_bootstrap() {
  local root=$1 label=$2 suite=$3 tmp=$1.tmp
  command -v debootstrap >/dev/null 2>&1 || {
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null
  } || die "debootstrap is missing and could not be installed"
  chroot_sweep "$tmp"
  rm -rf --one-file-system "$tmp"
  echo "$me: building the $label chroot in $root (debootstrap $suite, about 2 minutes, once)" >&2
  /usr/bin/env -i PATH="$chroot_host_path" HOME=/root LANG=C.UTF-8 TMPDIR=/tmp \
    /usr/bin/unshare --mount --propagation private -- \
    debootstrap --variant=minbase "$suite" "$tmp" "$mirror" >"$root.log" 2>&1 \
    || { tail -20 "$root.log" >&2; die "debootstrap $suite failed (log: $root.log)"; }
  cp /etc/resolv.conf "$tmp/etc/resolv.conf"
  # A minbase chroot has no /etc/hosts: without it nothing resolves localhost.
  cp /etc/hosts "$tmp/etc/hosts"
  [ "$suite" != sid ] || echo "deb $mirror experimental main" >"$tmp/etc/apt/sources.list.d/experimental.list"
  # Packages must not start their services in the chroot (mariadb-server would).
  printf '#!/bin/sh\nexit 101\n' >"$tmp/usr/sbin/policy-rc.d"
  chmod +x "$tmp/usr/sbin/policy-rc.d"
  mv "$tmp" "$root"
}

# chroot_apt ROOT ARGS...: apt-get in ROOT, quietly, without questions. The registry's sid
# Release file can be past its Valid-Until date.
chroot_apt() {
  local root=$1
  shift
  chroot_run "$root" --set DEBIAN_FRONTEND=noninteractive -- \
    apt-get -o Acquire::Check-Valid-Until=false -y -qq "$@"
}

# chroot_cargo ROOT DIR [--bind PATH]... [VAR=VALUE...] -- CARGO_ARGS...: the host's cargo
# (rustup's toolchain, bound into ROOT at its own paths, so nothing is installed there) run
# inside ROOT in DIR (bound too) with the VARs set: a build against a library or PHP that
# only ROOT has. Each PATH is bound as well (a target directory outside DIR).
chroot_cargo() {
  local root=$1 dir=$2 opts=()
  local cargo_home=${CARGO_HOME:-$HOME/.cargo} rustup_home=${RUSTUP_HOME:-$HOME/.rustup}
  shift 2
  opts=(--bind "$cargo_home" --bind "$rustup_home" --bind "$dir" --cwd "$dir"
        --set "PATH=$cargo_home/bin:/usr/local/bin:/usr/bin:/bin" --set "HOME=$HOME"
        --set "CARGO_HOME=$cargo_home" --set "RUSTUP_HOME=$rustup_home")
  # The toolchain the caller chose, if it chose one, builds here too.
  [ -z "${RUSTUP_TOOLCHAIN:-}" ] || opts+=(--set "RUSTUP_TOOLCHAIN=$RUSTUP_TOOLCHAIN")
  while [ $# -gt 0 ] && [ "$1" != -- ]; do
    case $1 in
      --bind) opts+=(--bind "${2:?chroot_cargo: --bind needs a path}"); shift 2 ;;
      *) opts+=(--set "$1"); shift ;;
    esac
  done
  [ "${1:-}" = -- ] || die "chroot_cargo: no -- before cargo's arguments"
  shift
  chroot_run "$root" "${opts[@]}" -- cargo "$@"
}
