<?php
// What keeping a PDO user's lastInsertId() costs the lease mode (issue 23): acquire +
// release cycles through PDO, one process, rounds rotating the order of the variants.
//
//   php -d extension=... bench/php/insert_id.php CYCLES WARMUP VARIANTS
//
// VARIANTS, comma-separated:
//   verdict   the protocol's two statements (lease_common.php's copy), verdict read from
//             the insert id: the caller's lastInsertId() is lost
//   restore   the same, plus one statement after the acquire that gives the caller's
//             insert id back (INSERT ... SELECT of no row whose WHERE runs LAST_INSERT_ID(?))
//   ext       Nene\Kit\DistributedLock on a PDO, as the loaded extension implements it,
//             the PDO's lastInsertId() "0" (nothing to give back)
//   ext-id    the same with the PDO's lastInsertId() set to "42" before each cycle, outside
//             the timing (an application that inserted a row before locking): what giving
//             it back costs
// Each variant runs on its own PDO and its own resource. Prints median and p90 per variant
// and the paired median difference to the first variant.
declare(strict_types=1);

namespace MySqlLockBench;

require __DIR__ . '/lease_common.php';

/** The restore statement the extension sends (core/src/lease_mode/statements.rs, keep_insert_id). */
const RESTORE_SQL = 'INSERT INTO `distributed_locks` (resource, owner, expires_at, acquired_at) '
    . 'SELECT NULL, NULL, NULL, NULL FROM DUAL WHERE LAST_INSERT_ID(CAST(? AS UNSIGNED)) < 0';

final class HandLease implements Lease
{
    private \PDO $pdo;
    private \PDOStatement $acquire;
    private \PDOStatement $release;
    private ?\PDOStatement $restore;

    public function __construct(bool $restore)
    {
        $this->pdo = pdo();
        $this->acquire = $this->pdo->prepare(PROTOCOL_ACQUIRE_SQL);
        $this->release = $this->pdo->prepare(PROTOCOL_RELEASE_SQL);
        $this->restore = $restore ? $this->pdo->prepare(RESTORE_SQL) : null;
    }

    public function acquire(string $resource, string $owner, float $wait = 0): bool
    {
        $keep = $this->pdo->lastInsertId();
        foreach ([$resource, $owner, TTL, $owner, $owner, $owner, TTL] as $i => $v) {
            $this->acquire->bindValue($i + 1, $v, is_int($v) ? \PDO::PARAM_INT : \PDO::PARAM_STR);
        }
        $this->acquire->execute();
        $verdict = $this->pdo->lastInsertId();
        if ($this->restore !== null) {
            $this->restore->bindValue(1, (int) $keep, \PDO::PARAM_INT);
            $this->restore->execute();
        }
        return $verdict === '1' || $verdict === '2' || ($verdict === '0' && $this->acquire->rowCount() === 1);
    }

    public function release(string $resource, string $owner): bool
    {
        $this->release->execute([$resource, $owner]);
        return $this->release->rowCount() > 0;
    }
}

/** Sets $pdo's lastInsertId() to $id, as an INSERT of the application's would. */
function setInsertId(\PDO $pdo, int $id): void
{
    $pdo->prepare(RESTORE_SQL)->execute([$id]);
    if ($pdo->lastInsertId() !== (string) $id) {
        fail('cannot set the insert id: ' . $pdo->lastInsertId());
    }
}

$n = (int) arg(1, 'cycles');
$warm = (int) arg(2, 'warm-up cycles');
$variants = explode(',', arg(3, 'variants'));
$leases = [];
/** Untimed, before each cycle of a variant. */
$before = [];
foreach ($variants as $v) {
    if ($v === 'ext-id') {
        $appPdo = pdo();
        $before[$v] = static fn () => setInsertId($appPdo, 42);
    }
    $leases[$v] = match ($v) {
        'verdict' => new HandLease(false),
        'restore' => new HandLease(true),
        'ext' => new LibLease(pdo()),
        'ext-id' => new LibLease($appPdo),
        default => fail("unknown variant $v (verdict, restore, ext, ext-id)"),
    };
}
$owner = 'bench-' . getmypid();
$cycle = static function (string $v) use ($leases, $owner): void {
    $resource = "insert-id-bench-$v";
    if (!$leases[$v]->acquire($resource, $owner) || !$leases[$v]->release($resource, $owner)) {
        fail("$v: acquire or release of a free resource returned false");
    }
};
$untimed = static function (string $v) use ($before): void {
    if (isset($before[$v])) {
        $before[$v]();
    }
};
for ($i = 0; $i < $warm; $i++) {
    foreach ($variants as $v) {
        $untimed($v);
        $cycle($v);
    }
}
$lat = array_fill_keys($variants, []);
$k = count($variants);
for ($i = 0; $i < $n; $i++) {
    for ($j = 0; $j < $k; $j++) {
        $v = $variants[($i + $j) % $k];
        $untimed($v);
        $t = hrtime(true);
        $cycle($v);
        $lat[$v][] = hrtime(true) - $t;
    }
}
$base = $variants[0];
echo "| $n cycles of acquire + release (after $warm warm-up) | median | p90 | paired median - $base |\n|---|---|---|---|\n";
foreach ($variants as $v) {
    $sorted = $lat[$v];
    sort($sorted);
    $diff = [];
    foreach ($lat[$v] as $i => $ns) {
        $diff[] = $ns - $lat[$base][$i];
    }
    printf(
        "| %s | %.1f µs | %.1f µs | %+.1f µs |\n",
        $v,
        quantile($sorted, 0.5) / 1000,
        quantile($sorted, 0.9) / 1000,
        median($diff) / 1000
    );
}
