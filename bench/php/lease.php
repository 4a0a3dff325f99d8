<?php
// Lease acquire + release latency (bench/lease.sh, tables 1 and 2).
//
//   setup                          creates `distributed_locks` (DistributedLock::createTable
//                                  on a PDO) and checks that it is empty
//   time CYCLES WARMUP IMPLS       one cycle = acquire + release of a lease nobody else
//                                  holds, per implementation (IMPLS: comma-separated of
//                                  ext, pdo, floor, raw; each on its own connection and its
//                                  own resource). Cycles run in rounds: every round times
//                                  one cycle of each implementation, the order rotating
//                                  from round to round, so all see the same machine.
//                                  Prints a Markdown table: median and p90 per
//                                  implementation, and the ratios to the floor and to raw
//                                  GET_LOCK (of the medians, and the median of the ratios
//                                  within each round).
// Every acquire and release must return true; anything else is a failure (exit 1).
declare(strict_types=1);

namespace MySqlLockBench;

require __DIR__ . '/lease_common.php';

use Nene\Kit\DistributedLock;

$mode = arg(1, 'setup|time');
if ($mode === 'setup') {
    $pdo = pdo();
    $created = (new DistributedLock($pdo))->createTable();
    $rows = (int) $pdo->query('SELECT COUNT(*) FROM distributed_locks')->fetchColumn();
    if ($rows !== 0) {
        fail("distributed_locks holds $rows rows before the run");
    }
    echo $created ? "created distributed_locks\n" : "distributed_locks exists\n";
    exit(0);
}
if ($mode !== 'time') {
    fail("unknown mode $mode (setup or time)");
}
$n = (int) arg(2, 'cycles');
$warm = (int) arg(3, 'warm-up cycles');
$impls = explode(',', arg(4, 'implementations'));

$owner = 'bench-' . getmypid();
$leases = [];
foreach ($impls as $impl) {
    $leases[$impl] = lease($impl);
}
$cycle = static function (string $impl) use ($leases, $owner): void {
    $resource = "lease-bench-$impl";
    if (!$leases[$impl]->acquire($resource, $owner)) {
        fail("$impl: acquire($resource) returned false on a free resource");
    }
    if (!$leases[$impl]->release($resource, $owner)) {
        fail("$impl: release($resource) returned false right after acquire");
    }
};
for ($i = 0; $i < $warm; $i++) {
    foreach ($impls as $impl) {
        $cycle($impl);
    }
}
$lat = array_fill_keys($impls, []);
$k = count($impls);
for ($i = 0; $i < $n; $i++) {
    for ($j = 0; $j < $k; $j++) {
        $impl = $impls[($i + $j) % $k];
        $t = hrtime(true);
        $cycle($impl);
        $lat[$impl][] = hrtime(true) - $t;
    }
}

$us = static fn (float $ns): string => number_format($ns / 1000) . ' µs';
$ratio = static fn (float $x): string => is_nan($x) ? '' : sprintf('%.2fx', $x);
$med = [];
foreach ($impls as $impl) {
    $med[$impl] = median($lat[$impl]);
}
/** Median over the rounds of $impl's cycle time divided by $base's in the same round. */
$paired = static function (string $impl, string $base) use ($lat, $n): float {
    $r = [];
    for ($i = 0; $i < $n; $i++) {
        $r[] = $lat[$impl][$i] / $lat[$base][$i];
    }
    return median($r);
};
echo "| $n cycles of acquire + release (after $warm warm-up) | median | p90 | / floor (medians; paired) | / raw GET_LOCK (medians; paired) |\n";
echo "|---|---|---|---|---|\n";
foreach ($impls as $impl) {
    $sorted = $lat[$impl];
    sort($sorted);
    $toFloor = isset($med['floor']) ? $ratio($med[$impl] / $med['floor']) . '; ' . $ratio($paired($impl, 'floor')) : 'n/a';
    $toRaw = isset($med['raw']) ? $ratio($med[$impl] / $med['raw']) . '; ' . $ratio($paired($impl, 'raw')) : 'n/a (GET_LOCK is per node)';
    printf("| %s | %s | %s | %s | %s |\n", LABELS[$impl], $us(quantile($sorted, 0.5)), $us(quantile($sorted, 0.9)), $toFloor, $toRaw);
}
if (isset($med['floor'])) {
    echo "\n";
    foreach (['ext', 'pdo'] as $impl) {
        if (!isset($med[$impl])) {
            continue;
        }
        $r = $med[$impl] / $med['floor'];
        printf(
            "target %s ≤ 1.2x floor: %s (%.2fx, %+d µs per cycle)\n",
            substr(LABELS[$impl], 0, 3),
            $r <= 1.2 ? 'met' : 'not met',
            $r,
            (int) round(($med[$impl] - $med['floor']) / 1000)
        );
    }
}
