#!/usr/bin/env bash
# matrix: php
# The Symfony Lock store (bridges/symfony) against the real Debian php-symfony-lock (5.4 on
# Debian 12, 7.4 from sid, 8.1 from experimental: the matrix row says which), php-symfony-console and
# php-symfony-framework-bundle and the real extension (PHPUnit, tests/bridges/symfony):
# every behaviour Symfony documents for a store in both modes, across processes
# (contention, kill -9), through LockFactory and through a FrameworkBundle kernel
# configured with a mysqllock:// DSN, and the examples/symfony-cron command run as three
# concurrent processes. composer.json is checked with `composer validate`.
set -euo pipefail
. "$(dirname "$0")/lib/php.sh"

# Symfony's version is HttpKernel's Kernel::VERSION (FrameworkBundle needs HttpKernel).
symfony_version() {
  sed -n "s/.*const VERSION = '\([0-9.]*\)'.*/\1/p" "$1/Symfony/Component/HttpKernel/Kernel.php" 2>/dev/null
}
# Debian's packages, or the copy scripts/sid.sh makes for a Symfony only experimental has.
want=${MYSQLLOCK_SYMFONY:-}
MYSQLLOCK_SYMFONY_DIR=/usr/share/php
if [ -n "$want" ] && [ -d "/opt/symfony-${want%%.*}/php" ] \
   && [[ $(symfony_version /usr/share/php) != "$want"* ]]; then
  MYSQLLOCK_SYMFONY_DIR=/opt/symfony-${want%%.*}/php
fi
export MYSQLLOCK_SYMFONY_DIR
for f in Symfony/Component/Lock/autoload.php Symfony/Component/Console/autoload.php \
         Symfony/Bundle/FrameworkBundle/autoload.php; do
  [ -f "$MYSQLLOCK_SYMFONY_DIR/$f" ] || fail "$MYSQLLOCK_SYMFONY_DIR/$f is missing (scripts/install-deps.sh installs php-symfony-lock, -console, -framework-bundle)"
done
need_version Symfony "$want" "$(symfony_version "$MYSQLLOCK_SYMFONY_DIR")"
echo "$suite: Symfony $(symfony_version "$MYSQLLOCK_SYMFONY_DIR") from $MYSQLLOCK_SYMFONY_DIR"

need_php_modules pdo_mysql posix
# The package is what `composer require` installs: its composer.json must be valid.
validate_composer bridges/symfony

need_attributes tests/bridges/symfony
phpunit_options tests/bridges/symfony
exec "$php" -d "extension=$so" "$phpunit" "${phpunit_opts[@]}" "$@"
