#!/usr/bin/env bash
# Release archives, installable without a compiler, into dist/ (docs/php.md, "Installing"):
# the PHP extension for every PHP version of the manifest, the CLI, the C library with its
# header, and a checksum file for all of them. Every binary needs glibc <floor> at most.
#
#   scripts/package.sh [--tag TAG]           # builds the archives into dist/
#   scripts/package.sh list [--tag TAG]      # the archives a release has, one a line:
#                                            # "ext X.Y FILE", "cli - FILE", "lib - FILE",
#                                            # "sums - FILE"
#   scripts/package.sh check-glibc FILE...   # the newest GLIBC_ version each ELF file
#                                            # needs; fails when one is above the floor
#   scripts/package.sh clean                 # removes the cache below (the next build
#                                            # is a cold one)
#
# What is built is the manifest [workspace.metadata.package] in Cargo.toml (read by
# scripts/lib/package_manifest.py): the glibc floor, the target, the PHP versions and where
# each one's php and headers live ("host": /usr/bin/php-configX.Y here; "sid": the chroot
# of scripts/sid.sh), and the archive names. TAG defaults to the workspace version; it
# must be the release's git tag exactly, as PIE puts the tag into the name it looks for.
#
# How the floor is met: the binaries are linked by `zig cc` against glibc <floor>'s
# symbol versions (zig and cargo-zigbuild from PyPI, in a venv under the cache), used as
# cargo's linker and C compiler for the target. The `cargo zigbuild` command itself is not
# used: it hands bindgen zig's clang headers, which crash older libclang (Debian 12's 14)
# while ext-php-rs generates the PHP bindings; bindgen reads the system's headers instead,
# which describe the same types. The extension for a "sid" PHP is built inside the chroot
# (its php must run there), with the host's toolchain and this cache bound in for that
# command alone (chroot_cargo, through chroot_run).
#
# Caches, so that a second run only packs: the venv, zig's cache and the builds
# (target/{host,phpX.Y}) in MYSQLLOCK_PACKAGE_CACHE (default /var/cache/mysqllock/package),
# outside the clone, since CI builds a fresh clone each time and a cold build of the
# dependencies for every target costs minutes. MYSQLLOCK_DIST overrides dist/, whose earlier archives
# each run removes. Needs python3 (3.11+), objdump, zip, tar and, for "sid" PHPs, root.
set -euo pipefail
me=package.sh
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
# shellcheck source=scripts/lib/servers.sh
. "$here/lib/servers.sh"
# shellcheck source=scripts/lib/chroot.sh
. "$here/lib/chroot.sh"

cache=$package_cache
dist=${MYSQLLOCK_DIST:-$repo/dist}
builds=$cache/target

usage() { sed -n '2,34p' "$0" | sed 's/^# \{0,1\}//'; }

# load_manifest [TAG]: the manifest's values as shell variables (tag, ext, glibc, triple,
# arch, os, libc, checksums, cli_archive, lib_archive, zig_tools, and the parallel arrays
# php_versions, php_places, ext_archives).
load_manifest() {
  local values
  values=$(python3 "$here/lib/package_manifest.py" "$repo" "$@") || die "cannot read the manifest"
  eval "$values"
}

# glibc_needed FILE: the newest GLIBC_x.y among FILE's dynamic symbol versions ("none"
# for a binary that asks for no versioned glibc symbol).
glibc_needed() {
  local symbols
  symbols=$(objdump -T "$1" 2>/dev/null) || return 1
  grep -o 'GLIBC_[0-9][0-9.]*' <<<"$symbols" | sed 's/^GLIBC_//' | sort -u -V | tail -n 1 \
    | grep . || echo none
}

# check_glibc FILE...: prints "FILE needs GLIBC_x.y" for each; returns 1 when one needs more
# than the floor or is no ELF file with dynamic symbols (a static .a has none: it is linked
# by its user, so it is not audited here).
check_glibc() {
  local file needed bad=0
  command -v objdump >/dev/null || die "objdump is missing (binutils)"
  for file in "$@"; do
    if ! needed=$(glibc_needed "$file"); then
      echo "$file: not an ELF file with dynamic symbols" >&2
      bad=1
    elif [ "$needed" = none ]; then
      echo "$file needs no versioned glibc symbol"
    elif [ "$(printf '%s\n' "$needed" "$glibc" | sort -V | tail -n 1)" != "$glibc" ]; then
      echo "$file needs GLIBC_$needed, above the floor GLIBC_$glibc" >&2
      bad=1
    else
      echo "$file needs GLIBC_$needed (floor GLIBC_$glibc)"
    fi
  done
  return $bad
}

# ensure_zig: zig and cargo-zigbuild (the manifest's pinned versions) in the cache's
# venv, and $zigcc, a compiler/linker wrapper that targets the floor's glibc.
ensure_zig() {
  local venv=$cache/venv zig_dir
  if [ "$(cat "$venv/.mysqllock-tools" 2>/dev/null)" != "$zig_tools" ]; then
    echo "$me: installing $zig_tools into $venv (once)" >&2
    mkdir -p "$cache"
    python3 -m venv --clear "$venv" || die "python3 -m venv failed (Debian: apt-get install python3-venv)"
    # shellcheck disable=SC2086 # a list of pinned requirements
    "$venv/bin/pip" install --quiet --disable-pip-version-check $zig_tools \
      || die "pip install $zig_tools failed"
    echo "$zig_tools" >"$venv/.mysqllock-tools"
  fi
  zig_dir=$("$venv/bin/python" -c 'import os, ziglang; print(os.path.dirname(ziglang.__file__))') \
    || die "ziglang is not importable in $venv"
  [ -x "$zig_dir/zig" ] || die "$zig_dir/zig is missing"
  # zig's target spelling: x86_64-linux-gnu.2.28 for x86_64-unknown-linux-gnu at 2.28.
  local zig_target=${triple/-unknown-/-}.$glibc
  zigcc=$cache/bin/zigcc-$zig_target
  mkdir -p "$cache/bin" "$cache/zig-cache"
  # cargo-zigbuild's `zig cc` filters the arguments rustc gives a linker that zig refuses.
  cat >"$zigcc.tmp" <<SH
#!/bin/sh
# zig cc for $zig_target (written by scripts/package.sh)
CARGO_ZIGBUILD_ZIG_PATH='$zig_dir/zig' ZIG_GLOBAL_CACHE_DIR='$cache/zig-cache' \\
  exec '$venv/bin/cargo-zigbuild' zig cc -- -target '$zig_target' "\$@"
SH
  chmod +x "$zigcc.tmp"
  mv "$zigcc.tmp" "$zigcc"
}

# cargo_env: the environment of every release build (as NAME=VALUE words for env).
cargo_env() {
  local triple_var
  triple_var=$(tr 'a-z-' 'A-Z_' <<<"$triple")
  printf '%s\n' \
    "CARGO_TARGET_${triple_var}_LINKER=$zigcc" \
    "CC_${triple//-/_}=$zigcc" \
    "CARGO_PROFILE_RELEASE_DEBUG=0"
}

# php_check PHP: the PHP is one the archive name describes: non-thread-safe, not a debug
# build (PIE looks for "-zts" and "-debug" in the name of archives for those).
php_check() {
  local flags
  flags=$("$@" -n -r 'echo (int) PHP_ZTS, (int) PHP_DEBUG;') || die "cannot run $*"
  [ "$flags" = 00 ] || die "$* is a thread-safe or debug build (PHP_ZTS, PHP_DEBUG = $flags): its archive would need another name"
}

# build_host: the CLI, the C library and the extension for every "host" PHP, into
# $builds/host; each extension is copied to $stage/phpX.Y/ as soon as it is built.
# The first host PHP's extension is built in the same cargo run as the CLI and the
# library: one set of dependencies (cargo unifies their features per run), not two.
build_host() {
  local env_words i minor packages=(-p mysqllock-cli -p mysqllock-ffi -p mysqllock-php)
  mapfile -t env_words < <(cargo_env)
  for i in "${!php_versions[@]}"; do
    [ "${php_places[$i]}" = host ] || continue
    minor=${php_versions[$i]}
    [ -x "/usr/bin/php-config$minor" ] && [ -x "/usr/bin/php$minor" ] \
      || die "PHP $minor is not installed here (/usr/bin/php-config$minor; Debian: php$minor-dev)"
    php_check "/usr/bin/php$minor"
    (cd "$repo" && env "${env_words[@]}" CARGO_TARGET_DIR="$builds/host" \
      PHP="/usr/bin/php$minor" PHP_CONFIG="/usr/bin/php-config$minor" \
      cargo build --release --locked --target "$triple" "${packages[@]}") \
      || die "building the extension for PHP $minor failed"
    packages=(-p mysqllock-php)
    mkdir -p "$stage/php$minor"
    cp "$builds/host/$triple/release/libmysqllock_php.so" "$stage/php$minor/$ext.so"
  done
  if [ ${#packages[@]} -eq 6 ]; then # no host PHP
    (cd "$repo" && env "${env_words[@]}" CARGO_TARGET_DIR="$builds/host" \
      cargo build --release --locked --target "$triple" -p mysqllock-cli -p mysqllock-ffi) \
      || die "building the CLI and the C library failed"
  fi
}

# build_sid MINOR: the extension for the chroot's PHP MINOR, built inside the chroot into
# $builds/phpMINOR (the repository and the cache are bound at their own paths there).
build_sid() {
  local minor=$1 root env_words
  root=$(bash "$here/sid.sh" root) || die "the sid chroot is not available"
  [ -x "$root/usr/bin/php$minor" ] && [ -x "$root/usr/bin/php-config$minor" ] \
    || die "PHP $minor is not in $root (scripts/sid.sh installs it)"
  php_check chroot_run "$root" -- "php$minor"
  mapfile -t env_words < <(cargo_env)
  chroot_cargo "$root" "$repo" --bind "$cache" "${env_words[@]}" CARGO_TARGET_DIR="$builds/php$minor" \
    PHP="/usr/bin/php$minor" PHP_CONFIG="/usr/bin/php-config$minor" \
    -- build --release --locked --target "$triple" -p mysqllock-php \
    || die "building the extension for PHP $minor (in $root) failed"
  mkdir -p "$stage/php$minor"
  cp "$builds/php$minor/$triple/release/libmysqllock_php.so" "$stage/php$minor/$ext.so"
}

# pack_tar ARCHIVE DIR: DIR (a directory under $stage) as a reproducible .tar.gz.
pack_tar() {
  (cd "$stage" && tar --sort=name --owner=0 --group=0 --numeric-owner --mtime="@$epoch" \
    -cf - "$2" | gzip -n -9 >"$dist/$1") || die "packing $1 failed"
}

# The name PIE's pre-packaged-binary method downloads, checked against PIE's source
# (github.com/php/pie, src/Platform/PrePackagedBinaryAssetName.php, packageNames()):
#   php_{extension-name}-{package version}_php{major.minor}-{arch}-{os family}-{libc}
#   {-debug if a debug PHP}{-zts if thread-safe}.zip (also .tgz, and "-nts" spelled
#   out), lowercased;
# {arch} is x86_64 (Architecture), {os family} linux, {libc} glibc or musl (LibcFlavour),
# and the package version is Composer's pretty version: the git tag as written. The PHP
# Foundation's binary builder (github.com/php/pie-ext-binary-builder, src/index.js,
# extensionDetails() and main()) makes the same name and zips the module with `zip -j`,
# so `{extension-name}.so` sits at the archive's root. The manifest's ext-archive holds
# this rule for a non-debug, non-thread-safe PHP (php_check refuses the others).
package() {
  local started=$SECONDS i minor dir files=()
  command -v zip >/dev/null || die "zip is missing"
  command -v cargo >/dev/null || die "cargo is missing (a Rust toolchain: https://rustup.rs)"
  ensure_zig
  stage=$builds/stage
  rm -rf "$stage"
  mkdir -p "$stage" "$dist"
  epoch=$(git -C "$repo" log -1 --format=%ct 2>/dev/null || date +%s)

  build_host
  for i in "${!php_versions[@]}"; do
    [ "${php_places[$i]}" = sid ] && build_sid "${php_versions[$i]}"
  done
  echo "$me: built in $((SECONDS - started)) s" >&2

  # The floor, audited on what is about to be packed.
  local release=$builds/host/$triple/release binaries=()
  binaries=("$release/mysqllock" "$release/libmysqllock.so")
  for minor in "${php_versions[@]}"; do binaries+=("$stage/php$minor/$ext.so"); done
  check_glibc "${binaries[@]}" || die "a binary needs a newer glibc than $glibc: not packed"

  rm -f "$dist"/*.zip "$dist"/*.tar.gz "$dist/$checksums"
  for i in "${!php_versions[@]}"; do
    minor=${php_versions[$i]}
    touch -d "@$epoch" "$stage/php$minor/$ext.so"
    (cd "$stage/php$minor" && zip -q -X "$dist/${ext_archives[$i]}" "$ext.so") \
      || die "zipping ${ext_archives[$i]} failed"
    files+=("${ext_archives[$i]}")
  done

  dir=${cli_archive%.tar.gz}
  install -D -m 0755 "$release/mysqllock" "$stage/$dir/mysqllock"
  pack_tar "$cli_archive" "$dir"
  files+=("$cli_archive")

  dir=${lib_archive%.tar.gz}
  install -D -m 0755 "$release/libmysqllock.so" "$stage/$dir/lib/libmysqllock.so"
  install -D -m 0644 "$release/libmysqllock.a" "$stage/$dir/lib/libmysqllock.a"
  install -D -m 0644 "$repo/include/mysqllock.h" "$stage/$dir/include/mysqllock.h"
  pack_tar "$lib_archive" "$dir"
  files+=("$lib_archive")

  (cd "$dist" && sha256sum -- "${files[@]}" >"$checksums") || die "writing $checksums failed"
  (cd "$dist" && ls -l -- "${files[@]}" "$checksums" | awk '{print $5, $9}') >&2
  echo "$me: $dist: ${#files[@]} archives and $checksums in $((SECONDS - started)) s" >&2
}

cmd=build
case "${1:-}" in
  list|check-glibc|build) cmd=$1; shift ;;
  clean) chroot_clean "$cache"; exit 0 ;;
  -h|--help) usage; exit 0 ;;
esac
tag_arg=()
if [ "$cmd" != check-glibc ]; then
  while [ $# -gt 0 ]; do
    case "$1" in
      --tag) tag_arg=("${2:?--tag needs a tag}"); shift ;;
      *) usage >&2; die "unknown argument $1" ;;
    esac
    shift
  done
fi
load_manifest "${tag_arg[@]}"

case "$cmd" in
  build) package ;;
  list)
    for i in "${!php_versions[@]}"; do echo "ext ${php_versions[$i]} ${ext_archives[$i]}"; done
    echo "cli - $cli_archive"
    echo "lib - $lib_archive"
    echo "sums - $checksums"
    ;;
  check-glibc)
    [ $# -gt 0 ] || die "usage: package.sh check-glibc FILE..."
    check_glibc "$@"
    ;;
esac
