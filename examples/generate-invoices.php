<?php
// A cron job that must run on exactly one node, written exactly as for the original
// Composer package its-mieger/mysql-shared-locks: with `extension=mysqllock.so` loaded
// (and the package removed), it runs unchanged.
//
//   php -d extension=mysqllock.so examples/generate-invoices.php node-a
//
// Connection from MYSQLLOCK_HOST, MYSQLLOCK_PORT, MYSQLLOCK_USER, MYSQLLOCK_PASSWORD,
// MYSQLLOCK_DB, or from MYSQLLOCK_DSN (mysql://user:password@host:port/db).
// Start it on several nodes at once: one generates the invoices, the others skip.

use ItsMieger\MySqlSharedLocks\Exception\SharedLockTimeoutException;
use ItsMieger\MySqlSharedLocks\SharedLock;

$node = $argv[1] ?? gethostname();

function logLine($message)
{
    fwrite(STDOUT, date('H:i:s') . ' ' . $message . "\n");
}

$dsn = getenv('MYSQLLOCK_DSN');
if ($dsn) {
    $url = parse_url($dsn);
    $host = $url['host'];
    $port = isset($url['port']) ? $url['port'] : 3306;
    $user = rawurldecode($url['user']);
    $password = isset($url['pass']) ? rawurldecode($url['pass']) : '';
    $db = ltrim($url['path'], '/');
} else {
    $host = getenv('MYSQLLOCK_HOST') ?: '127.0.0.1';
    $port = getenv('MYSQLLOCK_PORT') ?: 3306;
    $user = getenv('MYSQLLOCK_USER') ?: 'root';
    $password = getenv('MYSQLLOCK_PASSWORD') ?: '';
    $db = getenv('MYSQLLOCK_DB') ?: 'app';
}

SharedLock::configureConnection($host, $db, $user, $password, 'utf8mb4', $port);

try {
    // no waiting: if another node has the lock this month's run is its job
    $lock = SharedLock::lock('monthly-invoices', 0, 60);
} catch (SharedLockTimeoutException $ex) {
    logLine("node $node: another node holds the lock, skipping");
    exit(0);
}

try {
    logLine("node $node: generating invoices");
    sleep(2); // the real work

    // still ours? (the TTL of 60 s is far from over)
    $lock->assertTTL(5);
    logLine("node $node: invoices done");
} finally {
    $lock->release();
}
