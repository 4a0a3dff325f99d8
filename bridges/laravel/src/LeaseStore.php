<?php

declare(strict_types=1);

namespace MySqlLock\Laravel;

use Illuminate\Contracts\Cache\Lock as LockContract;
use Illuminate\Contracts\Cache\LockProvider;
use Illuminate\Contracts\Cache\Store;
use Illuminate\Contracts\Container\Container;
use Nene\Kit\DistributedLock;

/**
 * The `mysqllock` cache store: a lock provider only.
 *
 * lock() and restoreLock() give LeaseLocks; flushLocks() ends the leases under the store's
 * prefix (Laravel 13's CanFlushLocks: `php artisan cache:clear mysqllock --locks`). Cache operations throw
 * UnsupportedCacheOperation, except the three the scheduler sends where it keeps its mutexes
 * as cache entries (names under "framework/schedule-"): Laravel 8's withoutOverlapping()
 * and onOneServer(), and onOneServer() up to Laravel 11.45.1 and 12.21 (10.48 included).
 * add($key, true, $seconds) takes a lease with an owner of its own, get()/has() tell
 * whether one is held, forget() ends it whoever holds it (the scheduler forgets in another
 * process). Otherwise Laravel asks a LockProvider store for locks; both take the same
 * leases (the same names).
 */
class LeaseStore implements Store, LockProvider, FlushesLocks
{
    /**
     * @param string $prefix put before every lock name (Laravel's cache prefix)
     * @param int $lockTimeout seconds a lock taken with $seconds <= 0 lives (DatabaseLock's
     *   default: a day)
     */
    public function __construct(private Leases $leases, private string $prefix = '', private int $lockTimeout = 86400)
    {
        if ($lockTimeout < 1 || $lockTimeout > DistributedLock::MAX_TTL) {
            throw new \InvalidArgumentException('lock_timeout must be 1 to ' . DistributedLock::MAX_TTL . " seconds, not $lockTimeout");
        }
    }

    /**
     * The store for a `cache.stores.*` entry with `'driver' => 'mysqllock'`.
     *
     * @param array{connection?: ?string, dsn?: ?string, table?: ?string, prefix?: ?string, lock_timeout?: ?int} $config
     *   connection: a connection of config/database.php whose PDO the locks use (with its
     *   `options`, PDO::MYSQL_ATTR_SSL_* included); else dsn:
     *   `mysql://user:password@host:port/database` with mysqllock.dsn's query keys
     *   (`?ssl-mode=VERIFY_IDENTITY&ssl-ca=...`; a PDO opened here); else the
     *   extension's own connection (php.ini mysqllock.dsn). table: the lease table
     *   (distributed_locks). prefix: before every name (default: cache.prefix).
     *   lock_timeout: seconds a lock with $seconds = 0 lives (86400).
     * @param Container $app resolves `db` (with connection) and `config` (the default prefix)
     */
    public static function fromConfig(array $config, Container $app): self
    {
        $table = (string) ($config['table'] ?? 'distributed_locks');
        if (($config['connection'] ?? null) !== null && $config['connection'] !== '') {
            $leases = Leases::onLaravelConnection($app->make('db')->connection($config['connection']), $table);
        } elseif (($config['dsn'] ?? null) !== null && $config['dsn'] !== '') {
            $leases = Leases::onDsn((string) $config['dsn'], $table);
        } else {
            $leases = Leases::onExtensionConnection($table);
        }
        $prefix = $config['prefix'] ?? ($app->bound('config') ? $app->make('config')->get('cache.prefix') : null);
        return new self($leases, (string) ($prefix ?? ''), (int) ($config['lock_timeout'] ?? 86400));
    }

    /**
     * A lock on $name (the store's prefix put before it).
     *
     * @param string $name
     * @param int $seconds how long the lease lives; 0: lock_timeout (a day)
     * @param string|null $owner null: a random one
     */
    public function lock($name, $seconds = 0, $owner = null): LockContract
    {
        return new LeaseLock($this->leases, $this->prefix . $name, $seconds, $owner, $this->lockTimeout);
    }

    /**
     * The lock $owner took on $name, to release it in another process.
     *
     * @param string $name
     * @param string $owner
     */
    public function restoreLock($name, $owner): LockContract
    {
        return $this->lock($name, 0, $owner);
    }

    /** Creates the lease table (InnoDB) unless it exists; true if it was created. */
    public function createTable(): bool
    {
        return $this->leases->createTable();
    }

    /**
     * Ends every live lease whose name begins with this store's prefix (the app's
     * cache.prefix, or the store's `prefix`), whoever holds it: the app's locks, its
     * scheduler mutexes and unique-job locks included. Leases of other prefixes in the same
     * table (other apps, Symfony, plain DistributedLock users) stay. What Laravel's
     * DatabaseStore does to its whole lock table, limited to the app's names, since a
     * lease table is often shared.
     *
     * @return bool true (also when there was nothing to end)
     * @throws \RuntimeException when the prefix is empty: flushing would end every lease in
     *   the table, other apps' included, so it is refused rather than done silently
     */
    public function flushLocks(): bool
    {
        if ($this->prefix === '') {
            throw new \RuntimeException(
                'The mysqllock store has no prefix, so flushing its locks would end every lease in the table "'
                . $this->leases->table() . '", other apps\' and non-Laravel ones included: '
                . "set cache.prefix (CACHE_PREFIX) or the store's 'prefix' in config/cache.php to flush only this app's locks"
            );
        }
        $this->leases->forceReleaseAllWithPrefix($this->prefix);
        return true;
    }

    /**
     * True: the locks live in the lease table, never beside cached values (the store holds
     * none), so flushing locks touches no cache entries.
     */
    public function hasSeparateLockStore(): bool
    {
        return true;
    }

    /**
     * The scheduler's mutexes kept as cache entries only (CacheEventMutex on Laravel 8,
     * CacheSchedulingMutex up to 11.45.1 and 12.21): takes the mutex $key for $seconds
     * unless it is held.
     *
     * @throws UnsupportedCacheOperation for any other key or value
     */
    public function add($key, $value, $seconds): bool
    {
        if (!self::isSchedulerMutex($key) || $value !== true) {
            throw UnsupportedCacheOperation::for('add', $key);
        }
        $owner = 'scheduler:' . bin2hex(random_bytes(8));
        return $this->leases->acquire($this->prefix . $key, $owner, max(1, min(DistributedLock::MAX_TTL, (int) $seconds)));
    }

    /**
     * The scheduler's mutexes kept as cache entries only: true while the mutex $key is
     * held, null otherwise (so Repository::has() tells whether it is).
     *
     * @throws UnsupportedCacheOperation for any other key
     */
    public function get($key): mixed
    {
        if (!self::isSchedulerMutex($key)) {
            throw UnsupportedCacheOperation::for('get', $key);
        }
        return $this->leases->isHeld($this->prefix . $key) ? true : null;
    }

    /**
     * The scheduler's mutexes kept as cache entries only: ends the mutex $key whoever
     * holds it.
     *
     * @throws UnsupportedCacheOperation for any other key
     */
    public function forget($key): bool
    {
        if (!self::isSchedulerMutex($key)) {
            throw UnsupportedCacheOperation::for('forget', $key);
        }
        $this->leases->forceRelease($this->prefix . $key);
        return true;
    }

    /** @throws UnsupportedCacheOperation always */
    public function many(array $keys): never
    {
        throw UnsupportedCacheOperation::for('many', implode(', ', $keys));
    }

    /** @throws UnsupportedCacheOperation always */
    public function put($key, $value, $seconds): never
    {
        throw UnsupportedCacheOperation::for('put', $key);
    }

    /** @throws UnsupportedCacheOperation always */
    public function putMany(array $values, $seconds): never
    {
        throw UnsupportedCacheOperation::for('putMany', implode(', ', array_keys($values)));
    }

    /** @throws UnsupportedCacheOperation always */
    public function increment($key, $value = 1): never
    {
        throw UnsupportedCacheOperation::for('increment', $key);
    }

    /** @throws UnsupportedCacheOperation always */
    public function decrement($key, $value = 1): never
    {
        throw UnsupportedCacheOperation::for('decrement', $key);
    }

    /** @throws UnsupportedCacheOperation always */
    public function forever($key, $value): never
    {
        throw UnsupportedCacheOperation::for('forever', $key);
    }

    /** Extends a cached item's TTL (the Store contract of later Laravel versions). @throws UnsupportedCacheOperation always */
    public function touch($key, $seconds): never
    {
        throw UnsupportedCacheOperation::for('touch', $key);
    }

    /** @throws UnsupportedCacheOperation always: there are no cached items to flush (locks are not flushed; flushLocks() does) */
    public function flush(): never
    {
        throw UnsupportedCacheOperation::for('flush');
    }

    public function getPrefix(): string
    {
        return $this->prefix;
    }

    /**
     * Whether $key is a mutex of the scheduler: Event::mutexName() is
     * "framework" . DIRECTORY_SEPARATOR . "schedule-" . sha1(...), CallbackEvent's
     * "framework/schedule-" . sha1(...); onOneServer appends the minute ("Hi").
     */
    private static function isSchedulerMutex(mixed $key): bool
    {
        return is_string($key)
            && (str_starts_with($key, 'framework/schedule-') || str_starts_with($key, 'framework' . DIRECTORY_SEPARATOR . 'schedule-'));
    }
}
