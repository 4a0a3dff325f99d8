<?php
/*
 * The PHP-extension side of tests/c/cross_php.sh, written against the its-mieger API:
 *
 *   php -d extension=libmysqllock_php.so cross_php.php try NAME TIMEOUT
 *       lock NAME within TIMEOUT seconds, then unlock; prints "acquired" (exit 0) or,
 *       on SharedLockTimeoutException, "timeout" (exit 3)
 *   php -d extension=libmysqllock_php.so cross_php.php hold NAME TTL
 *       lock NAME, print "held", wait for a line (or EOF) on stdin, unlock, print "released"
 *
 * The server comes from MYSQLLOCK_TEST_DSN.
 */
declare(strict_types=1);

use ItsMieger\MySqlSharedLocks\Exception\SharedLockTimeoutException;
use ItsMieger\MySqlSharedLocks\SharedLock;

[, $mode, $name, $seconds] = $argv + [null, null, null, null];
$dsn = parse_url((string)getenv('MYSQLLOCK_TEST_DSN'));
SharedLock::configureConnection(
    $dsn['host'],
    ltrim($dsn['path'] ?? '', '/'),
    urldecode($dsn['user'] ?? ''),
    urldecode($dsn['pass'] ?? ''),
    'utf8mb4',
    $dsn['port'] ?? 3306
);

if ($mode === 'try') {
    try {
        SharedLock::lock($name, (float)$seconds, 10);
    } catch (SharedLockTimeoutException $e) {
        echo "timeout\n";
        exit(3);
    }
    echo "acquired\n";
    SharedLock::unlock($name);
    exit(0);
}
if ($mode === 'hold') {
    SharedLock::lock($name, 0, (float)$seconds);
    echo "held\n";
    fgets(STDIN);
    SharedLock::unlock($name);
    echo "released\n";
    exit(0);
}
fwrite(STDERR, "usage: cross_php.php try NAME TIMEOUT | hold NAME TTL\n");
exit(2);
