<?php
// The client's side of a lock + release cycle, for bench/client_cost.sh to count under
// callgrind: CYCLES cycles of one implementation on one name, after one warm-up cycle
// (which `locks()` runs) that connects, prepares nothing yet and fills every cache.
//
//   client_cost.php ext|pdo CYCLES NAME
declare(strict_types=1);

namespace MySqlLockBench;

require __DIR__ . '/common.php';

$impl = arg(1, 'ext|pdo');
$n = (int) arg(2, 'cycles');
$name = arg(3, 'lock name');
$l = locks($impl, $name);
for ($i = 0; $i < $n; $i++) {
    $l->lock($name, 5);
    $l->release($name);
}
