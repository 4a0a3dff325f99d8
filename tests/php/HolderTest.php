<?php
// SharedLock::holder() (issue 5): who holds a lock, with token, host name and pid of the
// holder on an upgraded table, and when it was acquired and expires (database clock).
declare(strict_types=1);

namespace MySqlLockTest;

use ItsMieger\MySqlSharedLocks\SharedLock;
use PHPUnit\Framework\Attributes\Test;

final class HolderTest extends TestCase
{
    /** A child holding $name in the upgraded table; this process looks at that table too. */
    private function fencedHolder(string $name): Child
    {
        SharedLock::setTable(FENCED_TABLE);
        $child = $this->startFencedChild();
        $this->assertReply('locked', $child->call(['lock', $name, 0, 30]));
        return $child;
    }

    /** @test */
    #[Test]
    public function holderKeepsItsKeysAndAddsTokenHostnamePidAcquiredAtAndExpiresAt(): void
    {
        $name = $this->lockName();
        SharedLock::lock($name, 0, 30);
        $this->assertSame(
            ['connectionId', 'host', 'ttl', 'remainingTTL', 'age', 'acquired', 'alive', 'mine', 'token', 'hostname', 'pid', 'acquiredAt', 'expiresAt'],
            array_keys(SharedLock::holder($name))
        );
    }

    /** @test */
    #[Test]
    public function holderShowsTheHoldersTokenOnAnUpgradedTable(): void
    {
        $name = $this->lockName();
        $child = $this->fencedHolder($name);
        $token = $child->call(['token', $name])['result'] ?? null;
        $this->assertIsInt($token);
        $this->assertSame($token, SharedLock::holder($name)['token']);
    }

    /** @test */
    #[Test]
    public function holderShowsTheHoldersHostnameOnAnUpgradedTable(): void
    {
        $name = $this->lockName();
        $this->fencedHolder($name);
        $this->assertSame(gethostname(), SharedLock::holder($name)['hostname']);
    }

    /** @test */
    #[Test]
    public function holderShowsTheHoldersPidOnAnUpgradedTable(): void
    {
        $name = $this->lockName();
        $child = $this->fencedHolder($name);
        $this->assertSame($child->pid, SharedLock::holder($name)['pid']);
    }

    /** @test */
    #[Test]
    public function holderShowsThisProcesssPidForItsOwnLock(): void
    {
        $name = $this->lockName();
        SharedLock::setTable(FENCED_TABLE);
        SharedLock::lock($name, 0, 30);
        $this->assertSame(getmypid(), SharedLock::holder($name)['pid']);
    }

    /** @test */
    #[Test]
    public function holderHasNoTokenHostnameOrPidOnTheOriginalTable(): void
    {
        $name = $this->lockName();
        $this->startHolder($name);
        $holder = SharedLock::holder($name);
        $this->assertSame(
            ['token' => null, 'hostname' => null, 'pid' => null],
            ['token' => $holder['token'], 'hostname' => $holder['hostname'], 'pid' => $holder['pid']]
        );
    }

    /** @test */
    #[Test]
    public function holderAcquiredAtIsWhenTheLockWasTakenOnTheDatabaseClock(): void
    {
        $name = $this->lockName();
        $before = self::dbNow();
        SharedLock::lock($name, 0, 30);
        $after = self::dbNow();
        $acquiredAt = SharedLock::holder($name)['acquiredAt'];
        $this->assertIsInt($acquiredAt);
        $this->assertGreaterThanOrEqual($before, $acquiredAt);
        $this->assertLessThanOrEqual($after, $acquiredAt);
    }

    /** @test */
    #[Test]
    public function holderExpiresAtIsAcquiredAtPlusTheTtl(): void
    {
        $name = $this->lockName();
        SharedLock::lock($name, 0, 30);
        $holder = SharedLock::holder($name);
        $this->assertSame($holder['acquiredAt'] + 30, $holder['expiresAt']);
    }

    /** @test */
    #[Test]
    public function holderExpiresAtMovesWithRenewAndAcquiredAtStays(): void
    {
        $name = $this->lockName();
        SharedLock::lock($name, 0, 30);
        $before = SharedLock::holder($name);
        SharedLock::renew($name, 300);
        $after = SharedLock::holder($name);
        $this->assertSame($before['acquiredAt'], $after['acquiredAt']);
        $this->assertGreaterThanOrEqual(self::dbNow() + 299, $after['expiresAt']);
    }
}
