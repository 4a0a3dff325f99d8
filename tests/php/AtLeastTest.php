<?php
// "Lock at least for" (issue 5): with ['atLeast' => S] the lock stays taken until S
// seconds after its acquisition even if it is released sooner.
declare(strict_types=1);

namespace MySqlLockTest;

use ItsMieger\MySqlSharedLocks\SharedLock;
use PHPUnit\Framework\Attributes\Test;

final class AtLeastTest extends TestCase
{
    /**
     * Sleeps until $seconds after $start (microtime): the behaviour under test is that the
     * lock stays taken while this time passes.
     */
    private static function sleepUntil(float $start, float $seconds): void
    {
        $left = $start + $seconds - microtime(true);
        if ($left > 0) {
            usleep((int) ($left * 1e6)); // the behaviour under test: time passes
        }
    }

    /** @test */
    #[Test]
    public function unlockWithAtLeastKeepsTheLockTakenForAnotherProcess(): void
    {
        $name = $this->lockName();
        $child = $this->startChild();
        $start = microtime(true);
        SharedLock::lock($name, 0, 30, ['atLeast' => 3]);
        SharedLock::unlock($name);
        self::sleepUntil($start, 1.0);
        $this->assertReply('busy', $child->call(['trylock', $name, 10]));
    }

    /** @test */
    #[Test]
    public function unlockWithAtLeastFreesTheLockOnceItsTimeHasPassed(): void
    {
        $name = $this->lockName();
        $child = $this->startChild();
        $start = microtime(true);
        SharedLock::lock($name, 0, 30, ['atLeast' => 3]);
        SharedLock::unlock($name);
        // stored in whole seconds: wait until the kept row has run out on the database clock
        self::waitUntilExpired($name);
        $this->assertGreaterThanOrEqual(2.0, microtime(true) - $start, 'the kept row ran out early');
        $this->assertReply('locked', $child->call(['trylock', $name, 10]));
    }

    /** @test */
    #[Test]
    public function unlockWithAtLeastKeepsTheLockFromThisProcessToo(): void
    {
        $name = $this->lockName();
        $start = microtime(true);
        SharedLock::lock($name, 0, 30, ['atLeast' => 3]);
        SharedLock::unlock($name);
        self::sleepUntil($start, 1.0);
        $this->assertNull(SharedLock::tryLock($name, 10));
    }

    /** @test */
    #[Test]
    public function unlockWithoutAtLeastFreesTheLockAtOnce(): void
    {
        $name = $this->lockName();
        $child = $this->startChild();
        SharedLock::lock($name, 0, 30);
        SharedLock::unlock($name);
        $this->assertReply('locked', $child->call(['trylock', $name, 10]));
    }

    /** @test */
    #[Test]
    public function unlockAfterTheAtLeastTimeFreesTheLockAtOnce(): void
    {
        $name = $this->lockName();
        $child = $this->startChild();
        SharedLock::lock($name, 0, 30, ['atLeast' => 1]);
        self::waitUntilAged($name, 1); // the at-least second has passed on the database clock
        SharedLock::unlock($name);
        $this->assertReply('locked', $child->call(['trylock', $name, 10]));
    }

    /** @test */
    #[Test]
    public function handleReleaseWithAtLeastKeepsTheLockTaken(): void
    {
        $name = $this->lockName();
        $child = $this->startChild();
        SharedLock::lock($name, 0, 30, ['atLeast' => 3])->release();
        $this->assertReply('busy', $child->call(['trylock', $name, 10]));
    }

    /** @test */
    #[Test]
    public function synchronizedWithAtLeastKeepsTheLockTakenAfterItReturns(): void
    {
        $name = $this->lockName();
        $child = $this->startChild();
        SharedLock::synchronized($name, 0, 30, fn () => null, ['atLeast' => 3]);
        $this->assertReply('busy', $child->call(['trylock', $name, 10]));
    }

    /** @test */
    #[Test]
    public function isLockedIsTrueWhileAReleasedLockLingersForAtLeast(): void
    {
        $name = $this->lockName();
        SharedLock::lock($name, 0, 30, ['atLeast' => 3])->release();
        $this->assertTrue(SharedLock::isLocked($name));
    }

    /** @test */
    #[Test]
    public function holderShowsAReleasedLockLingeringForAtLeastAsNotAcquired(): void
    {
        $name = $this->lockName();
        SharedLock::lock($name, 0, 30, ['atLeast' => 3])->release();
        $holder = SharedLock::holder($name);
        $this->assertNotNull($holder, 'the lingering row is gone');
        $this->assertFalse($holder['acquired']);
    }
}
