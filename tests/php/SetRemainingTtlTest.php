<?php
// SharedLock::setRemainingTTL() and SharedLockHandle::setRemainingTTL(): a lease's end set
// sooner or later (what Symfony's putOffExpiration() asks), and SharedLock::createTable()
// and SharedLock::MAX_TTL, which the Symfony bridge uses instead of SQL and limits of its own.
declare(strict_types=1);

namespace MySqlLockTest;

use ItsMieger\MySqlSharedLocks\Exception\SharedLockAcquireException;
use ItsMieger\MySqlSharedLocks\Exception\SharedLockRemainingTTLException;
use ItsMieger\MySqlSharedLocks\SharedLock;
use PHPUnit\Framework\Attributes\Test;

final class SetRemainingTtlTest extends TestCase
{
    private const CREATED = 'phpt_created_locks';

    /** Seconds until the row of $name may be taken over (created + ttl, database clock). */
    private static function serverRemaining(string $name): float
    {
        $st = self::db()->prepare('SELECT created + ttl - UNIX_TIMESTAMP(NOW(6)) FROM shared_locks WHERE name = ?');
        $st->execute([$name]);
        $left = $st->fetchColumn();
        self::assertNotFalse($left, "no row for $name");
        return (float) $left;
    }

    /** @test */
    #[Test]
    public function setRemainingTtlShortensTheLeaseInTheTable(): void
    {
        $name = $this->lockName();
        $handle = SharedLock::lock($name, 0, 300);
        $this->assertSame($handle, $handle->setRemainingTTL(2));

        $this->assertLessThanOrEqual(2.0, self::serverRemaining($name));
        $this->assertGreaterThan(0.0, self::serverRemaining($name));
        $this->assertLessThanOrEqual(2.0, $handle->getRemainingTTL());
    }

    /** @test */
    #[Test]
    public function staticSetRemainingTtlExtendsAHeldLock(): void
    {
        $name = $this->lockName();
        $handle = SharedLock::lock($name, 0, 5);
        $this->assertNull(SharedLock::setRemainingTTL($name, 60));
        $this->assertGreaterThan(55.0, $handle->getRemainingTTL());
    }

    /** @test */
    #[Test]
    public function anotherProcessTakesTheLockOverOnceTheShortenedTimeHasPassed(): void
    {
        $name = $this->lockName();
        SharedLock::lock($name, 0, 300)->setRemainingTTL(2);
        $set = microtime(true);

        $this->assertReply('locked', $this->startChild()->call(['lock', $name, 15, 30], 20));
        $waited = microtime(true) - $set;
        $this->assertGreaterThan(1.5, $waited, 'taken over before the 2 s were up');
        $this->assertLessThan(8.0, $waited, 'taken over long after the 2 s were up');
        $this->assertInstanceOf(SharedLockRemainingTTLException::class, $this->catchThrown(fn () => SharedLock::assertTTL($name)));
    }

    /** @test */
    #[Test]
    public function setRemainingTtlOfALockNotHeldThrowsRemainingTTLException(): void
    {
        $e = $this->catchThrown(fn () => SharedLock::setRemainingTTL($this->lockName(), 30));
        $this->assertInstanceOf(SharedLockRemainingTTLException::class, $e);
        $this->assertSame($this->lockName(), $e->getLockName());
    }

    /** @test */
    #[Test]
    public function setRemainingTtlAfterATakeoverThrowsAndLeavesTheNewHoldersRowAlone(): void
    {
        $name = $this->lockName();
        $handle = SharedLock::lock($name, 0, 1);
        self::waitUntilExpired($name);
        $this->assertReply('locked', $this->startChild()->call(['lock', $name, 5, 30]));
        $before = self::rows($name);

        $this->assertInstanceOf(SharedLockRemainingTTLException::class, $this->catchThrown(fn () => $handle->setRemainingTTL(300)));
        $this->assertSame($before, self::rows($name));
    }

    /** @test */
    #[Test]
    public function aTtlThatIsNotPositiveIsRefusedAndTheLockKept(): void
    {
        $handle = SharedLock::lock($this->lockName(), 0, 10);
        foreach ([0, -1] as $ttl) {
            $e = $this->catchThrown(fn () => $handle->setRemainingTTL($ttl));
            $this->assertInstanceOf(SharedLockRemainingTTLException::class, $e);
            $this->assertInstanceOf(\InvalidArgumentException::class, $e->getPrevious(), "ttl $ttl");
        }
        $this->assertGreaterThan(8.0, $handle->getRemainingTTL());
        $this->expectException(\TypeError::class);
        $handle->setRemainingTTL('soon');
    }

    /** @test */
    #[Test]
    public function createTableCreatesTheOriginalTableOnceAndLocksWorkOnIt(): void
    {
        self::db()->exec('DROP TABLE IF EXISTS ' . self::CREATED);
        try {
            SharedLock::setTable(self::CREATED);
            $this->assertTrue(SharedLock::createTable());
            $this->assertFalse(SharedLock::createTable(), 'created twice');

            $st = self::db()->prepare('SELECT COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ? ORDER BY ORDINAL_POSITION');
            $st->execute([self::CREATED]);
            $this->assertSame(['name', 'connection_id', 'created', 'ttl', 'lock_acquired'], $st->fetchAll(\PDO::FETCH_COLUMN));
            $name = $this->lockName();
            SharedLock::lock($name, 0, 30);
            $st = self::db()->prepare('SELECT COUNT(*) FROM ' . self::CREATED . ' WHERE name = ?');
            $st->execute([$name]);
            $this->assertSame(1, (int) $st->fetchColumn());
            SharedLock::unlock($name);
        } finally {
            SharedLock::setTable('shared_locks');
            self::db()->exec('DROP TABLE IF EXISTS ' . self::CREATED);
        }
    }

    /** @test */
    #[Test]
    public function maxTtlIsTheLongestTtlALockTakes(): void
    {
        $this->assertSame(1.0e9, SharedLock::MAX_TTL);
        $handle = SharedLock::lock($this->lockName(), 0, SharedLock::MAX_TTL);
        $this->assertGreaterThan(SharedLock::MAX_TTL - 10, $handle->getRemainingTTL());
        $e = $this->catchThrown(fn () => SharedLock::lock($this->lockName('over'), 0, SharedLock::MAX_TTL * 2));
        $this->assertInstanceOf(SharedLockAcquireException::class, $e);
        $this->assertInstanceOf(\InvalidArgumentException::class, $e->getPrevious());
    }
}
