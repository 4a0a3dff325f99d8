<?php
// The threaded test's setup and final check, run by tests/suites/37-zts-threads.sh with the
// extension loaded (mysqllock.dsn: the test server), in a process of its own:
//
//   check.php setup                           the tables (shared_locks, the lease table)
//   check.php verify DIR PREFIX THREADS REQUESTS
//   check.php clean PREFIX                    removes the rows of PREFIX (the self-test's)
//
// verify, after the threaded process has ended, on a connection of its own: every request
// reported (DIR/thread-T.json of each thread's last request, DIR/sessions-T with one
// session per request), some request found the common lock taken by another thread (the
// threads ran at the same time), THREADS x REQUESTS sessions all different (no request
// used another's connection) and all gone, and no row, GET_LOCK or lease of the test left.
declare(strict_types=1);

use ItsMieger\MySqlSharedLocks\SharedLock;
use Nene\Kit\DistributedLock;

const LEASE_TABLE = 'zts_leases';

function fail(string $why): never
{
    fwrite(STDERR, "check: $why\n");
    exit(1);
}

function inspection(): PDO
{
    $u = parse_url((string) getenv('MYSQLLOCK_TEST_DSN'));
    if (!is_array($u) || !isset($u['host'], $u['user'], $u['path'])) {
        fail('MYSQLLOCK_TEST_DSN is not a mysql://user:password@host:port/db URL');
    }
    return new PDO(
        sprintf('mysql:host=%s;port=%d;dbname=%s', $u['host'], $u['port'] ?? 3306, ltrim($u['path'], '/')),
        rawurldecode($u['user']),
        rawurldecode($u['pass'] ?? ''),
        [PDO::ATTR_ERRMODE => PDO::ERRMODE_EXCEPTION]
    );
}

$mode = $argv[1] ?? '';
if ($mode === 'setup') {
    SharedLock::createTable();
    (new DistributedLock(null, LEASE_TABLE))->createTable();
    exit(0);
}
if ($mode === 'clean' && ($argv[2] ?? '') !== '') {
    $db = inspection();
    $db->prepare('DELETE FROM shared_locks WHERE name LIKE ?')->execute([$argv[2] . '%']);
    $db->prepare('DELETE FROM `' . LEASE_TABLE . '` WHERE resource LIKE ?')->execute([$argv[2] . '%']);
    exit(0);
}
if ($mode !== 'verify' || count($argv) !== 6) {
    fwrite(STDERR, "usage: check.php setup | check.php verify DIR PREFIX THREADS REQUESTS | check.php clean PREFIX\n");
    exit(2);
}
[, , $dir, $prefix, $threads, $requests] = $argv;
$threads = (int) $threads;
$requests = (int) $requests;
$db = inspection();

$sessions = [];
for ($t = 0; $t < $threads; $t++) {
    $last = json_decode((string) @file_get_contents("$dir/thread-$t.json"), true);
    if (($last['request'] ?? null) !== $requests - 1) {
        fail("thread $t did not report its last request");
    }
    $ids = @file("$dir/sessions-$t", FILE_IGNORE_NEW_LINES) ?: [];
    if (count($ids) !== $requests) {
        fail(sprintf('thread %d reported %d sessions for %d requests', $t, count($ids), $requests));
    }
    array_push($sessions, ...$ids);
}
$contended = 0;
foreach (glob("$dir/contended-*") as $file) {
    $contended += count(file($file, FILE_IGNORE_NEW_LINES));
}
if ($contended === 0) {
    fail('no request ever found the common lock taken by another thread: the threads did not run at the same time');
}
if (count(array_unique($sessions)) !== $threads * $requests) {
    fail(sprintf('%d requests ran on only %d different sessions', $threads * $requests, count(array_unique($sessions))));
}

$st = $db->prepare('SELECT name FROM shared_locks WHERE name LIKE ?');
$st->execute([$prefix . '%']);
$rows = $st->fetchAll(PDO::FETCH_COLUMN);
if ($rows !== []) {
    fail('rows left in shared_locks: ' . implode(', ', $rows));
}
$names = ["{$prefix}common", "{$prefix}common-s"];
for ($t = 0; $t < $threads; $t++) {
    for ($r = 0; $r < $requests; $r++) {
        $names[] = "{$prefix}t$t-r$r";
        $names[] = "{$prefix}t$t-r$r-s";
    }
}
$st = $db->prepare('SELECT IS_USED_LOCK(?)');
foreach ($names as $name) {
    $st->execute([$name]);
    $holder = $st->fetchColumn();
    if ($holder !== null) {
        fail("the GET_LOCK $name is still held, by session $holder");
    }
}
$st = $db->prepare('SELECT COUNT(*) FROM `' . LEASE_TABLE . '` WHERE resource = ? AND expires_at > UTC_TIMESTAMP()');
$st->execute(["{$prefix}common-lease"]);
if ((int) $st->fetchColumn() !== 0) {
    fail('the common lease is still held');
}
$list = implode(',', array_map('intval', $sessions));
$deadline = hrtime(true) + 20 * 1000000000;
do {
    $alive = $db->query("SELECT ID FROM information_schema.PROCESSLIST WHERE ID IN ($list)")->fetchAll(PDO::FETCH_COLUMN);
    if ($alive === []) {
        break;
    }
    usleep(20000);
} while (hrtime(true) < $deadline);
if ($alive !== []) {
    fail('sessions of the requests still exist: ' . implode(', ', $alive));
}
printf(
    "check: %d requests on %d threads (%d found the common lock taken by another thread), %d sessions, all different and gone; no row, GET_LOCK or lease left\n",
    $threads * $requests,
    $threads,
    $contended,
    count($sessions)
);
