<?php
// Figure 1: uncontended lock + release on one connection.
//
//   count ext|pdo CYCLES WARMUP NAME   server status snapshots around CYCLES cycles of one
//                                      kind (snap0 and snap1 back to back, to take the
//                                      snapshot's own cost out)
//   time CYCLES WARMUP BASE            latency of each cycle, ext and raw PDO alternating
//                                      cycle by cycle (names BASE-ext, BASE-pdo), so both
//                                      see the same machine
declare(strict_types=1);

namespace MySqlLockBench;

require __DIR__ . '/common.php';

$mode = arg(1, 'count|time');
if ($mode === 'count') {
    $impl = arg(2, 'ext|pdo');
    $n = (int) arg(3, 'cycles');
    $warm = (int) arg(4, 'warm-up cycles');
    $name = arg(5, 'lock name');
    $l = locks($impl, $name);
    $admin = new Admin();
    for ($i = 0; $i < $warm; $i++) {
        $l->lock($name, 5);
        $l->release($name);
    }
    $s0 = $admin->snapshot();
    $s1 = $admin->snapshot();
    for ($i = 0; $i < $n; $i++) {
        $l->lock($name, 5);
        $l->release($name);
    }
    $s2 = $admin->snapshot();
    echo "snap0 $s0\nsnap1 $s1\nsnap2 $s2\n";
    exit(0);
}
if ($mode !== 'time') {
    fail("unknown mode $mode (count or time)");
}
$n = (int) arg(2, 'cycles');
$warm = (int) arg(3, 'warm-up cycles');
$base = arg(4, 'lock name prefix');
$impls = ['ext' => locks('ext', "$base-ext"), 'pdo' => locks('pdo', "$base-pdo")];
for ($i = 0; $i < $warm; $i++) {
    foreach ($impls as $tag => $l) {
        $l->lock("$base-$tag", 5);
        $l->release("$base-$tag");
    }
}
$lat = ['ext' => [], 'pdo' => []];
for ($i = 0; $i < $n; $i++) {
    // Which goes first alternates, so neither always follows the other.
    foreach ($i % 2 === 0 ? ['ext', 'pdo'] : ['pdo', 'ext'] as $tag) {
        $l = $impls[$tag];
        $name = "$base-$tag";
        $t = hrtime(true);
        $l->lock($name, 5);
        $l->release($name);
        $lat[$tag][] = hrtime(true) - $t;
    }
}
foreach ($lat as $tag => $samples) {
    echo "lat_$tag ", implode(' ', $samples), "\n";
}
