<?php

declare(strict_types=1);

namespace MySqlLock\Symfony;

use ItsMieger\MySqlSharedLocks\Exception\SharedLockReleaseException;
use ItsMieger\MySqlSharedLocks\Exception\SharedLockRemainingTTLException;
use ItsMieger\MySqlSharedLocks\Exception\SharedLockTimeoutException;
use ItsMieger\MySqlSharedLocks\SharedLock;
use ItsMieger\MySqlSharedLocks\SharedLockHandle;
use Nene\Kit\DistributedLock;
use Symfony\Component\Lock\BlockingStoreInterface;
use Symfony\Component\Lock\Exception\InvalidArgumentException;
use Symfony\Component\Lock\Exception\InvalidTtlException;
use Symfony\Component\Lock\Exception\LockAcquiringException;
use Symfony\Component\Lock\Exception\LockConflictedException;
use Symfony\Component\Lock\Exception\LockExpiredException;
use Symfony\Component\Lock\Exception\LockReleasingException;
use Symfony\Component\Lock\Exception\LockStorageException;
use Symfony\Component\Lock\Key;

/**
 * A Symfony Lock store on the mysqllock extension, in one of two modes:
 *
 * - `shared` (default; one server): the SharedLock lease protocol on the `shared_locks`
 *   table. A blocking acquire sleeps in the server and is woken by the release; a holder
 *   whose process died is taken over at once. The lock lives in this process's database
 *   session, so its Key cannot be serialized (as with Symfony's PostgreSqlStore/FlockStore).
 * - `lease` (Galera, Group Replication): Nene\Kit\DistributedLock's table-only leases on
 *   `distributed_locks`, owned by a random token kept in the Key. A serialized Key is
 *   resumed (refreshed, released) in another process; a dead holder's lease ends with its TTL.
 *
 * TTLs follow Symfony's stores: save() takes the lock for `initial_ttl` seconds (300, as
 * PdoStore), putOffExpiration() sets the TTL you give, the Key's lifetime is reduced
 * before each statement, and an expired Key is deleted and reported with
 * LockExpiredException. The server counts TTLs in whole seconds, rounded up.
 */
class MySqlLockStore implements BlockingStoreInterface
{
    public const MODE_SHARED = 'shared';
    public const MODE_LEASE = 'lease';

    /** Where a Key keeps its token (shared mode: which Key of this process holds the name; lease mode: the lease owner). */
    private const STATE = self::class;

    /** Seconds a blocking wait sleeps in one call before it asks again (it is woken at once on release). */
    private const WAIT_CHUNK = 3600.0;

    /** Longest TTL each mode accepts: the extension's own limits. */
    private const MAX_TTL = [self::MODE_SHARED => SharedLock::MAX_TTL, self::MODE_LEASE => DistributedLock::MAX_TTL];

    /**
     * Shared mode: the names this process holds through any store, with the token of the
     * Key holding each. SharedLock is per process, so this must be too.
     *
     * @var array<string, array{token: string, handle: SharedLockHandle}>
     */
    private static array $held = [];
    private static ?int $heldPid = null;
    /** Shared mode: which connection and table SharedLock was set to by a store. */
    private static ?string $sharedConnection = null;
    private static ?\PDO $sharedPdo = null;

    private string $mode;
    private ?string $table;
    private float $initialTtl;
    private ?ConnectionSettings $settings = null;
    /** The PDO given to the constructor. */
    private ?\PDO $pdo = null;
    /** A PDO this store opened (lease mode). */
    private ?\PDO $ownPdo = null;
    private ?DistributedLock $lease = null;

    /**
     * @param \PDO|string|null $connection a `mysqllock://user:password@host:port/database`
     *        (or `mysql://`) DSN, a pdo_mysql PDO, or null (or `mysqllock:`) for the
     *        extension's default connection (php.ini `mysqllock.dsn`). A DSN may carry TLS
     *        settings as mysqllock.dsn does (`?ssl-mode=VERIFY_IDENTITY&ssl-ca=/path/ca.pem`,
     *        `ssl-cert`, `ssl-key`); the lease mode's PDO gets them as the extension gives
     *        them to PDOs (see MySqlLock\PdoFactory::fromUrl()).
     * @param array{mode?: string, table?: string, initial_ttl?: float|int|string} $options
     *        `mode`: `shared` (default) or `lease`; `table`: the locks table (`shared_locks`
     *        or `distributed_locks` unless given); `initial_ttl`: seconds save() takes the
     *        lock for (300). A DSN's query string may carry the same (`?mode=lease`); $options win.
     *
     * @throws InvalidArgumentException for an unusable DSN, PDO or option
     */
    public function __construct(\PDO|string|null $connection = null, array $options = [])
    {
        if (!extension_loaded('mysqllock')) {
            throw new InvalidArgumentException('MySqlLockStore needs the mysqllock extension (extension=mysqllock.so).');
        }
        if (is_string($connection)) {
            $this->settings = ConnectionSettings::fromDsn($connection);
            $options += $this->settings->options;
        } elseif ($connection instanceof \PDO) {
            if ($connection->getAttribute(\PDO::ATTR_DRIVER_NAME) !== 'mysql') {
                throw new InvalidArgumentException(sprintf('MySqlLockStore needs a pdo_mysql connection, "%s" given.', $connection->getAttribute(\PDO::ATTR_DRIVER_NAME)));
            }
            $this->pdo = $connection;
        }
        $unknown = array_diff(array_keys($options), ['mode', 'table', 'initial_ttl', 'charset', 'socket']);
        if ($unknown !== []) {
            throw new InvalidArgumentException(sprintf('Unknown MySqlLockStore option(s): %s.', implode(', ', $unknown)));
        }
        $this->mode = (string) ($options['mode'] ?? self::MODE_SHARED);
        if (!in_array($this->mode, [self::MODE_SHARED, self::MODE_LEASE], true)) {
            throw new InvalidArgumentException(sprintf('Unknown MySqlLockStore mode "%s": use "shared" or "lease".', $this->mode));
        }
        $this->table = isset($options['table']) ? (string) $options['table'] : null;
        $onDefault = $connection === null || (is_string($connection) && ConnectionSettings::isDefaultDsn($connection));
        if ($this->table === null && $onDefault) {
            // The default connection: the table php.ini's mysqllock.dsn names, as the extension uses it.
            $this->table = ConnectionSettings::iniTable($this->mode);
        }
        if ($this->table !== null && preg_match('/^[A-Za-z0-9_$]{1,64}(\.[A-Za-z0-9_$]{1,64})?$/D', $this->table) !== 1) {
            throw new InvalidArgumentException(sprintf('Invalid table name "%s": "name" or "schema.name" of letters, digits, "_" and "$".', $this->table));
        }
        $ttl = $options['initial_ttl'] ?? 300.0;
        // !(x > 0): NAN is refused too (every comparison with it is false).
        if (!is_numeric($ttl) || !((float) $ttl > 0) || (float) $ttl > self::MAX_TTL[$this->mode]) {
            throw new InvalidTtlException(sprintf('MySqlLockStore expects a positive initial_ttl of at most %s seconds, "%s" given.', self::MAX_TTL[$this->mode], self::shown($ttl)));
        }
        $this->initialTtl = (float) $ttl;
    }

    public function getMode(): string
    {
        return $this->mode;
    }

    public function save(Key $key): void
    {
        $this->take($key, false);
    }

    public function waitAndSave(Key $key): void
    {
        $this->take($key, true);
    }

    /** save() ($wait false: one try) and waitAndSave() (waiting in chunks until it is free). */
    private function take(Key $key, bool $wait): void
    {
        $name = self::lockName($key);
        $token = self::token($key);
        if ($this->mode === self::MODE_LEASE) {
            $this->takeLease($key, $name, $token, $wait);
        } else {
            $this->useSharedLock();
            if (isset(self::$held[$name])) {
                // Held by a Key of this process: waiting would wait for ourselves.
                $this->saveAgain($key, $name, $token);
                return;
            }
            $this->takeShared($key, $name, $token, $wait);
        }
        $this->checkNotExpired($key);
    }

    /** Lease mode: the Key's lifetime ends no later than the lease's local deadline. */
    private function takeLease(Key $key, string $name, string $token, bool $wait): void
    {
        if (!$wait) {
            $key->reduceLifetime($this->initialTtl);
            $this->acquireLease($key, $name, $token, 0.0);
            return;
        }
        while (!$this->acquireLease($key, $name, $token, self::WAIT_CHUNK)) {
            // the wait ran out while another owner held it: wait again
        }
        // The lease's local deadline, taken before the winning statement was sent.
        $key->reduceLifetime(min($this->initialTtl, $this->lease()->getRemaining()));
    }

    /**
     * Shared mode: a lock in this process's session. The Key's lifetime is counted from
     * before one try, and from after a wait: the lease began inside lock(), and a takeover
     * needs its TTL plus the protocol's grace (0.5 s), far more than lock() took to return.
     */
    private function takeShared(Key $key, string $name, string $token, bool $wait): void
    {
        if (!$wait) {
            $key->reduceLifetime($this->initialTtl);
        }
        try {
            $handle = $wait ? $this->waitForShared($key, $name) : SharedLock::tryLock($name, $this->initialTtl);
        } catch (LockConflictedException $e) {
            throw $e;
        } catch (\Throwable $e) {
            throw new LockAcquiringException(sprintf('Failed to acquire the "%s" lock.', $key), 0, $e);
        }
        if ($handle === null) {
            throw new LockConflictedException(sprintf('The "%s" lock is held by another process.', $key));
        }
        if ($wait) {
            $key->reduceLifetime($this->initialTtl);
        }
        $this->holdShared($key, $name, $token, $handle);
    }

    /** Shared mode: SharedLock::lock() in chunks until it wins; a lock this process holds outside the stores ends the wait. */
    private function waitForShared(Key $key, string $name): SharedLockHandle
    {
        while (true) {
            try {
                return SharedLock::lock($name, self::WAIT_CHUNK, $this->initialTtl);
            } catch (SharedLockTimeoutException $e) {
                if ($this->heldOutsideStores($name)) {
                    throw new LockConflictedException(sprintf('The "%s" lock is held by this process outside the store.', $key), 0, $e);
                }
            }
        }
    }

    /** $value as a message shows it: PHP 8.5 warns when NAN becomes a string by itself. */
    private static function shown(mixed $value): string
    {
        if (is_float($value) && !is_finite($value)) {
            return var_export($value, true);
        }
        return is_scalar($value) ? (string) $value : get_debug_type($value);
    }

    public function putOffExpiration(Key $key, float $ttl): void
    {
        if (!($ttl > 0) || $ttl > self::MAX_TTL[$this->mode]) {
            throw new InvalidTtlException(sprintf('"%s()" expects a TTL greater than 0 and at most %s seconds, "%s" given.', __METHOD__, self::MAX_TTL[$this->mode], self::shown($ttl)));
        }
        $name = self::lockName($key);
        if ($this->mode === self::MODE_LEASE) {
            $key->reduceLifetime($ttl);
            try {
                $renewed = $this->lease()->renew($name, self::token($key), (int) ceil($ttl));
            } catch (\Throwable $e) {
                throw new LockStorageException(sprintf('Failed to put off the expiration of the "%s" lock.', $key), 0, $e);
            }
            if (!$renewed) {
                throw new LockConflictedException(sprintf('The "%s" lock is not held by this key any more.', $key));
            }
            $this->checkNotExpired($key);
            return;
        }
        $this->useSharedLock();
        $held = $this->heldBy($key, $name);
        if ($held === null) {
            throw new LockConflictedException(sprintf('The "%s" lock is not held by this key.', $key));
        }
        $key->reduceLifetime($ttl);
        try {
            // The lease ends $ttl from now, sooner than save() took it for too (renew() never shortens).
            $held['handle']->setRemainingTTL($ttl);
        } catch (SharedLockRemainingTTLException $e) {
            self::forget($name);
            throw new LockConflictedException(sprintf('The "%s" lock was lost: %s', $key, $e->getMessage()), 0, $e);
        } catch (\Throwable $e) {
            throw new LockStorageException(sprintf('Failed to put off the expiration of the "%s" lock.', $key), 0, $e);
        }
        $this->checkNotExpired($key);
    }

    public function delete(Key $key): void
    {
        $name = self::lockName($key);
        if ($this->mode === self::MODE_LEASE) {
            if (!$key->hasState(self::STATE)) {
                return;
            }
            try {
                $this->lease()->release($name, self::token($key));
            } catch (\Throwable $e) {
                throw new LockReleasingException(sprintf('Failed to release the "%s" lock.', $key), 0, $e);
            }
            // Released, or never this owner's: either way the Key holds nothing now, so
            // exists() (which Lock::release() asks next) answers without a statement.
            $key->removeState(self::STATE);
            return;
        }
        if ($this->heldBy($key, $name) === null) {
            return; // another Key's lock, or none: not ours to release
        }
        unset(self::$held[$name]);
        try {
            SharedLock::unlock($name);
        } catch (SharedLockReleaseException) {
            // already lost (TTL passed and taken over, session gone): not held, as asked
        } catch (\Throwable $e) {
            throw new LockReleasingException(sprintf('Failed to release the "%s" lock.', $key), 0, $e);
        }
    }

    public function exists(Key $key): bool
    {
        if ($key->isExpired() || !$key->hasState(self::STATE)) {
            return false;
        }
        $name = self::lockName($key);
        if ($this->mode === self::MODE_LEASE) {
            return $this->leaseIsOwned($key, $name);
        }
        $held = $this->heldBy($key, $name);
        if ($held === null) {
            return false;
        }
        try {
            return $held['handle']->getRemainingTTL() > 0;
        } catch (SharedLockRemainingTTLException) {
            self::forget($name);
            return false;
        } catch (\Throwable $e) {
            throw new LockStorageException(sprintf('Failed to check the "%s" lock.', $key), 0, $e);
        }
    }

    /**
     * Creates the locks table of this store's mode unless it exists, as `mysqllock init`
     * (`--lease`) does: the extension's DistributedLock::createTable() or
     * SharedLock::createTable() (the latter on SharedLock's connection, set to this store's).
     */
    public function createTable(): void
    {
        if ($this->mode === self::MODE_SHARED) {
            $this->useSharedLock();
        }
        try {
            if ($this->mode === self::MODE_LEASE) {
                $this->lease()->createTable();
            } else {
                SharedLock::createTable();
            }
        } catch (\Throwable $e) {
            throw new LockStorageException('Failed to create the locks table.', 0, $e);
        }
    }

    /**
     * The name the lock has in the table (and in `mysqllock status`): the resource itself
     * when it is 1 to 64 lowercase ASCII letters, digits and `_.:/-` (so the same name
     * taken by the CLI or SharedLock is the same lock), else `#` and 63 hex digits of its
     * SHA-256 (names the table would fold together, such as "Foo" and "foo", stay apart).
     */
    public static function lockName(Key $key): string
    {
        $resource = (string) $key;
        if (preg_match('#^[a-z0-9][a-z0-9_.:/-]{0,63}$#D', $resource) === 1) {
            return $resource;
        }
        return '#' . substr(hash('sha256', $resource), 0, 63);
    }

    /** The Key's token: created at its first use with a store, kept in its state. */
    private static function token(Key $key): string
    {
        if (!$key->hasState(self::STATE)) {
            // host:pid tell who took it (`mysqllock status`); the random part makes it unique.
            $host = substr(gethostname() ?: 'host', 0, 64);
            $key->setState(self::STATE, sprintf('%s:%d:%s', $host, getmypid(), bin2hex(random_bytes(12))));
        }
        return (string) $key->getState(self::STATE);
    }

    /** Lease mode: one acquire (waiting up to $wait seconds); false while another owner holds it and $wait > 0. */
    private function acquireLease(Key $key, string $name, string $owner, float $wait): bool
    {
        try {
            $acquired = $this->lease()->acquire($name, $owner, (int) ceil($this->initialTtl), $wait);
        } catch (\Throwable $e) {
            throw new LockAcquiringException(sprintf('Failed to acquire the "%s" lock.', $key), 0, $e);
        }
        if (!$acquired && $wait === 0.0) {
            throw new LockConflictedException(sprintf('The "%s" lock is held by another owner.', $key));
        }
        return $acquired;
    }

    /**
     * Lease mode: whether $key's owner holds an unexpired lease on $name, as the extension
     * judges it (database clock, exact owners, a read that sees the whole cluster).
     */
    private function leaseIsOwned(Key $key, string $name): bool
    {
        try {
            return $this->lease()->isHeldBy($name, self::token($key));
        } catch (\Throwable $e) {
            throw new LockStorageException(sprintf('Failed to check the "%s" lock.', $key), 0, $e);
        }
    }

    /** Shared mode: save() or waitAndSave() of a name some Key of this process holds. */
    private function saveAgain(Key $key, string $name, string $token): void
    {
        if (self::$held[$name]['token'] !== $token) {
            throw new LockConflictedException(sprintf('The "%s" lock is held by another key of this process.', $key));
        }
        // Saved twice: as PdoStore, the lock is put off to the initial TTL.
        $this->putOffExpiration($key, $this->initialTtl);
    }

    private function holdShared(Key $key, string $name, string $token, SharedLockHandle $handle): void
    {
        self::$held[$name] = ['token' => $token, 'handle' => $handle];
        // The lock lives in this process's database session: another process cannot resume it.
        $key->markUnserializable();
    }

    /**
     * Shared mode: the entry of $name when $key holds it in this process.
     *
     * @return array{token: string, handle: SharedLockHandle}|null
     */
    private function heldBy(Key $key, string $name): ?array
    {
        self::forgetAfterFork();
        $held = self::$held[$name] ?? null;
        if ($held === null || !$key->hasState(self::STATE) || $held['token'] !== $key->getState(self::STATE)) {
            return null;
        }
        return $held;
    }

    /** Shared mode: drops $name after it was found lost, and clears the extension's record of it. */
    private static function forget(string $name): void
    {
        unset(self::$held[$name]);
        try {
            SharedLock::unlock($name);
        } catch (\Throwable) {
            // lost already: the extension reports that, and now forgets it too
        }
    }

    /** A pcntl_fork() child holds none of its parent's locks (the extension gives it its own session). */
    private static function forgetAfterFork(): void
    {
        if (self::$heldPid !== getmypid()) {
            self::$held = [];
            self::$heldPid = getmypid();
        }
    }

    /** Whether this process holds $name through SharedLock directly (not through a store). */
    private function heldOutsideStores(string $name): bool
    {
        try {
            return (SharedLock::holder($name)['mine'] ?? false) === true;
        } catch (\Throwable) {
            return false;
        }
    }

    /**
     * Shared mode: points SharedLock (one connection and table per process) at this
     * store's. Switching is refused while a store holds locks on the current one.
     */
    private function useSharedLock(): void
    {
        self::forgetAfterFork();
        if ($this->pdo !== null) {
            $identity = 'pdo:' . spl_object_id($this->pdo);
        } elseif ($this->settings !== null) {
            $identity = 'dsn:' . $this->settings->identity();
        } else {
            $identity = 'default';
        }
        $identity .= '|' . ($this->table ?? 'shared_locks');
        if (self::$sharedConnection === $identity || (self::$sharedConnection === null && $identity === 'default|shared_locks')) {
            return; // already set, or the extension's own default untouched
        }
        if (self::$held !== []) {
            throw new LockStorageException(sprintf('SharedLock has one connection per process: this store cannot switch it while another store holds %d lock(s) on the current one.', count(self::$held)));
        }
        try {
            if ($this->pdo !== null) {
                SharedLock::setConnection($this->pdo);
            } else {
                $settings = $this->settings ?? ConnectionSettings::fromIni();
                SharedLock::configureConnection(
                    $settings->host,
                    $settings->dbName,
                    $settings->user,
                    $settings->password,
                    $settings->charset,
                    $settings->port,
                    $settings->additionalDsn(),
                );
            }
            $table = $this->table ?? 'shared_locks';
            if (SharedLock::getTable() !== $table) {
                SharedLock::setTable($table);
            }
        } catch (\Throwable $e) {
            throw new LockStorageException('Failed to set up the SharedLock connection.', 0, $e);
        }
        self::$sharedConnection = $identity;
        self::$sharedPdo = $this->pdo; // keeps the PDO (and with it its object id) alive
    }

    /** Lease mode's DistributedLock, on this store's PDO. */
    private function lease(): DistributedLock
    {
        return $this->lease ??= new DistributedLock($this->connection(), $this->table ?? 'distributed_locks');
    }

    /** The PDO given, or one opened from the DSN or from php.ini's mysqllock.dsn. */
    private function connection(): \PDO
    {
        return $this->pdo ?? ($this->ownPdo ??= ($this->settings ?? ConnectionSettings::fromIni())->openPdo());
    }

    /** As Symfony's stores: a Key whose lifetime is over is released and reported. */
    private function checkNotExpired(Key $key): void
    {
        if ($key->isExpired()) {
            try {
                $this->delete($key);
            } catch (\Exception) {
                // the expiry is what the caller must hear about
            }
            throw new LockExpiredException(sprintf('Failed to store the "%s" lock.', $key));
        }
    }
}
