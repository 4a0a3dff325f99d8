#!/usr/bin/env bash
# The PHP stack of the current Debian stable, Debian 13 trixie, in a chroot of its own: PHP
# 8.4, Symfony Lock 6.4 (LTS), Laravel 10.48, PHPUnit 11.5 and Composer, all from trixie's
# own packages (no experimental). The PHP suites of tests/matrix's `trixie` row run in it,
# with the extension built there against trixie's PHP and C library.
#
#   scripts/trixie.sh root | run CMD... | ext X.Y   # as every PHP chroot: scripts/lib/php-chroot.sh
#
# Kept under /var/cache/mysqllock/trixie-php (MYSQLLOCK_TRIXIE_ROOT overrides). Inside, the
# project's scripts see MYSQLLOCK_IN_CHROOT=trixie.
set -euo pipefail
me=trixie.sh
# shellcheck source=scripts/lib/php-chroot.sh
. "$(dirname "$0")/lib/php-chroot.sh"

root=$trixie_root

# What the chroot holds (a changed list is installed on the next use; as sid.sh's). With
# mariadb-client and python3 a PHP test marks a table crashed through the test server's
# script (scripts/mariadb.sh crash-table), which then runs in here.
install_trixie_php() {
  chroot_apt "$1" update &&
  chroot_apt "$1" install --no-install-recommends \
    php8.4-cli php8.4-dev php8.4-mysql php8.4-sqlite3 php8.4-fpm php8.4-xml php8.4-mbstring \
    libfcgi-bin \
    phpunit composer php-symfony-lock php-symfony-console php-symfony-framework-bundle \
    php-laravel-framework mariadb-client \
    gcc libc6-dev libclang-dev python3 procps ca-certificates
}

ensure() {
  chroot_ensure "$root" "Debian 13 PHP 8.4" install_trixie_php trixie
}

php_chroot_main "$root" trixie ensure "$@"
