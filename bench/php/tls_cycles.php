<?php
// The warm half of bench/tls.sh: the uncontended cycle (take a free name with one try,
// release it) on one open TLS connection, one implementation after the other (each in
// rounds of BLOCK cycles, medians over the rounds; the server refuses clear connections):
//   pdo       raw GET_LOCK / RELEASE_LOCK through PDO (prepared once): the floor
//   session   \MySqlLock\SessionLock on the extension's own connection (mysqllock.dsn)
//
//   tls_cycles.php ROUNDS BLOCK
//
// Environment: MYSQLLOCK_BENCH_DSN (the server), MYSQLLOCK_BENCH_PDO_SSL_CA (the CA for
// PDO's TLS), MYSQLLOCK_BENCH_TLS_URL (the extension's URL, ssl-mode=REQUIRED; the
// extension's SessionLock takes it through `mysqllock.dsn`, so it runs in a child).
// Prints the table rows.
declare(strict_types=1);

namespace MySqlLockBench;

require __DIR__ . '/session_common.php';

$rounds = (int) arg(1, 'rounds');
$block = (int) arg(2, 'cycles per block');

/** 200 untimed cycles, then ROUNDS blocks of BLOCK: nanoseconds per cycle of each block. */
function timeBlocks(\Closure $cycle, int $rounds, int $block): array
{
    for ($i = 0; $i < 200; $i++) {
        $cycle();
    }
    $out = [];
    for ($r = 0; $r < $rounds; $r++) {
        $t = hrtime(true);
        for ($i = 0; $i < $block; $i++) {
            $cycle();
        }
        $out[] = (hrtime(true) - $t) / $block;
    }
    return $out;
}

if (($argv[3] ?? '') === 'child') {
    // One SessionLock implementation: ROUNDS x BLOCK cycles timed per block, as
    // nanoseconds per cycle on stdout (one line per round), after a warm-up.
    $cycle = static function (): void {
        $lock = new \MySqlLock\SessionLock('tls-cycle-' . getmypid());
        if ($lock->acquire(0.0) !== true) {
            fail('SessionLock acquire(0.0) did not return true');
        }
        $lock->release();
    };
    echo implode("\n", timeBlocks($cycle, $rounds, $block)), "\n";
    exit(0);
}

/** Raw cycles through a PDO: per-cycle nanoseconds of each round. */
function pdoCycles(\PDO $pdo, int $rounds, int $block): array
{
    $get = $pdo->prepare('SELECT GET_LOCK(?, 0)');
    $rel = $pdo->prepare('SELECT RELEASE_LOCK(?)');
    $name = 'tls-pdo-' . getmypid() . '-' . spl_object_id($pdo);
    $cycle = static function () use ($get, $rel, $name): void {
        $get->execute([$name]);
        $got = (int) $get->fetchColumn();
        $rel->execute([$name]);
        if ($got !== 1 || (int) $rel->fetchColumn() !== 1) {
            fail('GET_LOCK/RELEASE_LOCK through PDO did not return 1');
        }
    };
    return timeBlocks($cycle, $rounds, $block);
}

/** The SessionLock child for one URL: its per-cycle nanoseconds. */
function sessionCycles(string $url, int $rounds, int $block): array
{
    $cmd = [PHP_BINARY, '-n', '-d', 'extension=mysqlnd.so', '-d', 'extension=pdo.so', '-d', 'extension=pdo_mysql.so',
        '-d', 'extension=' . getenv('MYSQLLOCK_BENCH_EXT'), '-d', "mysqllock.dsn=\"$url\"",
        __FILE__, (string) $rounds, (string) $block, 'child'];
    $proc = proc_open($cmd, [1 => ['pipe', 'w'], 2 => ['pipe', 'w']], $pipes);
    $out = stream_get_contents($pipes[1]);
    $err = stream_get_contents($pipes[2]);
    if (proc_close($proc) !== 0) {
        fail("SessionLock child failed: $err");
    }
    return array_map('floatval', array_filter(explode("\n", (string) $out)));
}

$tlsPdo = pdo();
$cipher = $tlsPdo->query("SHOW SESSION STATUS LIKE 'Ssl_cipher'")->fetch(\PDO::FETCH_NUM)[1] ?? '';
if ($cipher === '') {
    fail('the PDO is not encrypted: set MYSQLLOCK_BENCH_PDO_SSL_CA');
}
$times = [
    'PDO raw, TLS' => pdoCycles($tlsPdo, $rounds, $block),
    'SessionLock, TLS' => sessionCycles((string) getenv('MYSQLLOCK_BENCH_TLS_URL'), $rounds, $block),
];
$med = static function (array $xs): float {
    sort($xs);
    return $xs[intdiv(count($xs), 2)];
};
$p90 = static function (array $xs): float {
    sort($xs);
    return $xs[(int) floor(0.9 * (count($xs) - 1))];
};
$floor = ['PDO raw, TLS' => null, 'SessionLock, TLS' => 'PDO raw, TLS'];
foreach ($times as $label => $xs) {
    $vs = $floor[$label] === null ? 'floor' : sprintf('%.2f×', $med($xs) / $med($times[$floor[$label]]));
    printf("| %s | %.1f µs | %.1f µs | %s |\n", $label, $med($xs) / 1e3, $p90($xs) / 1e3, $vs);
}
echo "\nTLS cipher (PDO's session): $cipher\n";
