<?php
// Issue 16's hand-off and contention, measured the way a user meets them (run by
// bench/handoff.sh, always with the extension loaded and MYSQLLOCK_BENCH_DSN set).
//
//   handoff ROUNDS N HOLD_MS NAME
//     This process holds, a second PHP process (this script, "waiter") waits. Per hand-off:
//     the holder locks, tells the waiter to lock, polls the server's process list until
//     the waiter's connection is in 'User lock' (blocked inside lock()), holds until
//     HOLD_MS after its own lock, then takes hrtime(true) and calls release(); the waiter
//     takes hrtime(true) when its lock() returns and sends it back through its pipe.
//     Sample = waiter's return - holder's call (hrtime is CLOCK_MONOTONIC, one clock for
//     both processes). "ext" is SharedLock::lock($n, 30, 60) / ->release() on the
//     extension's native connection; "pdo" (raw, the floor of any lock on MySQL) is
//     GET_LOCK($n, 30) / RELEASE_LOCK($n) through PDO; "floor" is the protocol's own
//     floor, the extension's statements written by hand through PDO (class Floor); the
//     same two processes. They take turns hand-off by hand-off, the order rotating. Prints
//     one "| ..." table row per metric and a `target:` line.
//   worker KIND NAME START_NS SECONDS JOURNAL
//     One of the contending processes: waits for CLOCK_MONOTONIC START_NS, then loops
//     lock -> release on NAME for SECONDS, journaling per acquisition (wait start, got,
//     release start) in its own clock readings, written to JOURNAL at the end.
//   contention KIND SECONDS JOURNAL...
//     Reads the workers' journals: acquisitions/s, fewest/most per worker, longest wait,
//     and overlaps (two workers' got -> release-start intervals intersecting), judged
//     from the journals alone, not from the lock.
declare(strict_types=1);

use ItsMieger\MySqlSharedLocks\SharedLock;

require __DIR__ . '/common.php'; // MySqlLockBench\overlaps()

function fail(string $message): never
{
    fwrite(STDERR, 'bench/php/handoff_user.php: ' . $message . "\n");
    exit(1);
}

/** @return array{host: string, db: string, user: string, pass: string, port: int} */
function server(): array
{
    $u = parse_url((string) getenv('MYSQLLOCK_BENCH_DSN'));
    if (!is_array($u) || !isset($u['host'], $u['user'], $u['path'])) {
        fail('MYSQLLOCK_BENCH_DSN is not a mysql://user:password@host:port/db URL');
    }
    return ['host' => $u['host'], 'db' => ltrim($u['path'], '/'), 'user' => rawurldecode($u['user']),
        'pass' => rawurldecode($u['pass'] ?? ''), 'port' => (int) ($u['port'] ?? 3306)];
}

function pdo(): PDO
{
    $s = server();
    return new PDO("mysql:host={$s['host']};port={$s['port']};dbname={$s['db']};charset=utf8mb4", $s['user'], $s['pass'],
        [PDO::ATTR_ERRMODE => PDO::ERRMODE_EXCEPTION, PDO::ATTR_EMULATE_PREPARES => false]);
}

/** Lock / release one name, as a user writes it; connectionId() names the session. */
abstract class Way
{
    abstract public function lock(string $name): void;

    abstract public function release(): void;

    abstract public function connectionId(string $warm): int;
}

final class Ext extends Way
{
    private ?\ItsMieger\MySqlSharedLocks\SharedLockHandle $held = null;

    public function __construct()
    {
        $s = server();
        // The ssl-mode of MYSQLLOCK_BENCH_DSN's query (bench/lib.sh); the PDO floor ignores it.
        SharedLock::configureConnection($s['host'], $s['db'], $s['user'], $s['pass'], 'utf8mb4', $s['port'],
            \MySqlLockBench\productTls());
    }

    public function lock(string $name): void
    {
        $this->held = SharedLock::lock($name, 30, 60);
    }

    public function release(): void
    {
        $this->held->release();
        $this->held = null;
    }

    public function connectionId(string $warm): int
    {
        $this->lock($warm);
        $id = (int) SharedLock::holder($warm)['connectionId'];
        $this->release();
        return $id;
    }
}

final class Raw extends Way
{
    private PDO $pdo;
    private PDOStatement $get;
    private PDOStatement $rel;
    private string $name = '';

    public function __construct()
    {
        $this->pdo = pdo();
        $this->get = $this->pdo->prepare('SELECT GET_LOCK(?, 30)');
        $this->rel = $this->pdo->prepare('SELECT RELEASE_LOCK(?)');
    }

    public function lock(string $name): void
    {
        $this->get->execute([$name]);
        if ((int) $this->get->fetchColumn() !== 1) {
            fail("GET_LOCK($name, 30) did not return 1");
        }
        $this->name = $name;
    }

    public function release(): void
    {
        $this->rel->execute([$this->name]);
        if ((int) $this->rel->fetchColumn() !== 1) {
            fail("RELEASE_LOCK($this->name) did not return 1");
        }
    }

    public function connectionId(string $warm): int
    {
        $this->lock($warm);
        $this->release();
        return (int) $this->pdo->query('SELECT CONNECTION_ID()')->fetchColumn();
    }
}

/**
 * The protocol's hand-written floor (issue 34): the statements the extension sends on
 * the original table, written by hand through PDO, so that what the extension adds above
 * them is its own cost and what they cost above raw GET_LOCK is the protocol's. An
 * uncontended lock is the claim (INSERT ... IF(GET_LOCK(?, 0) = 1, 1, NULL), prepared); a
 * lock found busy queues at once on the server with the sleep and the claim in one round
 * trip, as the extension does for a name it found contended; release is the DELETE that
 * lets go of the GET_LOCK in the same statement (prepared). PDO sends the sleep and the
 * claim as one text batch (through an emulating PDO), which the server parses every time;
 * the extension sends them so only its first time, and pipelines the two prepared
 * statements after that, which PDO cannot: there it may beat this floor. Each step checks
 * its outcome, so the floor cannot pass for faster by doing less.
 */
final class Floor extends Way
{
    private PDO $pdo;
    private PDOStatement $claim;
    private PDOStatement $rel;
    private string $name = '';
    /** The last lock of this way found the name busy. */
    private bool $contended = false;

    public function __construct()
    {
        $this->pdo = pdo();
        $this->claim = $this->pdo->prepare('INSERT INTO shared_locks (name, connection_id, created, ttl, lock_acquired) '
            . 'VALUES (?, CONNECTION_ID(), UNIX_TIMESTAMP(), 60, IF(GET_LOCK(?, 0) = 1, 1, NULL))');
        $this->rel = $this->pdo->prepare('DELETE FROM shared_locks WHERE name = ? AND connection_id = CONNECTION_ID() '
            . 'AND RELEASE_LOCK(CAST(name AS CHAR)) = 1');
    }

    public function lock(string $name): void
    {
        $this->name = $name;
        if (!$this->contended && $this->claimAlone($name)) {
            return;
        }
        // Busy: sleep in GET_LOCK and claim in the same round trip (a text batch, which
        // only an emulating PDO sends; statements prepared before keep their mode).
        $n = "_utf8mb4 X'" . bin2hex($name) . "'";
        $this->pdo->setAttribute(PDO::ATTR_EMULATE_PREPARES, true);
        $st = $this->pdo->query("SELECT IS_FREE_LOCK($n), GET_LOCK($n, 30); INSERT INTO shared_locks "
            . "(name, connection_id, created, ttl, lock_acquired) VALUES ($n, CONNECTION_ID(), UNIX_TIMESTAMP(), 60, "
            . "IF(IS_USED_LOCK($n) <=> CONNECTION_ID(), 1, NULL))");
        $this->pdo->setAttribute(PDO::ATTR_EMULATE_PREPARES, false);
        // The next lock queues at once while the name stays busy, as the extension's does.
        $this->contended = (int) $st->fetchColumn() !== 1;
        $st->nextRowset();
        if ($st->rowCount() !== 1) {
            fail("the floor's waiter did not get $name");
        }
    }

    /** The single claim; false when the GET_LOCK was busy (nothing to undo then). */
    private function claimAlone(string $name): bool
    {
        try {
            $this->claim->execute([$name, $name]);
            return true;
        } catch (PDOException $e) {
            if (($e->errorInfo[1] ?? 0) !== 1048) {
                throw $e;
            }
            return false;
        }
    }

    public function release(): void
    {
        $this->rel->execute([$this->name]);
        if ($this->rel->rowCount() !== 1) {
            fail("the floor's release of $this->name found the lock not held");
        }
    }

    public function connectionId(string $warm): int
    {
        $this->lock($warm);
        $this->release();
        return (int) $this->pdo->query('SELECT CONNECTION_ID()')->fetchColumn();
    }
}

/** The holder's (`$holder`) or the waiter's way for a kind. */
function way(string $kind, bool $holder = false): Way
{
    return match ($kind) {
        'ext' => new Ext(),
        'pdo' => new Raw(),
        'floor' => new Floor(),
        default => fail("unknown kind $kind (ext, pdo, floor)"),
    };
}

/** @param list<int|float> $xs */
function quantile(array $xs, float $q): float
{
    sort($xs);
    return (float) $xs[(int) min(count($xs) - 1, floor($q * count($xs)))];
}

function median(array $xs): float
{
    sort($xs);
    $n = count($xs);
    return $n % 2 ? (float) $xs[intdiv($n, 2)] : ($xs[$n / 2 - 1] + $xs[$n / 2]) / 2;
}

function us(float $ns): string
{
    return number_format($ns / 1000, 1, '.', ',') . ' µs';
}

$mode = $argv[1] ?? '';
$kinds = ['pdo', 'floor', 'ext'];

if ($mode === 'waiter') {
    $name = $argv[2];
    $ways = [];
    $ids = [];
    foreach ($kinds as $k) {
        $ways[$k] = way($k);
        $ids[] = $ways[$k]->connectionId("$name-$k-warm-w");
    }
    echo implode(' ', $ids), "\n";
    while (($line = fgets(STDIN)) !== false) {
        $k = trim($line);
        $ways[$k]->lock("$name-$k");
        $got = hrtime(true);
        $ways[$k]->release();
        echo $got, "\n";
    }
    exit(0);
}

if ($mode === 'handoff') {
    [$rounds, $n, $holdMs, $name] = [(int) $argv[2], (int) $argv[3], (int) $argv[4], $argv[5]];
    $proc = proc_open([PHP_BINARY, '-d', 'extension=' . getenv('MYSQLLOCK_BENCH_EXT'), '-d', 'display_errors=stderr', __FILE__, 'waiter', $name],
        [0 => ['pipe', 'r'], 1 => ['pipe', 'w']], $pipes);
    if (!is_resource($proc)) {
        fail('cannot start the waiter');
    }
    [$toWaiter, $fromWaiter] = $pipes;
    $ids = array_combine($kinds, array_map('intval', explode(' ', trim((string) fgets($fromWaiter)))));
    if (count(array_filter($ids)) !== count($kinds)) {
        fail('the waiter did not report its connection ids');
    }
    $ways = [];
    foreach ($kinds as $k) {
        $ways[$k] = way($k, true);
        $ways[$k]->connectionId("$name-$k-warm-h");
    }
    $admin = pdo();
    $state = $admin->prepare('SELECT STATE FROM information_schema.PROCESSLIST WHERE ID = ?');
    $lat = $call = [];
    $perRound = [];
    for ($r = 0; $r < $rounds; $r++) {
        foreach ($kinds as $k) {
            $perRound[$r][$k] = [];
        }
        for ($i = 0; $i < $n; $i++) {
            $order = ($i + $r) % 2 ? array_reverse($kinds) : $kinds;
            foreach ($order as $k) {
                $w = $ways[$k];
                $w->lock("$name-$k");
                $locked = hrtime(true);
                fwrite($toWaiter, "$k\n");
                fflush($toWaiter);
                $until = hrtime(true) + 5_000_000_000;
                do {
                    $state->execute([$ids[$k]]);
                    $s = $state->fetchColumn();
                    if ($s === 'User lock') {
                        break;
                    }
                    if (hrtime(true) > $until) {
                        fail("the waiter's $k lock() was not blocked in 'User lock' within 5 s (state: " . var_export($s, true) . ')');
                    }
                    usleep(500);
                } while (true);
                $left = $locked + $holdMs * 1_000_000 - hrtime(true);
                if ($left > 0) {
                    usleep(intdiv($left, 1000));
                }
                $t = hrtime(true);
                $w->release();
                $returned = hrtime(true);
                $got = (int) fgets($fromWaiter);
                if ($got <= 0) {
                    fail('the waiter ended');
                }
                $lat[$k][] = $got - $t;
                $perRound[$r][$k][] = $got - $t;
                $call[$k][] = $returned - $t;
            }
        }
    }
    fclose($toWaiter);
    proc_close($proc);
    $over = static fn (string $k): array => array_map(fn (array $x): float => median($x['ext']) - median($x[$k]), $perRound);
    $total = $rounds * $n;
    $cell = static fn (array $x): string => us(median($x)) . ' (' . us(quantile($x, 0.9)) . ')';
    $byRound = static fn (array $xs): string => implode(' ', array_map(fn ($x) => sprintf('%+.0f', $x / 1000), $xs)) . ' µs';
    $overRaw = median($lat['ext']) - median($lat['pdo']);
    printf("| hand-off: holder's release() call → blocked waiter's lock() returns, median (p90), %d × %d | %s | %s | %s | %+.1f µs (rounds %s); %+.1f µs over the floor |\n",
        $n, $rounds, $cell($lat['pdo']), $cell($lat['floor']), $cell($lat['ext']), $overRaw / 1000,
        $byRound($over('pdo')), (median($lat['ext']) - median($lat['floor'])) / 1000);
    printf("| holder's release() call, median (p90) | %s | %s | %s | %.2f× raw, %.2f× the floor |\n",
        $cell($call['pdo']), $cell($call['floor']), $cell($call['ext']),
        median($call['ext']) / median($call['pdo']), median($call['ext']) / median($call['floor']));
    printf("target: hand-off <= raw + 0.2 ms: %s (%+.1f µs)\n", $overRaw <= 200_000 ? 'met' : 'not met', $overRaw / 1000);
    fwrite(STDERR, "handoff: $total hand-offs per kind\n");
    exit(0);
}

if ($mode === 'worker') {
    [$kind, $name, $start, $seconds, $journal] = [$argv[2], $argv[3], (int) $argv[4], (float) $argv[5], $argv[6]];
    $w = way($kind);
    $w->connectionId("$name-warm-" . getmypid());
    while (hrtime(true) < $start) {
        usleep(200);
    }
    $end = $start + (int) ($seconds * 1e9);
    $waitStart = $got = $relStart = [];
    do {
        $a = hrtime(true);
        $w->lock($name);
        $b = hrtime(true);
        $relStart[] = hrtime(true);
        $w->release();
        $waitStart[] = $a;
        $got[] = $b;
    } while (hrtime(true) < $end);
    $out = '';
    foreach ($got as $i => $g) {
        $out .= $waitStart[$i] . ' ' . $g . ' ' . $relStart[$i] . "\n";
    }
    file_put_contents($journal, $out);
    exit(0);
}

if ($mode === 'contention') {
    [$kind, $seconds] = [$argv[2], (float) $argv[3]];
    $counts = [];
    $holds = [];
    $longest = 0;
    $first = PHP_INT_MAX;
    $last = 0;
    foreach (array_slice($argv, 4) as $w => $file) {
        $counts[$w] = 0;
        foreach (file($file, FILE_IGNORE_NEW_LINES | FILE_SKIP_EMPTY_LINES) as $line) {
            [$a, $g, $r] = array_map('intval', explode(' ', $line));
            $counts[$w]++;
            $holds[] = [$g, $r, $w];
            $longest = max($longest, $g - $a);
        }
    }
    $overlaps = MySqlLockBench\overlaps($holds);
    $total = array_sum($counts);
    printf("%s total=%d rate=%.1f share=%.3f longest_ns=%d overlaps=%d counts=%s\n",
        $kind, $total, $total / $seconds, min($counts) / max($counts), $longest, $overlaps, implode('/', $counts));
    exit(0);
}

fail('usage: handoff ROUNDS N HOLD_MS NAME | worker KIND NAME START_NS SECONDS JOURNAL | contention KIND SECONDS JOURNAL...');
