<?php
// Shared by the lease-mode benchmark (bench/lease.sh): the ways of taking a lease that are
// compared, and the statistics. Always run with the extension loaded and, for the native
// connection, with -d mysqllock.dsn=... (the same server as MYSQLLOCK_BENCH_DSN, with ssl-mode=MYSQLLOCK_BENCH_SSL_MODE).
declare(strict_types=1);

namespace MySqlLockBench;

require_once __DIR__ . '/common.php';

use Nene\Kit\DistributedLock;

/*
 * A COPY of the SQL the lease mode sends, for the hand-written floor: core/src/lease_mode/statements.rs,
 * module `statements`, functions acquire() and release() for Dialect::MySql on the plain
 * (not upgraded) table `distributed_locks`, with the verdict constants of that file
 * (TAKEN_OVER = 1, STILL_MINE = 2, LOST = i64::MAX). Parameters, as the core binds them:
 * acquire (resource, owner, ttl, owner, owner, owner, ttl), release (resource, owner).
 * If the core's statements change, this copy must follow, or the floor measures something else.
 */
const PROTOCOL_ACQUIRE_SQL = 'INSERT INTO `distributed_locks` (resource, owner, expires_at, acquired_at) '
    . 'VALUES (?, ?, UTC_TIMESTAMP() + INTERVAL ? SECOND, UTC_TIMESTAMP()) '
    . 'ON DUPLICATE KEY UPDATE '
    . 'acquired_at = IF(LAST_INSERT_ID(IF(expires_at < UTC_TIMESTAMP(), 1, '
    . 'IF(CAST(CONVERT(owner USING utf8mb4) AS BINARY) = CAST(CONVERT(? USING utf8mb4) AS BINARY), 2, 9223372036854775807))) = 1, '
    . 'UTC_TIMESTAMP(), acquired_at), '
    . 'owner = IF(expires_at < UTC_TIMESTAMP(), ?, owner), '
    . 'expires_at = IF(CAST(CONVERT(owner USING utf8mb4) AS BINARY) = CAST(CONVERT(? USING utf8mb4) AS BINARY), '
    . 'UTC_TIMESTAMP() + INTERVAL ? SECOND, expires_at)';
const PROTOCOL_RELEASE_SQL = 'DELETE FROM `distributed_locks` WHERE resource = ? '
    . 'AND CAST(CONVERT(owner USING utf8mb4) AS BINARY) = CAST(CONVERT(? USING utf8mb4) AS BINARY) '
    . 'AND expires_at >= UTC_TIMESTAMP()';
/** The protocol's "another owner holds it" verdict (LAST_INSERT_ID). */
const PROTOCOL_LOST = '9223372036854775807';

/** One way of taking and ending a lease. */
interface Lease
{
    /** One try (or, with $wait > 0, keep trying that long): true when it is ours. */
    public function acquire(string $resource, string $owner, float $wait = 0): bool;

    public function release(string $resource, string $owner): bool;
}

/** Nene\Kit\DistributedLock, on the native connection (mysqllock.dsn) or on a PDO. */
final class LibLease implements Lease
{
    private DistributedLock $lock;

    public function __construct(?\PDO $pdo)
    {
        if ($pdo === null && (string) ini_get('mysqllock.dsn') === '') {
            fail('mysqllock.dsn is not set (run php with -d mysqllock.dsn=URL)');
        }
        $this->lock = $pdo === null ? new DistributedLock() : new DistributedLock($pdo);
    }

    public function lock(): DistributedLock
    {
        return $this->lock;
    }

    public function acquire(string $resource, string $owner, float $wait = 0): bool
    {
        return $this->lock->acquire($resource, $owner, TTL, $wait);
    }

    public function release(string $resource, string $owner): bool
    {
        return $this->lock->release($resource, $owner);
    }
}

/**
 * The floor: the protocol's two statements (the copy above) through PDO prepared
 * statements, prepared once, with the same verdict the core reads (LAST_INSERT_ID from
 * the OK packet, affected rows for a fresh insert). No waiting: $wait is ignored, a
 * caller that loses simply calls again.
 */
final class FloorLease implements Lease
{
    private \PDO $pdo;
    private \PDOStatement $acquire;
    private \PDOStatement $release;

    public function __construct()
    {
        $this->pdo = pdo();
        $this->acquire = $this->pdo->prepare(PROTOCOL_ACQUIRE_SQL);
        $this->release = $this->pdo->prepare(PROTOCOL_RELEASE_SQL);
    }

    public function acquire(string $resource, string $owner, float $wait = 0): bool
    {
        // Bound as the core binds them (the TTL as an integer), so the server sees the
        // very same statement with the very same parameter types.
        foreach ([$resource, $owner, TTL, $owner, $owner, $owner, TTL] as $i => $v) {
            $this->acquire->bindValue($i + 1, $v, is_int($v) ? \PDO::PARAM_INT : \PDO::PARAM_STR);
        }
        try {
            $this->acquire->execute();
        } catch (\PDOException $e) {
            // As the core does: another writer got there first (InnoDB picks a deadlock
            // victim among concurrent upserts of one row, even on one server).
            if (conflict($e)) {
                return false;
            }
            throw $e;
        }
        $verdict = $this->pdo->lastInsertId();
        if ($verdict === PROTOCOL_LOST) {
            return false;
        }
        return $verdict === '1' || $verdict === '2' || ($verdict === '0' && $this->acquire->rowCount() === 1);
    }

    public function release(string $resource, string $owner): bool
    {
        for ($attempt = 1;; $attempt++) {
            try {
                $this->release->execute([$resource, $owner]);
                return $this->release->rowCount() > 0;
            } catch (\PDOException $e) {
                // As the core does: the statement again (a few times) when it was the
                // victim of a concurrent upsert.
                if (!conflict($e) || $attempt === 4) {
                    throw $e;
                }
            }
        }
    }
}

/** Errors the core treats as "another writer committed first": deadlock, duplicate, lock wait. */
function conflict(\PDOException $e): bool
{
    return in_array((int) ($e->errorInfo[1] ?? 0), [1213, 1062, 1205], true);
}

/**
 * Deliberately broken, for the overlap checker's self-test only: sends the floor's two
 * statements but ignores their verdicts (every acquire "wins", every release succeeds).
 * The checker must count overlaps for it, or it could not see them for the others either.
 */
final class BrokenLease implements Lease
{
    private FloorLease $floor;

    public function __construct()
    {
        $this->floor = new FloorLease();
    }

    public function acquire(string $resource, string $owner, float $wait = 0): bool
    {
        try {
            $this->floor->acquire($resource, $owner);
        } catch (\PDOException $e) {
            // Broken on purpose: a failed statement is taken for a win too.
        }
        return true;
    }

    public function release(string $resource, string $owner): bool
    {
        try {
            $this->floor->release($resource, $owner);
        } catch (\PDOException $e) {
        }
        return true;
    }
}

/** For reference: raw GET_LOCK(name, 0) / RELEASE_LOCK(name) through PDO (owner unused). */
final class RawGetLock implements Lease
{
    private \PDOStatement $get;
    private \PDOStatement $rel;

    public function __construct()
    {
        $pdo = pdo();
        $this->get = $pdo->prepare('SELECT GET_LOCK(?, 0)');
        $this->rel = $pdo->prepare('SELECT RELEASE_LOCK(?)');
    }

    public function acquire(string $resource, string $owner, float $wait = 0): bool
    {
        $this->get->execute([$resource]);
        return (int) $this->get->fetchColumn() === 1;
    }

    public function release(string $resource, string $owner): bool
    {
        $this->rel->execute([$resource]);
        return (int) $this->rel->fetchColumn() === 1;
    }
}

/** What each implementation is called in the tables. */
const LABELS = [
    'ext' => '(a) DistributedLock, native connection (mysqllock.dsn)',
    'pdo' => '(b) DistributedLock on a PDO',
    'floor' => '(c) floor: the protocol\'s INSERT ... ON DUPLICATE KEY UPDATE + DELETE, hand-written PDO',
    'raw' => '(d) raw GET_LOCK(name, 0) + RELEASE_LOCK through PDO',
    'broken' => 'checker self-test: (c) with its verdicts ignored (no exclusion)',
];

function lease(string $impl): Lease
{
    switch ($impl) {
        case 'ext':
            return new LibLease(null);
        case 'pdo':
            return new LibLease(pdo());
        case 'floor':
            return new FloorLease();
        case 'raw':
            return new RawGetLock();
        case 'broken':
            return new BrokenLease();
    }
    fail("unknown implementation $impl (ext, pdo, floor, raw, broken)");
}

/** The q-quantile (0..1) of $sorted, nearest rank. */
function quantile(array $sorted, float $q): float
{
    $n = count($sorted);
    if ($n === 0) {
        return NAN;
    }
    $rank = (int) ceil($q * $n);
    return (float) $sorted[max(0, min($n - 1, $rank - 1))];
}

function median(array $values): float
{
    sort($values);
    return quantile($values, 0.5);
}
