#!/usr/bin/env bash
# The PHP extension against PHPUnit: the drop-in API of its-mieger/mysql-shared-locks
# (SPEC §3), the protocol under processes that die, hang and fork (§4), bad input (§7),
# Nene\Kit\DistributedLock (lease mode; MariaDB native, MariaDB PDO, SQLite PDO),
# and the stub file against what the extension really registers.
set -euo pipefail
: "${MYSQLLOCK_ROOT:?MYSQLLOCK_ROOT is not set (the repository root)}"
: "${MYSQLLOCK_BIN:?MYSQLLOCK_BIN is not set (the target/release directory)}"
: "${MYSQLLOCK_TEST_DSN:?MYSQLLOCK_TEST_DSN is not set (start a server with scripts/mariadb.sh)}"
cd "$MYSQLLOCK_ROOT"

so=$MYSQLLOCK_BIN/libmysqllock_php.so
phpunit=/usr/bin/phpunit
if [ ! -f "$so" ]; then
  echo "30-php: the extension $so does not exist (cargo build --release -p mysqllock-php)" >&2
  exit 1
fi
if [ ! -x "$phpunit" ]; then
  echo "30-php: $phpunit is missing (apt-get install phpunit)" >&2
  exit 1
fi
modules=$(php -m)
for ext in pdo_mysql pdo_sqlite pcntl posix; do
  if ! grep -qx "$ext" <<<"$modules"; then
    echo "30-php: the PHP extension $ext is missing" >&2
    exit 1
  fi
done
if ! php -d "extension=$so" -r 'exit(extension_loaded("mysqllock") ? 0 : 1);'; then
  echo "30-php: PHP cannot load $so as the mysqllock extension" >&2
  exit 1
fi

export MYSQLLOCK_BIN
exec php -d "extension=$so" "$phpunit" -c tests/php/phpunit.xml "$@"
