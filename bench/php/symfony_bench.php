<?php
// bench/symfony.sh's measurements: Symfony's LockFactory::createLock()->acquire(true) on
// MySqlLockStore (SharedLock mode, lease mode) and on Symfony's own PdoStore, all on the
// same MariaDB (MYSQLLOCK_BENCH_DSN; mysqllock.dsn is the same server, with the ssl-mode
// of bench/lib.sh's MYSQLLOCK_BENCH_SSL_MODE, and children get it as it is, quoted).
//
//   setup                                   creates the three stores' tables
//   handoff STORES ROUNDS PER_ROUND HOLD_US  hand-off latency (holds HOLD_US + 0-100 ms): this process holds, a waiter
//                                           process blocks in acquire(true); per store:
//                                           "handoff_STORE ns ns ..." (waiter's acquire()
//                                           returned minus holder's release() returned)
//   contend STORE PROCS SECONDS DIR         PROCS processes take one lock in a loop for
//                                           SECONDS; one Markdown table row
//
// STORE: shared | lease | pdo | none (InMemoryStore: one per process, so it excludes
// nothing: the overlap checker's self-test).
declare(strict_types=1);

namespace MySqlLockBench;

use MySqlLock\Symfony\MySqlLockStore;
use Symfony\Component\Lock\LockFactory;
use Symfony\Component\Lock\PersistingStoreInterface;
use Symfony\Component\Lock\Store\InMemoryStore;
use Symfony\Component\Lock\Store\PdoStore;

require __DIR__ . '/common.php';
require '/usr/share/php/Symfony/Component/Lock/autoload.php';
spl_autoload_register(function (string $class): void {
    if (str_starts_with($class, 'MySqlLock\\Symfony\\')) {
        require dirname(__DIR__, 2) . '/bridges/symfony/src/' . str_replace('\\', '/', substr($class, 18)) . '.php';
    }
});

const LABELS = [
    'shared' => 'MySqlLockStore, SharedLock mode (server wakes the waiter)',
    'lease' => 'MySqlLockStore, lease mode (waiter polls with backoff 5-250 ms)',
    'pdo' => 'Symfony PdoStore (Lock retries every 100 ms)',
    'none' => 'self-test: InMemoryStore per process (excludes nothing)',
];

function store(string $name): PersistingStoreInterface
{
    return match ($name) {
        'shared' => new MySqlLockStore(null, ['mode' => 'shared']),
        'lease' => new MySqlLockStore(null, ['mode' => 'lease']),
        'pdo' => new PdoStore(pdo(), [], 0.0), // no random pruning inside the measured calls
        'none' => new InMemoryStore(),
        default => fail("unknown store $name (shared, lease, pdo, none)"),
    };
}

function child(array $args): array
{
    $cmd = [PHP_BINARY, '-d', 'extension=' . getenv('MYSQLLOCK_BENCH_SO'), '-d', 'mysqllock.dsn="' . ini_get('mysqllock.dsn') . '"',
        '-d', 'display_errors=stderr', __FILE__, ...$args];
    $proc = proc_open($cmd, [0 => ['pipe', 'r'], 1 => ['pipe', 'w']], $pipes);
    if (!is_resource($proc)) {
        fail('cannot start ' . implode(' ', $args));
    }
    return [$proc, $pipes[0], $pipes[1]];
}

function percentile(array $values, float $p): float
{
    sort($values);
    return (float) $values[(int) min(count($values) - 1, floor($p * count($values)))];
}

function ms(float $ns): string
{
    return $ns >= 1e6 ? number_format($ns / 1e6, 1) . ' ms' : number_format($ns / 1e3) . ' µs';
}

$mode = arg(1, 'setup | handoff | contend');

if ($mode === 'setup') {
    (new MySqlLockStore(null, ['mode' => 'shared']))->createTable();
    (new MySqlLockStore(null, ['mode' => 'lease']))->createTable();
    $pdoStore = new PdoStore(pdo());
    try {
        $pdoStore->createTable();
    } catch (\PDOException) {
        // exists already
    }
    exit(0);
}

if ($mode === 'waiter') {
    // Each line names a store; acquire(true) on it (the holder holds it), report, release.
    $stores = explode(',', arg(2, 'stores'));
    $resource = arg(3, 'resource');
    $factories = [];
    foreach ($stores as $s) {
        $factories[$s] = new LockFactory(store($s));
    }
    echo "ready\n";
    while (($line = fgets(STDIN)) !== false) {
        $s = trim($line);
        $lock = $factories[$s]->createLock("$resource-$s");
        $lock->acquire(true);
        $got = hrtime(true);
        $lock->release();
        echo "$got\n";
    }
    exit(0);
}

if ($mode === 'handoff') {
    $stores = explode(',', arg(2, 'stores'));
    $rounds = (int) arg(3, 'rounds');
    $perRound = (int) arg(4, 'hand-offs per store and round');
    $holdUs = (int) arg(5, 'hold in microseconds');
    $resource = 'bench-sf-handoff-' . getmypid();
    [$proc, $toWaiter, $fromWaiter] = child(['waiter', implode(',', $stores), $resource]);
    if (trim((string) fgets($fromWaiter)) !== 'ready') {
        fail('the waiter did not start');
    }
    $factories = $deltas = [];
    foreach ($stores as $s) {
        $factories[$s] = new LockFactory(store($s));
        $deltas[$s] = [];
    }
    for ($round = 0; $round < $rounds; $round++) {
        // Rotate the order so every store sees the machine in each position.
        $order = array_merge(array_slice($stores, $round % count($stores)), array_slice($stores, 0, $round % count($stores)));
        foreach ($order as $s) {
            for ($i = 0; $i < $perRound; $i++) {
                $lock = $factories[$s]->createLock("$resource-$s");
                $lock->acquire(true);
                fwrite($toWaiter, "$s\n");
                fflush($toWaiter);
                // The waiter reaches its blocked acquire meanwhile; the random part puts the
                // release anywhere in a polling waiter's interval (Lock retries every 100 ms).
                usleep($holdUs + random_int(0, 100000));
                $lock->release();
                $released = hrtime(true);
                $line = fgets($fromWaiter);
                if ($line === false) {
                    fail('the waiter ended');
                }
                $deltas[$s][] = (int) trim($line) - $released;
            }
        }
    }
    fclose($toWaiter);
    fclose($fromWaiter);
    proc_close($proc);
    foreach ($stores as $s) {
        echo "handoff_$s ", implode(' ', $deltas[$s]), "\n";
    }
    exit(0);
}

if ($mode === 'worker') {
    // Until the deadline (monotonic ns): acquire(true), journal [returned, release called], release.
    $factory = new LockFactory(store(arg(2, 'store')));
    $resource = arg(3, 'resource');
    $journal = arg(4, 'journal file');
    echo "ready\n";
    $deadline = (int) trim((string) fgets(STDIN));
    $lines = [];
    while (($asked = hrtime(true)) < $deadline) {
        $lock = $factory->createLock($resource);
        $lock->acquire(true);
        $got = hrtime(true);
        $end = hrtime(true);
        $lock->release();
        $lines[] = "$asked $got $end";
    }
    file_put_contents($journal, implode("\n", $lines) . "\n");
    exit(0);
}

if ($mode === 'contend') {
    $store = arg(2, 'store');
    $procs = (int) arg(3, 'processes');
    $seconds = (float) arg(4, 'seconds');
    $dir = arg(5, 'journal directory');
    $resource = 'bench-sf-contend-' . $store . '-' . getmypid();
    $workers = [];
    for ($p = 0; $p < $procs; $p++) {
        $workers[$p] = child(['worker', $store, $resource, "$dir/$store-$p.journal"]);
        if (trim((string) fgets($workers[$p][2])) !== 'ready') {
            fail("worker $p did not start");
        }
    }
    $deadline = hrtime(true) + (int) ($seconds * 1e9);
    foreach ($workers as [, $in]) {
        fwrite($in, "$deadline\n");
        fflush($in);
    }
    foreach ($workers as [$proc, $in, $out]) {
        fclose($in);
        fclose($out);
        if (proc_close($proc) !== 0) {
            fail("a $store worker failed");
        }
    }
    $sections = [];
    $counts = [];
    $longestWait = 0;
    for ($p = 0; $p < $procs; $p++) {
        $counts[$p] = 0;
        foreach (file("$dir/$store-$p.journal", FILE_IGNORE_NEW_LINES | FILE_SKIP_EMPTY_LINES) as $line) {
            [$asked, $got, $end] = array_map('intval', explode(' ', $line));
            $sections[] = [$got, $end, $p];
            $counts[$p]++;
            $longestWait = max($longestWait, $got - $asked);
        }
    }
    // Overlaps, from the journals alone: a section that starts before an earlier one of
    // another process ended means two holders at once.
    sort($sections);
    $overlaps = 0;
    $lastEnd = 0;
    $lastProc = -1;
    foreach ($sections as [$start, $end, $p]) {
        if ($start < $lastEnd && $p !== $lastProc) {
            $overlaps++;
        }
        if ($end > $lastEnd) {
            [$lastEnd, $lastProc] = [$end, $p];
        }
    }
    $total = array_sum($counts);
    $shares = implode(' / ', array_map(fn ($c) => $total ? round(100 * $c / $total) . ' %' : '-', $counts));
    printf("| %s | %s | %s | %.2f | %s | %d |\n", LABELS[$store], number_format($total / $seconds), $shares,
        $total ? min($counts) / max($counts) : 0, ms($longestWait), $overlaps);
    exit(0);
}

if ($mode === 'table') {
    // Reads "handoff_STORE ns ..." lines on stdin; prints the hand-off table rows.
    foreach (file('php://stdin', FILE_IGNORE_NEW_LINES) as $line) {
        if (!preg_match('/^handoff_(\w+) (.*)$/', $line, $m)) {
            continue;
        }
        $ns = array_map('intval', explode(' ', $m[2]));
        printf("| %s | %s | %s | %d |\n", LABELS[$m[1]], ms(percentile($ns, 0.5)), ms(percentile($ns, 0.9)), count($ns));
    }
    exit(0);
}

fail("unknown mode $mode");
