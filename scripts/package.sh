#!/usr/bin/env bash
# Release archives, installable without a compiler, into dist/ (docs/php.md, "Installing"):
# for every target of the manifest (architecture, libc, thread safety) the PHP extension
# for each of its PHP versions, the CLI and the C library with its header, and one checksum
# file for all of them. Every binary is audited: its ELF machine is the target's, and a
# glibc binary needs glibc <floor> at most.
#
#   scripts/package.sh [--tag TAG]           # builds the archives into dist/
#   scripts/package.sh list [--tag TAG]      # the archives a release has, one a line:
#                                            # "ext TARGET X.Y FILE", "cli TARGET - FILE",
#                                            # "lib TARGET - FILE", "sums - - FILE"
#   scripts/package.sh check-glibc FILE...   # the newest GLIBC_ version each ELF file
#                                            # needs; fails when one is above the floor
#   scripts/package.sh check-elf ARCH FILE...  # each FILE is an ELF file for ARCH
#                                            # (x86_64, arm64: PIE's spelling)
#   scripts/package.sh check-musl FILE...    # each FILE is linked for musl, not glibc
#   scripts/package.sh clean                 # removes the cache below (the next build
#                                            # is a cold one)
#
# What is built is the manifest [workspace.metadata.package] in Cargo.toml (read by
# scripts/lib/package_manifest.py): the glibc floor, the targets, and for each target its
# PHP versions and the home each one's php and headers come from ("host": /usr/bin/
# php-configX.Y here; "sid": the chroot of scripts/sid.sh; a tree's name: that tree of
# scripts/trees.sh, e.g. arm64 Debian), and the archive names. TAG defaults to the
# workspace version; it must be the release's git tag exactly, as PIE puts the tag into
# the name it looks for (lowercased). MYSQLLOCK_PACKAGE_TARGETS="NAME..." builds only the
# targets named (e.g. arm64-linux-glibc), for development; a release builds them all.
#
# The compilers: a target whose toolchain is "host" is built by this machine's rustup
# toolchain (for a "sid" PHP inside the sid chroot, with the toolchain bound in, as that
# php must run there); a target whose toolchain is a tree (sid-rust) is built inside that
# tree by Debian's own rustc and cargo, whose aarch64 std is Debian's libstd-rust-dev:arm64
# (no rustup target can be downloaded here). Every target is linked by `zig cc` against
# glibc <floor>'s symbol versions (zig and cargo-zigbuild from PyPI, in a venv under the
# cache), used as cargo's linker and C compiler for the target. The `cargo zigbuild`
# command itself is not used: it hands bindgen zig's clang headers, which crash older
# libclang (Debian 12's 14) while ext-php-rs generates the PHP bindings; bindgen reads the
# system's headers instead (for arm64: the arm64 tree's, --sysroot), which describe the
# same types. For a PHP of another architecture, ext-php-rs is given a php that prints the
# real arm64 php's `php -i` (taken in its tree under qemu) and a php-config that names the
# tree's headers. A build inside a chroot or tree enters it through chroot_run, with the
# repository, the cache and the toolchain bound in for that command alone.
#
# Caches, so that a second run only packs: the venv, zig's cache, the crates Debian's cargo
# downloads and the builds (target/TARGET/phpX.Y, one per PHP so none undoes another's) in
# MYSQLLOCK_PACKAGE_CACHE (default /var/cache/mysqllock/package), outside the clone, since
# CI builds a fresh clone each time and a cold build of the dependencies for every target
# costs minutes. MYSQLLOCK_DIST overrides dist/, whose earlier archives each run removes.
# Needs python3 (3.11+), objdump, readelf, zip, tar and, for chroots and trees, root.
# shellcheck disable=SC2154 # the manifest's values are set by eval (package_manifest.py)
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

usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; }

# load_manifest [TAG]: the manifest's values as shell variables (tag, ext, glibc, os,
# checksums, zig_tools; per target the arrays t_name, t_arch, t_debian_arch, t_libc, t_zts,
# t_triple, t_toolchain, t_cli, t_lib; per extension archive e_target (its target's index),
# e_php, e_home, e_kind, e_file).
load_manifest() {
  local values
  values=$(python3 "$here/lib/package_manifest.py" build "$repo" "$@") || die "cannot read the manifest"
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

# check_musl FILE...: each FILE is linked for musl: it asks for no versioned glibc symbol,
# needs no library but musl's libc.so (an extension, the C library) and, when it is a
# program, is static or loaded by musl's loader. Prints what each is; returns 1 when one
# is not so.
check_musl() {
  local file needed interp bad=0
  command -v readelf >/dev/null || die "readelf is missing (binutils)"
  for file in "$@"; do
    needed=$(LC_ALL=C readelf -d "$file" 2>/dev/null | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | tr '\n' ' ')
    interp=$(LC_ALL=C readelf -l "$file" 2>/dev/null | sed -n 's/.*interpreter: \([^]]*\)\]/\1/p')
    if grep -q 'GLIBC_' <<<"$(objdump -T "$file" 2>/dev/null)"; then
      echo "$file asks for versioned glibc symbols: not a musl binary" >&2
      bad=1
    elif [ -n "${needed// /}" ] && [ "$needed" != "libc.so " ]; then
      echo "$file needs $needed, not musl's libc.so alone" >&2
      bad=1
    elif [ -n "$interp" ] && [[ $interp != /lib/ld-musl-* ]]; then
      echo "$file is loaded by $interp, not musl's loader" >&2
      bad=1
    else
      needed=${needed% }
      echo "$file is for musl (${needed:-static, no library}${interp:+, loaded by $interp})"
    fi
  done
  return $bad
}

# elf_machine ARCH: what readelf -h says as "Machine:" for PIE's architecture ARCH.
elf_machine() {
  case $1 in
    x86_64) echo "Advanced Micro Devices X86-64" ;;
    arm64) echo "AArch64" ;;
    *) return 1 ;;
  esac
}

# check_elf ARCH FILE...: each FILE is an ELF file whose machine is ARCH's (for a static
# library: every object in it); returns 1 when one is not (an x86-64 .so in an arm64
# archive would unpack fine and fail to load).
check_elf() {
  local arch=$1 want file machine bad=0
  shift
  command -v readelf >/dev/null || die "readelf is missing (binutils)"
  want=$(elf_machine "$arch") || die "no ELF machine is known for the architecture $arch"
  for file in "$@"; do
    machine=$(LC_ALL=C readelf -h "$file" 2>/dev/null | sed -n 's/^ *Machine: *//p' | sort -u | paste -sd, -)
    if [ "$machine" = "$want" ]; then
      echo "$file is $machine ($arch)"
    else
      echo "$file is ${machine:-no ELF file}, not $want ($arch)" >&2
      bad=1
    fi
  done
  return $bad
}

# zig_target TRIPLE LIBC: zig's spelling of the target, at the glibc floor for glibc
# (x86_64-linux-gnu.2.28 for x86_64-unknown-linux-gnu).
zig_target() {
  local t=${1/-unknown-/-}
  if [ "$2" = glibc ]; then echo "$t.$glibc"; else echo "$t"; fi
}

# ensure_zig: zig and cargo-zigbuild (the manifest's pinned versions) in the cache's venv,
# and $zig_dir, the directory of the zig binary.
ensure_zig() {
  local venv=$cache/venv
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
  mkdir -p "$cache/bin" "$cache/zig-cache"
}

# zigcc TRIPLE LIBC: writes (each run) and prints a compiler/linker wrapper for the target:
# cargo-zigbuild's `zig cc`, which filters the arguments rustc gives a linker that zig
# refuses. The wrapper names only files under the cache, so it works the same inside a
# chroot the cache is bound into (the cargo-zigbuild and zig binaries need no Python).
zigcc() {
  local target wrapper
  target=$(zig_target "$1" "$2")
  wrapper=$cache/bin/zigcc-$target
  cat >"$wrapper.tmp" <<SH
#!/bin/sh
# zig cc for $target (written by scripts/package.sh)
CARGO_ZIGBUILD_ZIG_PATH='$zig_dir/zig' ZIG_GLOBAL_CACHE_DIR='$cache/zig-cache' \\
  exec '$cache/venv/bin/cargo-zigbuild' zig cc -- -target '$target' "\$@"
SH
  chmod +x "$wrapper.tmp"
  mv "$wrapper.tmp" "$wrapper"
  echo "$wrapper"
}

# cargo_env TARGET_INDEX: the environment of the target's release builds (NAME=VALUE lines).
# RUSTFLAGS [FLAGS] sets the target's rustflags (the manifest's, or FLAGS for the CLI).
cargo_env() {
  local i=$1 triple=${t_triple[$1]} cc upper flags=${2-${t_rustflags[$1]}}
  cc=$(zigcc "$triple" "${t_libc[$i]}")
  upper=$(tr 'a-z-' 'A-Z_' <<<"$triple")
  printf '%s\n' \
    "CARGO_TARGET_${upper}_LINKER=$cc" \
    "CC_${triple//-/_}=$cc" \
    "CARGO_PROFILE_RELEASE_DEBUG=0"
  [ -z "$flags" ] || echo "CARGO_TARGET_${upper}_RUSTFLAGS=$flags"
  # -Zbuild-std: the std compiled from the toolchain's rust-src, for a target Debian
  # ships no std for (musl); RUSTC_BOOTSTRAP lets the stable toolchain take -Z flags.
  [ "${t_build_std[$i]}" = 0 ] || echo "RUSTC_BOOTSTRAP=1"
}

# php_check ZTS CMD...: the PHP CMD runs is what the archive name describes: thread-safe
# when ZTS is 1, not a debug build (PIE looks for "-debug" in the name of archives for
# those, and we ship none).
php_check() {
  local zts=$1 flags
  shift
  flags=$("$@" -n -r 'echo (int) PHP_ZTS, (int) PHP_DEBUG;') || die "cannot run $*"
  [ "$flags" = "${zts}0" ] \
    || die "$* has PHP_ZTS, PHP_DEBUG = $flags, the target wants ${zts}0: its archive would need another name"
}

# php_wrappers HOME MINOR PHP_CONFIG PREFIX PHP...: a php and a php-config for
# ext-php-rs's build script, for a PHP that cannot run where the build runs (another
# architecture's, or one linked against musl), in $cache/php/HOME/MINOR (printed). php
# prints the `php -i` the real php (the command PHP...) gave where it runs: ext-php-rs
# reads its version, API and thread safety from it. php-config is PHP_CONFIG, with its
# include paths moved under PREFIX (a tree's root; empty: as they are).
php_wrappers() {
  local home=$1 minor=$2 config=$3 prefix=$4 dir=$cache/php/$1/$2
  shift 4
  mkdir -p "$dir"
  "$@" -n -i >"$dir/php-i.txt" || die "$* -i failed"
  grep -q '^PHP API => ' "$dir/php-i.txt" || die "$* -i printed no 'PHP API'"
  [ -f "$config" ] || die "$config is missing (the PHP's -dev package)"
  cat >"$dir/php" <<SH
#!/bin/sh
# PHP $minor of $home, as ext-php-rs's build script asks it (written by scripts/package.sh):
# only -i is answered, with what the real php printed.
[ "\$1" = -i ] || { echo "only -i is known here" >&2; exit 1; }
exec cat '$dir/php-i.txt'
SH
  # shellcheck disable=SC2016 # the single quotes are the wrapper's
  cat >"$dir/php-config" <<SH
#!/bin/sh
# The php-config of PHP $minor of $home${prefix:+, its include paths under $prefix} (written
# by scripts/package.sh).
'$config' "\$@"${prefix:+ | sed 's# -I/# -I$prefix/#g; s#^-I/#-I$prefix/#'}
SH
  chmod +x "$dir/php" "$dir/php-config"
  echo "$dir"
}

# seed_target_dir DIR: a target's first build for a PHP starts from a copy of a build of
# the same target for another PHP, when there is one: only what depends on the PHP
# (ext-php-rs, whose build script reads $PHP, and the extension) is compiled again, not
# every dependency (cargo's fingerprints decide; minutes per PHP on a cold cache). Each
# PHP keeps its own directory afterwards, so a warm run rebuilds nothing.
seed_target_dir() {
  local dir=$1 sibling
  [ -e "$dir" ] && return 0
  for sibling in "$(dirname "$dir")"/php*; do
    case $sibling in *.tmp) continue ;; esac
    [ -e "$sibling/.mysqllock-complete" ] || continue
    echo "$me: $dir starts from a copy of $sibling" >&2
    rm -rf "$dir.tmp"
    if ! { cp -a --reflink=auto "$sibling" "$dir.tmp" && mv "$dir.tmp" "$dir"; }; then
      die "copying $sibling to $dir failed"
    fi
    rm -f "$dir/.mysqllock-complete"
    return 0
  done
  mkdir -p "$dir"
}

# fetch_crates ROOT BUILD_STD: the crates of Cargo.lock (and with BUILD_STD 1, those of
# the std in ROOT's rust-src) in $cache/cargo-home, downloaded by this machine's cargo
# (once; a no-op afterwards), for the builds inside a tree, which run offline: the
# download uses this machine's network setup and certificates, which a tree need not have.
fetch_crates() {
  local root=$1 build_std=$2
  if [ -z "${crates_fetched:-}" ]; then
    CARGO_HOME=$cache/cargo-home cargo fetch --locked --manifest-path "$repo/Cargo.toml" >&2 \
      || die "cargo fetch (into $cache/cargo-home) failed"
    crates_fetched=1
  fi
  if [ "$build_std" = 1 ] && [ -z "${std_fetched:-}" ]; then
    local library=$root/usr/lib/rustlib/src/rust/library
    [ -f "$library/Cargo.lock" ] || die "$library/Cargo.lock is missing (Debian: rust-src)"
    # From /, so that the library's own .cargo/config (Debian's vendored copies, which
    # -Zbuild-std does not read) is not used; RUSTC_BOOTSTRAP: its Cargo.toml asks for
    # an unstable cargo feature.
    (cd / && RUSTC_BOOTSTRAP=1 CARGO_HOME=$cache/cargo-home cargo fetch --locked \
      --manifest-path "$library/Cargo.toml") >&2 || die "cargo fetch of the std's crates failed"
    std_fetched=1
  fi
}

# ensure_trees: every tree the selected targets build in or against exists, made at the
# same time when several are missing (a cold machine makes each once; under qemu, a tree
# of another architecture is minutes of one core's work each, so two at once on two cores
# take the time of one).
ensure_trees() {
  local i j names=() name pids=() failed=0
  for i in "${!t_name[@]}"; do
    selected "$i" || continue
    [ "${t_toolchain[$i]}" = host ] || names+=("${t_toolchain[$i]}")
    for j in "${!e_file[@]}"; do
      [ "${e_target[$j]}" = "$i" ] && [ "${e_kind[$j]}" = tree ] && names+=("${e_home[$j]}")
    done
  done
  [ ${#names[@]} -gt 0 ] || return 0
  mapfile -t names < <(printf '%s\n' "${names[@]}" | sort -u)
  for name in "${names[@]}"; do
    bash "$here/trees.sh" root "$name" >/dev/null &
    pids+=($!)
  done
  for i in "${!pids[@]}"; do
    wait "${pids[$i]}" || { echo "$me: the tree ${names[$i]} could not be made" >&2; failed=1; }
  done
  [ $failed -eq 0 ] || die "a tree is missing"
}

# build_ext J [with_binaries]: the extension archive J's .so (and, with with_binaries, the
# target's CLI and C library in the same cargo run: one set of dependencies, not two; in a
# run of its own when the CLI has rustflags of its own, e.g. a static musl CLI), into
# $builds/TARGET/phpX.Y, staged in $stage/TARGET/phpX.Y/ and $stage/TARGET/bin/.
build_ext() {
  local j=$1 binaries=${2:-} i=${e_target[$1]} minor=${e_php[$1]} home=${e_home[$1]}
  local kind=${e_kind[$1]} toolchain=${t_toolchain[${e_target[$1]}]} target_dir
  local triple=${t_triple[$i]} zts=${t_zts[$i]} root='' tree prefix wrappers
  local binds=() sets=() php_env=() std_args=() packages=(-p mysqllock-php) env_words=()
  target_dir=$builds/${t_name[$i]}/php$minor
  if [ -n "$binaries" ]; then
    packages+=(-p mysqllock-ffi)
    [ -n "${t_cli_rustflags[$i]}" ] || packages+=(-p mysqllock-cli)
  fi
  [ "${t_build_std[$i]}" = 0 ] || std_args=("-Zbuild-std=std,panic_unwind")
  seed_target_dir "$target_dir"
  local started=$SECONDS

  # Where cargo runs: this machine (its rustup toolchain; root stays empty), the sid
  # chroot (the same toolchain bound in, for a php that only runs there), or a tree
  # (Debian's rustc, offline, with the crates fetched here).
  case "$toolchain:$kind" in
    host:host|host:src) ;;
    host:sid)
      local cargo_home=${CARGO_HOME:-$HOME/.cargo} rustup_home=${RUSTUP_HOME:-$HOME/.rustup}
      root=$(bash "$here/sid.sh" root) || die "the sid chroot is not available"
      binds=("$cargo_home" "$rustup_home")
      sets=("PATH=$cargo_home/bin:/usr/local/bin:/usr/bin:/bin" "CARGO_HOME=$cargo_home"
            "RUSTUP_HOME=$rustup_home")
      ;;
    host:*)
      die "target ${t_name[$i]}: a $kind home needs a tree's toolchain, not the host's"
      ;;
    *:tree|*:src)
      root=$(bash "$here/trees.sh" root "$toolchain") || die "the tree $toolchain is not available"
      fetch_crates "$root" "${t_build_std[$i]}"
      sets=("CARGO_HOME=$cache/cargo-home" CARGO_NET_OFFLINE=true)
      ;;
    *)
      die "target ${t_name[$i]}: no way to build against a $kind home with the toolchain $toolchain"
      ;;
  esac

  # Which php and headers: the home's, or wrappers naming them where they cannot run.
  case "$kind" in
    host)
      if [ ! -x "/usr/bin/php-config$minor" ] || [ ! -x "/usr/bin/php$minor" ]; then
        die "PHP $minor is not installed here (/usr/bin/php-config$minor; Debian: php$minor-dev)"
      fi
      php_check "$zts" "/usr/bin/php$minor"
      php_env=("PHP=/usr/bin/php$minor" "PHP_CONFIG=/usr/bin/php-config$minor")
      ;;
    sid)
      if [ ! -x "$root/usr/bin/php$minor" ] || [ ! -x "$root/usr/bin/php-config$minor" ]; then
        die "PHP $minor is not in $root (scripts/sid.sh installs it)"
      fi
      php_check "$zts" chroot_run "$root" -- "php$minor"
      php_env=("PHP=/usr/bin/php$minor" "PHP_CONFIG=/usr/bin/php-config$minor")
      ;;
    tree)
      # The PHP's headers from its own tree; bindgen reads that tree's system headers.
      tree=$(bash "$here/trees.sh" root "$home") || die "the tree $home is not available"
      php_check "$zts" bash "$here/trees.sh" run "$home" -- "php$minor"
      wrappers=$(php_wrappers "$home" "$minor" "$tree/usr/bin/php-config$minor" "$tree" \
        bash "$here/trees.sh" run "$home" -- "php$minor")
      binds+=("$tree")
      php_env=("PHP=$wrappers/php" "PHP_CONFIG=$wrappers/php-config"
               "BINDGEN_EXTRA_CLANG_ARGS_${triple//-/_}=--sysroot=$tree")
      ;;
    src)
      # A PHP built from source on this machine (a musl one runs here through musl's loader).
      prefix=$(src_prefix "$home")
      php_check "$zts" "$prefix/bin/php"
      if [ -z "$root" ]; then
        php_env=("PHP=$prefix/bin/php" "PHP_CONFIG=$prefix/bin/php-config")
      else
        wrappers=$(php_wrappers "$home" "$minor" "$prefix/bin/php-config" "" "$prefix/bin/php")
        binds+=("$prefix")
        php_env=("PHP=$wrappers/php" "PHP_CONFIG=$wrappers/php-config")
      fi
      ;;
  esac
  if [ "${t_libc[$i]}" = musl ]; then
    # bindgen reads musl's headers (this machine's, which a musl PHP is built with), not
    # glibc's: the layouts of libc's types differ.
    local musl_include=/usr/include/${triple/-unknown-/-}
    [ -f "$musl_include/stdio.h" ] || die "$musl_include is missing (Debian: musl-dev)"
    binds+=("$musl_include")
    php_env+=("BINDGEN_EXTRA_CLANG_ARGS_${triple//-/_}=-nostdlibinc -isystem $musl_include")
  fi

  mapfile -t env_words < <(cargo_env "$i")
  cargo_in "$root" "${env_words[@]}" "CARGO_TARGET_DIR=$target_dir" "${php_env[@]}" -- \
    build --release --locked --target "$triple" "${std_args[@]}" "${packages[@]}" \
    || die "building for PHP $minor (${t_name[$i]}, toolchain $toolchain) failed"
  if [ -n "$binaries" ] && [ -n "${t_cli_rustflags[$i]}" ]; then
    mapfile -t env_words < <(cargo_env "$i" "${t_cli_rustflags[$i]}")
    cargo_in "$root" "${env_words[@]}" "CARGO_TARGET_DIR=$builds/${t_name[$i]}/cli" -- \
      build --release --locked --target "$triple" "${std_args[@]}" -p mysqllock-cli \
      || die "building the CLI (${t_name[$i]}, toolchain $toolchain) failed"
  fi
  touch "$target_dir/.mysqllock-complete"
  echo "$me: ${t_name[$i]} PHP $minor${binaries:+ (and the CLI and the C library)} built in $((SECONDS - started)) s" >&2

  local release=$target_dir/$triple/release
  mkdir -p "$stage/${t_name[$i]}/php$minor"
  cp "$release/libmysqllock_php.so" "$stage/${t_name[$i]}/php$minor/$ext.so"
  if [ -n "$binaries" ]; then
    mkdir -p "$stage/${t_name[$i]}/bin"
    cp "$release/libmysqllock.so" "$release/libmysqllock.a" "$stage/${t_name[$i]}/bin/"
    if [ -n "${t_cli_rustflags[$i]}" ]; then
      cp "$builds/${t_name[$i]}/cli/$triple/release/mysqllock" "$stage/${t_name[$i]}/bin/"
    else
      cp "$release/mysqllock" "$stage/${t_name[$i]}/bin/"
    fi
  fi
}

# cargo_in ROOT VAR=VALUE... -- ARGS...: cargo ARGS in the repository with the VARs set: on
# this machine when ROOT is empty, else inside ROOT (chroot_run) with the caller's binds
# and sets (build_ext's locals), the repository and the cache bound in.
cargo_in() {
  local root=$1 vars=() run=() b
  shift
  while [ $# -gt 0 ] && [ "$1" != -- ]; do vars+=("$1"); shift; done
  shift
  if [ -z "$root" ]; then
    (cd "$repo" && env "${vars[@]}" cargo "$@")
    return
  fi
  run=(chroot_run "$root" --bind "$repo" --bind "$cache" --cwd "$repo")
  for b in "${binds[@]}"; do run+=(--bind "$b"); done
  for b in "${sets[@]}" "${vars[@]}"; do run+=(--set "$b"); done
  "${run[@]}" -- cargo "$@"
}

# src_prefix HOME: the prefix of the PHP the home's script builds from source (built once).
src_prefix() {
  local script prefix
  script=$(python3 "$here/lib/package_manifest.py" built-by "$repo" "$1") || die "home $1 names no script"
  prefix=$(bash "$repo/$script" build "$1") || die "$script build $1 failed"
  if [ ! -x "$prefix/bin/php" ] || [ ! -x "$prefix/bin/php-config" ]; then
    die "$prefix has no bin/php and bin/php-config"
  fi
  echo "$prefix"
}

# pack_tar ARCHIVE DIR: DIR (a directory under $stage) as a reproducible .tar.gz.
pack_tar() {
  (cd "$stage" && tar --sort=name --owner=0 --group=0 --numeric-owner --mtime="@$epoch" \
    -cf - "$2" | gzip -n -9 >"$dist/$1") || die "packing $1 failed"
}

# selected I: target I is built (all, unless MYSQLLOCK_PACKAGE_TARGETS names others).
selected() {
  [ -z "${MYSQLLOCK_PACKAGE_TARGETS:-}" ] && return 0
  case " $MYSQLLOCK_PACKAGE_TARGETS " in *" ${t_name[$1]} "*) return 0 ;; esac
  return 1
}

# The name PIE's pre-packaged-binary method downloads, checked against PIE's source
# (github.com/php/pie, src/Platform/PrePackagedBinaryAssetName.php, packageNames()):
#   php_{extension-name}-{package version}_php{major.minor}-{arch}-{os family}-{libc}
#   {-debug if a debug PHP}{-zts if thread-safe}.zip (then .tgz, then both with "-nts"
#   or "-zts" spelled out), every candidate lowercased, and a release asset matches when
#   its name, lowercased, is one of them;
# {arch} is x86_64 or arm64 (Architecture), {os family} linux, {libc} glibc or musl
# (LibcFlavour), and the package version is Composer's pretty version: the git tag as
# written. The PHP Foundation's binary builder (github.com/php/pie-ext-binary-builder)
# zips the module with `zip -j`, so `{extension-name}.so` sits at the archive's root. The
# manifest's ext-archive holds this rule (the first candidate, lowercased); php_check
# refuses a debug PHP and one whose thread safety is not the target's.
package() {
  local started=$SECONDS i j minor dir files=() binaries=()
  command -v zip >/dev/null || die "zip is missing"
  command -v cargo >/dev/null || die "cargo is missing (a Rust toolchain: https://rustup.rs)"
  ensure_zig
  # The binaries being packed, in a directory of this run's own (two runs at once, from
  # two clones, share the builds, which cargo locks, but must not share this).
  mkdir -p "$builds" "$dist"
  stage=$(mktemp -d "$builds/stage.XXXXXX")
  trap 'rm -rf "$stage"' EXIT
  epoch=$(git -C "$repo" log -1 --format=%ct 2>/dev/null || date +%s)

  ensure_trees

  # Each target's first extension is built with its CLI and C library.
  local done_bin=" "
  for j in "${!e_file[@]}"; do
    i=${e_target[$j]}
    selected "$i" || continue
    if [ -n "${t_cli[$i]}" ] && [[ $done_bin != *" $i "* ]]; then
      build_ext "$j" with_binaries
      done_bin+="$i "
    else
      build_ext "$j"
    fi
  done
  echo "$me: built in $((SECONDS - started)) s" >&2

  # The audit, on what is about to be packed: every binary's machine, and the glibc floor.
  for i in "${!t_name[@]}"; do
    selected "$i" || continue
    binaries=()
    for j in "${!e_file[@]}"; do
      [ "${e_target[$j]}" = "$i" ] && binaries+=("$stage/${t_name[$i]}/php${e_php[$j]}/$ext.so")
    done
    [ -n "${t_cli[$i]}" ] && binaries+=("$stage/${t_name[$i]}/bin/mysqllock" "$stage/${t_name[$i]}/bin/libmysqllock.so")
    check_elf "${t_arch[$i]}" "${binaries[@]}" ${t_lib[$i]:+"$stage/${t_name[$i]}/bin/libmysqllock.a"} \
      || die "a binary of ${t_name[$i]} is not ${t_arch[$i]}: not packed"
    case ${t_libc[$i]} in
      glibc) check_glibc "${binaries[@]}" || die "a binary needs a newer glibc than $glibc: not packed" ;;
      musl) check_musl "${binaries[@]}" || die "a binary of ${t_name[$i]} is not linked for musl: not packed" ;;
      *) die "no audit is known for the libc ${t_libc[$i]}" ;;
    esac
  done

  rm -f "$dist"/*.zip "$dist"/*.tar.gz "$dist/$checksums"
  for j in "${!e_file[@]}"; do
    i=${e_target[$j]}
    selected "$i" || continue
    dir=$stage/${t_name[$i]}/php${e_php[$j]}
    touch -d "@$epoch" "$dir/$ext.so"
    (cd "$dir" && zip -q -X "$dist/${e_file[$j]}" "$ext.so") || die "zipping ${e_file[$j]} failed"
    files+=("${e_file[$j]}")
  done
  for i in "${!t_name[@]}"; do
    if ! selected "$i" || [ -z "${t_cli[$i]}" ]; then continue; fi
    local bin=$stage/${t_name[$i]}/bin
    dir=${t_cli[$i]%.tar.gz}
    install -D -m 0755 "$bin/mysqllock" "$stage/$dir/mysqllock"
    pack_tar "${t_cli[$i]}" "$dir"
    files+=("${t_cli[$i]}")

    dir=${t_lib[$i]%.tar.gz}
    install -D -m 0755 "$bin/libmysqllock.so" "$stage/$dir/lib/libmysqllock.so"
    install -D -m 0644 "$bin/libmysqllock.a" "$stage/$dir/lib/libmysqllock.a"
    install -D -m 0644 "$repo/include/mysqllock.h" "$stage/$dir/include/mysqllock.h"
    pack_tar "${t_lib[$i]}" "$dir"
    files+=("${t_lib[$i]}")
  done

  (cd "$dist" && sha256sum -- "${files[@]}" >"$checksums") || die "writing $checksums failed"
  (cd "$dist" && stat -c '%s %n' -- "${files[@]}" "$checksums") >&2
  echo "$me: $dist: ${#files[@]} archives and $checksums in $((SECONDS - started)) s" >&2
}

cmd=build
case "${1:-}" in
  list|check-glibc|check-elf|check-musl|build) cmd=$1; shift ;;
  clean) chroot_clean "$cache"; exit 0 ;;
  -h|--help) usage; exit 0 ;;
esac
tag_arg=()
case "$cmd" in
  build|list)
    while [ $# -gt 0 ]; do
      case "$1" in
        --tag) tag_arg=("${2:?--tag needs a tag}"); shift ;;
        *) usage >&2; die "unknown argument $1" ;;
      esac
      shift
    done
    ;;
esac
load_manifest "${tag_arg[@]}"

case "$cmd" in
  build) package ;;
  list)
    for j in "${!e_file[@]}"; do
      selected "${e_target[$j]}" && echo "ext ${t_name[${e_target[$j]}]} ${e_php[$j]} ${e_file[$j]}"
    done
    for i in "${!t_name[@]}"; do
      if ! selected "$i" || [ -z "${t_cli[$i]}" ]; then continue; fi
      echo "cli ${t_name[$i]} - ${t_cli[$i]}"
      echo "lib ${t_name[$i]} - ${t_lib[$i]}"
    done
    echo "sums - - $checksums"
    ;;
  check-glibc)
    [ $# -gt 0 ] || die "usage: package.sh check-glibc FILE..."
    check_glibc "$@"
    ;;
  check-elf)
    [ $# -gt 1 ] || die "usage: package.sh check-elf ARCH FILE..."
    check_elf "$@"
    ;;
  check-musl)
    [ $# -gt 0 ] || die "usage: package.sh check-musl FILE..."
    check_musl "$@"
    ;;
esac
