#!/usr/bin/env bash
# matrix: php
# The Symfony Lock store (bridges/symfony) against the real Debian php-symfony-lock (5.4 on
# Debian 12, 7.4 from sid: the matrix row says which), php-symfony-console and
# php-symfony-framework-bundle and the real extension (PHPUnit, tests/bridges/symfony):
# every behaviour Symfony documents for a store in both modes, across processes
# (contention, kill -9), through LockFactory and through a FrameworkBundle kernel
# configured with a mysqllock:// DSN, and the examples/symfony-cron command run as three
# concurrent processes. composer.json is checked with `composer validate`.
set -euo pipefail
. "$(dirname "$0")/lib/php.sh"

for f in /usr/share/php/Symfony/Component/Lock/autoload.php /usr/share/php/Symfony/Component/Console/autoload.php \
         /usr/share/php/Symfony/Bundle/FrameworkBundle/autoload.php; do
  [ -f "$f" ] || fail "$f is missing (scripts/install-deps.sh installs php-symfony-lock, -console, -framework-bundle)"
done
need_version "Symfony Lock" "${MYSQLLOCK_SYMFONY:-}" "$(package_version php-symfony-lock)"
echo "$suite: Symfony Lock $(package_version php-symfony-lock)"

need_php_modules pdo_mysql posix
# The package is what `composer require` installs: its composer.json must be valid.
validate_composer bridges/symfony

need_attributes tests/bridges/symfony
exec "$php" -d "extension=$so" "$phpunit" -c "$(phpunit_config tests/bridges/symfony)" "$@"
