<?php
// The exception classes behave like the PHP-defined ones of the original package (SPEC §3).
declare(strict_types=1);

namespace MySqlLockTest;

use ItsMieger\MySqlSharedLocks\Exception\SharedLockAcquireException;
use ItsMieger\MySqlSharedLocks\Exception\SharedLockException;
use ItsMieger\MySqlSharedLocks\Exception\SharedLockReleaseException;
use ItsMieger\MySqlSharedLocks\Exception\SharedLockRemainingTTLException;
use ItsMieger\MySqlSharedLocks\Exception\SharedLockTimeoutException;
use ItsMieger\MySqlSharedLocks\Exception\TableRepairException;
use ItsMieger\MySqlSharedLocks\SharedLock;
use MySqlLockTest\Fixtures\JobLockTimeoutException;
use PHPUnit\Framework\Attributes\DataProvider;
use PHPUnit\Framework\Attributes\Test;

final class ExceptionsTest extends TestCase
{
    /** @test */
    #[Test]
    public function timeoutExceptionHasTheOriginalMessage(): void
    {
        $this->assertSame('Acquiring lock "n" timed out after 5 seconds', (new SharedLockTimeoutException('n', 5))->getMessage());
    }

    /** @test */
    #[Test]
    public function timeoutExceptionReturnsItsTimeout(): void
    {
        $this->assertEquals(5, (new SharedLockTimeoutException('n', 5))->getTimeout());
    }

    /** @test */
    #[Test]
    public function timeoutExceptionReturnsItsLockName(): void
    {
        $this->assertSame('n', (new SharedLockTimeoutException('n', 5))->getLockName());
    }

    /** @test */
    #[Test]
    public function timeoutExceptionWithFractionalTimeoutPrintsItAsPhpDoes(): void
    {
        $this->assertSame('Acquiring lock "n" timed out after 2.5 seconds', (new SharedLockTimeoutException('n', 2.5))->getMessage());
    }

    /** @test */
    #[Test]
    public function acquireExceptionHasTheOriginalDefaultMessage(): void
    {
        $this->assertSame('Acquiring lock "n" failed', (new SharedLockAcquireException('n'))->getMessage());
    }

    /** @test */
    #[Test]
    public function releaseExceptionHasTheOriginalDefaultMessage(): void
    {
        $this->assertSame('Releasing lock "n" failed', (new SharedLockReleaseException('n'))->getMessage());
    }

    /** @test */
    #[Test]
    public function remainingTTLExceptionHasTheOriginalMessage(): void
    {
        $this->assertSame('Lock "n" is not to live for 7 seconds anymore', (new SharedLockRemainingTTLException('n', 7))->getMessage());
    }

    /** @test */
    #[Test]
    public function remainingTTLExceptionReturnsItsTTL(): void
    {
        $this->assertEquals(7, (new SharedLockRemainingTTLException('n', 7))->getTTL());
    }

    /** @test */
    #[Test]
    public function explicitMessageCodeAndPreviousAreKept(): void
    {
        $previous = new \RuntimeException('cause');
        $e = new SharedLockAcquireException('n', 'custom', 42, $previous);
        $this->assertSame(['custom', 42, $previous, 'n'], [$e->getMessage(), $e->getCode(), $e->getPrevious(), $e->getLockName()]);
    }

    /** @test */
    #[Test]
    public function timeoutExceptionKeepsExplicitMessageCodeAndPrevious(): void
    {
        $previous = new \RuntimeException('cause');
        $e = new SharedLockTimeoutException('n', 3, 'custom', 7, $previous);
        $this->assertSame(['custom', 7, $previous, 3.0], [$e->getMessage(), $e->getCode(), $e->getPrevious(), (float) $e->getTimeout()]);
    }

    /** @test */
    #[Test]
    public function remainingTTLExceptionKeepsExplicitPrevious(): void
    {
        $previous = new \LogicException('cause');
        $this->assertSame($previous, (new SharedLockRemainingTTLException('n', 1, '', 0, $previous))->getPrevious());
    }

    /** @test */
    #[Test]
    public function exceptionsPointToTheLineThatCreatedThem(): void
    {
        $line = __LINE__ + 1;
        $e = new SharedLockReleaseException('n');
        $this->assertSame([__FILE__, $line], [$e->getFile(), $e->getLine()]);
    }

    /** @test */
    #[Test]
    public function exceptionsThrownByLockPointToTheCallingLine(): void
    {
        try {
            $line = __LINE__ + 1;
            SharedLock::lock('', 0, 10);
            $this->fail('lock() accepted an empty name');
        } catch (SharedLockAcquireException $e) {
            $this->assertSame([__FILE__, $line], [$e->getFile(), $e->getLine()]);
        }
    }

    /** @test */
    #[Test]
    public function exceptionsThrownByLockHaveTheCallerInTheirTrace(): void
    {
        $e = $this->catchThrown(fn () => SharedLock::lock('', 0, 10));
        $this->assertContains(__FUNCTION__, array_column($e->getTrace(), 'function'));
    }

    /** @test */
    #[Test]
    public function userSubclassCanBeThrownAndCaughtAsTheParent(): void
    {
        require_once __DIR__ . '/fixtures/UserExceptions.php';
        try {
            throw new JobLockTimeoutException('invoices', 'n', 5);
        } catch (SharedLockTimeoutException $e) {
            $this->assertSame('invoices: Acquiring lock "n" timed out after 5 seconds', $e->describe());
        }
    }

    /** @test */
    #[Test]
    public function userSubclassKeepsTheParentsGetters(): void
    {
        require_once __DIR__ . '/fixtures/UserExceptions.php';
        $e = new JobLockTimeoutException('invoices', 'n', 5);
        $this->assertSame(['n', 5.0], [$e->getLockName(), (float) $e->getTimeout()]);
    }

    public static function hierarchy(): array
    {
        return [
            'SharedLockException' => [SharedLockException::class, \Exception::class],
            'SharedLockAcquireException' => [SharedLockAcquireException::class, SharedLockException::class],
            'SharedLockTimeoutException' => [SharedLockTimeoutException::class, SharedLockAcquireException::class],
            'SharedLockReleaseException' => [SharedLockReleaseException::class, SharedLockException::class],
            'SharedLockRemainingTTLException' => [SharedLockRemainingTTLException::class, SharedLockException::class],
            'TableRepairException' => [TableRepairException::class, \Exception::class],
        ];
    }

    /**
     * @test
     * @dataProvider hierarchy
     */
    #[Test]
    #[DataProvider('hierarchy')]
    public function exceptionClassHasTheOriginalParent(string $class, string $parent): void
    {
        $this->assertSame($parent, get_parent_class($class));
    }

    /** @test */
    #[Test]
    public function timeoutExceptionIsCaughtAsAcquireException(): void
    {
        try {
            throw new SharedLockTimeoutException('n', 1);
        } catch (SharedLockAcquireException $e) {
            $this->assertSame('n', $e->getLockName());
        }
    }

    /** @test */
    #[Test]
    public function timeoutExceptionIsCaughtAsSharedLockException(): void
    {
        try {
            throw new SharedLockTimeoutException('n', 1);
        } catch (SharedLockException $e) {
            $this->assertSame('n', $e->getLockName());
        }
    }

    /** @test */
    #[Test]
    public function releaseExceptionIsCaughtAsException(): void
    {
        try {
            throw new SharedLockReleaseException('n');
        } catch (\Exception $e) {
            $this->assertInstanceOf(SharedLockException::class, $e);
        }
    }

    /** @test */
    #[Test]
    public function tableRepairExceptionIsNotASharedLockException(): void
    {
        $this->assertNotInstanceOf(SharedLockException::class, new TableRepairException('broken'));
    }

    /** @test */
    #[Test]
    public function exceptionsFromTheExtensionCanBeSerializedLikePhpOnes(): void
    {
        $e = unserialize(serialize(new SharedLockTimeoutException('n', 5)));
        $this->assertSame(['n', 5.0, 'Acquiring lock "n" timed out after 5 seconds'], [$e->getLockName(), (float) $e->getTimeout(), $e->getMessage()]);
    }
}
