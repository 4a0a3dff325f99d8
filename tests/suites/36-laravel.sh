#!/usr/bin/env bash
# The Laravel lock driver (bridges/laravel) against Debian's php-laravel-framework 8.83 and
# the real extension: Laravel's Lock contract through a CacheManager, restoreLock and
# release across processes, contention, a killed holder, the scheduler's mutexes and
# unique jobs, the store's refusal of cache operations, its connections; and its
# composer.json validated by composer.
set -euo pipefail
: "${MYSQLLOCK_ROOT:?MYSQLLOCK_ROOT is not set (the repository root)}"
: "${MYSQLLOCK_BIN:?MYSQLLOCK_BIN is not set (the target/release directory)}"
: "${MYSQLLOCK_TEST_DSN:?MYSQLLOCK_TEST_DSN is not set (start a server with scripts/mariadb.sh)}"
cd "$MYSQLLOCK_ROOT"

so=$MYSQLLOCK_BIN/libmysqllock_php.so
phpunit=/usr/bin/phpunit
if [ ! -f "$so" ]; then
  echo "36-laravel: the extension $so does not exist (cargo build --release -p mysqllock-php)" >&2
  exit 1
fi
if [ ! -x "$phpunit" ]; then
  echo "36-laravel: $phpunit is missing (apt-get install phpunit)" >&2
  exit 1
fi
if [ ! -f /usr/share/php/Illuminate/Foundation/Application.php ]; then
  echo "36-laravel: Laravel is missing (apt-get install php-laravel-framework)" >&2
  exit 1
fi
if ! command -v composer >/dev/null 2>&1; then
  echo "36-laravel: composer is missing (apt-get install composer)" >&2
  exit 1
fi
modules=$(php -m)
for ext in pdo_mysql pdo_sqlite posix; do
  if ! grep -qx "$ext" <<<"$modules"; then
    echo "36-laravel: the PHP extension $ext is missing" >&2
    exit 1
  fi
done
if ! php -d "extension=$so" -r 'exit(extension_loaded("mysqllock") ? 0 : 1);'; then
  echo "36-laravel: PHP cannot load $so as the mysqllock extension" >&2
  exit 1
fi

# composer validate reads only the file (no network); a warning is a failure too.
composer_home=$(mktemp -d /tmp/mysqllock-36-composer.XXXXXX)
trap 'rm -rf "$composer_home"' EXIT
(cd bridges/laravel && COMPOSER_HOME=$composer_home composer validate --strict --no-check-publish --no-check-lock --no-interaction)

export MYSQLLOCK_BIN
php -d "extension=$so" -d "mysqllock.dsn=$MYSQLLOCK_TEST_DSN" "$phpunit" -c tests/bridges/laravel/phpunit.xml "$@"
