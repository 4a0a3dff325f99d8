<?php
// Hand-off latency of Cache::lock()->block() (bench/laravel.sh, table 1): this process
// holds a lock, a waiter process blocks on it, this process releases it; the latency is
// from the release() call here to the waiter's block() returning, both on CLOCK_MONOTONIC
// (hrtime) on one machine.
//
//   drive IMPLS HANDOFFS ROUNDS   for each round, each implementation in turn (the order
//                                 rotates per round): HANDOFFS hand-offs with one waiter
//                                 process per implementation; prints one Markdown row each
//   waiter IMPL NAME              the waiter: on "go", says "blocking", calls block(30),
//                                 notes hrtime, releases, says "got NS"
//
// The waiter is inside block() when the lock is released: the release comes a random
// 20-320 ms after the waiter said "blocking" (the same pseudo-random delays for every
// implementation within a round), so the figure covers every phase of the waiter's polling.
declare(strict_types=1);

namespace MySqlLockBench\Laravel;

use function MySqlLockBench\arg;
use function MySqlLockBench\fail;

require __DIR__ . '/laravel_common.php';

$mode = arg(1, 'drive|waiter');
if ($mode === 'waiter') {
    waiter(arg(2, 'implementation'), arg(3, 'name'));
    exit(0);
}
if ($mode === 'setup') {
    setup(app());
    exit(0);
}
if ($mode !== 'drive') {
    fail("unknown mode $mode (setup, drive or waiter)");
}
$impls = explode(',', arg(2, 'implementations'));
$handoffs = (int) arg(3, 'hand-offs per round');
$rounds = (int) arg(4, 'rounds');
drive($impls, $handoffs, $rounds);
exit(0);

function waiter(string $impl, string $name): void
{
    $app = app();
    $owner = "waiter-" . getmypid();
    // Warm up: connection, table checks.
    for ($i = 0; $i < 5; $i++) {
        $l = lock($app, $impl, "$name-warm", $owner);
        if (!$l->get() || !$l->release()) {
            fail("$impl waiter: warm-up failed");
        }
    }
    echo "ready\n";
    while (($line = fgets(STDIN)) !== false && trim($line) === 'go') {
        $l = lock($app, $impl, $name, $owner);
        echo "blocking\n";
        $l->block(30);
        $got = hrtime(true);
        if (!$l->release()) {
            fail("$impl waiter: release of the lock it had just taken returned false");
        }
        echo "got $got\n";
    }
}

function drive(array $impls, int $handoffs, int $rounds): void
{
    $app = app();
    $so = getenv('MYSQLLOCK_BENCH_SO');
    $waiters = [];
    foreach ($impls as $impl) {
        if (!isset(IMPLS[$impl])) {
            fail("unknown implementation $impl");
        }
        $name = "handoff-$impl";
        $cmd = [PHP_BINARY, '-d', "extension=$so", '-d', 'mysqllock.dsn="' . ini_get('mysqllock.dsn') . '"', __FILE__, 'waiter', $impl, $name];
        $p = proc_open($cmd, [0 => ['pipe', 'r'], 1 => ['pipe', 'w']], $pipes);
        if (!is_resource($p)) {
            fail("could not start a $impl waiter");
        }
        $waiters[$impl] = ['proc' => $p, 'in' => $pipes[0], 'out' => $pipes[1], 'name' => $name];
        if (trim((string) fgets($pipes[1])) !== 'ready') {
            fail("the $impl waiter did not get ready");
        }
    }
    $latencies = array_fill_keys($impls, []);
    for ($round = 0; $round < $rounds; $round++) {
        $order = array_merge(array_slice($impls, $round % count($impls)), array_slice($impls, 0, $round % count($impls)));
        foreach ($order as $impl) {
            $w = $waiters[$impl];
            mt_srand(1000 + $round);
            for ($i = 0; $i < $handoffs; $i++) {
                $held = lock($app, $impl, $w['name'], 'holder');
                if (!$held->get()) {
                    fail("$impl: the holder could not take the free lock");
                }
                fwrite($w['in'], "go\n");
                fflush($w['in']);
                if (trim((string) fgets($w['out'])) !== 'blocking') {
                    fail("the $impl waiter did not block");
                }
                usleep(mt_rand(20_000, 320_000));
                $released = hrtime(true);
                if (!$held->release()) {
                    fail("$impl: the holder's release returned false");
                }
                if (!preg_match('/^got (\d+)$/', trim((string) fgets($w['out'])), $m)) {
                    fail("the $impl waiter did not take the lock");
                }
                $latencies[$impl][] = (int) $m[1] - $released;
            }
        }
    }
    foreach ($waiters as $w) {
        fclose($w['in']);
        fclose($w['out']);
        proc_close($w['proc']);
    }
    echo "| $rounds rounds x $handoffs hand-offs, waiter blocked 20-320 ms before the release | median | p90 | mean | max |\n";
    echo "|---|---|---|---|---|\n";
    foreach ($impls as $impl) {
        $l = $latencies[$impl];
        printf(
            "| %s | %s | %s | %s | %s |\n",
            IMPLS[$impl]['label'],
            ms(percentile($l, 50)),
            ms(percentile($l, 90)),
            ms(array_sum($l) / count($l)),
            ms(max($l))
        );
    }
}
