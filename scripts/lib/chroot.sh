# shellcheck shell=bash disable=SC2154
# (SC2154: $me is set by the sourcing script.)
# Debian chroots for what Debian 12 lacks (sourced by scripts/mysql.sh, scripts/sid.sh and
# scripts/trixie.sh; lib/servers.sh first, for die): sid ones, and a trixie one for Debian
# 13's PHP stack. Each is made once by debootstrap and kept
# under /var/cache/mysqllock, so later runs pay nothing; its package list is remembered
# inside it, and a chroot made for an older list gets the missing packages on its next use
# instead of being rebuilt. Several suites may need a chroot at the same time: the first
# builds or extends it under a lock, the others wait for it.

mirror=${MYSQLLOCK_DEBIAN_MIRROR:-http://deb.debian.org/debian}

# chroot_ensure ROOT LABEL INSTALL [SUITE]: ROOT exists, a Debian SUITE (sid by default),
# with what INSTALL (a function taking ROOT, whose steps are chained with &&: it is called
# with ||, where set -e does not act) installs. The list INSTALL installs is what
# `declare -f INSTALL` prints: when that changes, INSTALL runs again on the existing chroot.
chroot_ensure() {
  local root=$1 label=$2 install=$3 suite=${4:-sid} want
  want=$(declare -f "$install" | md5sum | cut -c1-32)
  if [ "$(cat "$root/.mysqllock-packages" 2>/dev/null)" = "$want" ]; then
    chroot_mount_proc "$root"
    return 0
  fi
  [ "$(id -u)" -eq 0 ] || die "building the $label chroot needs root (debootstrap, chroot)"
  mkdir -p "$(dirname "$root")"
  exec 9>"$root.lock"
  flock 9
  if [ "$(cat "$root/.mysqllock-packages" 2>/dev/null)" != "$want" ]; then
    if [ ! -x "$root/usr/bin/apt-get" ]; then
      chroot_bootstrap "$root" "$label" "$suite"
    fi
    chroot_mount_proc "$root"
    echo "$me: installing the $label packages in $root (log: $root.log)" >&2
    "$install" "$root" >>"$root.log" 2>&1 \
      || { tail -20 "$root.log" >&2; die "installing the $label packages in $root failed (log: $root.log)"; }
    echo "$want" >"$root/.mysqllock-packages"
  fi
  flock -u 9
  exec 9>&-
  chroot_mount_proc "$root"
}

# chroot_bootstrap ROOT LABEL SUITE: a minimal Debian SUITE in ROOT (for sid also
# experimental, pinned low as Debian ships it), made in ROOT.tmp and moved into place when
# complete.
chroot_bootstrap() {
  local root=$1 label=$2 suite=$3 tmp=$1.tmp
  command -v debootstrap >/dev/null 2>&1 || {
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null
  } || die "debootstrap is missing and could not be installed"
  umount "$tmp/proc" 2>/dev/null || true
  rm -rf "$tmp"
  echo "$me: building the $label chroot in $root (debootstrap $suite, about 2 minutes, once)" >&2
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
  DEBIAN_FRONTEND=noninteractive chroot "$root" apt-get -o Acquire::Check-Valid-Until=false -y -qq "$@"
}

# Servers and PHP read /proc (CPU count, their own limits); one mount serves every use.
chroot_mount_proc() {
  [ -e "$1/proc/self" ] && return 0
  mount -t proc proc "$1/proc" 2>/dev/null || [ -e "$1/proc/self" ] \
    || die "cannot mount /proc in $1"
}

# chroot_bind ROOT PATH: PATH of the host at the same path inside ROOT. Nothing is done
# when ROOT already sees PATH there: through an earlier bind, or through ROOT's /tmp for a
# clone under /tmp (a bind there would be a mount point on the host's own directory, which
# could then not be removed: "Device or resource busy"). A mount at that place which is not
# PATH is left from a directory since removed (CI clones into the same path each run and
# deletes the clone after): it is taken off first, or a build there would run in the
# deleted directory ("Could not locate working directory"). Under a lock, so that two
# suites binding at once never take off each other's bind.
chroot_bind() {
  local root=$1 path=$2
  mkdir -p "$root$path"
  [ "$root$path" -ef "$path" ] && return 0
  {
    flock 8
    if ! [ "$root$path" -ef "$path" ]; then
      while mountpoint -q "$root$path"; do
        umount -l "$root$path" || break
      done
      # Its failure is told below, by the check that counts (callers run under set -e).
      mount --bind "$path" "$root$path" || true
    fi
  } 8>"$root.bind.lock"
  [ "$root$path" -ef "$path" ] || die "cannot bind $path into $root"
}

# chroot_run ROOT [--bind PATH]... [--cwd DIR] [--set NAME=VALUE]... -- CMD ARGS...: CMD
# inside ROOT, in a mount namespace of its own (unshare --mount --propagation private), where
# /proc, /dev, /tmp and each PATH of the host (at the same path) are mounted for CMD alone:
# the kernel takes them away when CMD and whatever it started have ended, even on kill -9,
# so nothing of the host stays reachable through ROOT afterwards (an `rm -rf` of the cache
# cannot descend into the host's files). A PATH ROOT already sees (through its /tmp) is not
# bound again. CMD sees a clean environment, not the caller's: PATH, HOME=/root, LANG,
# TMPDIR=/tmp, the project's own MYSQLLOCK_* variables and the --set ones; a TMPDIR or
# LD_PRELOAD of the caller's shell means nothing inside ROOT.
chroot_run() {
  local root=$1 cwd=/ binds=() sets=() name
  shift
  while [ $# -gt 0 ] && [ "$1" != -- ]; do
    case $1 in
      --bind) binds+=("${2:?chroot_run: --bind needs a path}"); shift 2 ;;
      --cwd) cwd=${2:?chroot_run: --cwd needs a directory}; shift 2 ;;
      --set) sets+=("${2:?chroot_run: --set needs NAME=VALUE}"); shift 2 ;;
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
  env+=("${sets[@]}")
  unshare --mount --propagation private -- /bin/bash -euc '
    root=$1 cwd=$2 nbinds=$3 nenv=$4
    shift 4
    mount -t proc proc "$root/proc"
    mount --rbind /dev "$root/dev"
    mkdir -p "$root/tmp"
    mount --bind /tmp "$root/tmp"
    while [ "$nbinds" -gt 0 ]; do
      mkdir -p "$root$1"
      [ "$root$1" -ef "$1" ] || mount --bind "$1" "$root$1"
      shift; nbinds=$((nbinds - 1))
    done
    env=()
    while [ "$nenv" -gt 0 ]; do env+=("$1"); shift; nenv=$((nenv - 1)); done
    exec chroot "$root" /usr/bin/env -i -C "$cwd" "${env[@]}" "$@"
  ' chroot_run "$root" "$cwd" "${#binds[@]}" "${#env[@]}" "${binds[@]}" "${env[@]}" "$@"
}

# chroot_cargo ROOT DIR [VAR=VALUE...] -- CARGO_ARGS...: the host's cargo (rustup's
# toolchain, bound into ROOT at its own paths, so nothing is installed there) run inside
# ROOT (through chroot_run: DIR and the toolchain are bound for this command alone) in DIR
# with the VARs set: a build against a library or PHP that only ROOT has.
chroot_cargo() {
  local root=$1 dir=$2 sets=()
  local cargo_home=${CARGO_HOME:-$HOME/.cargo} rustup_home=${RUSTUP_HOME:-$HOME/.rustup}
  shift 2
  while [ $# -gt 0 ] && [ "$1" != -- ]; do
    sets+=(--set "$1")
    shift
  done
  [ "${1:-}" = -- ] || die "chroot_cargo: no -- before cargo's arguments"
  shift
  chroot_run "$root" --bind "$cargo_home" --bind "$rustup_home" --bind "$dir" --cwd "$dir" \
    --set PATH="$cargo_home/bin:/usr/local/bin:/usr/bin:/bin" --set HOME="$HOME" \
    --set CARGO_HOME="$cargo_home" --set RUSTUP_HOME="$rustup_home" "${sets[@]}" -- cargo "$@"
}
