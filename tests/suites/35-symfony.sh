#!/usr/bin/env bash
# The Symfony Lock store (bridges/symfony) against the real Debian php-symfony-lock 5.4,
# php-symfony-console and php-symfony-framework-bundle and the real extension (PHPUnit,
# tests/bridges/symfony): every behaviour Symfony documents for a store in both modes,
# across processes (contention, kill -9), through LockFactory and through a FrameworkBundle
# kernel configured with a mysqllock:// DSN, and the examples/symfony-cron command run as
# three concurrent processes. composer.json is checked with `composer validate`.
set -euo pipefail
: "${MYSQLLOCK_ROOT:?MYSQLLOCK_ROOT is not set (the repository root)}"
: "${MYSQLLOCK_BIN:?MYSQLLOCK_BIN is not set (the target/release directory)}"
: "${MYSQLLOCK_TEST_DSN:?MYSQLLOCK_TEST_DSN is not set (start a server with scripts/mariadb.sh)}"
cd "$MYSQLLOCK_ROOT"

so=$MYSQLLOCK_BIN/libmysqllock_php.so
fail() { echo "35-symfony: $*" >&2; exit 1; }
[ -f "$so" ] || fail "the extension $so does not exist (cargo build --release -p mysqllock-php)"
[ -x /usr/bin/phpunit ] || fail "/usr/bin/phpunit is missing (apt-get install phpunit)"
for f in /usr/share/php/Symfony/Component/Lock/autoload.php /usr/share/php/Symfony/Component/Console/autoload.php \
         /usr/share/php/Symfony/Bundle/FrameworkBundle/autoload.php; do
  [ -f "$f" ] || fail "$f is missing (scripts/install-deps.sh installs php-symfony-lock, -console, -framework-bundle)"
done
command -v composer >/dev/null || fail "composer is missing (apt-get install composer)"
php -d "extension=$so" -r 'exit(extension_loaded("mysqllock") ? 0 : 1);' || fail "PHP cannot load $so as the mysqllock extension"

# The package is what `composer require` installs: its composer.json must be valid.
(cd bridges/symfony && COMPOSER_HOME=$(mktemp -d) composer validate --no-check-publish --no-interaction --quiet) \
  || fail "bridges/symfony/composer.json does not validate"

export MYSQLLOCK_BIN
exec php -d "extension=$so" /usr/bin/phpunit -c tests/bridges/symfony/phpunit.xml "$@"
