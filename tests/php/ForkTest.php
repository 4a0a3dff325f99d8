<?php
// pcntl_fork: a child inherits the parent's connection but not its locks (SPEC §3/§4).
declare(strict_types=1);

namespace MySqlLockTest;

use ItsMieger\MySqlSharedLocks\Exception\SharedLockRemainingTTLException;
use ItsMieger\MySqlSharedLocks\Exception\SharedLockTimeoutException;
use ItsMieger\MySqlSharedLocks\SharedLock;
use ItsMieger\MySqlSharedLocks\SharedLockHandle;
use PHPUnit\Framework\Attributes\Test;

final class ForkTest extends TestCase
{
    /** In a forked child: locks $name and reports its row's connection id. */
    private static function lockAndReportSession(string $name): int
    {
        SharedLock::lock($name, 0, 30);
        $st = connect()->prepare('SELECT connection_id FROM shared_locks WHERE name = ?');
        $st->execute([$name]);
        return (int) $st->fetchColumn();
    }

    /** @test */
    #[Test]
    public function forkedChildsExitLeavesTheParentsLockHeld(): void
    {
        $name = $this->lockName();
        SharedLock::lock($name, 0, 30);
        $this->inForkedChild(fn () => null);
        SharedLock::assertTTL($name, 5);
        $this->assertCount(1, self::rows($name));
    }

    /** @test */
    #[Test]
    public function forkedChildsExitLeavesTheParentsLockExclusive(): void
    {
        $name = $this->lockName();
        SharedLock::lock($name, 0, 30);
        $this->inForkedChild(fn () => null);
        $this->assertReplyException(SharedLockTimeoutException::class, $this->startChild()->call(['lock', $name, 0, 10]));
    }

    /** @test */
    #[Test]
    public function forkedChildCanLockAnotherNameOnItsOwnSession(): void
    {
        $name = $this->lockName();
        SharedLock::lock($name, 0, 30);
        $parentSession = (int) self::rows($name)[0]['connection_id'];
        $childSession = $this->inForkedChild(fn () => self::lockAndReportSession($this->lockName('child')));
        $this->assertIsInt($childSession);
        $this->assertNotSame(0, $childSession, 'the child\'s lock left no row');
        $this->assertNotSame($parentSession, $childSession, 'the child locked on the parent\'s session');
    }

    /** @test */
    #[Test]
    public function forkedChildsOwnLockIsReleasedWhenItExits(): void
    {
        SharedLock::lock($this->lockName(), 0, 30);
        $this->inForkedChild(fn () => self::lockAndReportSession($this->lockName('child')));
        $this->assertSame([], self::rows($this->lockName('child')));
    }

    /** @test */
    #[Test]
    public function forkedChildsOwnLockCanBeTakenAtOnceAfterItExits(): void
    {
        SharedLock::lock($this->lockName(), 0, 30);
        $this->inForkedChild(fn () => self::lockAndReportSession($this->lockName('child')));
        $this->assertInstanceOf(SharedLockHandle::class, SharedLock::lock($this->lockName('child'), 0, 10));
    }

    /** @test */
    #[Test]
    public function forkedChildOfAKeepAliveHolderRunsNoKeepAliveThread(): void
    {
        SharedLock::lock($this->lockName(), 0, 30, ['keepAlive' => true]);
        $threads = $this->inForkedChild(function () {
            SharedLock::isLocked($this->lockName('other')); // the child's first SharedLock call
            return self::keepAliveThreads();
        });
        $this->assertSame(0, $threads);
    }

    /** @test */
    #[Test]
    public function forkedChildDoesNotHoldItsParentsKeptAliveLock(): void
    {
        $name = $this->lockName();
        SharedLock::lock($name, 0, 30, ['keepAlive' => true]);
        $thrown = $this->inForkedChild(function () use ($name) {
            try {
                SharedLock::renew($name, 30);
                return null;
            } catch (\Throwable $e) {
                return get_class($e);
            }
        });
        $this->assertSame(SharedLockRemainingTTLException::class, $thrown);
    }

    /** @test */
    #[Test]
    public function parentsKeptAliveLockOutlivesItsTtlAfterAForkedChildExited(): void
    {
        $name = $this->lockName();
        SharedLock::lock($name, 0, 2, ['keepAlive' => true]);
        $this->inForkedChild(fn () => SharedLock::isLocked($name));
        self::waitUntilAged($name, 4); // two TTLs on the database clock
        SharedLock::assertTTL($name, 0.1);
        $this->assertTrue(self::takenFor($this->startChild(), $name), 'another process took the parent\'s lock');
    }

    /** @test */
    #[Test]
    public function parentsLockSurvivesAForkedChildThatLockedAndExited(): void
    {
        $name = $this->lockName();
        SharedLock::lock($name, 0, 30);
        $this->inForkedChild(fn () => self::lockAndReportSession($this->lockName('child')));
        SharedLock::assertTTL($name, 5);
        $this->assertReplyException(SharedLockTimeoutException::class, $this->startChild()->call(['lock', $name, 0, 10]));
    }
}
