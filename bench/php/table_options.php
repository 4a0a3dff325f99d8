<?php
// Appendix A2: what one lock + release costs the server per kind of table. Copies of the
// lock table with other table options (created here, dropped at the end; run only
// against a throwaway server) get today's claim (INSERT with GET_LOCK) and release
// (DELETE with RELEASE_LOCK), alternating cycle by cycle with raw GET_LOCK/RELEASE_LOCK,
// each kind on its own PDO connection (real prepares), in a random order every cycle.
// Args: CYCLES. Prints "opt_KIND median=NS p99=NS" per kind (raw first).
declare(strict_types=1);

namespace MySqlLockBench;

require __DIR__ . '/common.php';

$n = (int) arg(1, 'cycles');
$variants = [
    'myisam' => null,                                   // the original table as created by init
    'myisam_delay_key_write' => 'DELAY_KEY_WRITE = 1',
    'myisam_fixed_rows' => 'ROW_FORMAT = FIXED',
    'memory' => 'ENGINE = MEMORY',
];
$admin = pdo();
$kinds = [];
$raw = new Raw();
$kinds['raw'] = [fn () => $raw->lock('bench-opt-raw', 5), fn () => $raw->release('bench-opt-raw')];
$created = [];
foreach ($variants as $tag => $options) {
    $table = 'shared_locks';
    if ($options !== null) {
        $table = "bench_opt_$tag";
        $admin->exec("DROP TABLE IF EXISTS `$table`");
        $admin->exec("CREATE TABLE `$table` LIKE `shared_locks`");
        $admin->exec("ALTER TABLE `$table` $options");
        $created[] = $table;
    }
    $c = pdo();
    $ins = $c->prepare("INSERT INTO `$table` (name, connection_id, created, ttl, lock_acquired) VALUES (?, CONNECTION_ID(), UNIX_TIMESTAMP(), ?, IF(GET_LOCK(?, 0) = 1, 1, NULL))");
    $del = $c->prepare("DELETE FROM `$table` WHERE name = ? AND connection_id = CONNECTION_ID() AND RELEASE_LOCK(name) = 1");
    $name = "bench-opt-$tag";
    $kinds[$tag] = [
        function () use ($ins, $name) {
            $ins->execute([$name, TTL, $name]);
        },
        function () use ($del, $name) {
            $del->execute([$name]);
            if ($del->rowCount() !== 1) {
                throw new \RuntimeException("release of $name matched nothing");
            }
        },
    ];
}
$lat = array_fill_keys(array_keys($kinds), []);
$order = array_keys($kinds);
for ($i = 0; $i < $n + 100; $i++) {
    shuffle($order); // no kind always runs first (or right after the same other kind)
    foreach ($order as $tag) {
        [$lock, $release] = $kinds[$tag];
        $t = hrtime(true);
        $lock();
        $release();
        if ($i >= 100) {
            $lat[$tag][] = hrtime(true) - $t;
        }
    }
}
foreach ($created as $table) {
    $admin->exec("DROP TABLE `$table`");
}
foreach ($lat as $tag => $samples) {
    sort($samples);
    $median = $samples[intdiv(count($samples) - 1, 2)];
    $p99 = $samples[(int) ceil(0.99 * count($samples)) - 1];
    echo "opt_$tag median=$median p99=$p99\n";
}
