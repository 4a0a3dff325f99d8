<?php

/**
 * IDE and static-analysis stubs for the mysqllock extension (mysqllock.so).
 *
 * The extension registers these classes natively; this file is never loaded at run
 * time. It declares exactly what the extension registers (checked by
 * tests/php/StubTest.php through Reflection): the same classes, parents, methods,
 * parameter names, optional parameters, defaults and constants.
 *
 * Like the original package its-mieger/mysql-shared-locks, methods declare no return
 * types and parameters no types (the extension registers them as `mixed`, which is the
 * same to PHP), so subclasses written for the original keep working; the PHPDoc gives
 * the accepted types.
 */

namespace ItsMieger\MySqlSharedLocks {

    use ItsMieger\MySqlSharedLocks\Exception\SharedLockAcquireException;
    use ItsMieger\MySqlSharedLocks\Exception\SharedLockException;
    use ItsMieger\MySqlSharedLocks\Exception\SharedLockReleaseException;
    use ItsMieger\MySqlSharedLocks\Exception\SharedLockRemainingTTLException;
    use ItsMieger\MySqlSharedLocks\Exception\SharedLockTimeoutException;
    use ItsMieger\MySqlSharedLocks\Exception\TableRepairException;

    /**
     * MySQL-backed named locks with acquire timeout and TTL, shared by every process
     * that uses the same table (also processes still running the original package).
     *
     * Beyond the original, lock(), tryLock() and synchronized() take an array of options:
     *
     * - `keepAlive` (bool): renew the lock from a background thread with its own
     *   connection every third of the TTL while it is held, so a long job needs no
     *   renew() calls. Needs the extension's own connection (configureConnection() or
     *   mysqllock.dsn), not a PDO. Stops at release/unlock, at the end of the request,
     *   and after `maxHold`; never runs in a pcntl_fork() child. If a renewal fails, the
     *   lock counts as lost: assertTTL(), getRemainingTTL() and renew() throw
     *   SharedLockRemainingTTLException, release()/unlock() SharedLockReleaseException.
     * - `maxHold` (int|float seconds, only with keepAlive; default 3600): when keep-alive
     *   stops renewing; the lock then ends by its TTL, never after acquisition + maxHold.
     * - `atLeast` (int|float seconds): the lock stays taken for at least this long after
     *   acquisition even if released sooner (nobody, this process included, acquires it
     *   before), so a node whose cron fires a little later does not run the job again.
     *
     * Fencing tokens: on a table upgraded with `mysqllock init --upgrade`, every
     * acquisition gets a token greater than all before it (SharedLockHandle::getToken()).
     * A lock can be lost (TTL passed, another process took over) while its holder still
     * works; check the token in the write the lock protects, so a stale holder's write
     * changes nothing (`:t` twice needs PDO's emulated prepares, its MySQL default):
     *
     * ```php
     * $lock = SharedLock::lock('invoice-42', 5, 60);
     * $update = $pdo->prepare('UPDATE invoices SET total = :total, fence = :t WHERE id = :id AND fence < :t');
     * $update->execute(['total' => $total, 't' => $lock->getToken(), 'id' => 42]);
     * if ($update->rowCount() === 0) {
     *     throw new RuntimeException('a newer lock holder has written: abort');
     * }
     * $lock->release();
     * ```
     */
    class SharedLock
    {
        /** Identifiers quoted with backticks (MySQL's default). */
        public const QUOTE_STYLE_DEFAULT = 0;

        /** Identifiers quoted with double quotes, for sessions with sql_mode ANSI_QUOTES. */
        public const QUOTE_STYLE_ANSI = 1;

        /**
         * The longest TTL (and timeout) in seconds any method accepts. Not part of the
         * original package.
         */
        public const MAX_TTL = 1.0E9;

        /**
         * Sets the connection parameters and closes the current connection: locks held
         * on it are released (as with the original, whose PDO was closed). The
         * connection is opened at the next lock.
         *
         * @param string $host server host name or IP ("localhost" uses the Unix socket)
         * @param string|null $dbName database holding the locks table
         * @param string $username
         * @param string|null $password
         * @param string $charset connection character set
         * @param int|string|null $port TCP port (3306 when null)
         * @param string|null $additionalDsn more PDO DSN settings, e.g. "unix_socket=/run/mysqld/mysqld.sock";
         *        also the TLS settings of the `mysql` client, which are taken out of the DSN
         *        PDO sees: "ssl-mode=VERIFY_IDENTITY;ssl-ca=/etc/mysql/ca.pem" (ssl-mode:
         *        DISABLED, PREFERRED (the default), REQUIRED, VERIFY_CA, VERIFY_IDENTITY;
         *        ssl-ca alone means VERIFY_CA; ssl-cert and ssl-key for a client certificate;
         *        "ssl_mode" and so on too)
         * @return void
         * @throws \InvalidArgumentException for an invalid port, charset or TLS setting
         */
        public static function configureConnection($host, $dbName, $username, $password, $charset = 'utf8mb4', $port = null, $additionalDsn = null) {}

        /**
         * From now on lock SQL runs on this PDO's session, so a takeover of a lock
         * KILLs that session and the application's open transaction on it fails.
         * Locks already held stay on the session they were taken on.
         *
         * @param \PDO $pdo a pdo_mysql connection
         * @return void
         * @throws \TypeError if $pdo is not a PDO
         */
        public static function setConnection(\PDO $pdo) {}

        /**
         * The PDO locks run on. Without one (see setConnection()), opens one with the
         * configured parameters (ERRMODE_EXCEPTION, emulated prepares off): every lock
         * held or taken from then on is lost when its session is killed.
         *
         * The TLS settings become PDO::MYSQL_ATTR_SSL_* attributes, within what mysqlnd
         * can do: PREFERRED (the default) gives an unencrypted PDO; VERIFY_CA, and
         * REQUIRED with ssl-ca, also check the host name; TLS over a Unix socket (host
         * localhost) is refused (see \MySqlLock\PdoFactory).
         *
         * Bounded as the extension's own connection is: connect_timeout for the TCP
         * connect (PDO::ATTR_TIMEOUT), and read_timeout + 10 s for every read
         * (mysqlnd.net_read_timeout, set while it connects), your own queries on it
         * included; lock waits on it run as GET_LOCKs of at most 10 s each.
         *
         * @return \PDO
         * @throws \PDOException if connecting fails
         * @throws \InvalidArgumentException if no connection is configured, or for a TLS
         *         setting the PDO cannot have
         */
        public static function getConnection() {}

        /**
         * @param int $style self::QUOTE_STYLE_DEFAULT or self::QUOTE_STYLE_ANSI
         * @return void
         * @throws \InvalidArgumentException for any other style, or while locks are held
         */
        public static function setQuoteStyle($style) {}

        /**
         * @return string the locks table, "shared_locks" unless changed
         */
        public static function getTable() {}

        /**
         * Changes the locks table (not part of the original package).
         *
         * @param string $table "name" or "schema.name": letters, digits, "_" and "$"
         * @return void
         * @throws \InvalidArgumentException for an invalid name, or while locks are held
         */
        public static function setTable($table) {}

        /**
         * Acquires a lock. A discarded handle does not release it: the lock lives
         * until unlock()/release(), until its TTL passed and another process took it
         * over, or until the process (or PHP request) ends.
         *
         * @param string $name lock name: 1 to 64 characters the table can store
         * @param int|float $timeout seconds to wait while another process holds it; 0 = one try
         * @param int|float $ttl seconds the lock lives at most (rounded up to whole seconds)
         * @param array{keepAlive?: bool, maxHold?: int|float, atLeast?: int|float} $options
         *        see the class description (not part of the original package)
         * @return SharedLockHandle
         * @throws SharedLockTimeoutException if it is still held elsewhere after $timeout
         *         seconds, and at once if this process already holds it
         * @throws SharedLockAcquireException on any other failure (bad input, connection,
         *         missing table); getPrevious() tells the cause (an
         *         \InvalidArgumentException for bad input, e.g. an unknown option key, a
         *         wrong option type, or keepAlive on a PDO connection; a
         *         \MySqlLock\DeadlockException when the server refused the wait because a
         *         process waiting for a lock this one holds holds this lock)
         * @throws \TypeError if $timeout or $ttl is not a number, or $options not an array
         */
        public static function lock($name, $timeout, $ttl, $options = []) {}

        /**
         * One try without waiting (not part of the original package).
         *
         * @param string $name
         * @param int|float $ttl seconds the lock lives at most
         * @param array{keepAlive?: bool, maxHold?: int|float, atLeast?: int|float} $options as lock()
         * @return SharedLockHandle|null null while another process (or this one) holds it
         * @throws SharedLockAcquireException on any failure other than contention
         */
        public static function tryLock($name, $ttl, $options = []) {}

        /**
         * Runs $callback($handle) under the lock and returns its value; the lock is
         * released afterwards, also when $callback throws (its exception is rethrown
         * unchanged). Not part of the original package.
         *
         * @template T
         * @param string $name
         * @param int|float $timeout
         * @param int|float $ttl
         * @param callable(SharedLockHandle): T $callback
         * @param array{keepAlive?: bool, maxHold?: int|float, atLeast?: int|float} $options as lock()
         * @return T
         * @throws SharedLockTimeoutException|SharedLockAcquireException as lock()
         * @throws SharedLockReleaseException if the lock was lost while $callback ran
         */
        public static function synchronized($name, $timeout, $ttl, callable $callback, $options = []) {}

        /**
         * @param string $name
         * @return void
         * @throws SharedLockReleaseException if this process does not hold the lock (any more)
         */
        public static function unlock($name) {}

        /**
         * Extends a lock this process holds to $ttl seconds from now (database clock);
         * never shortens it. Not part of the original package.
         *
         * @param string $name
         * @param int|float $ttl seconds from now
         * @return void
         * @throws SharedLockRemainingTTLException if the lock is not held any more (taken
         *         over, session lost, keep-alive failed) or $ttl is invalid; the message
         *         names the lock and the cause, getPrevious() the underlying error
         * @throws \TypeError if $ttl is not a number
         */
        public static function renew($name, $ttl) {}

        /**
         * Sets a lock this process holds to end $ttl seconds from now (database clock),
         * sooner or later than it would have: another process may take it over once
         * they are up (Symfony's putOffExpiration()). Whole seconds, rounded up. A
         * keep-alive goes on renewing it. Not part of the original package.
         *
         * @param string $name
         * @param int|float $ttl seconds from now
         * @return void
         * @throws SharedLockRemainingTTLException if the lock is not held any more (taken
         *         over, session lost, keep-alive failed) or $ttl is invalid
         * @throws \TypeError if $ttl is not a number
         */
        public static function setRemainingTTL($name, $ttl) {}

        /**
         * @param string $name
         * @param int|float $minRemainingTTL seconds the lock must still live
         * @return void
         * @throws SharedLockRemainingTTLException if the lock is not held any more or
         *         lives less than $minRemainingTTL seconds
         */
        public static function assertTTL($name, $minRemainingTTL = 1) {}

        /**
         * Runs REPAIR TABLE on the locks table (MyISAM). lock() and friends do it by
         * themselves (once) when they find the table marked as crashed.
         *
         * @return void
         * @throws TableRepairException unless the server reports status OK; the message
         *         ends with the server's own status texts
         */
        public static function tryRepairTable() {}

        /**
         * Creates the locks table (getTable()) on the current connection unless it
         * exists: the original package's DDL, as `mysqllock init` runs it (InnoDB on a
         * Group Replication member). Not part of the original package.
         *
         * @return bool true if it was created
         * @throws \RuntimeException if the database refuses (getPrevious(): the
         *         PDOException, if any)
         * @throws \InvalidArgumentException if no connection is configured
         */
        public static function createTable() {}

        /**
         * Whether any process (this one included) holds the lock now. Not part of the
         * original package.
         *
         * @param string $name
         * @return bool
         * @throws SharedLockException if the table cannot be read
         */
        public static function isLocked($name) {}

        /**
         * Who holds the lock, from its table row (database clock); null when nobody
         * does. Not part of the original package. `host` is the holder's client address
         * as the server sees it; `token`, `hostname` (the holder machine's name) and `pid`
         * are recorded on tables upgraded with `mysqllock init --upgrade` by mysqllock
         * holders, null otherwise. `acquiredAt` and `expiresAt` are Unix seconds on the
         * database clock; `acquired` is false while the row only lingers for `atLeast`.
         *
         * @param string $name
         * @return array{connectionId: int, host: ?string, ttl: int, remainingTTL: float, age: float, acquired: bool, alive: bool, mine: bool, token: ?int, hostname: ?string, pid: ?int, acquiredAt: int, expiresAt: int}|null
         * @throws SharedLockException if the table cannot be read
         */
        public static function holder($name) {}
    }

    /**
     * A lock acquired by SharedLock::lock(); only its name. Releasing or checking it
     * is the same as SharedLock::unlock()/assertTTL() with that name.
     */
    class SharedLockHandle
    {
        /** @var string */
        protected $lockName;

        /**
         * @param string $lockName
         */
        public function __construct($lockName) {}

        /**
         * @return static
         * @throws SharedLockReleaseException if this process does not hold the lock (any more)
         */
        public function release() {}

        /**
         * @param int|float $min seconds the lock must still live
         * @return static
         * @throws SharedLockRemainingTTLException if the lock is not held any more or
         *         lives less than $min seconds
         */
        public function assertTTL($min = 1) {}

        /**
         * @return string the lock name (not part of the original package)
         */
        public function getName() {}

        /**
         * Seconds until another process may take the lock over, on the database
         * clock. Not part of the original package.
         *
         * @return float
         * @throws SharedLockRemainingTTLException if the lock is not held any more
         */
        public function getRemainingTTL() {}

        /**
         * The fencing token of this acquisition: greater than every token issued before
         * on the table, also across server restarts. Check it in the write the lock
         * protects (see SharedLock). Not part of the original package.
         *
         * @return int
         * @throws SharedLockException if the table has no token column (run
         *         `mysqllock init --upgrade`)
         * @throws SharedLockRemainingTTLException if this process does not hold the lock
         *         (any more)
         */
        public function getToken() {}

        /**
         * SharedLock::renew() for this lock. Not part of the original package.
         *
         * @param int|float $ttl seconds from now
         * @return static
         * @throws SharedLockRemainingTTLException if the lock is not held any more
         */
        public function renew($ttl) {}

        /**
         * SharedLock::setRemainingTTL() for this lock. Not part of the original package.
         *
         * @param int|float $ttl seconds from now
         * @return static
         * @throws SharedLockRemainingTTLException if the lock is not held any more
         */
        public function setRemainingTTL($ttl) {}
    }
}

namespace ItsMieger\MySqlSharedLocks\Exception {

    /**
     * Base of the lock exceptions.
     */
    class SharedLockException extends \Exception
    {
        /** @var string */
        protected $lockName;

        /**
         * @param string $lockName
         * @param string $message the class's default message when empty
         * @param int $code
         * @param \Throwable|null $previous
         */
        public function __construct($lockName, $message = '', $code = 0, ?\Throwable $previous = null) {}

        /**
         * @return string
         */
        public function getLockName() {}
    }

    /**
     * Acquiring failed. Default message: Acquiring lock "NAME" failed
     */
    class SharedLockAcquireException extends SharedLockException
    {
        /**
         * @param string $lockName
         * @param string $message
         * @param int $code
         * @param \Throwable|null $previous
         */
        public function __construct($lockName, $message = '', $code = 0, ?\Throwable $previous = null) {}
    }

    /**
     * The lock stayed held elsewhere. Default message:
     * Acquiring lock "NAME" timed out after T seconds
     */
    class SharedLockTimeoutException extends SharedLockAcquireException
    {
        /** @var int|float */
        protected $timeout;

        /**
         * @param string $lockName
         * @param int|float $timeout
         * @param string $message
         * @param int $code
         * @param \Throwable|null $previous
         */
        public function __construct($lockName, $timeout, $message = '', $code = 0, ?\Throwable $previous = null) {}

        /**
         * @return int|float the timeout as given
         */
        public function getTimeout() {}
    }

    /**
     * Releasing failed: the lock is not held (any more). Default message:
     * Releasing lock "NAME" failed
     */
    class SharedLockReleaseException extends SharedLockException
    {
        /**
         * @param string $lockName
         * @param string $message
         * @param int $code
         * @param \Throwable|null $previous
         */
        public function __construct($lockName, $message = '', $code = 0, ?\Throwable $previous = null) {}
    }

    /**
     * The lock is not held any more or lives too short. Default message:
     * Lock "NAME" is not to live for T seconds anymore
     */
    class SharedLockRemainingTTLException extends SharedLockException
    {
        /** @var int|float */
        protected $ttl;

        /**
         * @param string $lockName
         * @param int|float $ttl the TTL that was required
         * @param string $message
         * @param int $code
         * @param \Throwable|null $previous
         */
        public function __construct($lockName, $ttl, $message = '', $code = 0, ?\Throwable $previous = null) {}

        /**
         * @return int|float the required TTL as given
         */
        public function getTTL() {}
    }

    /**
     * REPAIR TABLE did not report status OK. Also reachable as
     * ItsMieger\MySqlSharedLocks\TableRepairException (a class alias).
     */
    class TableRepairException extends \Exception
    {
    }

    /**
     * The getPrevious() of the SharedLockAcquireException (or other lock exception)
     * thrown when the server is a replicated cluster node (Galera with wsrep_on=ON, or
     * an active Group Replication member): GET_LOCK and KILL act on that node only, so
     * another node would grant the same lock. The message names both ways out: the
     * lease mode (\Nene\Kit\DistributedLock), or `mysqllock.allow_cluster = 1` in
     * php.ini (`allow_cluster=1` in mysqllock.dsn) when every lock client talks to one
     * node.
     */
    class ClusterNodeException extends \RuntimeException
    {
    }
}

namespace ItsMieger\MySqlSharedLocks {
    \class_alias(Exception\TableRepairException::class, TableRepairException::class);
}

namespace Nene\Kit {

    /**
     * A DB-backed mutual exclusion lock with owner strings and a TTL (lease mode): a
     * drop-in for the class of this name. One row per resource in the table
     * `distributed_locks(resource VARCHAR(255) PRIMARY KEY, owner VARCHAR(255) NOT NULL,
     * expires_at DATETIME NOT NULL, acquired_at DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP)`
     * (InnoDB; `mysqllock init --lease` or createTable() creates it). No GET_LOCK, no
     * connection ids: safe on replicated clusters (Galera, Group Replication).
     *
     * Expiry is judged by the database clock only; expires_at holds UTC. Each call is one
     * autocommitted statement (on a PDO of yours it runs in your session as it is: inside
     * your transaction it commits or rolls back with it). Leases are not released when the
     * object or the request ends: they expire by their TTL, as with the original class.
     *
     * On MySQL through a PDO, acquire() and renew() leave $pdo->lastInsertId() as they
     * found it (their verdict travels in LAST_INSERT_ID(); one more statement that writes
     * nothing sets it back when it changed). On SQLite an acquire that inserts a row sets
     * it to that row's id, which SQL cannot set back.
     */
    class DistributedLock
    {
        /**
         * The longest TTL in seconds acquire() and renew() accept: what ends a lease by
         * 9999-12-31 23:59:59 UTC counted from 1970, where expires_at (a DATETIME) ends;
         * the database clock may refuse less (a lease may not end past that date).
         */
        public const MAX_TTL = 253402300799;

        /**
         * @param \PDO|null $pdo a pdo_mysql PDO (MySQL/MariaDB) or a pdo_sqlite PDO (tests
         *   with crafted rows); null: the extension's own connection from php.ini's
         *   mysqllock.dsn (whose `?lease_table=` names the table when $table is not given)
         * @param string $table the lease table, `name` or `schema.name`
         * @param callable(): \PDO|null $reconnect with a PDO: called for a new PDO (of the
         *   same driver) when the extension finds the connection of the one in use lost
         *   (MySQL 2006, 2013, a killed session, ...); the statement is then sent again on
         *   it, as the extension's own connection does by itself. Without it a lost PDO
         *   stays lost. What it throws is the getPrevious() of the DistributedLockException.
         * @throws DistributedLockException without a PDO when mysqllock.dsn is not set or invalid
         * @throws \InvalidArgumentException for another PDO driver, an invalid table name,
         *   or $reconnect without a PDO
         * @throws \TypeError if $pdo is not a PDO or $reconnect not callable
         */
        public function __construct(?\PDO $pdo = null, string $table = 'distributed_locks', ?callable $reconnect = null) {}

        /**
         * Takes $resource for $owner when it is free, expired, or already $owner's (the
         * TTL then restarts).
         *
         * @param string $resource at most as long as the column (255 characters)
         * @param string $owner unique per process/request, compared exactly (case-sensitive)
         * @param int $ttlSeconds from 1 to what ends the lease by 9999-12-31 23:59:59 UTC, where
         *   the DATETIME column's range ends (about 2.5e11 seconds from 2026)
         * @param float $wait seconds to keep trying while another owner holds it (polls with
         *   capped exponential backoff and jitter); 0: one try, as the original
         * @return bool false if another owner holds an unexpired lease
         * @throws \InvalidArgumentException for bad input (nothing is written)
         * @throws DistributedLockException if the database fails (missing or MyISAM table, connection)
         */
        public function acquire(string $resource, string $owner, int $ttlSeconds, float $wait = 0): bool {}

        /**
         * @return bool true only for the current, unexpired owner (false: wrong owner, expired, not found)
         * @throws \InvalidArgumentException for bad input
         * @throws DistributedLockException if the database fails
         */
        public function release(string $resource, string $owner): bool {}

        /**
         * Restarts $owner's unexpired lease with $ttlSeconds from now.
         *
         * @return bool true only for the current, unexpired owner (false: wrong owner, expired, not found)
         * @throws \InvalidArgumentException for bad input
         * @throws DistributedLockException if the database fails
         */
        public function renew(string $resource, string $owner, int $ttlSeconds): bool {}

        /**
         * @return bool whether any unexpired lease on $resource exists
         * @throws \InvalidArgumentException for bad input
         * @throws DistributedLockException if the database fails
         */
        public function isHeld(string $resource): bool {}

        /**
         * Whether $owner holds an unexpired lease on $resource. Owners compare exactly, as
         * release() and renew() compare them; read as isHeld() reads.
         *
         * @throws \InvalidArgumentException for bad input
         * @throws DistributedLockException if the database fails
         */
        public function isHeldBy(string $resource, string $owner): bool {}

        /**
         * The owner of the unexpired lease on $resource, expiry judged as by every other
         * method (database clock, the table's precision); null when it is free. On a
         * Galera node or a Group Replication member read after every commit the cluster
         * made before it, as isHeld().
         *
         * @throws \InvalidArgumentException for bad input
         * @throws DistributedLockException if the database fails (a cluster node that is
         *   not ready: code 1047, 3796, 3797)
         */
        public function owner(string $resource): ?string {}

        /**
         * Ends the unexpired lease on $resource whoever holds it (a holder that died or
         * hangs), as its owner's release() would: on an upgraded table the row stays,
         * so fencing tokens count on. One statement, no read first.
         *
         * @return bool true if a live lease was ended, false if there was none
         * @throws \InvalidArgumentException for bad input
         * @throws DistributedLockException if the database fails
         */
        public function forceRelease(string $resource): bool {}

        /**
         * The resources of the live leases whose name begins with $prefix exactly (case,
         * accents and trailing blanks count, whatever the column's collation folds),
         * ordered; read as isHeld() reads.
         *
         * @return list<string>
         * @throws \InvalidArgumentException for an empty prefix (it would name every lease
         *   of the table, other applications' too) or bad input
         * @throws DistributedLockException if the database fails
         */
        public function heldWithPrefix(string $prefix): array {}

        /**
         * Ends every live lease whose name begins with $prefix exactly, whoever holds it,
         * each as forceRelease() ends one (what a framework's "flush the locks" asks
         * for). A lease taken while this runs may outlive it.
         *
         * @return int how many live leases it ended
         * @throws \InvalidArgumentException for an empty prefix (it would end every lease
         *   of the table, other applications' too) or bad input
         * @throws DistributedLockException if the database fails
         */
        public function forceReleaseWithPrefix(string $prefix): int {}

        /**
         * The fencing token of the last successful acquire()/renew() on this object:
         * strictly increasing per resource across takeovers. Null on a table without the
         * upgrade (upgradeTable(), `mysqllock init --lease --upgrade`), and once that
         * lease was released or a renewal refused.
         */
        public function getToken(): ?int {}

        /**
         * Seconds until the local deadline of the last successful acquire()/renew() on
         * this object (monotonic clock, taken before the statement was sent, minus a
         * margin of 0.5 s for clock skew; half the TTL for TTLs under 1 s). 0 when there
         * is none, it passed, the lease was released or a renewal refused.
         */
        public function getRemaining(): float {}

        /**
         * Creates the table (InnoDB on MySQL) unless it exists.
         *
         * @return bool true if it was created
         * @throws DistributedLockException if the database fails
         */
        public function createTable(): bool {}

        /**
         * Adds the fencing `token` column and microsecond times (MySQL/MariaDB only;
         * everything works without it).
         *
         * @return bool true if it changed the table, false if it was upgraded already
         * @throws \InvalidArgumentException on SQLite
         * @throws DistributedLockException if the database fails
         */
        public function upgradeTable(): bool {}

        /** The copy uses a session of its own. */
        public function __clone() {}

        /** Closes the object's own connection; its leases stay until their TTL. */
        public function __destruct() {}
    }

    /**
     * A database failure of DistributedLock: the code is the driver's error number (MySQL's
     * 1047 node not ready, ...) and getPrevious() the PDOException where there is one.
     */
    class DistributedLockException extends \RuntimeException
    {
    }
}

namespace MySqlLock {

    /**
     * A session lock: MySQL's GET_LOCK, held by a database session until release(), or
     * until that session ends: with the request (php-fpm, php -S), the process (also when
     * it is killed), or the connection. Nothing to create, no table, no TTL.
     *
     * Which lock do I want?
     *
     * - SessionLock: "only one at a time" while the holder runs. It is free again the
     *   moment its holder ends, so a job that takes less time than the clock skew between
     *   the nodes whose cron starts it can run twice: node B starts after node A finished
     *   and finds the lock free.
     * - \ItsMieger\MySqlSharedLocks\SharedLock::lock($name, $timeout, $ttl, ['atLeast' => $seconds]):
     *   a lease that stays taken for at least $seconds after acquisition even when
     *   released sooner, so the late node finds it taken. Use it for "once per period".
     * - \Nene\Kit\DistributedLock (lease mode): on a replicated cluster (Galera, Group
     *   Replication), where GET_LOCK is local to one node and is refused.
     *
     * The connection: null is the extension's own (the settings of SharedLock:
     * mysqllock.dsn or SharedLock::configureConnection(); the very session SharedLock
     * uses when that is the native one). A PDO (pdo_mysql) or mysqli of yours: the lock
     * lives in that connection's session, so your open transaction and the lock end
     * together (a killed process, $mysqli->close()). While a lock is held on it, the
     * extension keeps a reference to your connection (so dropping yours does not close
     * it) and releases the lock at the end of the request, also on a persistent
     * connection that outlives the request.
     *
     * Names: 1 to 64 characters. Spellings that differ only in case, accents or Unicode
     * normal form are one lock ("Invoices", "invoices", "ÍNVOICES"): getKey() is the name
     * GET_LOCK actually takes (lowercase, accents removed), so a plain lowercase ASCII
     * name is the very lock a hand-written GET_LOCK('name', ...) takes. A name whose key
     * would exceed 64 characters is refused, never shortened.
     *
     * The lock belongs to the session, not to this object: destroying the object does not
     * release it, and another SessionLock of the same name on the same connection
     * releases it. A pcntl_fork() child neither uses nor releases its parent's sessions.
     *
     * ```php
     * $lock = new \MySqlLock\SessionLock('nightly-report', $mysqli);
     * if (!$lock->acquire()) {
     *     exit(0); // another instance runs
     * }
     * // ... the job ...
     * $lock->release();
     * ```
     */
    class SessionLock
    {
        /**
         * Connects at the first call, not here.
         *
         * @param string $name 1 to 64 characters
         * @param \PDO|\mysqli|null $connection a pdo_mysql PDO or a mysqli whose session
         *   holds the lock; null: the extension's own connection
         * @throws \InvalidArgumentException for an unusable name (empty, over 64
         *   characters) or a PDO of another driver
         * @throws \TypeError for another kind of $connection
         */
        public function __construct(string $name, \PDO|\mysqli|null $connection = null) {}

        /**
         * Takes the lock, waiting up to $timeout seconds while another session holds it.
         *
         * @param float $timeout seconds, fractions allowed; 0: one try
         * @return bool true: this session holds it now; false: another session still held
         *   it when the time ran out
         * @throws AlreadyHeldException if this connection's session holds it already
         *   (under any spelling of the name)
         * @throws DeadlockException if the server refused to wait: a session holding this
         *   lock waits for one this session holds (locks this session held stay held)
         * @throws ConnectionException if connecting failed or the connection is lost (on
         *   the extension's own connection a session that died since the last call is
         *   replaced once, on yours it is not)
         * @throws LockException on any other database failure (getPrevious(): the
         *   PDOException or mysqli_sql_exception; a ClusterNodeException on a cluster node)
         * @throws \InvalidArgumentException for a negative or NaN $timeout
         */
        public function acquire(float $timeout = 0.0): bool {}

        /**
         * @throws NotHeldException if this connection's session does not hold it (never
         *   acquired, already released, or lost with its session)
         * @throws LockException on any other database failure
         */
        public function release(): void {}

        /**
         * Whether this connection's session holds the lock, asked of the server (a lock
         * lost with its session reads as not held).
         *
         * @throws ConnectionException|LockException if the server cannot be asked
         */
        public function isHeldByMe(): bool {}

        /**
         * The CONNECTION_ID() of the session holding the lock, whatever client it is (a
         * hand-written GET_LOCK too); null when it is free.
         *
         * @throws ConnectionException|LockException if the server cannot be asked
         */
        public function holder(): ?int {}

        /**
         * Runs $work($this) under the lock and returns what it returns. The lock is
         * released afterwards whatever happens: when $work throws (its exception is
         * rethrown unchanged), and after exit() or a fatal error at the end of the
         * request.
         *
         * @template T
         * @param callable(SessionLock): T $work
         * @param float $timeout as acquire()
         * @return T
         * @throws LockTimeoutException if another session still held it after $timeout
         * @throws NotHeldException if the lock was lost while $work ran (its session died)
         * @throws AlreadyHeldException|DeadlockException|ConnectionException|LockException as acquire()
         */
        public function synchronized(callable $work, float $timeout = 0.0): mixed {}

        /** The name as given. */
        public function getName(): string {}

        /**
         * The name GET_LOCK takes: lowercase, accents and Unicode normal form folded
         * ("Müller-Größe" -> "muller-grosse"). A plain lowercase ASCII name is its own key.
         */
        public function getKey(): string {}

        /** The copy names the same lock on the same connection. */
        public function __clone() {}

        /** Does not release the lock: it belongs to the session, not the object. */
        public function __destruct() {}
    }

    /**
     * Base of the failures of MySqlLock classes (bad input is \InvalidArgumentException).
     * The code is the server's error number where there is one; getPrevious() the
     * PDOException or mysqli_sql_exception behind it, or the
     * \ItsMieger\MySqlSharedLocks\Exception\ClusterNodeException on a cluster node.
     */
    class LockException extends \RuntimeException
    {
    }

    /** synchronized() could not acquire the lock in time. */
    class LockTimeoutException extends LockException
    {
    }

    /** release() of a lock this session does not hold (any more), or one lost meanwhile. */
    class NotHeldException extends LockException
    {
    }

    /** acquire() of a lock this session holds already. */
    class AlreadyHeldException extends LockException
    {
    }

    /**
     * The server refused to wait for a lock: a session that holds it waits for a lock
     * this session holds (MariaDB error 1213, MySQL 3058). Also the getPrevious() of
     * SharedLock's SharedLockAcquireException in that case. Release this session's other
     * locks and retry, or take locks in one fixed order everywhere.
     */
    class DeadlockException extends LockException
    {
    }

    /** Connecting failed, no connection is configured, or the connection was lost. */
    class ConnectionException extends LockException
    {
    }

    /**
     * PDOs on the server of a `mysql://` URL, with the extension's connection settings
     * (TLS, connect_timeout as PDO::ATTR_TIMEOUT; reads keep mysqlnd's own bound): for
     * code that needs a PDO (the Symfony and Laravel bridges lease on one).
     */
    final class PdoFactory
    {
        /**
         * A new PDO (ERRMODE_EXCEPTION, emulated prepares off) on the server $url names,
         * in the syntax of php.ini's mysqllock.dsn:
         * `mysql://user:password@host:port/database?socket=...&charset=...&ssl-mode=...&ssl-ca=...&ssl-cert=...&ssl-key=...`.
         * A `socket` is used instead of host and port.
         *
         * The TLS settings become PDO::MYSQL_ATTR_SSL_* attributes. mysqlnd cannot do all
         * that the `mysql` client's modes ask: PREFERRED (the default) gives an
         * unencrypted PDO; VERIFY_CA, and REQUIRED with ssl-ca, also check the host name
         * (stricter, never weaker); TLS over a Unix socket (host localhost) is refused.
         *
         * @param string $url
         * @return \PDO
         * @throws \InvalidArgumentException for an invalid URL or TLS setting, a file that
         *         cannot be read, or a mode that needs TLS over a Unix socket
         * @throws \PDOException if connecting fails ("Cannot connect to MySQL using SSL" for
         *         every TLS failure: a certificate refused, a server without TLS)
         */
        public static function fromUrl(string $url): \PDO {}
    }

    /**
     * The end of a request for worker-mode servers, which serve many requests in one PHP
     * request (FrankenPHP's worker mode, RoadRunner, Swoole, ReactPHP, Laravel Octane):
     * PHP's own request end, where the extension releases what a request left, never
     * comes between them. Call it in the worker loop after each request.
     *
     * It does what request end does: every lock of SharedLock and of SessionLock still
     * held is released (SessionLocks on your PDOs and mysqlis too), and the extension's
     * own connections are closed, as is a PDO made by SharedLock::getConnection() (the
     * next request connects anew). What the worker set up once stays: the settings of
     * SharedLock::configureConnection() and php.ini, SharedLock::setTable(), and a PDO
     * given to SharedLock::setConnection() (its locks released; the PDO is yours and
     * stays open). A SharedLockHandle of a released lock is stale: its release() throws.
     * DistributedLock leases are not touched: they outlive requests by design and end by
     * release() or their TTL.
     *
     * Safe to call at any time outside the extension's own calls: when nothing is held it
     * does nothing and returns 0.
     *
     * ```php
     * $handler = static function (): void { ... };   // may lock and forget to release
     * while (frankenphp_handle_request($handler)) {
     *     \MySqlLock\end_request();
     * }
     * ```
     *
     * @return int how many SharedLock and SessionLock locks were still held (all
     *         released now): more than 0 means the request forgot some
     * @throws \InvalidArgumentException when called from code the extension is running
     *         itself (a PDO subclass, an error handler inside a lock call)
     */
    function end_request(): int {}
}
