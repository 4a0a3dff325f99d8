<?php
// One request of the threaded test (tests/zts/threads.c runs it REQUESTS times on each of
// THREADS threads of one ZTS PHP process, the threads at the same time):
//
//   request.php THREAD REQUEST DIR PREFIX
//
// Each request, on the extension's own connection (mysqllock.dsn):
// 1. checks, on a connection of its own (PDO), that the previous request of its thread
//    left nothing: its SharedLock row and GET_LOCK, its SessionLock, its session (gone
//    from the process list, waited for with a deadline);
// 2. takes a SharedLock and a SessionLock of its own and keeps them (request end must
//    free them);
// 3. takes the locks all threads contend for (counting in DIR/contended-THREAD when the
//    common SharedLock was taken by another thread), each guarding a marker file that must be
//    absent on entry (another thread inside at the same time would have left it): a
//    SharedLock (synchronized), a SessionLock (synchronized) and a DistributedLock lease
//    (acquire, release). Every fourth request also keeps the common SharedLock and the
//    common SessionLock to its end, so the other threads get them only once its request
//    shutdown released them;
// 4. checks that its session is its own: not one an earlier request of any thread used
//    (each request appends its session's id to DIR/sessions-THREAD);
// 5. writes what the next request of its thread must find freed to DIR/thread-THREAD.json.
// Exit status 0 when all is well; the reason on stderr otherwise (php://stderr: the embed
// SAPI defines no STDERR).
declare(strict_types=1);

use ItsMieger\MySqlSharedLocks\SharedLock;
use MySqlLock\SessionLock;
use Nene\Kit\DistributedLock;

[, $thread, $request, $dir, $prefix] = $argv + [1 => '', 2 => '', 3 => '', 4 => ''];
if (!ctype_digit($thread) || !ctype_digit($request) || !is_dir($dir) || $prefix === '') {
    file_put_contents('php://stderr', "usage: request.php THREAD REQUEST DIR PREFIX\n");
    exit(2);
}
$where = "thread $thread request $request";
$fail = function (string $why) use ($where): never {
    file_put_contents('php://stderr', "$where: $why\n");
    exit(1);
};
const WAIT = 20.0;
const LEASE_TABLE = 'zts_leases';

/** The inspection connection: a PDO of its own on mysqllock.dsn's server. */
function inspection(): PDO
{
    $u = parse_url((string) getenv('MYSQLLOCK_TEST_DSN'));
    return new PDO(
        sprintf('mysql:host=%s;port=%d;dbname=%s', $u['host'], $u['port'] ?? 3306, ltrim($u['path'], '/')),
        rawurldecode($u['user']),
        rawurldecode($u['pass'] ?? ''),
        [PDO::ATTR_ERRMODE => PDO::ERRMODE_EXCEPTION]
    );
}

function getLockHolder(PDO $db, string $name): ?int
{
    $st = $db->prepare('SELECT IS_USED_LOCK(?)');
    $st->execute([$name]);
    $id = $st->fetchColumn();
    return $id === null ? null : (int) $id;
}

function rowCount(PDO $db, string $name): int
{
    $st = $db->prepare('SELECT COUNT(*) FROM shared_locks WHERE name = ?');
    $st->execute([$name]);
    return (int) $st->fetchColumn();
}

function sessionLives(PDO $db, int $id): bool
{
    $st = $db->prepare('SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = ?');
    $st->execute([$id]);
    return (int) $st->fetchColumn() > 0;
}

/** Polls $condition every 20 ms until it holds or $seconds pass; whether it held. */
function waitUntil(callable $condition, float $seconds): bool
{
    $deadline = hrtime(true) + (int) ($seconds * 1e9);
    while (!$condition()) {
        if (hrtime(true) > $deadline) {
            return false;
        }
        usleep(20000);
    }
    return true;
}

/** Runs $inside with DIR/$marker created exclusively: another thread inside fails it. */
function exclusively(string $dir, string $marker, callable $inside, callable $fail): void
{
    $path = "$dir/$marker.inside";
    $handle = @fopen($path, 'x');
    if ($handle === false) {
        $fail("entered the section of $marker while another request was inside");
    }
    fclose($handle);
    $inside();
    usleep(1000); // a while inside, so an overlap has time to show
    if (!unlink($path)) {
        $fail("cannot remove $path");
    }
}

$db = inspection();

// 1. The previous request of this thread left nothing behind.
$previous = "$dir/thread-$thread.json";
if ($request > 0) {
    $left = json_decode((string) file_get_contents($previous), true);
    if (!is_array($left) || $left['request'] !== $request - 1) {
        $fail("no report of the previous request in $previous");
    }
    foreach ($left['getLocks'] as $name) {
        $holder = getLockHolder($db, $name);
        if ($holder !== null) {
            $fail("the GET_LOCK $name of request {$left['request']} is still held, by session $holder");
        }
    }
    // The common locks it kept may have gone to another thread's request since.
    foreach ($left['common'] as $name) {
        if (getLockHolder($db, $name) === $left['session']) {
            $fail("the GET_LOCK $name of request {$left['request']} is still held, by its session {$left['session']}");
        }
    }
    if (rowCount($db, $left['shared']) !== 0) {
        $fail("the row of {$left['shared']} (request {$left['request']}) is still there");
    }
    if (!waitUntil(fn () => !sessionLives($db, $left['session']), WAIT)) {
        $fail("session {$left['session']} of request {$left['request']} still exists");
    }
}

// 2. Locks of its own, kept to the request's end.
$mine = "{$prefix}t$thread-r$request";
try {
    SharedLock::lock($mine, 0, 60);
    $session = new SessionLock("$mine-s");
    if (!$session->acquire(0.0)) {
        $fail("$mine-s is held by session {$session->holder()}");
    }
    $sessionId = $session->holder();
    if (getLockHolder($db, $mine) !== $sessionId) {
        $fail("the SharedLock $mine is not held by this request's session $sessionId");
    }

    // 3. The locks every thread contends for. Finding the common lock taken (by another
    // thread's request: this thread's earlier ones are over) is counted, to show that the
    // threads did run at the same time.
    $common = "{$prefix}common";
    $probe = SharedLock::tryLock($common, 60);
    if ($probe === null) {
        file_put_contents("$dir/contended-$thread", "$request\n", FILE_APPEND);
    } else {
        $probe->release();
    }
    SharedLock::synchronized($common, WAIT, 60, function () use ($dir, $fail) {
        exclusively($dir, 'shared', fn () => null, $fail);
    });
    $commonSession = new SessionLock("$common-s");
    $commonSession->synchronized(function () use ($dir, $fail) {
        exclusively($dir, 'session', fn () => null, $fail);
    }, WAIT);
    $leases = new DistributedLock(null, LEASE_TABLE);
    if (!$leases->acquire("$common-lease", $where, 60, WAIT)) {
        $fail("the common lease stayed taken for " . WAIT . " s");
    }
    exclusively($dir, 'lease', fn () => null, $fail);
    if (!$leases->release("$common-lease", $where)) {
        $fail('the common lease was not ours to release');
    }
    $keptCommon = [];
    if ($request % 4 === 3) {
        SharedLock::lock($common, WAIT, 60);
        if (!$commonSession->acquire(WAIT)) {
            $fail("$common-s stayed taken for " . WAIT . ' s');
        }
        $keptCommon = [$common, "$common-s"];
    }
} catch (Throwable $e) {
    $fail(get_class($e) . ': ' . $e->getMessage());
}

// 4. This request's session is its own: no earlier request of any thread had it.
foreach (glob("$dir/sessions-*") as $file) {
    if (in_array((string) $sessionId, file($file, FILE_IGNORE_NEW_LINES), true)) {
        $fail("session $sessionId was used by an earlier request (" . basename($file) . ')');
    }
}
file_put_contents("$dir/sessions-$thread", "$sessionId\n", FILE_APPEND);

// 5. What the next request of this thread must find freed.
file_put_contents($previous, json_encode([
    'request' => (int) $request, 'shared' => $mine, 'getLocks' => [$mine, "$mine-s"], 'common' => $keptCommon,
    'session' => $sessionId,
]));
exit(0);
