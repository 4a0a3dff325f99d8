<?php
// Shared by bench/session.sh's PHP scripts (session_cycles.php, session_lease.php):
// implementations as "run N cycles, return their times", interleaved rounds, statements
// per cycle counted by the server, and the table rows. Always run with the extension
// loaded and -d mysqllock.dsn=... (the same URL as MYSQLLOCK_BENCH_DSN).
declare(strict_types=1);

namespace MySqlLockBench;

// common.php: server(), pdo(), fail(), arg(), Admin; lease_common.php: quantile(), median().
require_once __DIR__ . '/lease_common.php';

/**
 * One implementation under test: runs $n uncontended cycles (lock + release of a name
 * nobody else holds) and returns each cycle's time in nanoseconds. Any failure throws.
 */
interface Cycles
{
    /** @return list<int> */
    public function run(int $n): array;
}

/** A cycle written in PHP, timed with hrtime() around it. */
final class PhpCycles implements Cycles
{
    /** @param \Closure(): void $cycle */
    public function __construct(private \Closure $cycle)
    {
    }

    public function run(int $n): array
    {
        $cycle = $this->cycle;
        $t = [];
        for ($i = 0; $i < $n; $i++) {
            $start = hrtime(true);
            $cycle();
            $t[] = hrtime(true) - $start;
        }
        return $t;
    }
}

/**
 * Rounds: in every round each implementation runs a block of $block cycles, the order
 * rotating from round to round, so all of them see the same machine.
 *
 * @param array<string, Cycles> $impls
 * @return array<string, list<list<int>>> per implementation, per round, the cycle times
 */
function interleave(array $impls, int $rounds, int $block): array
{
    $keys = array_keys($impls);
    $k = count($keys);
    $out = array_fill_keys($keys, []);
    for ($r = 0; $r < $rounds; $r++) {
        for ($j = 0; $j < $k; $j++) {
            $key = $keys[($r + $j) % $k];
            $out[$key][] = $impls[$key]->run($block);
        }
    }
    return $out;
}

/**
 * Statements and prepares per cycle as the server counts them: global `Questions` (every
 * statement a client sends, COM_QUERY and COM_STMT_EXECUTE alike: one round trip each)
 * and `Com_stmt_prepare`, read on the admin connection before and after $n cycles of one
 * implementation at a time, minus what the admin's own snapshot adds (measured by two
 * snapshots back to back). Nothing else talks to this server during a bench.
 *
 * @return array{float, float} statements per cycle, prepares per cycle
 */
function countPerCycle(Admin $admin, Cycles $impl, int $n): array
{
    $a = parseSnapshot($admin->snapshot());
    $b = parseSnapshot($admin->snapshot());
    $impl->run($n);
    $c = parseSnapshot($admin->snapshot());
    $per = static fn (string $var): float => (($c[$var] - $b[$var]) - ($b[$var] - $a[$var])) / $n;
    return [$per('Questions'), $per('Com_stmt_prepare')];
}

/** @return array<string, int> Admin::snapshot()'s "k=v k=v" */
function parseSnapshot(string $snapshot): array
{
    $out = [];
    foreach (explode(' ', $snapshot) as $kv) {
        [$k, $v] = explode('=', $kv, 2);
        $out[$k] = (int) $v;
    }
    foreach (['Questions', 'Com_stmt_prepare'] as $need) {
        if (!isset($out[$need])) {
            fail("the status snapshot lacks $need (MYSQLLOCK_BENCH_VARS=Questions,Com_stmt_prepare)");
        }
    }
    return $out;
}

/** Statistics of one implementation's rounds. */
final class Timed
{
    /** @var list<int> */
    public array $sorted;
    /** @var list<float> */
    public array $roundMedians;

    /** @param list<list<int>> $rounds */
    public function __construct(array $rounds)
    {
        $this->sorted = array_merge(...$rounds);
        sort($this->sorted);
        $this->roundMedians = array_map(static fn (array $r): float => median($r), $rounds);
    }

    public function median(): float
    {
        return quantile($this->sorted, 0.5);
    }

    public function p90(): float
    {
        return quantile($this->sorted, 0.9);
    }

    /** Median of this one's cycles over $base's, and the median of that ratio per round. */
    public function ratio(Timed $base): array
    {
        $perRound = [];
        foreach ($this->roundMedians as $r => $m) {
            $perRound[] = $m / $base->roundMedians[$r];
        }
        return [$this->median() / $base->median(), median($perRound)];
    }
}

function us(float $ns): string
{
    return number_format($ns / 1000, $ns < 100000 ? 1 : 0) . ' µs';
}

/** "1.04× NAME (paired 1.03×)" */
function ratioText(Timed $impl, Timed $base, string $baseName): string
{
    [$m, $p] = $impl->ratio($base);
    return sprintf('%.2f× %s (paired %.2f×)', $m, $baseName, $p);
}

/** Statements per cycle, with the prepares when there are any. */
function stmtText(float $statements, float $prepares): string
{
    $s = rtrim(rtrim(sprintf('%.2f', $statements), '0'), '.');
    if ($prepares >= 0.005) {
        $s .= sprintf(' (+%.2f prepares)', $prepares);
    }
    return $s;
}

/** One Markdown row of the table bench/session.sh prints. */
function row(string ...$cells): void
{
    echo '| ' . implode(' | ', $cells) . " |\n";
}
