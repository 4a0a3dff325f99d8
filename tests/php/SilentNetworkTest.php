<?php
// Issue 30: the extension's own connection on a silent network. A proxy between it and
// the server ($MYSQLLOCK_BIN/freezeproxy) stops passing bytes, as a dropped route or a
// frozen VM would: no RST, no FIN. Every call returns or throws within its bound
// (connect_timeout for a connect, the wait plus read_timeout for a lock wait), with the
// class it would throw for a lost connection and the cause in getPrevious().
declare(strict_types=1);

namespace MySqlLockTest;

use ItsMieger\MySqlSharedLocks\Exception\SharedLockAcquireException;
use ItsMieger\MySqlSharedLocks\Exception\SharedLockTimeoutException;
use ItsMieger\MySqlSharedLocks\SharedLock;
use MySqlLock\ConnectionException;
use MySqlLock\SessionLock;
use Nene\Kit\DistributedLock;
use Nene\Kit\DistributedLockException;

final class SilentNetworkTest extends TestCase
{
    /** connect_timeout and read_timeout of the connections under test, in seconds. */
    private const CONNECT = 2;
    private const READ = 2;
    /** On top of every bound: scheduling on a loaded two-core machine. */
    private const SLACK = 3.0;
    private const LEASES = 'phpt_silent_leases';

    /** @var resource|null */
    private $proxy = null;
    /** @var resource|null */
    private $proxyOut = null;
    private int $proxyPid = 0;

    protected function tearDown(): void
    {
        if ($this->proxy !== null) {
            posix_kill($this->proxyPid, SIGKILL);
            fclose($this->proxyOut);
            proc_close($this->proxy);
            $this->proxy = null;
        }
        ini_restore('mysqllock.dsn');
        ini_restore('mysqllock.connect_timeout');
        ini_restore('mysqllock.read_timeout');
        parent::tearDown();
    }

    /** Starts the freeze proxy in front of the test server; returns its port. */
    private function startProxy(string ...$args): int
    {
        $s = server();
        return $this->startFreezeproxy($s['host'] . ':' . $s['port'], ...$args);
    }

    /** Starts $MYSQLLOCK_BIN/freezeproxy with $args; returns the port it listens on. */
    private function startFreezeproxy(string ...$args): int
    {
        $bin = getenv('MYSQLLOCK_BIN');
        $this->assertNotFalse($bin, 'MYSQLLOCK_BIN is not set (the target/release directory)');
        $this->assertFileExists($bin . '/freezeproxy', 'cargo build --release -p mysqllock-tests builds it');
        $this->proxy = proc_open([$bin . '/freezeproxy', ...$args], [0 => ['file', '/dev/null', 'r'], 1 => ['pipe', 'w'], 2 => STDERR], $pipes);
        $this->assertIsResource($this->proxy);
        $this->proxyOut = $pipes[1];
        $this->proxyPid = proc_get_status($this->proxy)['pid'];
        $line = (string) fgets($this->proxyOut);
        $this->assertMatchesRegularExpression('/^port \d+$/', trim($line), 'the proxy did not start');
        return (int) substr(trim($line), 5);
    }

    private function freeze(): void
    {
        posix_kill($this->proxyPid, SIGUSR1);
        $this->assertSame('frozen', trim((string) fgets($this->proxyOut)));
    }

    /** SharedLock and SessionLock (on the extension's own connection) through the proxy. */
    private function configureThrough(int $port): void
    {
        ini_set('mysqllock.connect_timeout', (string) self::CONNECT);
        ini_set('mysqllock.read_timeout', (string) self::READ);
        $s = server();
        // Unencrypted: the proxy freezes on the text of a statement (--freeze-on), which it
        // cannot see inside TLS (MySQL 9.7 and MariaDB 11.8 offer TLS by themselves).
        SharedLock::configureConnection('127.0.0.1', $s['db'], $s['user'], $s['pass'], 'utf8mb4', $port, 'ssl-mode=DISABLED');
    }

    /** Runs $call and returns what it threw, failing unless it threw within $bound (+ slack). */
    private function throwsWithin(float $bound, callable $call): \Throwable
    {
        $start = microtime(true);
        $e = $this->catchThrown($call);
        $took = microtime(true) - $start;
        $this->assertLessThan($bound + self::SLACK, $took, 'took ' . round($took, 1) . ' s: ' . $e->getMessage());
        return $e;
    }

    private function assertSaysStopped(\Throwable $e, string $during): void
    {
        $text = implode("\n", array_merge([$e->getMessage()], self::previousMessages($e)));
        $this->assertStringContainsString('stopped answering for', $text);
        $this->assertStringContainsString($during, $text);
    }

    /**
     * @test
     */
    #[\PHPUnit\Framework\Attributes\Test]
    public function sharedLockWaitingOnAFrozenNetworkThrowsWithinTheWaitPlusReadTimeout(): void
    {
        $name = $this->lockName();
        $this->startHolder($name, 60);
        // Frozen right after the waiter's GET_LOCK wait reached the server.
        $this->configureThrough($this->startProxy('--freeze-on', 'IS_FREE_LOCK'));
        $e = $this->throwsWithin(4 + self::READ, fn () => SharedLock::lock($name, 4, 60));
        $this->assertInstanceOf(SharedLockAcquireException::class, $e);
        $this->assertNotInstanceOf(SharedLockTimeoutException::class, $e, 'a silent server is not a busy lock');
        $this->assertSaysStopped($e, 'during a lock wait');
    }

    /**
     * @test
     */
    #[\PHPUnit\Framework\Attributes\Test]
    public function sharedLockConnectingThroughAFrozenNetworkThrowsWithinConnectTimeout(): void
    {
        $this->configureThrough($this->startProxy());
        $this->freeze();
        $e = $this->throwsWithin(self::CONNECT, fn () => SharedLock::lock($this->lockName(), 5, 60));
        $this->assertInstanceOf(SharedLockAcquireException::class, $e);
        $this->assertSaysStopped($e, 'during the connect');
    }

    /**
     * @test
     */
    #[\PHPUnit\Framework\Attributes\Test]
    public function sharedLockAgainstAServerWhoseGreetingItCannotReadThrowsAtOnceSayingSo(): void
    {
        // The junk server of issue 35: a greeting with an auth data length of 0xEE and an
        // unknown plugin, any login accepted, then silence. The mysql crate, the core's
        // fallback then, read it and waited on the silent setup; the core's own client
        // refuses it before sending a byte, and nothing else tries.
        // Bounds far above the slack: only a refusal at once ends within it.
        $port = $this->startFreezeproxy('--stall', 'unknown-plugin');
        ini_set('mysqllock.connect_timeout', '30');
        ini_set('mysqllock.read_timeout', '30');
        SharedLock::configureConnection('127.0.0.1', 'db', 'u', 'p', 'utf8mb4', $port, 'ssl-mode=DISABLED');
        $e = $this->throwsWithin(0, fn () => SharedLock::lock($this->lockName(), 5, 60));
        $this->assertInstanceOf(SharedLockAcquireException::class, $e);
        $text = implode("\n", array_merge([$e->getMessage()], self::previousMessages($e)));
        $this->assertStringContainsString('a greeting this client cannot read', $text);
        $this->assertStringNotContainsString('stopped answering', $text);
    }

    /**
     * @test
     */
    #[\PHPUnit\Framework\Attributes\Test]
    public function sharedLockOnTheGetConnectionPdoThrowsWithinItsReadBoundOnAFrozenNetwork(): void
    {
        $this->configureThrough($this->startProxy());
        SharedLock::getConnection();
        SharedLock::lock($this->lockName('held'), 0, 60);
        $this->freeze();
        // mysqlnd bounds that PDO's reads at read_timeout + 10 s, the longest wait one
        // statement on it asks for.
        $e = $this->throwsWithin(self::READ + 10, fn () => SharedLock::lock($this->lockName('next'), 5, 60));
        $this->assertInstanceOf(SharedLockAcquireException::class, $e);
        $this->assertNotInstanceOf(SharedLockTimeoutException::class, $e, 'a silent server is not a busy lock');
        $this->assertSaysStopped($e, 'for 12 s during');
    }

    /**
     * @test
     */
    #[\PHPUnit\Framework\Attributes\Test]
    public function sharedLockOnTheGetConnectionPdoWaitsLongerThanItsReadBoundInPieces(): void
    {
        $name = $this->lockName();
        $this->startHolder($name, 60);
        $this->configureThrough($this->startProxy());
        SharedLock::getConnection();
        // 13 s is past the PDO's read bound (read_timeout + 10 s = 12 s): one GET_LOCK
        // that long would end as a lost connection, not as a busy lock.
        $start = microtime(true);
        $e = $this->catchThrown(fn () => SharedLock::lock($name, 13, 60));
        $this->assertInstanceOf(SharedLockTimeoutException::class, $e, $e->getMessage());
        $this->assertGreaterThanOrEqual(13.0, microtime(true) - $start, 'waited the whole timeout');
    }

    /**
     * @test
     */
    #[\PHPUnit\Framework\Attributes\Test]
    public function sessionLockWaitingOnAFrozenNetworkThrowsWithinTheWaitPlusReadTimeout(): void
    {
        $name = $this->lockName();
        $holder = $this->startSessionChild();
        $this->assertTrue($holder->call(['acquire', $name, 0])['result'] ?? null, 'the holder takes the lock');
        $this->configureThrough($this->startProxy('--freeze-on', 'UNHEX'));
        $lock = new SessionLock($name);
        $e = $this->throwsWithin(3 + self::READ, fn () => $lock->acquire(3));
        $this->assertInstanceOf(ConnectionException::class, $e);
        $this->assertSaysStopped($e, 'during a lock wait');
    }

    /**
     * @test
     */
    #[\PHPUnit\Framework\Attributes\Test]
    public function distributedLockOnAFrozenNetworkReturnsOrThrowsWithinReadTimeout(): void
    {
        $db = self::db();
        $db->exec('CREATE TABLE IF NOT EXISTS ' . self::LEASES . ' (resource VARCHAR(255) PRIMARY KEY, owner VARCHAR(255) NOT NULL, expires_at DATETIME NOT NULL, acquired_at DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP) ENGINE=InnoDB');
        $port = $this->startProxy();
        $s = server();
        ini_set('mysqllock.dsn', sprintf(
            'mysql://%s:%s@127.0.0.1:%d/%s?lease_table=%s&connect_timeout=%d&read_timeout=%d',
            rawurlencode($s['user']), rawurlencode($s['pass']), $port, $s['db'], self::LEASES, self::CONNECT, self::READ,
        ));
        $lock = new DistributedLock();
        $resource = $this->lockName();
        $this->assertTrue($lock->acquire($resource, 'owner-A', 60));
        $this->freeze();
        $e = $this->throwsWithin(self::READ, fn () => $lock->renew($resource, 'owner-A', 60));
        $this->assertInstanceOf(DistributedLockException::class, $e);
        $this->assertSaysStopped($e, 'during a statement');
        // A new acquisition connects again: bounded by connect_timeout, once.
        $start = microtime(true);
        try {
            $got = $lock->acquire($resource . '-2', 'owner-A', 60, 1.0);
            $this->assertFalse($got, 'nothing is acquired on a frozen network');
        } catch (DistributedLockException $e) {
            $this->assertSaysStopped($e, 'during the connect');
        }
        $this->assertLessThan(self::CONNECT + 1.0 + self::SLACK, microtime(true) - $start);
        $db->prepare('DELETE FROM ' . self::LEASES . ' WHERE resource LIKE ?')->execute([$this->prefix() . '%']);
    }
}
