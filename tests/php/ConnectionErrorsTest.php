<?php
// SPEC §7: failures name the cause, with a hint, and never the password.
declare(strict_types=1);

namespace MySqlLockTest;

use ItsMieger\MySqlSharedLocks\Exception\SharedLockAcquireException;
use ItsMieger\MySqlSharedLocks\SharedLock;
use PHPUnit\Framework\Attributes\Test;

final class ConnectionErrorsTest extends TestCase
{
    private function configureUnreachablePort(): void
    {
        $s = server();
        SharedLock::configureConnection($s['host'], $s['db'], $s['user'], $s['pass'], 'utf8mb4', 1);
    }

    private function useMissingTable(): void
    {
        $this->assertTrue(method_exists(SharedLock::class, 'setTable'), 'SharedLock::setTable() does not exist');
        SharedLock::setTable('no_such_table_' . getmypid());
    }

    /** @test */
    #[Test]
    public function unreachableServerGivesAcquireException(): void
    {
        $name = $this->lockName();
        $this->configureUnreachablePort();
        $e = $this->catchThrown(fn () => SharedLock::lock($name, 0, 10));
        $this->assertSame([SharedLockAcquireException::class, $name], [get_class($e), $e->getLockName()]);
    }

    /** @test */
    #[Test]
    public function unreachableServerIsNamedByGetPrevious(): void
    {
        $this->configureUnreachablePort();
        $e = $this->catchThrown(fn () => SharedLock::lock($this->lockName(), 0, 10));
        $this->assertNotNull($e->getPrevious(), 'no getPrevious(): ' . $e->getMessage());
        $this->assertStringContainsString(server()['host'], $e->getPrevious()->getMessage());
    }

    /** @test */
    #[Test]
    public function unreachableServerErrorDoesNotContainThePassword(): void
    {
        $this->configureUnreachablePort();
        $e = $this->catchThrown(fn () => SharedLock::lock($this->lockName(), 0, 10));
        $this->assertStringNotContainsString(server()['pass'], implode("\n", array_merge([$e->getMessage()], self::previousMessages($e))));
    }

    /** @test */
    #[Test]
    public function missingTableGivesAcquireException(): void
    {
        $name = $this->lockName();
        $this->useMissingTable();
        $e = $this->catchThrown(fn () => SharedLock::lock($name, 0, 10));
        $this->assertSame([SharedLockAcquireException::class, $name], [get_class($e), $e->getLockName()]);
    }

    /** @test */
    #[Test]
    public function missingTableErrorTellsHowToCreateIt(): void
    {
        $this->useMissingTable();
        $e = $this->catchThrown(fn () => SharedLock::lock($this->lockName(), 0, 10));
        $this->assertMatchesRegularExpression('/mysqllock init|CREATE TABLE/', implode("\n", self::previousMessages($e)));
    }

    /** @test */
    #[Test]
    public function setTableChangesGetTable(): void
    {
        $this->useMissingTable();
        $this->assertSame('no_such_table_' . getmypid(), SharedLock::getTable());
    }
}
