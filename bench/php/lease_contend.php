<?php
// Contention in lease mode (bench/lease.sh, table 3): PROCS processes take one resource
// again and again for SECONDS.
//
//   drive IMPLS PROCS SECONDS DIR  for each implementation in IMPLS (ext, floor, pdo), one
//                                  after the other: starts PROCS workers (this file, same
//                                  php binary, extension and mysqllock.dsn; the extension's
//                                  path in MYSQLLOCK_BENCH_SO), waits until all are
//                                  connected, gives them one common start and end on the
//                                  monotonic clock, and prints one Markdown table row per
//                                  implementation
//   worker IMPL RESOURCE LOG       one worker: "ready", reads "START END" (hrtime ns), loops
//                                  until END, writes "GOT RELEASE_CALLED" (hrtime ns) per
//                                  acquisition to LOG, says "done TRIES"
//
// The loops. ext/pdo (Nene\Kit\DistributedLock): acquire($r, $owner, ttl, $wait = time left)
// -> release at once -> again; a waiting acquire polls with the library's backoff (5 ms
// doubling to 250 ms, jitter). floor: the protocol's INSERT ... ON DUPLICATE KEY UPDATE
// (copied, see lease_common.php) in a tight loop, no backoff: on "held by another" it sends
// it again at once; on success the DELETE at once.
//
// The overlap check is independent of the lock code: every acquisition is logged as the
// interval [acquire returned, release called] on CLOCK_MONOTONIC (hrtime, the same clock in
// every process); the server-side hold contains that interval, so two logged intervals that
// overlap mean two holders at once. Overlaps are reported; the script fails only if a
// measurement could not run (a worker died, a release of a held lease returned false).
declare(strict_types=1);

namespace MySqlLockBench;

require __DIR__ . '/lease_common.php';

const LOOPS = [
    'ext' => 'acquire(r, owner, ttl, wait: time left) polls with the library\'s backoff (5→250 ms, jitter); release at once; again',
    'pdo' => 'as (a), on a PDO',
    'floor' => 'the protocol\'s INSERT ... ON DUPLICATE KEY UPDATE in a tight loop, no backoff (lost: send again at once; won: DELETE at once)',
    'broken' => 'as (c), every INSERT taken for a win',
];

$mode = arg(1, 'drive|worker');
if ($mode === 'worker') {
    worker(arg(2, 'implementation'), arg(3, 'resource'), arg(4, 'log file'));
    exit(0);
}
if ($mode !== 'drive') {
    fail("unknown mode $mode (drive or worker)");
}
$impls = explode(',', arg(2, 'implementations'));
$procs = (int) arg(3, 'processes');
$seconds = (float) arg(4, 'seconds');
$dir = arg(5, 'work directory');
echo "| $procs processes, one resource, {$seconds} s each | loop | acquisitions/s | per-process shares | fewest / most | statements per acquisition (server-counted) | longest a process went without | overlaps |\n";
echo "|---|---|---|---|---|---|---|---|\n";
foreach ($impls as $impl) {
    drive($impl, $procs, $seconds, $dir);
}
exit(0);

function worker(string $impl, string $resource, string $logFile): void
{
    $owner = "w-$impl-" . getmypid();
    $l = lease($impl);
    // Warm up on a resource of our own: connection, prepared statements, table checks.
    for ($i = 0; $i < 20; $i++) {
        if (!$l->acquire("$resource-warm-" . getmypid(), $owner) || !$l->release("$resource-warm-" . getmypid(), $owner)) {
            fail("$impl worker: warm-up cycle failed");
        }
    }
    echo "ready\n";
    fflush(STDOUT);
    $line = fgets(STDIN);
    if ($line === false || !preg_match('/^(\d+) (\d+)$/', trim($line), $m)) {
        fail('expected "START END" on stdin');
    }
    [$start, $end] = [(int) $m[1], (int) $m[2]];
    while (($left = $start - hrtime(true)) > 0) {
        usleep(max(1, intdiv($left, 1000)));
    }
    $log = [];
    $tries = 0;
    while (($now = hrtime(true)) < $end) {
        $tries++;
        // The floor ignores $wait (one statement per call); the library waits at most
        // until the end of the run.
        if (!$l->acquire($resource, $owner, max(0.001, ($end - $now) / 1e9))) {
            continue;
        }
        $got = hrtime(true);
        $releaseCalled = hrtime(true);
        if (!$l->release($resource, $owner)) {
            fail("$impl worker: release of a lease it had just acquired returned false");
        }
        $log[] = "$got $releaseCalled";
    }
    file_put_contents($logFile, implode("\n", $log) . ($log === [] ? '' : "\n"));
    echo "done $tries\n";
    fflush(STDOUT);
}

/** SHOW GLOBAL STATUS counters of the statements the lease mode sends. */
function statements(\PDO $admin): int
{
    $n = 0;
    foreach ($admin->query("SHOW GLOBAL STATUS WHERE Variable_name IN ('Com_insert', 'Com_delete', 'Com_stmt_execute')", \PDO::FETCH_NUM) as $row) {
        // Prepared statements count in both Com_stmt_execute and their own Com_*: only
        // the kinds are wanted.
        if ($row[0] !== 'Com_stmt_execute') {
            $n += (int) $row[1];
        }
    }
    return $n;
}

function drive(string $impl, int $procs, float $seconds, string $dir): void
{
    $so = getenv('MYSQLLOCK_BENCH_SO');
    if (!is_string($so) || !is_file($so)) {
        fail('MYSQLLOCK_BENCH_SO does not name the extension');
    }
    $resource = "lease-contend-$impl";
    $workers = [];
    for ($w = 0; $w < $procs; $w++) {
        $log = "$dir/contend-$impl-$w.log";
        @unlink($log);
        $cmd = [PHP_BINARY, '-d', "extension=$so", '-d', 'mysqllock.dsn="' . ini_get('mysqllock.dsn') . '"', __FILE__, 'worker', $impl, $resource, $log];
        // No descriptor 2: the worker inherits ours. Handing over STDERR makes PHP give the
        // child a stream whose file position is its own, so with `> log 2>&1` its first
        // write lands at the start of the log, over what the driver printed.
        $p = proc_open($cmd, [0 => ['pipe', 'r'], 1 => ['pipe', 'w']], $pipes);
        if (!is_resource($p)) {
            fail("could not start a $impl worker");
        }
        $workers[] = ['proc' => $p, 'in' => $pipes[0], 'out' => $pipes[1], 'log' => $log];
    }
    foreach ($workers as $w) {
        if (trim((string) fgets($w['out'])) !== 'ready') {
            fail("a $impl worker did not get ready");
        }
    }
    $admin = pdo();
    // The snapshot's own statement is no INSERT/DELETE: no calibration needed.
    $s0 = statements($admin);
    $start = hrtime(true) + 200_000_000;
    $end = $start + (int) ($seconds * 1e9);
    foreach ($workers as $w) {
        fwrite($w['in'], "$start $end\n");
        fflush($w['in']);
    }
    foreach ($workers as $w) {
        if (!preg_match('/^done \d+$/', trim((string) fgets($w['out'])))) {
            fail("a $impl worker ended without its log");
        }
    }
    $s1 = statements($admin);
    foreach ($workers as $w) {
        fclose($w['in']);
        fclose($w['out']);
        if (proc_close($w['proc']) !== 0) {
            fail("a $impl worker failed");
        }
    }

    $counts = [];
    $intervals = [];
    $longestWait = 0;
    foreach ($workers as $i => $w) {
        $lines = file($w['log'], FILE_IGNORE_NEW_LINES | FILE_SKIP_EMPTY_LINES);
        if ($lines === false) {
            fail("no log from $impl worker $i");
        }
        $counts[$i] = count($lines);
        $free = $start;
        foreach ($lines as $line) {
            [$got, $rel] = array_map('intval', explode(' ', $line));
            $intervals[] = [$got, $rel];
            $longestWait = max($longestWait, $got - $free);
            $free = $rel;
        }
        $longestWait = max($longestWait, $end - $free);
    }
    $overlaps = overlaps($intervals);
    $total = array_sum($counts);
    if ($total === 0) {
        fail("no $impl worker acquired anything in {$seconds} s");
    }
    $shares = implode(' / ', array_map(static fn ($c) => sprintf('%.0f%%', 100 * $c / $total), $counts));
    printf(
        "| %s | %s | %s | %s | %.2f | %.1f | %.0f ms | %d |\n",
        LABELS[$impl],
        LOOPS[$impl],
        number_format($total / $seconds),
        $shares,
        min($counts) / max($counts),
        ($s1 - $s0) / $total,
        $longestWait / 1e6,
        $overlaps
    );
}
