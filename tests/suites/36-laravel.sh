#!/usr/bin/env bash
# matrix: php
# The Laravel lock driver (bridges/laravel) against Debian's php-laravel-framework (8.83 on
# Debian 12, 13 from sid: the matrix row says which) and the real extension: Laravel's
# Lock contract through a CacheManager, restoreLock and release across processes,
# contention, a killed holder, the scheduler's mutexes and unique jobs, the store's refusal
# of cache operations, its connections; and its composer.json validated by composer.
set -euo pipefail
. "$(dirname "$0")/lib/php.sh"

[ -f /usr/share/php/Illuminate/Foundation/Application.php ] || fail "Laravel is missing (apt-get install php-laravel-framework)"
need_version Laravel "${MYSQLLOCK_LARAVEL:-}" "$(package_version php-laravel-framework)"
echo "$suite: Laravel $(package_version php-laravel-framework)"
need_php_modules pdo_mysql pdo_sqlite posix
validate_composer bridges/laravel
need_attributes tests/bridges/laravel

exec "$php" -d "extension=$so" -d "mysqllock.dsn=$MYSQLLOCK_TEST_DSN" "$phpunit" -c "$(phpunit_config tests/bridges/laravel)" "$@"
