<?php
// Contention on Cache::lock() (bench/laravel.sh, table 2): PROCS processes, each with its
// own Laravel app, take one lock name again and again for SECONDS.
//
//   drive IMPLS PROCS SECONDS DIR  for each implementation in IMPLS, one after the other:
//                                  starts PROCS workers, waits until all are ready, gives
//                                  them one common start and end on the monotonic clock,
//                                  prints one Markdown row per implementation
//   worker IMPL NAME LOG           one worker: "ready", reads "START END" (hrtime ns), loops
//                                  until END: lock(NAME)->block(time left), note hrtime,
//                                  note hrtime, release(); writes "GOT RELEASE_CALLED" per
//                                  acquisition to LOG, says "done"
//
// The overlap check does not use the lock: every acquisition is logged as the interval
// [block() returned, release() called] on CLOCK_MONOTONIC (the same clock in every
// process), which lies inside the hold, so two logged intervals that overlap mean two
// holders at once. The implementation "broken" (block() skipped: no lock at all) must show
// overlaps, or the check proves nothing: bench/laravel.sh fails then.
declare(strict_types=1);

namespace MySqlLockBench\Laravel;

use Illuminate\Contracts\Cache\LockTimeoutException;

use function MySqlLockBench\arg;
use function MySqlLockBench\fail;
use function MySqlLockBench\pdo;

require __DIR__ . '/laravel_common.php';

const BROKEN = ['label' => 'overlap check self-test: no lock (`block()` skipped)'];

$mode = arg(1, 'drive|worker');
if ($mode === 'worker') {
    worker(arg(2, 'implementation'), arg(3, 'name'), arg(4, 'log file'));
    exit(0);
}
if ($mode !== 'drive') {
    fail("unknown mode $mode (drive or worker)");
}
$impls = explode(',', arg(2, 'implementations'));
$procs = (int) arg(3, 'processes');
$seconds = (float) arg(4, 'seconds');
$dir = arg(5, 'work directory');
echo "| $procs processes, one name, {$seconds} s each: block(time left), release at once, again | acquisitions/s | per-process shares | fewest / most | statements per acquisition (server-counted) | longest a process went without | overlaps |\n";
echo "|---|---|---|---|---|---|---|\n";
foreach ($impls as $impl) {
    drive($impl, $procs, $seconds, $dir);
}
exit(0);

function worker(string $impl, string $name, string $logFile): void
{
    $app = app();
    $owner = "w-$impl-" . getmypid();
    $real = $impl === 'broken' ? 'ours' : $impl;
    for ($i = 0; $i < 5; $i++) {
        $l = lock($app, $real, "$name-warm-" . getmypid(), $owner);
        if (!$l->get() || !$l->release()) {
            fail("$impl worker: warm-up failed");
        }
    }
    echo "ready\n";
    $line = fgets(STDIN);
    if ($line === false || !preg_match('/^(\d+) (\d+)$/', trim($line), $m)) {
        fail('expected "START END" on stdin');
    }
    [$start, $end] = [(int) $m[1], (int) $m[2]];
    while (($left = $start - hrtime(true)) > 0) {
        usleep(max(1, intdiv($left, 1000)));
    }
    $log = [];
    while (($now = hrtime(true)) < $end) {
        $l = lock($app, $real, $name, $owner);
        if ($impl !== 'broken') {
            try {
                $l->block(($end - $now) / 1e9);
            } catch (LockTimeoutException $e) {
                break;
            }
        }
        $got = hrtime(true);
        $releaseCalled = hrtime(true);
        if (!$l->release() && $impl !== 'broken') {
            fail("$impl worker: release of the lock it had just taken returned false");
        }
        $log[] = "$got $releaseCalled";
    }
    file_put_contents($logFile, implode("\n", $log) . ($log === [] ? '' : "\n"));
    echo "done\n";
}

function drive(string $impl, int $procs, float $seconds, string $dir): void
{
    $label = $impl === 'broken' ? BROKEN['label'] : (IMPLS[$impl]['label'] ?? fail("unknown implementation $impl"));
    $so = getenv('MYSQLLOCK_BENCH_SO');
    $name = "contend-$impl";
    $workers = [];
    for ($w = 0; $w < $procs; $w++) {
        $log = "$dir/laravel-contend-$impl-$w.log";
        @unlink($log);
        $cmd = [PHP_BINARY, '-d', "extension=$so", '-d', 'mysqllock.dsn=' . ini_get('mysqllock.dsn'), __FILE__, 'worker', $impl, $name, $log];
        // No descriptor 2: the worker inherits ours (see bench/php/lease_contend.php).
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
    $s0 = statements($admin);
    $start = hrtime(true) + 200_000_000;
    $end = $start + (int) ($seconds * 1e9);
    foreach ($workers as $w) {
        fwrite($w['in'], "$start $end\n");
        fflush($w['in']);
    }
    foreach ($workers as $w) {
        if (trim((string) fgets($w['out'])) !== 'done') {
            fail("a $impl worker ended without its log");
        }
    }
    // SHOW STATUS is no Com_select: the snapshots count nothing of their own.
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
    usort($intervals, static fn ($a, $b) => $a[0] <=> $b[0]);
    $overlaps = 0;
    $busyUntil = PHP_INT_MIN;
    foreach ($intervals as [$got, $rel]) {
        if ($got < $busyUntil) {
            $overlaps++;
        }
        $busyUntil = max($busyUntil, $rel);
    }
    $total = array_sum($counts);
    if ($total === 0) {
        fail("no $impl worker acquired anything in {$seconds} s");
    }
    printf(
        "| %s | %s | %s | %.2f | %.1f | %s | %d |\n",
        $label,
        number_format($total / $seconds),
        implode(' / ', array_map(static fn ($c) => sprintf('%.0f%%', 100 * $c / $total), $counts)),
        min($counts) / max($counts),
        ($s1 - $s0) / $total,
        ms($longestWait),
        $overlaps
    );
}
