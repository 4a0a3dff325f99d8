<?php
// Contention on Cache::lock() (bench/laravel.sh, table 2): PROCS processes, each with its
// own Laravel app, take one lock name again and again, SECONDS per implementation.
//
//   drive IMPLS PROCS SECONDS SLICES DIR
//                                  starts PROCS workers per implementation, waits until all
//                                  are ready, then runs SLICES rounds in which each
//                                  implementation in turn (the order rotates per round) gets
//                                  SECONDS / SLICES: its workers get one common start and end
//                                  on the monotonic clock, the others idle. So every
//                                  implementation sees the same spells of load from other
//                                  work on the machine. Prints one Markdown row per
//                                  implementation over all its slices
//   worker IMPL NAME LOG           one worker: "ready"; per line "START END" (hrtime ns) loops
//                                  until END: lock(NAME)->block(time left), note hrtime,
//                                  note hrtime, release(); appends "GOT RELEASE_CALLED" per
//                                  acquisition to LOG, says "done"; exits at end of input
//
// The overlap check does not use the lock: every acquisition is logged as the interval
// [block() returned, release() called] on CLOCK_MONOTONIC (the same clock in every
// process), which lies inside the hold, so two logged intervals that overlap mean two
// holders at once. The implementation "broken" (block() skipped: no lock at all) must show
// overlaps, or the check proves nothing: bench/laravel.sh fails then.
declare(strict_types=1);

namespace MySqlLockBench\Laravel;

use Illuminate\Container\Container;
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
$slices = (int) arg(5, 'slices');
$dir = arg(6, 'work directory');
drive($impls, $procs, $seconds, $slices, $dir);
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
    while (($line = fgets(STDIN)) !== false) {
        if (!preg_match('/^(\d+) (\d+)$/', trim($line), $m)) {
            fail('expected "START END" on stdin');
        }
        file_put_contents($logFile, slice($app, $impl, $real, $name, $owner, (int) $m[1], (int) $m[2]), FILE_APPEND);
        echo "done\n";
    }
}

/** One slice of a worker: from $start to $end; its log lines. */
function slice(Container $app, string $impl, string $real, string $name, string $owner, int $start, int $end): string
{
    while (($left = $start - hrtime(true)) > 0) {
        usleep(max(1, intdiv($left, 1000)));
    }
    $log = '';
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
        $log .= "$got $releaseCalled\n";
    }
    return $log;
}

function drive(array $impls, int $procs, float $seconds, int $slices, string $dir): void
{
    $so = getenv('MYSQLLOCK_BENCH_SO');
    $workers = [];
    foreach ($impls as $impl) {
        if ($impl !== 'broken' && !isset(IMPLS[$impl])) {
            fail("unknown implementation $impl");
        }
        for ($w = 0; $w < $procs; $w++) {
            $log = "$dir/laravel-contend-$impl-$w.log";
            file_put_contents($log, '');
            $cmd = [PHP_BINARY, '-d', "extension=$so", '-d', 'mysqllock.dsn="' . ini_get('mysqllock.dsn') . '"', __FILE__, 'worker', $impl, "contend-$impl", $log];
            // No descriptor 2: the worker inherits ours (see bench/php/lease_contend.php).
            $p = proc_open($cmd, [0 => ['pipe', 'r'], 1 => ['pipe', 'w']], $pipes);
            if (!is_resource($p)) {
                fail("could not start a $impl worker");
            }
            $workers[$impl][] = ['proc' => $p, 'in' => $pipes[0], 'out' => $pipes[1], 'log' => $log];
        }
    }
    foreach ($workers as $impl => $ws) {
        foreach ($ws as $w) {
            if (trim((string) fgets($w['out'])) !== 'ready') {
                fail("a $impl worker did not get ready");
            }
        }
    }
    $admin = pdo();
    $statements = array_fill_keys($impls, 0);
    $windows = array_fill_keys($impls, []);
    $sliceNs = (int) ($seconds / $slices * 1e9);
    for ($slice = 0; $slice < $slices; $slice++) {
        $k = $slice % count($impls);
        foreach (array_merge(array_slice($impls, $k), array_slice($impls, 0, $k)) as $impl) {
            // SHOW STATUS is no Com_select: the snapshots count nothing of their own.
            $s0 = statements($admin);
            $start = hrtime(true) + 100_000_000;
            $end = $start + $sliceNs;
            foreach ($workers[$impl] as $w) {
                fwrite($w['in'], "$start $end\n");
                fflush($w['in']);
            }
            foreach ($workers[$impl] as $w) {
                if (trim((string) fgets($w['out'])) !== 'done') {
                    fail("a $impl worker ended without its log");
                }
            }
            $statements[$impl] += statements($admin) - $s0;
            $windows[$impl][] = [$start, $end];
        }
    }
    foreach ($workers as $impl => $ws) {
        foreach ($ws as $w) {
            fclose($w['in']);
            fclose($w['out']);
            if (proc_close($w['proc']) !== 0) {
                fail("a $impl worker failed");
            }
        }
    }

    echo "| $procs processes, one name, {$seconds} s each in $slices turns: block(time left), release at once, again | acquisitions/s | per-process shares | fewest / most | statements per acquisition (server-counted) | longest a process went without | overlaps |\n";
    echo "|---|---|---|---|---|---|---|\n";
    foreach ($impls as $impl) {
        report($impl, $workers[$impl], $windows[$impl], $statements[$impl], $seconds);
    }
}

/** One row: an implementation's workers' logs over its time windows. */
function report(string $impl, array $workers, array $windows, int $statements, float $seconds): void
{
    $counts = [];
    $intervals = [];
    $longestWait = 0;
    foreach ($workers as $i => $w) {
        $lines = file($w['log'], FILE_IGNORE_NEW_LINES | FILE_SKIP_EMPTY_LINES);
        if ($lines === false) {
            fail("no log from $impl worker $i");
        }
        $counts[$i] = count($lines);
        $mine = array_map(static fn ($line) => array_map('intval', explode(' ', $line)), $lines);
        array_push($intervals, ...$mine);
        // The longest stretch without the lock, within each window (the idle time between
        // an implementation's windows is no waiting).
        foreach ($windows as [$start, $end]) {
            $free = $start;
            foreach ($mine as [$got, $rel]) {
                if ($got >= $start && $got < $end) {
                    $longestWait = max($longestWait, $got - $free);
                    $free = $rel;
                }
            }
            $longestWait = max($longestWait, $end - $free);
        }
    }
    $overlaps = \MySqlLockBench\overlaps($intervals);
    $total = array_sum($counts);
    if ($total === 0) {
        fail("no $impl worker acquired anything in {$seconds} s");
    }
    printf(
        "| %s | %s | %s | %.2f | %.1f | %s | %d |\n",
        $impl === 'broken' ? BROKEN['label'] : IMPLS[$impl]['label'],
        number_format($total / $seconds),
        implode(' / ', array_map(static fn ($c) => sprintf('%.0f%%', 100 * $c / $total), $counts)),
        min($counts) / max($counts),
        $statements / $total,
        ms($longestWait),
        $overlaps
    );
}
