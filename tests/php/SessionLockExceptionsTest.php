<?php
// The exceptions of the MySqlLock namespace behave like PHP-defined ones: one base
// (LockException, a RuntimeException) to catch them all, users can new and subclass
// them, and those the extension throws carry file, line and getPrevious() as PHP would.
declare(strict_types=1);

namespace MySqlLockTest;

use MySqlLock\AlreadyHeldException;
use MySqlLock\ConnectionException;
use MySqlLock\DeadlockException;
use MySqlLock\LockException;
use MySqlLock\LockTimeoutException;
use MySqlLock\NotHeldException;
use MySqlLock\SessionLock;
use PHPUnit\Framework\Attributes\DataProvider;
use PHPUnit\Framework\Attributes\Test;

final class SessionLockExceptionsTest extends TestCase
{
    public static function hierarchy(): array
    {
        return [
            'LockException' => [LockException::class, \RuntimeException::class],
            'LockTimeoutException' => [LockTimeoutException::class, LockException::class],
            'NotHeldException' => [NotHeldException::class, LockException::class],
            'AlreadyHeldException' => [AlreadyHeldException::class, LockException::class],
            'DeadlockException' => [DeadlockException::class, LockException::class],
            'ConnectionException' => [ConnectionException::class, LockException::class],
        ];
    }

    /**
     * @test
     * @dataProvider hierarchy
     */
    #[Test]
    #[DataProvider('hierarchy')]
    public function exceptionClassExtendsItsParent(string $class, string $parent): void
    {
        $this->assertSame($parent, get_parent_class($class));
    }

    /** Each class of hierarchy() alone (PHPUnit 10+ warns of data a test does not take). */
    public static function classes(): array
    {
        return array_map(fn (array $case): array => [$case[0]], self::hierarchy());
    }

    /**
     * @test
     * @dataProvider classes
     */
    #[Test]
    #[DataProvider('classes')]
    public function usersCanCreateItWithMessageCodeAndPrevious(string $class): void
    {
        $previous = new \LogicException('cause');
        $e = new $class('message', 7, $previous);
        $this->assertSame(['message', 7, $previous], [$e->getMessage(), $e->getCode(), $e->getPrevious()]);
    }

    /** @test */
    #[Test]
    public function usersCanSubclassIt(): void
    {
        $e = new class ('mine') extends NotHeldException {
        };
        $this->assertInstanceOf(LockException::class, $e);
    }

    /** @test */
    #[Test]
    public function anExceptionTheExtensionThrowsHasTheCallersFileAndLine(): void
    {
        $lock = new SessionLock($this->lockName());
        $line = __LINE__ + 1;
        $e = $this->catchThrown(fn () => $lock->release());
        $this->assertInstanceOf(NotHeldException::class, $e);
        $this->assertSame([__FILE__, $line], [$e->getFile(), $e->getLine()]);
    }

    /** @test */
    #[Test]
    public function theMessageNamesTheMethodAndTheLock(): void
    {
        $name = $this->lockName();
        $e = $this->catchThrown(fn () => (new SessionLock($name))->release());
        $this->assertSame("SessionLock::release(): lock \"$name\" is not held: this session does not hold it", $e->getMessage());
    }

    /** @test */
    #[Test]
    public function aSessionLockWithoutAConfiguredConnectionThrowsConnectionException(): void
    {
        // A process that never configured a connection (no mysqllock.dsn, no configureConnection()).
        $script = 'try { (new MySqlLock\SessionLock("n"))->acquire(); } catch (Throwable $e) { echo get_class($e), "|", $e->getMessage(); }';
        $cmd = [PHP_BINARY, '-n', '-d', 'extension=' . extensionPath(), '-r', $script];
        [$out, $err] = self::runToEnd($cmd);
        [$class, $message] = explode('|', $out, 2) + [1 => "stderr: $err"];
        $this->assertSame(ConnectionException::class, $class, $message);
        $this->assertStringContainsString('no connection is configured', $message);
    }
}
