<?php
// Keep-alive (issue 5): lock()/tryLock()/synchronized() with ['keepAlive' => true] renew
// the lease from a background thread while PHP is busy, until release, request end or
// maxHold. Fork behaviour is in ForkTest.
declare(strict_types=1);

namespace MySqlLockTest;

use ItsMieger\MySqlSharedLocks\Exception\SharedLockAcquireException;
use ItsMieger\MySqlSharedLocks\Exception\SharedLockReleaseException;
use ItsMieger\MySqlSharedLocks\Exception\SharedLockRemainingTTLException;
use ItsMieger\MySqlSharedLocks\SharedLock;
use ItsMieger\MySqlSharedLocks\SharedLockHandle;
use PHPUnit\Framework\Attributes\Test;

final class KeepAliveTest extends TestCase
{
    private const KEEP_ALIVE = ['keepAlive' => true];

    /**
     * Asserts every 0.2 s, until $seconds after the lock's acquisition (its `created`,
     * database clock), that its lease has time left for the same holder, so nobody may
     * take it over, and that tryLock() in this process fails.
     */
    private function assertTakenUntil(string $name, float $seconds): void
    {
        $st = self::db()->prepare('SELECT connection_id, created + ttl - UNIX_TIMESTAMP(NOW(6)), UNIX_TIMESTAMP(NOW(6)) - created FROM shared_locks WHERE name = ?');
        $holder = null;
        do {
            $st->execute([$name]);
            $row = $st->fetch(\PDO::FETCH_NUM);
            $this->assertNotFalse($row, 'the row was gone');
            [$session, $remaining, $age] = [$row[0], (float) $row[1], (float) $row[2]];
            $holder ??= $session;
            $this->assertSame($holder, $session, sprintf('another session held it after %.1f s', $age));
            $this->assertGreaterThan(0.0, $remaining, sprintf('the lease ran out after %.1f s', $age));
            $this->assertNull(SharedLock::tryLock($name, 10), sprintf('tryLock got it after %.1f s', $age));
            usleep(200000); // the behaviour under test: time passes while the holder sleeps; paces the tries
        } while ($age < $seconds);
    }

    /** @test */
    #[Test]
    public function keptAliveLockWithTtl2StaysTakenForFiveSecondsWhileItsHolderSleeps(): void
    {
        $name = $this->lockName();
        $holder = $this->startHolder($name, 2, self::KEEP_ALIVE);
        $holder->command(['sleep', 7]); // the behaviour under test: the holder is busy past its TTL
        $this->assertTakenUntil($name, 6.0); // `created` is a whole second: 5+ s after acquisition
        $this->assertReply('slept', $holder->receive(5));
        $this->assertReply('ok', $holder->call(['assert', $name, 0]));
    }

    /**
     * The control for the test above: without keep-alive the same lock is lost.
     *
     * @test
     */
    #[Test]
    public function lockWithTtl2WithoutKeepAliveIsTakenOverWhileItsHolderSleeps(): void
    {
        $name = $this->lockName();
        $holder = $this->startHolder($name, 2);
        $holder->command(['sleep', 6]); // the behaviour under test: the holder is busy past its TTL
        $this->assertTrue(self::waitUntil(fn () => !self::taken($name), 5, 0.1));
    }

    /** @test */
    #[Test]
    public function keepAliveStopsRenewingAtMaxHold(): void
    {
        $name = $this->lockName();
        $start = microtime(true);
        $holder = $this->startHolder($name, 2, ['keepAlive' => true, 'maxHold' => 4]);
        $holder->command(['sleep', 12]); // the behaviour under test: the holder is busy past max-hold
        // Counted from `created`: a TTL of 2 alone ends at 2 s, maxHold 4 at 4 s.
        $this->assertTakenUntil($name, 3.0);
        $this->assertTrue(self::waitUntil(fn () => !self::taken($name), $start + 9 - microtime(true), 0.1), 'still taken 9 s after it was locked');
    }

    /** @test */
    #[Test]
    public function keepAliveThreadRunsWhileTheLockIsHeld(): void
    {
        SharedLock::lock($this->lockName(), 0, 3, self::KEEP_ALIVE);
        // an earlier test's thread may take a moment to end after its release
        $this->assertTrue(self::waitUntil(fn () => self::keepAliveThreads() === 1, 3), 'no single keep-alive thread');
    }

    /** @test */
    #[Test]
    public function lockWithoutKeepAliveStartsNoThread(): void
    {
        SharedLock::lock($this->lockName(), 0, 3);
        $this->assertTrue(self::waitUntil(fn () => self::keepAliveThreads() === 0, 3), 'a keep-alive thread runs');
    }

    /** @test */
    #[Test]
    public function keepAliveThreadEndsWhenTheHandleIsReleased(): void
    {
        SharedLock::lock($this->lockName(), 0, 3, self::KEEP_ALIVE)->release();
        $this->assertTrue(self::waitUntil(fn () => self::keepAliveThreads() === 0, 3), 'the keep-alive thread still runs');
    }

    /** @test */
    #[Test]
    public function keepAliveThreadEndsWhenTheLockIsUnlocked(): void
    {
        $name = $this->lockName();
        SharedLock::lock($name, 0, 3, self::KEEP_ALIVE);
        SharedLock::unlock($name);
        $this->assertTrue(self::waitUntil(fn () => self::keepAliveThreads() === 0, 3), 'the keep-alive thread still runs');
    }

    /** @test */
    #[Test]
    public function releasedKeptAliveLockStaysReleased(): void
    {
        $name = $this->lockName();
        SharedLock::lock($name, 0, 2, self::KEEP_ALIVE)->release();
        // The same session takes the name again with a 1 s TTL and no keep-alive: a
        // renewal thread left running would find this row (its name, its session, the
        // GET_LOCK held) and keep extending it, so it would never run out.
        SharedLock::lock($name, 0, 1);
        self::waitUntilExpired($name);
        $this->assertSame('1', (string) self::rows($name)[0]['ttl'], 'the lease was renewed after the release');
        $this->assertSame(0, self::keepAliveThreads());
    }

    /** @test */
    #[Test]
    public function tryLockWithKeepAliveKeepsTheLockPastItsTtl(): void
    {
        $handle = SharedLock::tryLock($this->lockName(), 2, self::KEEP_ALIVE);
        usleep(3500000); // the behaviour under test: the holder is busy past its TTL
        $this->assertGreaterThan(0.0, $handle->getRemainingTTL());
    }

    /** @test */
    #[Test]
    public function synchronizedWithKeepAliveKeepsTheLockPastItsTtl(): void
    {
        $remaining = SharedLock::synchronized($this->lockName(), 0, 2, function ($handle) {
            usleep(3500000); // the behaviour under test: the callback works past the TTL
            return $handle->getRemainingTTL();
        }, self::KEEP_ALIVE);
        $this->assertGreaterThan(0.0, $remaining);
    }

    /** @test */
    #[Test]
    public function keepAliveThreadEndsWhenSynchronizedReturns(): void
    {
        SharedLock::synchronized($this->lockName(), 0, 3, fn () => null, self::KEEP_ALIVE);
        $this->assertTrue(self::waitUntil(fn () => self::keepAliveThreads() === 0, 3), 'the keep-alive thread still runs');
    }

    /** @test */
    #[Test]
    public function keptAliveLockIsGoneSoonAfterItsPhpProcessExits(): void
    {
        $name = $this->lockName();
        $holder = $this->startHolder($name, 30, self::KEEP_ALIVE);
        $holder->command(['exit']);
        $this->assertTrue($holder->waitForExit(5), 'the PHP process did not exit within 5 s');
        $this->assertSame([], self::rows($name));
    }

    /** @test */
    #[Test]
    public function keptAliveLockCanBeTakenAtOnceAfterItsPhpProcessExited(): void
    {
        $name = $this->lockName();
        $holder = $this->startHolder($name, 30, self::KEEP_ALIVE);
        $holder->command(['exit']);
        $this->assertTrue($holder->waitForExit(5), 'the PHP process did not exit within 5 s');
        $this->assertNotNull(SharedLock::tryLock($name, 10));
    }

    /**
     * Takes $name with keep-alive, KILLs its session from another connection, and waits
     * until the keep-alive's next renewals have run into the loss.
     */
    private function lockAndLetTheKeepAliveFail(string $name): void
    {
        SharedLock::lock($name, 0, 2, self::KEEP_ALIVE);
        // The thread takes its name only once it runs: until then "no keep-alive thread"
        // below would be true before it ever tried.
        $this->assertTrue(self::waitUntil(fn () => self::keepAliveThreads() === 1, 10), 'the keep-alive thread never started');
        $id = (int) self::rows($name)[0]['connection_id'];
        self::db()->exec('KILL ' . $id);
        $this->assertTrue(self::waitUntil(fn () => !self::sessionExists($id), 10), 'the killed session stayed');
        // The keep-alive thread ends at its first failed renewal.
        $this->assertTrue(self::waitUntil(fn () => self::keepAliveThreads() === 0, 10), 'the keep-alive never ran into the loss');
    }

    /** @test */
    #[Test]
    public function assertTTLThrowsRemainingTTLExceptionNamingTheKeepAliveAfterItFailed(): void
    {
        $name = $this->lockName();
        $this->lockAndLetTheKeepAliveFail($name);
        $e = $this->catchThrown(fn () => SharedLock::assertTTL($name, 1));
        $this->assertInstanceOf(SharedLockRemainingTTLException::class, $e);
        $this->assertStringContainsString('keep-alive', implode("\n", self::previousMessages($e)));
    }

    /** @test */
    #[Test]
    public function getRemainingTTLThrowsRemainingTTLExceptionAfterTheKeepAliveFailed(): void
    {
        $name = $this->lockName();
        $this->lockAndLetTheKeepAliveFail($name);
        $this->expectException(SharedLockRemainingTTLException::class);
        (new SharedLockHandle($name))->getRemainingTTL();
    }

    /** @test */
    #[Test]
    public function renewThrowsRemainingTTLExceptionAfterTheKeepAliveFailed(): void
    {
        $name = $this->lockName();
        $this->lockAndLetTheKeepAliveFail($name);
        $this->expectException(SharedLockRemainingTTLException::class);
        SharedLock::renew($name, 30);
    }

    /** @test */
    #[Test]
    public function unlockThrowsReleaseExceptionAfterTheKeepAliveFailed(): void
    {
        $name = $this->lockName();
        $this->lockAndLetTheKeepAliveFail($name);
        $this->expectException(SharedLockReleaseException::class);
        SharedLock::unlock($name);
    }

    /** @test */
    #[Test]
    public function releaseThrowsReleaseExceptionWhenTheKeepAliveFoundTheRowGone(): void
    {
        $name = $this->lockName();
        $handle = SharedLock::lock($name, 0, 2, self::KEEP_ALIVE);
        self::db()->prepare('DELETE FROM shared_locks WHERE name = ?')->execute([$name]);
        // The keep-alive thread ends at its first failed renewal.
        $this->assertTrue(self::waitUntil(fn () => self::keepAliveThreads() === 0, 10), 'the keep-alive never found the row gone');
        $e = $this->catchThrown(fn () => $handle->release());
        $this->assertInstanceOf(SharedLockReleaseException::class, $e);
    }

    /** @test */
    #[Test]
    public function keepAliveOnASetConnectionPdoThrowsAcquireExceptionNamingTheOwnConnection(): void
    {
        SharedLock::setConnection(connect());
        $e = $this->catchThrown(fn () => SharedLock::lock($this->lockName(), 0, 10, self::KEEP_ALIVE));
        $this->assertSame(SharedLockAcquireException::class, get_class($e), (string) $e);
        $this->assertInstanceOf(\InvalidArgumentException::class, $e->getPrevious());
        $this->assertStringContainsString('configureConnection', $e->getMessage());
        $this->assertStringContainsString('mysqllock.dsn', $e->getMessage());
    }

    /** @test */
    #[Test]
    public function keepAliveOnASetConnectionPdoLocksNothing(): void
    {
        $name = $this->lockName();
        SharedLock::setConnection(connect());
        $this->catchThrown(fn () => SharedLock::lock($name, 0, 10, self::KEEP_ALIVE));
        $this->assertSame([], self::rows($name));
    }

    /** @test */
    #[Test]
    public function keepAliveOnTheGetConnectionPdoIsRefused(): void
    {
        SharedLock::getConnection();
        $this->expectException(SharedLockAcquireException::class);
        SharedLock::lock($this->lockName(), 0, 10, self::KEEP_ALIVE);
    }
}
