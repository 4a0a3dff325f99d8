# shellcheck shell=bash disable=SC2154
# (SC2154: $me is set by the sourcing script.)
# The commands of a Debian chroot that holds a PHP stack Debian 12 lacks (sourced by
# scripts/sid.sh and scripts/trixie.sh, which set $me first; this file sources
# lib/servers.sh and lib/chroot.sh and sets $repo). Each script says what its chroot holds
# (its install function) and which Debian it is; the commands are the same:
#
#   SCRIPT root          # makes the chroot (once; debootstrap needs root), prints its path
#   SCRIPT run CMD...    # CMD inside it (chroot_run: the repository and /tmp are the host's,
#                        # at the same paths, so paths mean the same on both sides), in the
#                        # current directory, with the project's MYSQLLOCK_* environment,
#                        # MYSQLLOCK_IN_CHROOT=SUITE (the project's scripts then know they
#                        # already run inside), TERM, and SYMFONY_LOCK_SRC and
#                        # COMPOSER_ROOT_VERSION when set; nothing else of the caller's (a
#                        # TMPDIR of the host's, say) reaches CMD
#   SCRIPT ext X.Y       # builds the extension for the chroot's PHP X.Y with the host's Rust
#                        # toolchain and prints the .so's path inside the chroot
#                        # (/build/phpX.Y/release/...; ROOT/build/... on the host)
#   SCRIPT clean         # removes the chroot (refused while a server runs in it); the next
#                        # use builds it again
#
# The extension's builds live in the chroot's /build/phpX.Y, so they stay incremental from
# run to run, and are linked against the chroot's own C library and PHP: a .so built in one
# Debian may need symbols another's glibc lacks.

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
# shellcheck source=scripts/lib/servers.sh
. "$repo/scripts/lib/servers.sh"
# shellcheck source=scripts/lib/chroot.sh
. "$repo/scripts/lib/chroot.sh"

# php_chroot_main ROOT SUITE ENSURE CMD ARGS...: the command CMD on the chroot ROOT (a
# Debian SUITE); ENSURE is the calling script's function that makes ROOT ready.
php_chroot_main() {
  local root=$1 suite=$2 ensure=$3 usage="usage: $me root | run CMD... | ext X.Y | clean"
  shift 3
  # One chroot cannot reach another: their caches live on the host.
  [ -z "${MYSQLLOCK_IN_CHROOT:-}" ] \
    || die "already inside the $MYSQLLOCK_IN_CHROOT chroot: run $me on the host"
  local cmd=${1:-}
  [ -n "$cmd" ] || die "$usage"
  shift
  case "$cmd" in
    root)
      "$ensure"
      echo "$root"
      ;;
    run)
      [ $# -gt 0 ] || die "usage: $me run CMD..."
      "$ensure"
      # The current directory must exist inside: the repository and /tmp do.
      local sets=(--set "MYSQLLOCK_IN_CHROOT=$suite") name
      for name in TERM SYMFONY_LOCK_SRC COMPOSER_ROOT_VERSION; do
        [ -z "${!name:-}" ] || sets+=(--set "$name=${!name}")
      done
      chroot_command "$root" --bind "$repo" --cwd "$PWD" "${sets[@]}" -- "$@"
      exec "${chroot_cmd[@]}"
      ;;
    ext)
      local version=${1:-} target so
      [[ $version =~ ^[0-9]+\.[0-9]+$ ]] || die "ext ${version:-(none)}: a PHP version is X.Y"
      "$ensure"
      [ -x "$root/usr/bin/php$version" ] || die "PHP $version is not in $root"
      target=/build/php$version
      mkdir -p "$root$target"
      chroot_cargo "$root" "$repo" CARGO_TARGET_DIR="$target" \
        PHP="/usr/bin/php$version" PHP_CONFIG="/usr/bin/php-config$version" \
        -- build --release --locked -p mysqllock-php >&2 \
        || die "building the extension for PHP $version in $root failed"
      so=$target/release/libmysqllock_php.so
      # The path inside the chroot; the same file is $root$so on the host.
      chroot_run "$root" -- "php$version" -d "extension=$so" -r 'exit(extension_loaded("mysqllock") ? 0 : 1);' \
        || die "PHP $version cannot load $so"
      echo "$so"
      ;;
    clean)
      chroot_clean "$root"
      ;;
    *)
      die "$usage"
      ;;
  esac
}
