<?php
// Locks between processes, each with its own Laravel app: restoreLock + release in
// another process, contention, a lock outliving its process, and a holder killed with
// SIGKILL (the lease mode keeps its lock until its time is up; forceRelease ends it).
declare(strict_types=1);

namespace MySqlLockLaravelTest;

final class CrossProcessTest extends TestCase
{
    public function testRestoreLockReleasesTheLockInAnotherProcess(): void
    {
        $lock = $this->cache()->lock($this->lockName(), 60);
        $this->assertTrue($lock->get());
        $this->assertTrue($this->child()->run(['release', $this->lockName(), $lock->owner()]));
        $this->assertNull($this->liveOwner($this->lockName()));
        $this->assertTrue($this->cache()->lock($this->lockName(), 10)->get());
    }

    public function testRestoreLockWithAnotherOwnerDoesNotReleaseInAnotherProcess(): void
    {
        $this->assertTrue($this->cache()->lock($this->lockName(), 60, 'owner-a')->get());
        $this->assertFalse($this->child()->run(['release', $this->lockName(), 'owner-b']));
        $this->assertSame('owner-a', $this->liveOwner($this->lockName()));
    }

    public function testALockTakenInAnotherProcessIsReleasedHereWithItsOwner(): void
    {
        $child = $this->child();
        $this->assertTrue($child->run(['get', $this->lockName(), 60, 'job-owner']));
        $this->assertFalse($this->cache()->lock($this->lockName(), 10)->get());
        $this->assertTrue($this->cache()->restoreLock($this->lockName(), 'job-owner')->release());
        $this->assertTrue($child->run(['get', $this->lockName(), 60, 'other-owner']));
    }

    public function testALockOutlivesTheProcessThatTookIt(): void
    {
        $child = $this->child();
        $this->assertTrue($child->run(['get', $this->lockName(), 60, 'job-owner']));
        $this->assertSame('bye', $child->run(['exit']));
        $this->assertTrue(self::waitUntil(fn () => !$child->isRunning(), 10), 'the child did not exit');
        $this->assertFalse($this->cache()->lock($this->lockName(), 10)->get());
        $this->assertSame('job-owner', $this->liveOwner($this->lockName()));
    }

    public function testOfTwoProcessesTakingAFreeLockOnlyOneGetsIt(): void
    {
        $a = $this->child();
        $b = $this->child();
        for ($round = 0; $round < 10; $round++) {
            $name = $this->lockName("round-$round");
            $a->send(['get', $name, 60, 'owner-a']);
            $b->send(['get', $name, 60, 'owner-b']);
            $gotA = $a->receive(20);
            $gotB = $b->receive(20);
            $this->assertTrue(($gotA['ok'] ?? false) && ($gotB['ok'] ?? false), json_encode([$gotA, $gotB]));
            $this->assertTrue($gotA['result'] xor $gotB['result'], "round $round: " . json_encode([$gotA, $gotB]));
            $this->assertSame($gotA['result'] ? 'owner-a' : 'owner-b', $this->liveOwner($name));
        }
    }

    public function testAProcessBlockedOnALockGetsItOnlyAfterTheHolderReleases(): void
    {
        $holder = $this->child();
        $waiter = $this->child();
        $this->assertTrue($holder->run(['get', $this->lockName(), 60, 'owner-a']));
        $waiter->send(['block', $this->lockName(), 60, 'owner-b', 30]);
        $this->assertSame('blocking', $waiter->receive(20)['result'] ?? null);
        // While the holder holds it, the waiter's tries are refused (the lock stays owner-a's).
        $this->assertNull($waiter->receive(0.5), 'the waiter returned while the lock was held');
        $this->assertSame('owner-a', $this->liveOwner($this->lockName()));
        $this->assertTrue($holder->run(['release', $this->lockName(), 'owner-a']));
        $this->assertSame(['ok' => true, 'result' => true], $waiter->receive(20));
        $this->assertSame('owner-b', $this->liveOwner($this->lockName()));
        $this->assertFalse($holder->run(['get', $this->lockName(), 60, 'owner-a']));
    }

    public function testAKilledHolderKeepsItsLockUntilItsTimeIsUp(): void
    {
        $holder = $this->child();
        $this->assertTrue($holder->run(['get', $this->lockName(), 3, 'owner-a']));
        $acquired = microtime(true);
        $holder->kill();
        $this->assertTrue(self::waitUntil(fn () => !$holder->isRunning(), 10), 'the holder did not die');
        $this->assertFalse($this->cache()->lock($this->lockName(), 10, 'owner-b')->get(), 'the dead holder\'s lock was free at once');
        $this->assertTrue(
            self::waitUntil(fn () => $this->cache()->lock($this->lockName(), 10, 'owner-b')->get(), 15, 0.1),
            'the dead holder\'s lock was not free within 15 s'
        );
        $this->assertGreaterThan(2.0, microtime(true) - $acquired, 'a 3 s lock was free before its time was up');
        $this->assertSame('owner-b', $this->liveOwner($this->lockName()));
    }

    public function testForceReleaseFreesAKilledHoldersLockAtOnce(): void
    {
        $holder = $this->child();
        $this->assertTrue($holder->run(['get', $this->lockName(), 600, 'owner-a']));
        $holder->kill();
        $this->assertTrue(self::waitUntil(fn () => !$holder->isRunning(), 10), 'the holder did not die');
        $this->cache()->lock($this->lockName())->forceRelease();
        $this->assertTrue($this->cache()->lock($this->lockName(), 10, 'owner-b')->get());
    }
}
