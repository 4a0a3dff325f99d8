#!/usr/bin/env bash
# Debian trees for the platforms this machine is not: the toolchain that builds for them
# (Debian sid's Rust, with the aarch64 std) and the systems whose PHP loads what was built
# (arm64 Debian bookworm and sid, run under qemu-user). Each is listed in the manifest,
# [workspace.metadata.package.trees] in Cargo.toml (suite, architecture, PHP versions and
# packages), made once with mmdebstrap and kept under /var/cache/mysqllock/NAME; a tree made
# for an older list gets what is missing on its next use instead of being rebuilt.
#
#   scripts/trees.sh root NAME          # makes NAME (once; needs root) and prints its path
#   scripts/trees.sh run NAME [--bind PATH]... [--cwd DIR] [--set NAME=VALUE]... -- CMD...
#                                       # CMD inside NAME (lib/chroot.sh's chroot_run: /proc,
#                                       # /dev, /tmp and each PATH for CMD alone)
#   scripts/trees.sh list               # the trees' names
#   scripts/trees.sh clean NAME         # removes NAME (lib/chroot.sh's chroot_clean: refused
#                                       # while a process runs in it or a mount is under it)
#
# A tree of another architecture runs through binfmt_misc: the kernel hands its programs to
# Debian's qemu-user-static, registered with the F flag (the emulator is opened once, at
# registration, so it works inside a chroot without a copy there). This script mounts
# binfmt_misc and registers qemu when either is missing. MYSQLLOCK_TREES_DIR overrides
# /var/cache/mysqllock; MYSQLLOCK_DEBIAN_MIRROR the mirror.
# shellcheck disable=SC2154 # the manifest's values are set by eval (package_manifest.py)
set -euo pipefail
me=trees.sh
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
# shellcheck source=scripts/lib/servers.sh
. "$here/lib/servers.sh"
# shellcheck source=scripts/lib/chroot.sh
. "$here/lib/chroot.sh"


# apt_install PACKAGE...: on the host, when a tool is missing.
apt_install() {
  echo "$me: installing $* on this machine" >&2
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 \
      install -y -qq --no-install-recommends "$@" >/dev/null; } || die "apt-get install $* failed"
}

# ensure_binfmt DEBIAN_ARCH: programs of that architecture run here (through qemu-user).
ensure_binfmt() {
  local arch=$1 qemu entry=
  case $arch in
    "$(dpkg --print-architecture)") return 0 ;;
    arm64) qemu=aarch64 ;;
    *) die "no qemu for the architecture $arch is known here" ;;
  esac
  if ! command -v "qemu-$qemu-static" >/dev/null || ! command -v update-binfmts >/dev/null; then
    apt_install qemu-user-static binfmt-support
  fi
  if ! mountpoint -q /proc/sys/fs/binfmt_misc; then
    mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc \
      || die "cannot mount binfmt_misc (the kernel needs CONFIG_BINFMT_MISC)"
  fi
  entry=/proc/sys/fs/binfmt_misc/qemu-$qemu
  if ! grep -qx enabled "$entry" 2>/dev/null; then
    update-binfmts --enable "qemu-$qemu" >/dev/null 2>&1 \
      || update-binfmts --import "qemu-$qemu" >/dev/null 2>&1 || true
  fi
  grep -qx enabled "$entry" 2>/dev/null || die "qemu-$qemu is not registered with binfmt_misc ($entry)"
  # F: the kernel keeps the emulator open, so a chroot needs none of its own.
  grep -q '^flags:.*F' "$entry" || die "$entry lacks the F flag: programs inside a chroot would not find qemu"
}

# load_tree NAME: the tree's manifest entry as tree_* variables, and $root.
load_tree() {
  local values
  values=$(python3 "$here/lib/package_manifest.py" tree "$repo" "$1") || die "no tree $1 in the manifest"
  eval "$values"
  root=$trees_dir/$1
}

# tree_want: what the tree must hold, as one line (remembered in ROOT/.mysqllock-packages).
# A tree made by an older recipe (v1: always apt) is made again when it is to be extracted.
tree_want() {
  local version=v2
  [ "$tree_variant" != apt ] || version=v1
  echo "$version $tree_arch $tree_suite foreign:${tree_foreign[*]} ${tree_packages[*]} ${tree_php_packages[*]}"
}

# ensure_tree NAME: NAME exists with every package of its manifest entry.
ensure_tree() {
  local name=$1 want
  load_tree "$name"
  want=$(tree_want)
  # One at a time (trees made at once would run apt-get on this machine at once).
  mkdir -p "$trees_dir"
  exec 8>"$trees_dir/.binfmt.lock"
  flock 8
  ensure_binfmt "$tree_arch"
  local arch
  for arch in "${tree_foreign[@]}"; do ensure_binfmt "$arch"; done
  flock -u 8
  exec 8>&-
  [ "$(cat "$root/.mysqllock-packages" 2>/dev/null)" = "$want" ] && return 0
  [ "$(id -u)" -eq 0 ] || die "making the tree $name needs root (mmdebstrap, chroot)"
  exec 9>"$root.lock"
  flock 9
  if [ "$(cat "$root/.mysqllock-packages" 2>/dev/null)" != "$want" ]; then
    local started=$SECONDS
    if [ "$tree_variant" = apt ] && [ -x "$root/usr/bin/apt-get" ]; then
      echo "$me: installing what is new in $root (log: $root.log)" >&2
      extend_tree "$name" >>"$root.log" 2>&1 \
        || { tail -20 "$root.log" >&2; die "installing into $root failed (log: $root.log)"; }
    else
      echo "$me: making the tree $name in $root (mmdebstrap $tree_suite $tree_arch, once; log: $root.log)" >&2
      make_tree "$name" >"$root.log" 2>&1 \
        || { tail -20 "$root.log" >&2; die "making $root failed (log: $root.log)"; }
    fi
    echo "$want" >"$root/.mysqllock-packages"
    echo "$me: $root is ready ($((SECONDS - started)) s, $(du -sh --one-file-system "$root" | cut -f1))" >&2
  fi
  flock -u 9
  exec 9>&-
}

# apt_options: what every apt run in a tree is told: the registry's sid Release file can be
# past its Valid-Until date, and recommendations are not wanted.
apt_options=(-o Acquire::Check-Valid-Until=false -o APT::Install-Recommends=false)

# make_tree NAME: mmdebstrap into ROOT.tmp, moved into place (over an older tree of the
# same name) when complete. The PHP packages from another suite (experimental) are named
# with their suite, after it is added.
#
# Variant "apt" installs the packages, running their maintainer scripts, as a system's own
# apt would (a tree that builds: Debian's Rust). Variant "extract" only unpacks them and
# what they depend on, running nothing: for a tree of another architecture, whose every
# maintainer script, dpkg and apt run would be emulated by qemu (measured here: the arm64
# PHP trees took 2720 s and 5820 s with apt, 121 s for PHP 8.2 extracted). What runs in
# such a tree needs no configuration step: php with no php.ini and no conf.d (modules are
# given with -d), sh, ldd and coreutils.
make_tree() {
  if [ "$tree_variant" = extract ]; then
    make_extracted_tree
  else
    make_installed_tree
  fi
  # The older tree is removed only now, with nothing of it running or mounted.
  if [ -e "$root" ]; then
    [ -z "$(chroot_users "$root")" ] || die "$root is in use: $(chroot_users "$root" | tr '\n' ' ')"
    chroot_sweep "$root"
    rm -rf --one-file-system "$root"
  fi
  mv "$root.tmp" "$root"
}

make_extracted_tree() {
  local tmp=$root.tmp suite sources=() include
  command -v mmdebstrap >/dev/null || apt_install mmdebstrap
  rm -rf --one-file-system "$tmp"
  sources=("deb $mirror $tree_suite main")
  for suite in "${tree_extra_suites[@]}"; do sources+=("deb $mirror $suite main"); done
  include="${tree_packages[*]} ${tree_php_packages[*]}"
  /usr/bin/unshare --mount --propagation private -- mmdebstrap --variant=extract \
    --architectures="$tree_arch" \
    --aptopt='Acquire::Check-Valid-Until "false"' --aptopt='APT::Install-Recommends "false"' \
    --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' \
    --include="$include" "$tree_suite" "$tmp" "${sources[@]}"
  cp /etc/hosts /etc/resolv.conf "$tmp/etc/"
}

make_installed_tree() {
  local tmp=$root.tmp suite archs sources=() include
  command -v mmdebstrap >/dev/null || apt_install mmdebstrap
  rm -rf --one-file-system "$tmp"
  sources=("deb $mirror $tree_suite main")
  for suite in "${tree_extra_suites[@]}"; do sources+=("deb $mirror $suite main"); done
  archs=$(IFS=,; echo "$tree_arch${tree_foreign[*]:+,${tree_foreign[*]}}")
  include=$(IFS=,; echo "${tree_packages[*]}")
  local plain=() from_suite=() package
  for package in "${tree_php_packages[@]}"; do
    case $package in */*) from_suite+=("$package") ;; *) plain+=("$package") ;; esac
  done
  [ ${#plain[@]} -eq 0 ] || include=${include:+$include,}$(IFS=,; echo "${plain[*]}")
  # In a mount namespace of its own: what mmdebstrap mounts in the tree while it works
  # (/proc, /dev, /sys, for its hooks and the packages' scripts) ends with it, even when
  # it is killed. Its hooks' chroot is mmdebstrap's own, inside that namespace.
  # shellcheck disable=SC2016 # $1 is mmdebstrap's, in its hooks
  /usr/bin/unshare --mount --propagation private -- mmdebstrap --variant=apt --architectures="$archs" \
    --aptopt='Acquire::Check-Valid-Until "false"' --aptopt='APT::Install-Recommends "false"' \
    --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' \
    ${include:+--include="$include"} \
    ${from_suite[0]:+--customize-hook="DEBIAN_FRONTEND=noninteractive chroot \"\$1\" apt-get -y -qq install ${from_suite[*]}"} \
    --customize-hook='cp /etc/hosts /etc/resolv.conf "$1/etc/"' \
    "$tree_suite" "$tmp" "${sources[@]}"
}

# extend_tree NAME: the manifest's packages installed into the existing ROOT.
extend_tree() {
  local arch
  for arch in "${tree_foreign[@]}"; do
    chroot_run "$root" -- dpkg --add-architecture "$arch"
  done
  chroot_run "$root" --set DEBIAN_FRONTEND=noninteractive -- apt-get "${apt_options[@]}" -qq update
  chroot_run "$root" --set DEBIAN_FRONTEND=noninteractive -- \
    apt-get "${apt_options[@]}" -y -qq install "${tree_packages[@]}" "${tree_php_packages[@]}"
}

cmd=${1:-}
shift || true
case "$cmd" in
  root)
    [ $# -eq 1 ] || die "usage: trees.sh root NAME"
    ensure_tree "$1"
    echo "$root"
    ;;
  run)
    [ $# -ge 1 ] || die "usage: trees.sh run NAME [chroot_run options] -- CMD..."
    name=$1
    shift
    ensure_tree "$name"
    chroot_run "$root" "$@"
    ;;
  list)
    python3 "$here/lib/package_manifest.py" trees "$repo"
    ;;
  clean)
    [ $# -eq 1 ] || die "usage: trees.sh clean NAME"
    load_tree "$1"
    # Refused while a process runs in it or any mount namespace has a mount under it.
    chroot_clean "$root"
    ;;
  *)
    die "usage: trees.sh root NAME | run NAME ... -- CMD... | list | clean NAME"
    ;;
esac
