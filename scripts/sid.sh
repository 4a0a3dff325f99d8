#!/usr/bin/env bash
# The PHP stack of 2026, which Debian 12 lacks, in a Debian sid chroot: PHP 8.4 (sid) and
# 8.5 (experimental) side by side, PHPUnit 13, Symfony Lock 7.4 (and 8 from experimental in
# /opt/symfony-8/php, see install_symfony_8), Laravel 13 and MariaDB 11.8 LTS
# (scripts/mariadb11.sh runs it). MySQL 9.7 has a chroot of its own
# (scripts/mysql.sh): sid's mysql-server-core and mariadb-server-core conflict.
#
#   scripts/sid.sh root            # makes the chroot (once; debootstrap needs root) and
#                                  # prints its path
#   scripts/sid.sh run CMD...      # CMD inside it, in the current directory, with
#                                  # MYSQLLOCK_IN_SID=1; the repository and /tmp are the
#                                  # host's, at the same paths, so paths mean the same on
#                                  # both sides
#   scripts/sid.sh ext X.Y         # builds the extension for PHP X.Y with the host's Rust
#                                  # toolchain and prints the .so's path inside the chroot
#                                  # (/build/phpX.Y/release/...; ROOT/build/... on the host)
#   scripts/sid.sh clean           # removes the chroot (refused while a server runs in
#                                  # it); the next use builds it again
#
# Kept under /var/cache/mysqllock/sid-php (MYSQLLOCK_SID_ROOT overrides). The extension's
# builds live in the chroot's /build/phpX.Y, so they stay incremental from run to run.
# Every command enters the chroot through chroot_run (scripts/lib/chroot.sh): its mounts
# end with it, and it sees a clean environment. `run` hands over the MYSQLLOCK_* variables
# (the suites' settings), TERM, and SYMFONY_LOCK_SRC and COMPOSER_ROOT_VERSION when set;
# nothing else of the caller's (a TMPDIR of the host's, say) reaches CMD.
set -euo pipefail
me=sid.sh
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
# shellcheck source=scripts/lib/servers.sh
. "$here/lib/servers.sh"
# shellcheck source=scripts/lib/chroot.sh
. "$here/lib/chroot.sh"

root=$sid_root

# What the chroot holds. Changing this list makes the next use install what is new. The
# steps are chained with && (set -e does not reach into a function called with ||).
install_sid_php() {
  chroot_apt "$1" update &&
  chroot_apt "$1" install --no-install-recommends \
    php8.4-cli php8.4-dev php8.4-mysql php8.4-sqlite3 php8.4-fpm php8.4-xml php8.4-mbstring \
    libfcgi-bin \
    phpunit composer php-symfony-lock php-symfony-console php-symfony-framework-bundle \
    php-laravel-framework mariadb-server mariadb-client galera-4 rsync \
    gcc libc6-dev libclang-dev python3 procps ca-certificates &&
  # PHP 8.5 is only in experimental: each of its packages is named from there (with
  # -t experimental, php-common would come from there too, and that one breaks 8.5.7).
  chroot_apt "$1" install --no-install-recommends php8.5-cli/experimental \
    php8.5-dev/experimental php8.5-mysql/experimental php8.5-sqlite3/experimental \
    php8.5-fpm/experimental php8.5-xml/experimental php8.5-mbstring/experimental &&
  install_symfony_8 "$1"
}

# Symfony 8 is only in experimental, and one chroot holds one version of a package: sid's
# 7.4 is installed, and experimental's Symfony Lock, Console and FrameworkBundle (with
# whatever they need from experimental or sid) are unpacked over a copy of /usr/share/php
# in /opt/symfony-8/php, which the Symfony suite loads instead when its matrix row asks
# for Symfony 8. Debian's autoload.php files find each other relative to their own
# directory, so the copy is complete on its own.
install_symfony_8() {
  # The work directory is the host's /tmp (chroot_run binds it): a name of its own there.
  # shellcheck disable=SC2016 # the script is the chroot's shell's
  chroot_run "$1" -- /bin/sh -e -c '
    rm -rf /opt/symfony-8 && mkdir -p /opt/symfony-8
    work=$(mktemp -d /tmp/mysqllock-symfony-8.XXXXXX) && chmod 755 "$work"
    trap "rm -rf \"$work\"" EXIT
    mkdir -p "$work/debs" "$work/files"
    apt-get -o Acquire::Check-Valid-Until=false -s -t experimental install --no-install-recommends \
      php-symfony-lock php-symfony-console php-symfony-framework-bundle \
      | sed -n "s/^Inst \([^ ]*\) .*(\([^ ]*\) .*/\1=\2/p" >"$work/list"
    grep -q "^php-symfony-lock=8" "$work/list"
    cd "$work/debs"
    apt-get -o Acquire::Check-Valid-Until=false -qq download $(cat "$work/list")
    for deb in *.deb; do dpkg-deb -x "$deb" "$work/files"; done
    cp -a /usr/share/php /opt/symfony-8/php
    cp -a "$work/files/usr/share/php/." /opt/symfony-8/php/'
}

ensure() {
  chroot_ensure "$root" "PHP 8.4/8.5 + MariaDB 11.8" install_sid_php
}

usage="usage: sid.sh root | run CMD... | ext X.Y | clean"
cmd=${1:?$usage}
shift
case "$cmd" in
  root)
    ensure
    echo "$root"
    ;;
  run)
    [ $# -gt 0 ] || die "usage: sid.sh run CMD..."
    ensure
    # The current directory must exist inside: the repository and /tmp do.
    # MYSQLLOCK_IN_SID tells the project's scripts that they already run inside.
    sets=(--set MYSQLLOCK_IN_SID=1)
    for name in TERM SYMFONY_LOCK_SRC COMPOSER_ROOT_VERSION; do
      [ -z "${!name:-}" ] || sets+=(--set "$name=${!name}")
    done
    chroot_command "$root" --bind "$repo" --cwd "$PWD" "${sets[@]}" -- "$@"
    exec "${chroot_cmd[@]}"
    ;;
  ext)
    version=${1:?usage: sid.sh ext X.Y}
    [[ $version =~ ^[0-9]+\.[0-9]+$ ]] || die "ext $version: a PHP version is X.Y"
    ensure
    [ -x "$root/usr/bin/php$version" ] || die "PHP $version is not in $root"
    target=/build/php$version
    mkdir -p "$root$target"
    chroot_cargo "$root" "$repo" CARGO_TARGET_DIR="$target" \
      PHP="/usr/bin/php$version" PHP_CONFIG="/usr/bin/php-config$version" \
      -- build --release --locked -p mysqllock-php >&2 \
      || die "building the extension for PHP $version failed"
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
