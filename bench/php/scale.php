<?php
// Figure 4: one process acquires and holds N distinct names (keeping what lock()
// returns, as an application would), then releases them all.
// Args: ext|pdo N. Prints "scale first_ns= last_ns= release_ns= rss_delta_kb= mem_delta=":
// the median acquisition time among the first and among the last 1,000, the time to
// release all, and the memory deltas while all are held.
declare(strict_types=1);

namespace MySqlLockBench;

require __DIR__ . '/common.php';

const WINDOW = 1000;

$impl = arg(1, 'ext|pdo');
$n = (int) arg(2, 'names');
if ($n < 2 * WINDOW) {
    fail('N must be at least ' . (2 * WINDOW));
}
$names = [];
for ($i = 0; $i < $n; $i++) {
    $names[] = sprintf('bench-scale-php%s-%05d', $impl, $i);
}
$l = locks($impl, "bench-scale-php$impl-warm");
$took = array_fill(0, $n, 0);
gc_collect_cycles();
$mem = memory_get_usage();
$rss = rssKb();
foreach ($names as $i => $name) {
    $t = hrtime(true);
    $l->lock($name, 5);
    $took[$i] = hrtime(true) - $t;
}
$memDelta = memory_get_usage() - $mem;
$rssDelta = rssKb() - $rss;
$t = hrtime(true);
foreach ($names as $name) {
    $l->release($name);
}
$release = hrtime(true) - $t;
/** The median of a window of acquisition times (robust to the odd stall). */
function median(array $a): int
{
    sort($a);
    return $a[intdiv(count($a) - 1, 2)];
}
$first = median(array_slice($took, 0, WINDOW));
$last = median(array_slice($took, $n - WINDOW));
echo "scale first_ns=$first last_ns=$last release_ns=$release rss_delta_kb=$rssDelta mem_delta=$memDelta\n";
