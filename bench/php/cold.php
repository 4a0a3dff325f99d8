<?php
// Figure 5: a cold start. Configure, lock, release, exit: through the extension, or
// raw GET_LOCK / RELEASE_LOCK through PDO (the extension is loaded either way).
// Args: ext|pdo NAME
declare(strict_types=1);

namespace MySqlLockBench;

use ItsMieger\MySqlSharedLocks\SharedLock;

require __DIR__ . '/common.php';

$impl = arg(1, 'ext|pdo');
$name = arg(2, 'lock name');
$s = server();
if ($impl === 'ext') {
    SharedLock::configureConnection($s['host'], $s['db'], $s['user'], $s['pass'], 'utf8mb4', $s['port'], productTls());
    SharedLock::lock($name, 5, TTL)->release();
} else {
    $pdo = pdo();
    $get = $pdo->prepare('SELECT GET_LOCK(?, ?)');
    $get->execute([$name, 5]);
    if ((int) $get->fetchColumn() !== 1) {
        fail("GET_LOCK($name) failed");
    }
    $rel = $pdo->prepare('SELECT RELEASE_LOCK(?)');
    $rel->execute([$name]);
    if ((int) $rel->fetchColumn() !== 1) {
        fail("RELEASE_LOCK($name) failed");
    }
}
