<?php
// Figure 2: hand-off between two processes. This process holds; it starts a waiter
// process (this script with "waiter") that blocks in lock() with a long timeout. Each
// round: lock, tell the waiter to go, hold for HOLD_US, release; the waiter reports
// hrtime(true) when its lock() returned. hrtime is CLOCK_MONOTONIC, the same clock in
// both processes. The implementations take turns round by round (each on its own
// connection and name NAME-IMPL), so both see the same machine.
//
// Args: IMPLS (ext,pdo) ROUNDS HOLD_US NAME [waiter]
// Prints per implementation "delta_IMPL ..." (waiter's lock() returned minus holder's
// release() returned, ns) and "waited_IMPL ..." (how long each waiter lock() took).
declare(strict_types=1);

namespace MySqlLockBench;

require __DIR__ . '/common.php';

$tags = explode(',', arg(1, 'implementations, e.g. ext,pdo'));
$rounds = (int) arg(2, 'rounds per implementation');
$holdUs = (int) arg(3, 'hold in microseconds');
$name = arg(4, 'lock name');

if (($argv[5] ?? '') === 'waiter') {
    $locks = [];
    foreach ($tags as $tag) {
        $locks[$tag] = locks($tag, "$name-$tag-warm-w");
    }
    echo "ready\n";
    while (($line = fgets(STDIN)) !== false) {
        $tag = trim($line);
        if (!isset($locks[$tag])) {
            fail("waiter: unknown implementation $tag");
        }
        $t0 = hrtime(true);
        $locks[$tag]->lock("$name-$tag", 30);
        $got = hrtime(true);
        $locks[$tag]->release("$name-$tag");
        echo $got, ' ', $got - $t0, "\n";
    }
    exit(0);
}

$ext = (string) getenv('MYSQLLOCK_BENCH_EXT');
$cmd = [PHP_BINARY, '-d', "extension=$ext", '-d', 'display_errors=stderr', __FILE__, implode(',', $tags), (string) $rounds, (string) $holdUs, $name, 'waiter'];
// No descriptor 2: the child inherits ours (handing over STDERR gives it a file position
// of its own, so under `> log 2>&1` it would overwrite the start of the log).
$proc = proc_open($cmd, [0 => ['pipe', 'r'], 1 => ['pipe', 'w']], $pipes);
if (!is_resource($proc)) {
    fail('cannot start the waiter process');
}
[$toWaiter, $fromWaiter] = $pipes;
if (trim((string) fgets($fromWaiter)) !== 'ready') {
    fail('the waiter process did not start');
}
$locks = [];
$deltas = [];
$waits = [];
foreach ($tags as $tag) {
    $locks[$tag] = locks($tag, "$name-$tag-warm-h");
    $deltas[$tag] = [];
    $waits[$tag] = [];
}
for ($i = 0; $i < $rounds; $i++) {
    foreach ($locks as $tag => $l) {
        $l->lock("$name-$tag", 5);
        fwrite($toWaiter, "$tag\n");
        fflush($toWaiter);
        usleep($holdUs);
        $l->release("$name-$tag");
        $released = hrtime(true);
        $line = fgets($fromWaiter);
        if ($line === false) {
            fail('the waiter process ended');
        }
        [$got, $waited] = array_map('intval', explode(' ', trim($line)));
        $deltas[$tag][] = $got - $released;
        $waits[$tag][] = $waited;
    }
}
fclose($toWaiter);
fclose($fromWaiter);
if (proc_close($proc) !== 0) {
    fail('the waiter process failed');
}
foreach ($tags as $tag) {
    echo "delta_$tag ", implode(' ', $deltas[$tag]), "\n";
    echo "waited_$tag ", implode(' ', $waits[$tag]), "\n";
}
