#!/usr/bin/env bash
# The PHP stack of 2026, which Debian 12 lacks, in a Debian sid chroot: PHP 8.4 (sid) and
# 8.5 (experimental) side by side, PHPUnit 13, Symfony Lock 7.4 (and 8 from experimental in
# /opt/symfony-8/php, see install_symfony_8), Laravel 13 and MariaDB 11.8 LTS
# (scripts/mariadb11.sh runs it). MySQL 9.7 has a chroot of its own
# (scripts/mysql.sh): sid's mysql-server-core and mariadb-server-core conflict.
#
#   scripts/sid.sh root | run CMD... | ext X.Y | clean   # as every PHP chroot:
#                                                        # scripts/lib/php-chroot.sh
#
# Kept under /var/cache/mysqllock/sid-php (MYSQLLOCK_SID_ROOT overrides). Inside, the
# project's scripts see MYSQLLOCK_IN_CHROOT=sid.
set -euo pipefail
me=sid.sh
# shellcheck source=scripts/lib/php-chroot.sh
. "$(dirname "$0")/lib/php-chroot.sh"

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
  chroot_ensure "$root" "PHP 8.4/8.5 + MariaDB 11.8" install_sid_php sid
}

php_chroot_main "$root" sid ensure "$@"
