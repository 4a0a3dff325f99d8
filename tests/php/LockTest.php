<?php
// The single-process API of SharedLock and its handle (SPEC §3).
declare(strict_types=1);

namespace MySqlLockTest;

use ItsMieger\MySqlSharedLocks\Exception\SharedLockReleaseException;
use ItsMieger\MySqlSharedLocks\Exception\SharedLockRemainingTTLException;
use ItsMieger\MySqlSharedLocks\Exception\SharedLockTimeoutException;
use ItsMieger\MySqlSharedLocks\SharedLock;
use ItsMieger\MySqlSharedLocks\SharedLockHandle;
use PHPUnit\Framework\Attributes\Test;

final class LockTest extends TestCase
{
    /** @test */
    #[Test]
    public function lockReturnsAHandle(): void
    {
        $this->assertInstanceOf(SharedLockHandle::class, SharedLock::lock($this->lockName(), 0, 10));
    }

    /** @test */
    #[Test]
    public function lockStoresOneAcquiredRowWithTheTtl(): void
    {
        $name = $this->lockName();
        SharedLock::lock($name, 0, 10);
        $rows = self::rows($name);
        $this->assertCount(1, $rows);
        $this->assertSame(['name' => $name, 'ttl' => 10, 'lock_acquired' => 1], [
            'name' => $rows[0]['name'], 'ttl' => (int) $rows[0]['ttl'], 'lock_acquired' => (int) $rows[0]['lock_acquired'],
        ]);
    }

    /** @test */
    #[Test]
    public function lockStoresTheDatabaseClockAsCreated(): void
    {
        $name = $this->lockName();
        SharedLock::lock($name, 0, 10);
        $now = (int) self::db()->query('SELECT UNIX_TIMESTAMP()')->fetchColumn();
        $this->assertEqualsWithDelta($now, (int) self::rows($name)[0]['created'], 2);
    }

    /** @test */
    #[Test]
    public function unlockDeletesTheRow(): void
    {
        $name = $this->lockName();
        SharedLock::lock($name, 0, 10);
        SharedLock::unlock($name);
        $this->assertSame([], self::rows($name));
    }

    /** @test */
    #[Test]
    public function aReleasedLockCanBeLockedAgainAtOnce(): void
    {
        $name = $this->lockName();
        SharedLock::lock($name, 0, 10)->release();
        $this->assertInstanceOf(SharedLockHandle::class, SharedLock::lock($name, 0, 10));
    }

    /** @test */
    #[Test]
    public function handleReleaseReturnsTheHandle(): void
    {
        $handle = SharedLock::lock($this->lockName(), 0, 10);
        $this->assertSame($handle, $handle->release());
    }

    /** @test */
    #[Test]
    public function handleReleaseDeletesTheRow(): void
    {
        $name = $this->lockName();
        SharedLock::lock($name, 0, 10)->release();
        $this->assertSame([], self::rows($name));
    }

    /** @test */
    #[Test]
    public function handleReleaseOfAReleasedLockThrowsReleaseException(): void
    {
        $name = $this->lockName();
        $handle = SharedLock::lock($name, 0, 10)->release();
        $this->expectException(SharedLockReleaseException::class);
        $handle->release();
    }

    /** @test */
    #[Test]
    public function handleAssertTTLReturnsTheHandle(): void
    {
        $handle = SharedLock::lock($this->lockName(), 0, 10);
        $this->assertSame($handle, $handle->assertTTL(1));
    }

    /** @test */
    #[Test]
    public function handleConstructedFromANameReleasesThatLock(): void
    {
        $name = $this->lockName();
        SharedLock::lock($name, 0, 10);
        (new SharedLockHandle($name))->release();
        $this->assertSame([], self::rows($name));
    }

    /** @test */
    #[Test]
    public function assertTTLPassesWithEnoughTTLLeft(): void
    {
        $name = $this->lockName();
        SharedLock::lock($name, 0, 10);
        SharedLock::assertTTL($name, 5);
        $this->assertCount(1, self::rows($name), 'assertTTL must not change the lock');
    }

    /** @test */
    #[Test]
    public function assertTTLDefaultsToOneSecond(): void
    {
        $name = $this->lockName();
        SharedLock::lock($name, 0, 10);
        SharedLock::assertTTL($name);
        $this->assertCount(1, self::rows($name));
    }

    /** @test */
    #[Test]
    public function assertTTLThrowsRemainingTTLExceptionWithTooLittleTTLLeft(): void
    {
        $name = $this->lockName();
        SharedLock::lock($name, 0, 10);
        $e = $this->catchThrown(fn () => SharedLock::assertTTL($name, 30));
        $this->assertInstanceOf(SharedLockRemainingTTLException::class, $e);
        $this->assertEquals(30, $e->getTTL());
        $this->assertSame($name, $e->getLockName());
        $this->assertStringStartsWith("Lock \"$name\" is not to live for 30 seconds anymore", $e->getMessage());
    }

    /** @test */
    #[Test]
    public function assertTTLWithTooLittleTTLLeftKeepsTheLock(): void
    {
        $name = $this->lockName();
        SharedLock::lock($name, 0, 10);
        $this->catchThrown(fn () => SharedLock::assertTTL($name, 30));
        SharedLock::assertTTL($name, 5);
        $this->assertCount(1, self::rows($name));
    }

    /** @test */
    #[Test]
    public function secondLockOfANameThisProcessHoldsFailsAtOnceWithTimeoutException(): void
    {
        $name = $this->lockName();
        SharedLock::lock($name, 0, 10);
        $start = microtime(true);
        $e = $this->catchThrown(fn () => SharedLock::lock($name, 5, 10));
        $this->assertInstanceOf(SharedLockTimeoutException::class, $e);
        $this->assertLessThan(2.0, microtime(true) - $start, 'it waited for the timeout instead of failing at once');
    }

    /** @test */
    #[Test]
    public function secondLockOfANameThisProcessHoldsSaysItIsAlreadyHeld(): void
    {
        $name = $this->lockName();
        SharedLock::lock($name, 0, 10);
        $e = $this->catchThrown(fn () => SharedLock::lock($name, 5, 10));
        $this->assertSame($name, $e->getLockName());
        $this->assertMatchesRegularExpression('/already (held|holds|locked)/i', $e->getMessage());
    }

    /** @test */
    #[Test]
    public function secondLockOfANameThisProcessHoldsKeepsTheFirst(): void
    {
        $name = $this->lockName();
        SharedLock::lock($name, 0, 10);
        $this->catchThrown(fn () => SharedLock::lock($name, 0, 10));
        SharedLock::unlock($name);
        $this->assertSame([], self::rows($name));
    }

    /** @test */
    #[Test]
    public function getTableReturnsSharedLocks(): void
    {
        $this->assertSame('shared_locks', SharedLock::getTable());
    }

    /** @test */
    #[Test]
    public function quoteStyleConstantsHaveTheOriginalValues(): void
    {
        $this->assertSame([0, 1], [SharedLock::QUOTE_STYLE_DEFAULT, SharedLock::QUOTE_STYLE_ANSI]);
    }

    /** @test */
    #[Test]
    public function setQuoteStyleRejectsAnUnknownStyle(): void
    {
        $this->expectException(\InvalidArgumentException::class);
        SharedLock::setQuoteStyle(2);
    }

    /** @test */
    #[Test]
    public function locksWorkWithAnsiQuotesOnAnAnsiQuotesSession(): void
    {
        $name = $this->lockName();
        $pdo = connect("SET SESSION sql_mode = CONCAT(@@sql_mode, ',ANSI_QUOTES')");
        SharedLock::setConnection($pdo);
        SharedLock::setQuoteStyle(SharedLock::QUOTE_STYLE_ANSI);
        SharedLock::lock($name, 0, 10);
        $this->assertCount(1, self::rows($name), 'lock() left no row');
        SharedLock::unlock($name);
        $this->assertSame([], self::rows($name), 'unlock() left the row');
    }

    /** @test */
    #[Test]
    public function tryRepairTableSucceedsOnAHealthyTable(): void
    {
        $name = $this->lockName();
        SharedLock::tryRepairTable();
        SharedLock::lock($name, 0, 10);
        $this->assertCount(1, self::rows($name), 'the table does not work after the repair');
    }

    /** @test */
    #[Test]
    public function getConnectionReturnsAnExceptionModePdo(): void
    {
        $pdo = SharedLock::getConnection();
        $this->assertSame(\PDO::ERRMODE_EXCEPTION, $pdo->getAttribute(\PDO::ATTR_ERRMODE));
    }

    /** @test */
    #[Test]
    public function lockTakenAfterGetConnectionLivesInThatPdosSession(): void
    {
        $name = $this->lockName();
        $id = (int) SharedLock::getConnection()->query('SELECT CONNECTION_ID()')->fetchColumn();
        SharedLock::lock($name, 0, 10);
        $this->assertSame($id, (int) self::rows($name)[0]['connection_id']);
    }

    /** @test */
    #[Test]
    public function lockTakenAfterSetConnectionLivesInThatPdosSession(): void
    {
        $name = $this->lockName();
        $pdo = connect();
        SharedLock::setConnection($pdo);
        SharedLock::lock($name, 0, 10);
        $this->assertSame((int) $pdo->query('SELECT CONNECTION_ID()')->fetchColumn(), (int) self::rows($name)[0]['connection_id']);
    }

    /** @test */
    #[Test]
    public function getConnectionReturnsThePdoGivenToSetConnection(): void
    {
        $pdo = connect();
        SharedLock::setConnection($pdo);
        $this->assertSame($pdo, SharedLock::getConnection());
    }

    /** @test */
    #[Test]
    public function getConnectionReturnsTheSamePdoEachTime(): void
    {
        $this->assertSame(SharedLock::getConnection(), SharedLock::getConnection());
    }

    /** @test */
    #[Test]
    public function setTableMakesLocksUseThatTable(): void
    {
        $this->assertTrue(method_exists(SharedLock::class, 'setTable'), 'SharedLock::setTable() does not exist');
        $name = $this->lockName();
        self::db()->exec(str_replace('`shared_locks`', '`phpt_other_locks`', CREATE_TABLE));
        SharedLock::setTable('phpt_other_locks');
        SharedLock::lock($name, 0, 10);
        $st = self::db()->prepare('SELECT COUNT(*) FROM phpt_other_locks WHERE name = ?');
        $st->execute([$name]);
        $this->assertSame([1, []], [(int) $st->fetchColumn(), self::rows($name)]);
    }

    /** @test */
    #[Test]
    public function otherSpellingOfANameThisProcessHoldsFailsAtOnce(): void
    {
        SharedLock::lock($this->lockName('Foo'), 0, 10);
        $start = microtime(true);
        $e = $this->catchThrown(fn () => SharedLock::lock($this->lockName('foo '), 5, 10));
        $this->assertInstanceOf(SharedLockTimeoutException::class, $e);
        $this->assertLessThan(2.0, microtime(true) - $start, 'it waited for itself until the timeout');
    }

    /** @test */
    #[Test]
    public function numericStringTimeoutAndTtlAreAcceptedAsByTheOriginal(): void
    {
        $name = $this->lockName();
        SharedLock::lock($name, '0', '10');
        $this->assertSame(10, (int) self::rows($name)[0]['ttl']);
    }

    /** @test */
    #[Test]
    public function phpRiDescribesTheExtension(): void
    {
        exec(escapeshellarg(PHP_BINARY) . ' -d ' . escapeshellarg('extension=' . extensionPath()) . ' --ri mysqllock 2>&1', $output, $status);
        $this->assertSame(0, $status, implode("\n", $output));
    }

    /** @test */
    #[Test]
    public function aThousandLocksAreHeldAtOnceAndAllReleased(): void
    {
        // Past 500 leases the extension takes further ones on another session of its own.
        $handles = [];
        for ($i = 0; $i < 1000; $i++) {
            $handles[] = SharedLock::lock($this->lockName("many-$i"), 0, 30);
        }
        $holders = self::db()->query(
            'SELECT COUNT(*), COUNT(DISTINCT connection_id), SUM(IS_USED_LOCK(name) = connection_id) FROM shared_locks WHERE name LIKE '
            . self::db()->quote($this->prefix() . '%')
        )->fetch(\PDO::FETCH_NUM);
        $this->assertSame([1000, 2, 1000], array_map('intval', $holders));
        SharedLock::assertTTL($this->lockName('many-999'), 10);
        foreach ($handles as $handle) {
            $handle->release();
        }
        $this->assertSame([], $this->ownRows());
    }
}
