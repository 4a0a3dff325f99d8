<?php

declare(strict_types=1);

namespace MySqlLock\Laravel;

use Illuminate\Database\Connection;
use MySqlLock\PdoFactory;
use Nene\Kit\DistributedLock;
use Nene\Kit\DistributedLockException;

/**
 * The lease table Laravel's locks live in (the lease mode of the mysqllock extension).
 *
 * Acquire, release and isHeld are `Nene\Kit\DistributedLock`'s, on one of three
 * connections: the extension's own (php.ini `mysqllock.dsn`; it reconnects by itself), a
 * PDO opened here from a `mysql://` DSN, or the PDO of a Laravel database connection. On the
 * two PDOs, a statement that finds the connection gone (MySQL errors 2006, 2013) is sent
 * once more on a fresh connection, as the extension does on its own: acquire is idempotent
 * for one owner, and a release whose first attempt committed answers false.
 *
 * Two things Laravel needs are not in DistributedLock's API and are done here with SQL on a
 * PDO (on the extension's own connection, a second connection opened from `mysqllock.dsn`
 * when first needed): who owns a lease now (Lock::getCurrentOwner()), and releasing a lease
 * whoever owns it (forceRelease(): read the owner, release as that owner, again if the
 * owner changed meanwhile), which keeps the extension's release semantics (on an upgraded
 * table the row stays, so fencing tokens count on).
 */
final class Leases
{
    /** MySQL client errors of a connection that is gone: server has gone away, lost connection. */
    private const LOST_CONNECTION = [2006, 2013];

    /** How often forceRelease() reads the owner again when it changed under it. */
    private const FORCE_RELEASE_TRIES = 10;

    private ?DistributedLock $lock = null;
    private ?\PDO $lockPdo = null;
    private ?bool $upgraded = null;

    /**
     * @param (\Closure(bool): \PDO)|null $statementsPdo the PDO the lease statements run on
     *   (argument: connect afresh); null: the extension's own connection
     * @param \Closure(bool): \PDO $readsPdo the PDO owners are read on (argument: connect afresh)
     */
    private function __construct(
        private ?\Closure $statementsPdo,
        private \Closure $readsPdo,
        private string $table,
    ) {
        self::quoteTable($table);
    }

    /**
     * Leases on the extension's own connection (php.ini `mysqllock.dsn`).
     *
     * @throws \InvalidArgumentException when mysqllock.dsn is not set, or for an invalid table name
     */
    public static function onExtensionConnection(string $table = 'distributed_locks'): self
    {
        $dsn = (string) ini_get('mysqllock.dsn');
        if ($dsn === '') {
            throw new \InvalidArgumentException(
                'The mysqllock lock store has no connection: set mysqllock.dsn in php.ini '
                . '(mysql://user:password@host:port/database), or give the store a "dsn" or a database "connection" in config/cache.php'
            );
        }
        self::checkDsn($dsn);
        $read = static function (bool $fresh) use ($dsn, &$pdo): \PDO {
            if ($fresh || $pdo === null) {
                $pdo = self::connect($dsn);
            }
            return $pdo;
        };
        return new self(null, $read, $table);
    }

    /**
     * Leases on a PDO connected here from $dsn, `mysql://user:password@host:port/database`
     * with the query keys of mysqllock.dsn (`socket`, `charset`, and the TLS settings
     * `ssl-mode`, `ssl-ca`, `ssl-cert`, `ssl-key`), opened by the extension
     * (MySqlLock\PdoFactory::fromUrl()) as it opens its own PDOs.
     *
     * @throws \InvalidArgumentException for a malformed DSN or table name
     */
    public static function onDsn(string $dsn, string $table = 'distributed_locks'): self
    {
        self::checkDsn($dsn);
        $pdo = static function (bool $fresh) use ($dsn, &$open): \PDO {
            if ($fresh || $open === null) {
                $open = self::connect($dsn);
            }
            return $open;
        };
        return new self($pdo, $pdo, $table);
    }

    /**
     * Leases on the PDO of a Laravel database connection (a MySQL or MariaDB one). Its
     * statements run in that connection's session: inside an open transaction of yours they
     * commit or roll back with it, so give the locks a connection of their own (a second
     * entry in config/database.php) unless that is what you want.
     */
    public static function onLaravelConnection(Connection $connection, string $table = 'distributed_locks'): self
    {
        $pdo = static function (bool $fresh) use ($connection): \PDO {
            if ($fresh) {
                $connection->reconnect();
            }
            return self::mysqlPdo($connection->getPdo(), 'the database connection [' . $connection->getName() . ']');
        };
        return new self($pdo, $pdo, $table);
    }

    /** Leases on a PDO of yours (pdo_mysql), used as it is: no reconnection. */
    public static function onPdo(\PDO $pdo, string $table = 'distributed_locks'): self
    {
        self::mysqlPdo($pdo, 'the PDO');
        $get = static fn (bool $fresh): \PDO => $pdo;
        return new self($get, $get, $table);
    }

    /** The table, as given (`name` or `schema.name`). */
    public function table(): string
    {
        return $this->table;
    }

    /**
     * Takes $resource for $owner when it is free, expired or $owner's already (the TTL then
     * restarts); with $wait > 0 keeps trying that long (the extension's backoff: 5 ms
     * doubling to 250 ms, with jitter).
     */
    public function acquire(string $resource, string $owner, int $ttl, float $wait = 0.0): bool
    {
        return $this->statement(static fn (DistributedLock $l): bool => $l->acquire($resource, $owner, $ttl, $wait));
    }

    /** Ends $owner's live lease on $resource; false if $owner does not hold it. */
    public function release(string $resource, string $owner): bool
    {
        return $this->statement(static fn (DistributedLock $l): bool => $l->release($resource, $owner));
    }

    /** Whether anyone holds an unexpired lease on $resource. */
    public function isHeld(string $resource): bool
    {
        return $this->statement(static fn (DistributedLock $l): bool => $l->isHeld($resource));
    }

    /** The owner of the unexpired lease on $resource, null when there is none. */
    public function owner(string $resource): ?string
    {
        return $this->read(function (\PDO $pdo) use ($resource): ?string {
            // Live as the extension judges it: a whole-second expires_at lives through its
            // second; an upgraded (microsecond) one until that instant.
            $live = $this->isUpgraded($pdo) ? 'expires_at > UTC_TIMESTAMP(6)' : 'expires_at >= UTC_TIMESTAMP()';
            $st = $pdo->prepare('SELECT owner FROM ' . self::quoteTable($this->table) . " WHERE resource = ? AND $live");
            $st->execute([$resource]);
            $owner = $st->fetchColumn();
            return $owner === false || $owner === null ? null : (string) $owner;
        });
    }

    /**
     * Ends the lease on $resource whoever holds it.
     *
     * @throws \RuntimeException if its owner changed every time it was read (10 times)
     */
    public function forceRelease(string $resource): void
    {
        for ($try = 0; $try < self::FORCE_RELEASE_TRIES; $try++) {
            $owner = $this->owner($resource);
            if ($owner === null || $this->release($resource, $owner)) {
                return;
            }
        }
        throw new \RuntimeException("Force-releasing the lock \"$resource\" failed: its owner changed every time it was read");
    }

    /** Creates the lease table (InnoDB) unless it exists; true if it was created. */
    public function createTable(): bool
    {
        return $this->statement(static fn (DistributedLock $l): bool => $l->createTable());
    }

    /** @template T @param \Closure(DistributedLock): T $op @return T */
    private function statement(\Closure $op): mixed
    {
        try {
            return $op($this->distributedLock(false));
        } catch (DistributedLockException $e) {
            if ($this->statementsPdo === null || !in_array($e->getCode(), self::LOST_CONNECTION, true)) {
                throw $e;
            }
            return $op($this->distributedLock(true));
        }
    }

    private function distributedLock(bool $fresh): DistributedLock
    {
        if ($this->statementsPdo === null) {
            return $this->lock ??= new DistributedLock(null, $this->table);
        }
        $pdo = ($this->statementsPdo)($fresh);
        if ($this->lock === null || $this->lockPdo !== $pdo) {
            $this->lock = new DistributedLock($pdo, $this->table);
            $this->lockPdo = $pdo;
        }
        return $this->lock;
    }

    /** @template T @param \Closure(\PDO): T $op @return T */
    private function read(\Closure $op): mixed
    {
        try {
            return $op(($this->readsPdo)(false));
        } catch (\PDOException $e) {
            if (!in_array((int) ($e->errorInfo[1] ?? 0), self::LOST_CONNECTION, true)) {
                throw $e;
            }
            return $op(($this->readsPdo)(true));
        }
    }

    /** Whether the table has the upgrade's microsecond expires_at (checked once). */
    private function isUpgraded(\PDO $pdo): bool
    {
        if ($this->upgraded === null) {
            $parts = explode('.', $this->table);
            $name = array_pop($parts);
            $st = $pdo->prepare(
                "SELECT DATETIME_PRECISION FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = COALESCE(?, DATABASE()) "
                . "AND TABLE_NAME = ? AND COLUMN_NAME = 'expires_at'"
            );
            $st->execute([$parts[0] ?? null, $name]);
            $precision = $st->fetchColumn();
            if ($precision === false) {
                throw new \RuntimeException(
                    "The lease table {$this->table} does not exist: run `mysqllock init --lease`, "
                    . 'or call createTable() on the store (Cache::store(\'mysqllock\')->getStore()->createTable())'
                );
            }
            $this->upgraded = (int) $precision > 0;
        }
        return $this->upgraded;
    }

    private static function mysqlPdo(\PDO $pdo, string $what): \PDO
    {
        $driver = $pdo->getAttribute(\PDO::ATTR_DRIVER_NAME);
        if ($driver !== 'mysql') {
            throw new \InvalidArgumentException("mysqllock locks need MySQL or MariaDB; $what uses the PDO driver $driver");
        }
        return $pdo;
    }

    /** `name` or `schema.name` as SQL, with the rules of the extension (letters, digits, _ and $). */
    private static function quoteTable(string $table): string
    {
        if (!preg_match('/^[A-Za-z0-9_$]{1,64}(\.[A-Za-z0-9_$]{1,64})?$/D', $table)) {
            throw new \InvalidArgumentException("Invalid lease table name \"$table\": name or schema.name of letters, digits, _ and \$");
        }
        return '`' . str_replace('.', '`.`', $table) . '`';
    }

    /** Refuses a DSN without the parts the leases need (scheme, host, database). */
    private static function checkDsn(string $dsn): void
    {
        $u = parse_url($dsn);
        if (!is_array($u) || ($u['scheme'] ?? '') !== 'mysql' || !isset($u['host'])) {
            throw new \InvalidArgumentException('Invalid mysqllock DSN: expected mysql://user:password@host:port/database');
        }
        if (ltrim(rawurldecode($u['path'] ?? ''), '/') === '') {
            throw new \InvalidArgumentException('Invalid mysqllock DSN: no database (mysql://user:password@host:port/database)');
        }
    }

    /**
     * A PDO on $dsn, opened by the extension as it opens its own: its socket, character
     * set and TLS settings as mysqllock.dsn has them.
     */
    private static function connect(string $dsn): \PDO
    {
        return PdoFactory::fromUrl($dsn);
    }
}
