<?php
// unlock() and assertTTL() of a lock that is gone: row deleted, session killed (SPEC §3/§4).
declare(strict_types=1);

namespace MySqlLockTest;

use ItsMieger\MySqlSharedLocks\Exception\SharedLockReleaseException;
use ItsMieger\MySqlSharedLocks\Exception\SharedLockRemainingTTLException;
use ItsMieger\MySqlSharedLocks\SharedLock;
use ItsMieger\MySqlSharedLocks\SharedLockHandle;
use PHPUnit\Framework\Attributes\Test;

final class LostLockTest extends TestCase
{
    private function deleteRow(string $name): void
    {
        self::db()->prepare('DELETE FROM shared_locks WHERE name = ?')->execute([$name]);
    }

    /** KILLs the session that owns $name's row, from the inspection connection. */
    private function killHolderSession(string $name): void
    {
        $id = (int) self::rows($name)[0]['connection_id'];
        self::db()->exec('KILL ' . $id);
        $this->assertTrue(self::waitUntil(fn () => !self::sessionExists($id), 10), 'the killed session stayed');
    }

    /** @test */
    #[Test]
    public function unlockThrowsReleaseExceptionWhenTheRowWasDeleted(): void
    {
        $name = $this->lockName();
        SharedLock::lock($name, 0, 10);
        $this->deleteRow($name);
        $e = $this->catchThrown(fn () => SharedLock::unlock($name));
        $this->assertInstanceOf(SharedLockReleaseException::class, $e);
        $this->assertSame($name, $e->getLockName());
        $this->assertStringStartsWith("Releasing lock \"$name\" failed", $e->getMessage());
    }

    /** @test */
    #[Test]
    public function unlockThrowsReleaseExceptionWhenTheSessionWasKilled(): void
    {
        $name = $this->lockName();
        SharedLock::lock($name, 0, 10);
        $this->killHolderSession($name);
        $this->expectException(SharedLockReleaseException::class);
        SharedLock::unlock($name);
    }

    /** @test */
    #[Test]
    public function unlockThrowsReleaseExceptionForANameNeverLocked(): void
    {
        $this->expectException(SharedLockReleaseException::class);
        SharedLock::unlock($this->lockName());
    }

    /** @test */
    #[Test]
    public function unlockOfAnotherProcesssLockThrowsAndKeepsItsRow(): void
    {
        $name = $this->lockName();
        $this->startHolder($name);
        $before = self::rows($name);
        $this->catchThrown(fn () => SharedLock::unlock($name));
        $this->assertSame($before, self::rows($name));
    }

    /** @test */
    #[Test]
    public function assertTTLThrowsRemainingTTLExceptionWhenTheRowWasDeleted(): void
    {
        $name = $this->lockName();
        SharedLock::lock($name, 0, 10);
        $this->deleteRow($name);
        $e = $this->catchThrown(fn () => SharedLock::assertTTL($name, 1));
        $this->assertInstanceOf(SharedLockRemainingTTLException::class, $e);
        $this->assertSame($name, $e->getLockName());
    }

    /** @test */
    #[Test]
    public function assertTTLThrowsRemainingTTLExceptionWhenTheSessionWasKilled(): void
    {
        $name = $this->lockName();
        SharedLock::lock($name, 0, 10);
        $this->killHolderSession($name);
        $this->expectException(SharedLockRemainingTTLException::class);
        SharedLock::assertTTL($name, 1);
    }

    /** @test */
    #[Test]
    public function handleAssertTTLThrowsRemainingTTLExceptionWhenTheRowWasDeleted(): void
    {
        $name = $this->lockName();
        $handle = SharedLock::lock($name, 0, 10);
        $this->deleteRow($name);
        $this->expectException(SharedLockRemainingTTLException::class);
        $handle->assertTTL(1);
    }

    /** @test */
    #[Test]
    public function handleReleaseThrowsReleaseExceptionWhenTheSessionWasKilled(): void
    {
        $name = $this->lockName();
        $handle = SharedLock::lock($name, 0, 10);
        $this->killHolderSession($name);
        $this->expectException(SharedLockReleaseException::class);
        $handle->release();
    }

    /** @test */
    #[Test]
    public function lockWorksAgainAfterTheSessionWasKilled(): void
    {
        $name = $this->lockName();
        SharedLock::lock($name, 0, 10);
        $this->killHolderSession($name);
        $this->assertInstanceOf(SharedLockHandle::class, SharedLock::lock($this->lockName('other'), 0, 10));
    }

    /** Runs KILL CONNECTION_ID() through $pdo, as application code would. */
    private static function killOwnSession(\PDO $pdo): void
    {
        try {
            @$pdo->exec('KILL CONNECTION_ID()');
        } catch (\PDOException $e) {
            // the server reports the kill of the running statement's own session
        }
    }

    /** @test */
    #[Test]
    public function killingGetConnectionsSessionLosesLocksTakenAfterwards(): void
    {
        $name = $this->lockName();
        $pdo = SharedLock::getConnection();
        SharedLock::lock($name, 0, 10);
        self::killOwnSession($pdo);
        $this->expectException(SharedLockReleaseException::class);
        SharedLock::unlock($name);
    }

    /** @test */
    #[Test]
    public function killingGetConnectionsSessionLosesLocksHeldBeforeIt(): void
    {
        $name = $this->lockName();
        SharedLock::lock($name, 0, 10);
        self::killOwnSession(SharedLock::getConnection());
        $this->expectException(SharedLockReleaseException::class);
        SharedLock::unlock($name);
    }

    /** @test */
    #[Test]
    public function anotherProcessCanLockAtOnceAfterGetConnectionsSessionWasKilled(): void
    {
        $name = $this->lockName();
        $pdo = SharedLock::getConnection();
        SharedLock::lock($name, 0, 10);
        self::killOwnSession($pdo);
        $this->assertReply('locked', $this->startChild()->call(['lock', $name, 0, 10]));
    }
}
