<?php

declare(strict_types=1);

namespace MySqlLock\Laravel;

use Illuminate\Database\Connection;
use MySqlLock\PdoFactory;
use Nene\Kit\DistributedLock;

/**
 * The lease table Laravel's locks live in (the lease mode of the mysqllock extension).
 *
 * Every statement is `Nene\Kit\DistributedLock`'s (the extension's core decides expiry,
 * owners, the reads that must see a whole cluster, and what a lost connection is), on
 * one of three connections: the extension's own (php.ini `mysqllock.dsn`; it reconnects
 * by itself), a PDO opened here from a `mysql://` DSN, or the PDO of a Laravel database
 * connection. The two PDOs are given to DistributedLock with a way to replace them: when
 * it finds the connection lost it asks for a fresh one (a new PDO, or Laravel's
 * reconnect()) and sends the statement again, as on its own connection: acquire is
 * idempotent for one owner, and a release whose first attempt committed answers false.
 */
final class Leases
{
    private ?DistributedLock $lock = null;
    /** The PDO $lock runs on (Laravel may reconnect its connection under us). */
    private ?\PDO $lockPdo = null;

    /**
     * @param (\Closure(bool): \PDO)|null $pdo the PDO the leases run on (argument: connect
     *   afresh); null: the extension's own connection
     * @param bool $replaceable whether a lost PDO is replaced by $pdo(true)
     */
    private function __construct(
        private ?\Closure $pdo,
        private bool $replaceable,
        private string $table,
    ) {
        self::checkTable($table);
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
        return new self(null, false, $table);
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
                $open = PdoFactory::fromUrl($dsn);
            }
            return $open;
        };
        return new self($pdo, true, $table);
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
        return new self($pdo, true, $table);
    }

    /** Leases on a PDO of yours (pdo_mysql), used as it is: no reconnection. */
    public static function onPdo(\PDO $pdo, string $table = 'distributed_locks'): self
    {
        self::mysqlPdo($pdo, 'the PDO');
        return new self(static fn (bool $fresh): \PDO => $pdo, false, $table);
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
        return $this->lock()->acquire($resource, $owner, $ttl, $wait);
    }

    /**
     * Restarts $owner's unexpired lease on $resource with $ttl seconds from now; false
     * (nothing changes) when the lease expired, ended or is another owner's.
     */
    public function renew(string $resource, string $owner, int $ttl): bool
    {
        return $this->lock()->renew($resource, $owner, $ttl);
    }

    /** Ends $owner's live lease on $resource; false if $owner does not hold it. */
    public function release(string $resource, string $owner): bool
    {
        return $this->lock()->release($resource, $owner);
    }

    /** Whether anyone holds an unexpired lease on $resource. */
    public function isHeld(string $resource): bool
    {
        return $this->lock()->isHeld($resource);
    }

    /** The owner of the unexpired lease on $resource, null when there is none. */
    public function owner(string $resource): ?string
    {
        return $this->lock()->owner($resource);
    }

    /** Ends the lease on $resource whoever holds it; false if none was live. */
    public function forceRelease(string $resource): bool
    {
        return $this->lock()->forceRelease($resource);
    }

    /** Creates the lease table (InnoDB) unless it exists; true if it was created. */
    public function createTable(): bool
    {
        return $this->lock()->createTable();
    }

    /**
     * Ends every live lease whose resource begins with $prefix (exactly, case included),
     * whoever holds it; returns how many it ended. One call of the extension
     * (DistributedLock::forceReleaseWithPrefix()), on the connection in use: the names
     * and the table's rules are the core's (an upgraded table keeps its rows, ended, and
     * their fencing tokens count on). A lease taken while this runs may outlive it.
     *
     * @throws \InvalidArgumentException for an empty prefix: that would end every lease
     *   in the table, other apps' and non-Laravel ones included
     */
    public function forceReleaseAllWithPrefix(string $prefix): int
    {
        return $this->lock()->forceReleaseWithPrefix($prefix);
    }

    /** The DistributedLock on the connection in use, made again if Laravel replaced its PDO. */
    private function lock(): DistributedLock
    {
        if ($this->pdo === null) {
            return $this->lock ??= new DistributedLock(null, $this->table);
        }
        $pdo = ($this->pdo)(false);
        if ($this->lock === null || $this->lockPdo !== $pdo) {
            $replace = null;
            if ($this->replaceable) {
                $open = $this->pdo;
                $current = &$this->lockPdo;
                $replace = static function () use ($open, &$current): \PDO {
                    return $current = $open(true);
                };
            }
            $this->lock = new DistributedLock($pdo, $this->table, $replace);
            $this->lockPdo = $pdo;
        }
        return $this->lock;
    }

    private static function mysqlPdo(\PDO $pdo, string $what): \PDO
    {
        $driver = $pdo->getAttribute(\PDO::ATTR_DRIVER_NAME);
        if ($driver !== 'mysql') {
            throw new \InvalidArgumentException("mysqllock locks need MySQL or MariaDB; $what uses the PDO driver $driver");
        }
        return $pdo;
    }

    /** `name` or `schema.name` with the rules of the extension (letters, digits, _ and $), checked before first use. */
    private static function checkTable(string $table): void
    {
        if (!preg_match('/^[A-Za-z0-9_$]{1,64}(\.[A-Za-z0-9_$]{1,64})?$/D', $table)) {
            throw new \InvalidArgumentException("Invalid lease table name \"$table\": name or schema.name of letters, digits, _ and \$");
        }
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
}
