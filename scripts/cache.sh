#!/usr/bin/env bash
# The project's caches on this machine (docs/operations.md, "Caches"): where each lives,
# how big it is, and removing them safely. Each is made again on its next use.
#
#   scripts/cache.sh list            # each cache: name, path, size (du -sh), and any
#                                    # mount left under it in the host's mount namespace
#   scripts/cache.sh clean NAME...   # removes the caches named: sid-php, trixie-php,
#                                    # sid-mysql, package, fuzz-target, php-src, the release
#                                    # manifest's trees, or all of them with `all`
#
# The caches and their paths (the variables override them): sid-php, the Debian sid chroot
# of scripts/sid.sh (MYSQLLOCK_SID_ROOT); trixie-php, the Debian 13 chroot of
# scripts/trixie.sh (MYSQLLOCK_TRIXIE_ROOT); sid-mysql, the MySQL chroot of scripts/mysql.sh
# (MYSQLLOCK_MYSQL_ROOT); package, the builds and zig venv of scripts/package.sh
# (MYSQLLOCK_PACKAGE_CACHE); fuzz-target, the builds of tests/suites/15-fuzz.sh
# (MYSQLLOCK_FUZZ_TARGET_DIR); php-src, the PHPs scripts/php-src.sh builds from source
# (MYSQLLOCK_PHP_SRC_CACHE); the trees of scripts/trees.sh that the release manifest lists
# (sid-rust, arm64-bookworm, arm64-sid; MYSQLLOCK_TREES_DIR); by default all under
# /var/cache/mysqllock. `clean` goes
# through chroot_clean (scripts/lib/chroot.sh), as `sid.sh clean`, `mysql.sh clean` and
# `package.sh clean` do: mounts an older script left are taken off first, then
# `rm -rf --one-file-system`; refused, saying why, while a server runs in a chroot or any
# mount remains under it. `clean all` also removes /var/cache/mysqllock once nothing else
# is left in it.
set -euo pipefail
me=cache.sh
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=scripts/lib/servers.sh
. "$here/lib/servers.sh"
# shellcheck source=scripts/lib/chroot.sh
. "$here/lib/chroot.sh"

php_src_cache=${MYSQLLOCK_PHP_SRC_CACHE:-$cache_dir/php-src}
mapfile -t trees < <(python3 "$here/lib/package_manifest.py" trees "$here/..")
names=(sid-php trixie-php sid-mysql package fuzz-target php-src ${trees[@]+"${trees[@]}"})
usage="usage: cache.sh list | clean NAME... (${names[*]}, all)"

path_of() {
  case $1 in
    sid-php) echo "$sid_root" ;;
    trixie-php) echo "$trixie_root" ;;
    sid-mysql) echo "$mysql_root" ;;
    package) echo "$package_cache" ;;
    fuzz-target) echo "$fuzz_cache" ;;
    php-src) echo "$php_src_cache" ;;
    *)
      local tree
      for tree in ${trees[@]+"${trees[@]}"}; do
        [ "$1" != "$tree" ] || { echo "$trees_dir/$tree"; return; }
      done
      die "no cache $1 ($usage)"
      ;;
  esac
}

cmd=${1:-list}
[ $# -eq 0 ] || shift
case $cmd in
  list)
    for name in "${names[@]}"; do
      path=$(path_of "$name")
      size=-
      # What a mount left by an older script shows is not the cache's (a bind of the same
      # file system is no other device to --one-file-system): left out.
      mapfile -t left < <(chroot_host_mounts "$path")
      excludes=()
      for mount in ${left[@]+"${left[@]}"}; do excludes+=("--exclude=$mount"); done
      [ ! -e "$path" ] || size=$(du -sh --one-file-system ${excludes[@]+"${excludes[@]}"} "$path" 2>/dev/null | cut -f1)
      printf '%-14s %-6s %s\n' "$name" "$size" "$path"
      for mount in ${left[@]+"${left[@]}"}; do
        echo "             mount left by an older script: $mount"
      done
    done
    ;;
  clean)
    [ $# -gt 0 ] || die "$usage"
    if [ "$*" = all ]; then set -- "${names[@]}"; fi
    for name in "$@"; do path_of "$name" >/dev/null; done
    for name in "$@"; do chroot_clean "$(path_of "$name")"; done
    if [ "${names[*]}" = "$*" ] && [ -d "$cache_dir" ]; then
      if rmdir "$cache_dir" 2>/dev/null; then
        echo "$me: removed $cache_dir"
      else
        echo "$me: $cache_dir stays: it holds more than this checkout's caches: $(find "$cache_dir" -mindepth 1 -maxdepth 1 -printf '%f ')"
      fi
    fi
    ;;
  *)
    die "$usage"
    ;;
esac
