#!/usr/bin/env bash
# matrix: php
# The Laravel lock driver (bridges/laravel) against Debian's php-laravel-framework (8.83 on
# Debian 12, 10.48 on Debian 13, 13 from sid: the matrix row says which) and the real
# extension: Laravel's Lock contract through a CacheManager, restoreLock and release across
# processes, contention, a killed holder, the scheduler's mutexes and unique jobs, the
# store's refusal of cache operations, its connections; and its composer.json validated by
# composer.
set -euo pipefail
. "$(dirname "$0")/lib/php.sh"

[ -f /usr/share/php/Illuminate/Foundation/Application.php ] || fail "Laravel is missing (apt-get install php-laravel-framework)"
laravel=$(package_version php-laravel-framework)
need_version Laravel "${MYSQLLOCK_LARAVEL:-}" "$laravel"
echo "$suite: Laravel $laravel"
need_php_modules pdo_mysql pdo_sqlite posix
validate_composer bridges/laravel
need_attributes tests/bridges/laravel

# Laravel13/ (the tests of Laravel 12 and later) declares no class on an older Laravel,
# which PHPUnit 10 and later take for a warning: there, only the suite without it runs
# (phpunit10.xml). PHPUnit 9.6 collects nothing from such a file by itself.
only=()
if [ "$phpunit_major" -ge 10 ] && [ "${laravel%%.*}" -lt 12 ]; then
  only=(--testsuite laravel-bridge)
fi
phpunit_options tests/bridges/laravel
exec "$php" -d "extension=$so" -d "mysqllock.dsn=$MYSQLLOCK_TEST_DSN" "$phpunit" "${phpunit_opts[@]}" "${only[@]}" "$@"
