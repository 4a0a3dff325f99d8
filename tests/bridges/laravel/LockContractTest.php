<?php
// Laravel's Lock contract (Illuminate\Contracts\Cache\Lock + LockProvider) on the mysqllock
// store, in one process: get, get with a callback, release, owner, forceRelease,
// restoreLock, the lease time, and Laravel 13's isLocked()/isOwnedBy() (the bridge's own on
// Laravel 8). On the extension's own connection and the original table;
// the subclasses run the same on the upgraded table and on the other connections.
declare(strict_types=1);

namespace MySqlLockLaravelTest;

use Illuminate\Cache\Lock;
use MySqlLock\Laravel\LeaseLock;

class LockContractTest extends TestCase
{
    public function testLockReturnsALaravelLock(): void
    {
        $lock = $this->cache()->lock($this->lockName(), 10);
        $this->assertInstanceOf(Lock::class, $lock);
        $this->assertInstanceOf(LeaseLock::class, $lock);
    }

    public function testGetTakesAFreeLock(): void
    {
        $lock = $this->cache()->lock($this->lockName(), 10, 'owner-a');
        $this->assertTrue($lock->get());
        $this->assertSame('owner-a', $this->liveOwner($this->lockName()));
    }

    public function testGetIsRefusedWhileAnotherOwnerHoldsTheLock(): void
    {
        $this->assertTrue($this->cache()->lock($this->lockName(), 10, 'owner-a')->get());
        $this->assertFalse($this->cache()->lock($this->lockName(), 10, 'owner-b')->get());
        $this->assertSame('owner-a', $this->liveOwner($this->lockName()));
    }

    public function testGetWithACallbackRunsItUnderTheLockAndReleasesAfterwards(): void
    {
        $name = $this->lockName();
        $seenInside = null;
        $result = $this->cache()->lock($name, 10, 'owner-a')->get(function () use ($name, &$seenInside) {
            $seenInside = $this->liveOwner($name);
            return 'the result';
        });
        $this->assertSame('the result', $result);
        $this->assertSame('owner-a', $seenInside);
        $this->assertNull($this->liveOwner($name));
    }

    public function testGetWithACallbackReleasesWhenTheCallbackThrows(): void
    {
        $name = $this->lockName();
        $thrown = $this->thrownBy(fn () => $this->cache()->lock($name, 10)->get(function () {
            throw new \DomainException('the job failed');
        }));
        $this->assertInstanceOf(\DomainException::class, $thrown);
        $this->assertSame('the job failed', $thrown->getMessage());
        $this->assertNull($this->liveOwner($name));
        $this->assertTrue($this->cache()->lock($name, 10)->get());
    }

    public function testGetWithACallbackDoesNotRunItWhileTheLockIsTaken(): void
    {
        $this->assertTrue($this->cache()->lock($this->lockName(), 10, 'owner-a')->get());
        $ran = false;
        $result = $this->cache()->lock($this->lockName(), 10, 'owner-b')->get(function () use (&$ran) {
            $ran = true;
        });
        $this->assertFalse($result);
        $this->assertFalse($ran);
        $this->assertSame('owner-a', $this->liveOwner($this->lockName()));
    }

    public function testReleaseByTheOwnerFreesTheLock(): void
    {
        $lock = $this->cache()->lock($this->lockName(), 10);
        $this->assertTrue($lock->get());
        $this->assertTrue($lock->release());
        $this->assertNull($this->liveOwner($this->lockName()));
        $this->assertTrue($this->cache()->lock($this->lockName(), 10)->get());
    }

    public function testReleaseByAnotherOwnerChangesNothing(): void
    {
        $this->assertTrue($this->cache()->lock($this->lockName(), 10, 'owner-a')->get());
        $this->assertFalse($this->cache()->lock($this->lockName(), 10, 'owner-b')->release());
        $this->assertSame('owner-a', $this->liveOwner($this->lockName()));
    }

    public function testReleaseOfALockNotHeldReturnsFalse(): void
    {
        $this->assertFalse($this->cache()->lock($this->lockName(), 10)->release());
    }

    public function testOwnerIsTheOwnerGiven(): void
    {
        $this->assertSame('job-42', $this->cache()->lock($this->lockName(), 10, 'job-42')->owner());
    }

    public function testOwnerIsRandomWhenNoneIsGiven(): void
    {
        $a = $this->cache()->lock($this->lockName(), 10)->owner();
        $b = $this->cache()->lock($this->lockName(), 10)->owner();
        $this->assertIsString($a);
        $this->assertSame(16, strlen($a));
        $this->assertNotSame($a, $b);
    }

    public function testOwnersCompareExactly(): void
    {
        $this->assertTrue($this->cache()->lock($this->lockName(), 10, 'Owner')->get());
        $this->assertFalse($this->cache()->lock($this->lockName(), 10, 'owner')->get());
        $this->assertFalse($this->cache()->lock($this->lockName(), 10, 'Owner ')->release());
        $this->assertSame('Owner', $this->liveOwner($this->lockName()));
    }

    public function testTheCurrentOwnerIsReadFromTheTable(): void
    {
        $lock = $this->cache()->lock($this->lockName(), 10, 'owner-a');
        $current = \Closure::bind(fn () => $this->getCurrentOwner(), $lock, Lock::class);
        $this->assertNull($current());
        $this->assertTrue($lock->get());
        $this->assertSame('owner-a', $current());
        $this->assertTrue($lock->release());
        $this->assertNull($current(), 'a released lock has no owner');
    }

    public function testForceReleaseFreesALockWhoeverHoldsIt(): void
    {
        $this->assertTrue($this->cache()->lock($this->lockName(), 10, 'owner-a')->get());
        $this->assertNull($this->cache()->lock($this->lockName(), 10, 'someone-else')->forceRelease());
        $this->assertNull($this->liveOwner($this->lockName()));
        $this->assertTrue($this->cache()->lock($this->lockName(), 10, 'owner-b')->get());
    }

    public function testForceReleaseOfAFreeLockChangesNothing(): void
    {
        $this->cache()->lock($this->lockName(), 10)->forceRelease();
        $this->assertNull($this->liveOwner($this->lockName()));
        $this->assertTrue($this->cache()->lock($this->lockName(), 10)->get());
    }

    public function testRestoreLockReleasesTheLockOfThatOwner(): void
    {
        $owner = $this->cache()->lock($this->lockName(), 10)->owner();
        $this->assertTrue($this->cache()->lock($this->lockName(), 10, $owner)->get());
        $restored = $this->cache()->restoreLock($this->lockName(), $owner);
        $this->assertSame($owner, $restored->owner());
        $this->assertTrue($restored->release());
        $this->assertNull($this->liveOwner($this->lockName()));
    }

    public function testTheSameOwnerMayTakeItsLockAgainAndItsTimeRestarts(): void
    {
        $this->assertTrue($this->cache()->lock($this->lockName(), 5, 'owner-a')->get());
        $this->assertTrue($this->cache()->lock($this->lockName(), 300, 'owner-a')->get());
        $this->assertGreaterThan(200, $this->row($this->lockName())['remaining']);
    }

    public function testSecondsAreTheLeaseTime(): void
    {
        $this->assertTrue($this->cache()->lock($this->lockName(), 120)->get());
        $remaining = $this->row($this->lockName())['remaining'];
        $this->assertGreaterThan(110, $remaining);
        $this->assertLessThanOrEqual(121, $remaining);
    }

    public function testZeroSecondsLastADayAsWithLaravelsDatabaseLock(): void
    {
        $this->assertTrue($this->cache()->lock($this->lockName())->get());
        $remaining = $this->row($this->lockName())['remaining'];
        $this->assertGreaterThan(86400 - 60, $remaining);
        $this->assertLessThanOrEqual(86401, $remaining);
    }

    public function testAnExpiredLockIsFreeForAnotherOwner(): void
    {
        $this->assertTrue($this->cache()->lock($this->lockName(), 1, 'owner-a')->get());
        $this->assertFalse($this->cache()->lock($this->lockName(), 10, 'owner-b')->get());
        $taken = self::waitUntil(fn () => $this->cache()->lock($this->lockName(), 10, 'owner-b')->get(), 10, 0.1);
        $this->assertTrue($taken, 'the expired lock was not taken over within 10 s');
        $this->assertSame('owner-b', $this->liveOwner($this->lockName()));
        $this->assertFalse($this->cache()->lock($this->lockName(), 10, 'owner-a')->release(), 'the old owner released the new owner\'s lock');
    }

    public function testLockNamesGetTheCachePrefix(): void
    {
        $this->assertTrue($this->cache()->lock($this->lockName(), 10)->get());
        $st = self::db()->prepare('SELECT COUNT(*) FROM `' . $this->table() . '` WHERE resource = ?');
        $st->execute(['lvt_' . $this->lockName()]);
        $this->assertSame(1, (int) $st->fetchColumn());
    }

    public function testIsLockedWhileAnyOwnerHoldsTheLease(): void
    {
        $lock = $this->cache()->lock($this->lockName(), 10, 'owner-a');
        $other = $this->cache()->lock($this->lockName(), 10, 'owner-b');
        $this->assertFalse($lock->isLocked());
        $this->assertTrue($lock->get());
        $this->assertTrue($lock->isLocked());
        $this->assertTrue($other->isLocked(), 'a lock object of another owner sees the lease too');
        $this->assertTrue($lock->release());
        $this->assertFalse($lock->isLocked());
        $this->assertFalse($other->isLocked());
    }

    public function testAnExpiredLeaseIsNotLocked(): void
    {
        $lock = $this->cache()->lock($this->lockName(), 10, 'owner-a');
        $this->assertTrue($lock->get());
        $this->expireRow($this->lockName());
        $this->assertNull($this->liveOwner($this->lockName()));
        $this->assertFalse($lock->isLocked());
        $this->assertTrue($this->cache()->lock($this->lockName(), 10, 'owner-b')->get());
    }

    public function testIsOwnedByTellsTheOwnerOfTheLiveLease(): void
    {
        $lock = $this->cache()->lock($this->lockName(), 10, 'owner-a');
        $this->assertTrue($lock->isOwnedBy(null), 'a free lock is owned by no one');
        $this->assertFalse($lock->isOwnedByCurrentProcess());
        $this->assertTrue($lock->get());
        $this->assertTrue($lock->isOwnedBy('owner-a'));
        $this->assertFalse($lock->isOwnedBy('owner-b'));
        $this->assertTrue($lock->isOwnedByCurrentProcess());
        $restored = $this->cache()->restoreLock($this->lockName(), 'owner-b');
        $this->assertTrue($restored->isOwnedBy('owner-a'));
        $this->assertFalse($restored->isOwnedByCurrentProcess());
    }
}
