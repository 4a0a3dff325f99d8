<?php
// Laravel 13's lock contract, as Laravel's own integration tests check it of a lock driver
// (tests/Integration/Cache/*CacheLockTest, Database/DatabaseLockTest: facts, not their
// code), through Cache::store('mysqllock') of an app: get and release, block with and
// without a callback, concurrent owners, restoreLock, isLocked, isOwnedBy, refresh with
// seconds, with none and with 0, expired leases, forceRelease, betweenBlockedAttemptsSleepFor.
// Laravel 12 and later only (Lock::refresh() is the base class's there, which throws for a
// driver without one); on Laravel 8 this file declares nothing, so PHPUnit collects nothing.
declare(strict_types=1);

namespace MySqlLockLaravelTest\Laravel13;

use Illuminate\Cache\Lock;
use Illuminate\Contracts\Cache\Lock as LockContract;
use Illuminate\Contracts\Cache\LockTimeoutException;
use MySqlLock\Laravel\LeaseLock;
use MySqlLockLaravelTest\TestCase;
use function MySqlLockLaravelTest\laravelAtLeast;

if (laravelAtLeast(12)) {
    class LockContractTest extends TestCase
    {
        private function lock(int $seconds = 0, ?string $owner = null): LockContract
        {
            return $this->cache()->lock($this->lockName(), $seconds, $owner);
        }

        public function testTheLockIsALaravelLockWithARefreshOfItsOwn(): void
        {
            $lock = $this->lock(10);
            $this->assertInstanceOf(Lock::class, $lock);
            // Laravel's Lock::refresh() throws "This lock driver does not support refreshing locks."
            $this->assertSame(LeaseLock::class, (new \ReflectionMethod($lock, 'refresh'))->getDeclaringClass()->getName());
            $this->assertSame(LeaseLock::class, (new \ReflectionMethod($lock, 'isLocked'))->getDeclaringClass()->getName());
        }

        public function testLocksCanBeAcquiredAndReleased(): void
        {
            $lock = $this->lock(10);
            $this->assertTrue($lock->get());
            $this->assertFalse($this->lock(10)->get());
            $lock->release();
            $lock = $this->lock(10);
            $this->assertTrue($lock->get());
            $this->assertFalse($this->lock(10)->get());
            $this->assertTrue($lock->release());
        }

        public function testLocksCanBlockForSeconds(): void
        {
            $this->assertSame('taylor', $this->lock(10)->block(1, fn () => 'taylor'));
            $this->assertTrue($this->lock(10)->block(1));
        }

        public function testBlockTimesOutWhileAnotherOwnerHoldsTheLock(): void
        {
            $this->assertTrue($this->lock(10)->get());
            $started = hrtime(true);
            $this->assertInstanceOf(LockTimeoutException::class, $this->thrownBy(fn () => $this->lock(10)->block(1)));
            $this->assertGreaterThanOrEqual(0.9, (hrtime(true) - $started) / 1e9, 'block(1) gave up before its second');
        }

        public function testBetweenBlockedAttemptsSleepForReturnsTheLockAndBlockTakesIt(): void
        {
            $lock = $this->lock(10);
            $this->assertSame($lock, $lock->betweenBlockedAttemptsSleepFor(50));
            $this->assertTrue($lock->block(1));
            $other = $this->lock(10)->betweenBlockedAttemptsSleepFor(50);
            $this->assertInstanceOf(LockTimeoutException::class, $this->thrownBy(fn () => $other->block(0.3)));
        }

        public function testConcurrentLocksAreReleasedSafely(): void
        {
            $first = $this->lock(1);
            $this->assertTrue($first->get());
            $taken = self::waitUntil(fn () => $this->lock(10, 'second')->get(), 10, 0.1);
            $this->assertTrue($taken, 'the first lease did not expire within 10 s');
            $this->assertFalse($first->release(), 'the expired first owner released the second\'s lock');
            $this->assertFalse($this->lock(10)->get());
            $this->assertSame('second', $this->liveOwner($this->lockName()));
        }

        public function testLocksWithAFailedBlockCallbackAreReleased(): void
        {
            $thrown = $this->thrownBy(fn () => $this->lock(10)->block(1, function () {
                throw new \RuntimeException('the callback failed');
            }));
            $this->assertSame('the callback failed', $thrown->getMessage());
            $this->assertTrue($this->lock(10)->get());
        }

        public function testLocksCanBeReleasedUsingTheOwnerToken(): void
        {
            $first = $this->lock(10);
            $this->assertTrue($first->get());
            $this->assertTrue($this->cache()->restoreLock($this->lockName(), $first->owner())->release());
            $this->assertTrue($this->lock()->get());
        }

        public function testOwnerStatusCanBeCheckedAfterRestoringTheLock(): void
        {
            $first = $this->lock(10);
            $this->assertTrue($first->get());
            $this->assertTrue($this->cache()->restoreLock($this->lockName(), $first->owner())->isOwnedByCurrentProcess());
        }

        public function testIsLocked(): void
        {
            $lock = $this->lock(10);
            $this->assertFalse($lock->isLocked());
            $this->assertTrue($lock->get());
            $this->assertTrue($lock->isLocked());
            $lock->release();
            $this->assertFalse($lock->isLocked());
        }

        public function testAnotherOwnerDoesNotOwnTheLockAfterRestore(): void
        {
            $first = $this->lock(10);
            $this->assertTrue($first->isOwnedBy(null));
            $this->assertTrue($first->get());
            $this->assertTrue($first->isOwnedBy($first->owner()));
            $second = $this->cache()->restoreLock($this->lockName(), 'other_owner');
            $this->assertTrue($second->isOwnedBy($first->owner()));
            $this->assertFalse($second->isOwnedByCurrentProcess());
        }

        public function testTheLockCanBeRefreshed(): void
        {
            $lock = $this->lock(10);
            $this->assertTrue($lock->get());
            $this->assertTrue($lock->refresh(20));
            $this->assertFalse($this->lock(10)->get());
            $this->assertGreaterThan(15, $this->row($this->lockName())['remaining']);
            $this->assertTrue($lock->release());
        }

        public function testTheLockCannotBeRefreshedByAnotherOwner(): void
        {
            $first = $this->lock(10);
            $this->assertTrue($first->get());
            $this->assertFalse($this->cache()->restoreLock($this->lockName(), 'other_owner')->refresh(20));
            $this->assertLessThanOrEqual(11, $this->row($this->lockName())['remaining']);
            $this->assertTrue($first->refresh(20));
            $this->assertGreaterThan(15, $this->row($this->lockName())['remaining']);
        }

        public function testRefreshWithoutSecondsUsesTheLocksOwn(): void
        {
            $lock = $this->lock(10);
            $this->assertTrue($lock->get());
            $this->assertTrue($lock->refresh());
            $this->assertFalse($this->lock(10)->get());
            $remaining = $this->row($this->lockName())['remaining'];
            $this->assertGreaterThan(5, $remaining);
            $this->assertLessThanOrEqual(11, $remaining);
        }

        public function testRefreshOfALockWithoutExpiryDoesNotReleaseIt(): void
        {
            $lock = $this->lock();
            $this->assertTrue($lock->get());
            $this->assertTrue($lock->refresh());
            $this->assertFalse($this->lock()->get());
        }

        public function testRefreshWithZeroSecondsDoesNotReleaseTheLock(): void
        {
            $lock = $this->lock(10);
            $this->assertTrue($lock->get());
            $this->assertTrue($lock->refresh(0));
            $this->assertFalse($this->lock()->get());
            // As Laravel's DatabaseLock: 0 is the store's lock_timeout (a day), not "for ever".
            $this->assertGreaterThan(86400 - 60, $this->row($this->lockName())['remaining']);
        }

        public function testAnExpiredLockCannotBeRefreshedByItsFormerOwner(): void
        {
            $lock = $this->lock(10);
            $this->assertTrue($lock->get());
            $this->expireRow($this->lockName());
            $this->assertFalse($lock->refresh(20));
        }

        public function testAnExpiredLockCanBeTakenByAnotherOwner(): void
        {
            $this->assertTrue($this->lock()->get());
            $this->expireRow($this->lockName());
            $other = $this->lock();
            $this->assertTrue($other->get());
            $this->assertTrue($other->release());
        }

        public function testAnExpiredLockIsNotLocked(): void
        {
            $lock = $this->lock();
            $this->assertFalse($lock->isLocked());
            $this->assertTrue($lock->get());
            $this->assertTrue($lock->isLocked());
            $this->expireRow($this->lockName());
            $this->assertFalse($lock->isLocked());
        }

        public function testTheLockCanBeForceReleased(): void
        {
            $this->assertTrue($this->lock()->get());
            $other = $this->lock();
            $other->forceRelease();
            $this->assertTrue($other->get());
            $this->assertTrue($other->release());
        }
    }
}
