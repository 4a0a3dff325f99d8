<?php
// Fencing tokens (issue 5): SharedLockHandle::getToken() on a table upgraded by
// `mysqllock init --upgrade`, and what happens without the upgrade.
declare(strict_types=1);

namespace MySqlLockTest;

use ItsMieger\MySqlSharedLocks\Exception\SharedLockException;
use ItsMieger\MySqlSharedLocks\Exception\SharedLockRemainingTTLException;
use ItsMieger\MySqlSharedLocks\SharedLock;
use ItsMieger\MySqlSharedLocks\SharedLockHandle;
use PHPUnit\Framework\Attributes\Test;

final class FencingTest extends TestCase
{
    /** An InnoDB table a lock protects, written with the token as the stub shows. */
    private const RESOURCE_TABLE = 'phpt_fenced_resource';

    protected function setUp(): void
    {
        parent::setUp();
        SharedLock::setTable(FENCED_TABLE);
    }

    /** @test */
    #[Test]
    public function getTokenReturnsAnInteger(): void
    {
        $this->assertIsInt(SharedLock::lock($this->lockName(), 0, 10)->getToken());
    }

    /** @test */
    #[Test]
    public function tokensStrictlyIncreaseAcrossLockAndUnlockCycles(): void
    {
        $name = $this->lockName();
        $tokens = [];
        for ($i = 0; $i < 5; $i++) {
            $handle = SharedLock::lock($name, 0, 10);
            $tokens[] = $handle->getToken();
            $handle->release();
        }
        $this->assertStrictlyIncreasing($tokens);
    }

    /** @test */
    #[Test]
    public function tokensStrictlyIncreaseAcrossTwoProcessesTakingTurns(): void
    {
        $name = $this->lockName();
        $child = $this->startFencedChild();
        $tokens = [];
        for ($i = 0; $i < 3; $i++) {
            $handle = SharedLock::lock($name, 0, 10);
            $tokens[] = $handle->getToken();
            $handle->release();
            $this->assertReply('locked', $child->call(['lock', $name, 5, 10]));
            $reply = $child->call(['token', $name]);
            $this->assertIsInt($reply['result'] ?? null, 'child replied ' . json_encode($reply));
            $tokens[] = $reply['result'];
            $this->assertReply('released', $child->call(['release', $name]));
        }
        $this->assertStrictlyIncreasing($tokens);
    }

    /** @test */
    #[Test]
    public function getTokenIsTheTokenStoredInTheLocksRow(): void
    {
        $name = $this->lockName();
        $token = SharedLock::lock($name, 0, 10)->getToken();
        $this->assertSame((string) $token, (string) self::fencedRows($name)[0]['token']);
    }

    /** @test */
    #[Test]
    public function getTokenOnATableWithoutTheUpgradeThrowsSharedLockExceptionNamingInitUpgrade(): void
    {
        SharedLock::setTable('shared_locks');
        $name = $this->lockName();
        $handle = SharedLock::lock($name, 0, 10);
        $e = $this->catchThrown(fn () => $handle->getToken());
        $this->assertSame(SharedLockException::class, get_class($e), (string) $e);
        $this->assertSame($name, $e->getLockName());
        $this->assertStringContainsString('mysqllock init --upgrade', $e->getMessage());
    }

    /** @test */
    #[Test]
    public function getTokenAfterReleaseThrowsRemainingTTLException(): void
    {
        $name = $this->lockName();
        $handle = SharedLock::lock($name, 0, 10);
        $handle->release();
        $e = $this->catchThrown(fn () => $handle->getToken());
        $this->assertInstanceOf(SharedLockRemainingTTLException::class, $e);
        $this->assertSame($name, $e->getLockName());
    }

    /** @test */
    #[Test]
    public function getTokenOfALockAnotherProcessHoldsThrowsRemainingTTLException(): void
    {
        $name = $this->lockName();
        $this->assertReply('locked', $this->startFencedChild()->call(['lock', $name, 0, 30]));
        $this->expectException(SharedLockRemainingTTLException::class);
        (new SharedLockHandle($name))->getToken();
    }

    /**
     * docs/php.md's fenced write example: a holder whose lock was taken over after its TTL
     * still has its (older) token, and the write guarded by `fence < :t` refuses it. Each
     * holder makes its write itself, in its own process, with its handle's getToken().
     *
     * @test
     */
    #[Test]
    public function aTakenOverHoldersFencedWriteChangesNoRow(): void
    {
        $name = $this->lockName();
        $db = self::db();
        $db->exec('CREATE TABLE IF NOT EXISTS `' . self::RESOURCE_TABLE . '` (name varchar(100) NOT NULL PRIMARY KEY, fence bigint unsigned NOT NULL, writer varchar(20) NOT NULL) ENGINE=InnoDB');
        $db->prepare('INSERT INTO `' . self::RESOURCE_TABLE . "` VALUES (?, 0, 'nobody')")->execute([$name]);
        try {
            $stale = $this->startFencedChild();
            $this->assertReply('locked', $stale->call(['lock', $name, 0, 1]));
            $this->assertReply(1, $stale->call(['fencedwrite', $name, self::RESOURCE_TABLE, 'stale, in time']));
            self::waitUntilExpired($name, FENCED_TABLE);
            $newHolder = $this->startFencedChild();
            $this->assertReply('locked', $newHolder->call(['lock', $name, 5, 30]));
            $this->assertReply(1, $newHolder->call(['fencedwrite', $name, self::RESOURCE_TABLE, 'new holder']));

            $this->assertReply(0, $stale->call(['fencedwrite', $name, self::RESOURCE_TABLE, 'stale']));
            $st = $db->prepare('SELECT writer FROM `' . self::RESOURCE_TABLE . '` WHERE name = ?');
            $st->execute([$name]);
            $this->assertSame('new holder', $st->fetchColumn());
        } finally {
            $db->prepare('DELETE FROM `' . self::RESOURCE_TABLE . '` WHERE name = ?')->execute([$name]);
        }
    }

    private function assertStrictlyIncreasing(array $tokens): void
    {
        for ($i = 1; $i < count($tokens); $i++) {
            $this->assertGreaterThan($tokens[$i - 1], $tokens[$i], 'tokens ' . json_encode($tokens));
        }
    }
}
