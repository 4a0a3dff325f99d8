#!/usr/bin/env bash
# matrix: php
# The PHP extension against PHPUnit: the drop-in API of its-mieger/mysql-shared-locks
# (SPEC §3), the protocol under processes that die, hang and fork (§4), bad input (§7),
# Nene\Kit\DistributedLock (lease mode; MariaDB native, MariaDB PDO, SQLite PDO),
# and the stub file against what the extension really registers. Once per PHP of the
# matrix (tests/matrix).
set -euo pipefail
. "$(dirname "$0")/lib/php.sh"

need_php_modules pdo_mysql pdo_sqlite pcntl posix

need_attributes tests/php
phpunit_options tests/php
exec "$php" -d "extension=$so" "$phpunit" "${phpunit_opts[@]}" "$@"
