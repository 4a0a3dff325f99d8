<?php
// The $options array of lock(), tryLock() and synchronized() (issue 5): bad contents fail
// like any other bad input to lock() and lock nothing.
declare(strict_types=1);

namespace MySqlLockTest;

use ItsMieger\MySqlSharedLocks\Exception\SharedLockAcquireException;
use ItsMieger\MySqlSharedLocks\SharedLock;
use ItsMieger\MySqlSharedLocks\SharedLockHandle;
use PHPUnit\Framework\Attributes\DataProvider;
use PHPUnit\Framework\Attributes\Test;

final class LockOptionsTest extends TestCase
{
    /** [options, what the message must name] */
    public static function badOptions(): array
    {
        return [
            'unknown key' => [['keepalive' => true], '/"keepalive"/'],
            'integer key' => [[true], '/"0"/'],
            'keepAlive not a bool' => [['keepAlive' => 1], '/keepAlive/'],
            'maxHold not a number' => [['keepAlive' => true, 'maxHold' => 'long'], '/maxHold/'],
            'maxHold without keepAlive' => [['maxHold' => 60], '/maxHold/'],
            'maxHold with keepAlive off' => [['keepAlive' => false, 'maxHold' => 60], '/maxHold/'],
            'maxHold zero' => [['keepAlive' => true, 'maxHold' => 0], '/maxHold/'],
            'maxHold negative' => [['keepAlive' => true, 'maxHold' => -1], '/maxHold/'],
            'atLeast a bool' => [['atLeast' => true], '/atLeast/'],
            'atLeast negative' => [['atLeast' => -1], '/atLeast/'],
            'atLeast NAN' => [['atLeast' => NAN], '/atLeast/'],
        ];
    }

    /**
     * @test
     * @dataProvider badOptions
     */
    #[Test]
    #[DataProvider('badOptions')]
    public function badOptionsThrowAcquireExceptionNamingTheKey(array $options, string $names): void
    {
        $name = $this->lockName();
        $e = $this->catchThrown(fn () => SharedLock::lock($name, 0, 10, $options));
        $this->assertSame(SharedLockAcquireException::class, get_class($e), (string) $e);
        $this->assertStringStartsWith("Acquiring lock \"$name\" failed", $e->getMessage());
        $this->assertMatchesRegularExpression($names, $e->getMessage());
    }

    /**
     * @test
     * @dataProvider badOptions
     */
    #[Test]
    #[DataProvider('badOptions')]
    public function badOptionsAreExplainedByAnInvalidArgumentException(array $options, string $names): void
    {
        $e = $this->catchThrown(fn () => SharedLock::lock($this->lockName(), 0, 10, $options));
        $this->assertInstanceOf(\InvalidArgumentException::class, $e->getPrevious());
        $this->assertMatchesRegularExpression($names, $e->getPrevious()->getMessage());
    }

    /**
     * @test
     * @dataProvider badOptions
     */
    #[Test]
    #[DataProvider('badOptions')]
    public function badOptionsLockNothing(array $options, string $names): void
    {
        $name = $this->lockName();
        $this->catchThrown(fn () => SharedLock::lock($name, 0, 10, $options));
        $this->assertSame([], self::rows($name));
    }

    /** @test */
    #[Test]
    public function tryLockWithBadOptionsThrowsInsteadOfReturningNull(): void
    {
        $this->expectException(SharedLockAcquireException::class);
        SharedLock::tryLock($this->lockName(), 10, ['frobnicate' => true]);
    }

    /** @test */
    #[Test]
    public function synchronizedWithBadOptionsDoesNotRunTheCallback(): void
    {
        $ran = false;
        $e = $this->catchThrown(fn () => SharedLock::synchronized($this->lockName(), 0, 10, function () use (&$ran) {
            $ran = true;
        }, ['frobnicate' => true]));
        $this->assertInstanceOf(SharedLockAcquireException::class, $e);
        $this->assertFalse($ran);
    }

    /** @test */
    #[Test]
    public function optionsThatAreNotAnArrayThrowTypeError(): void
    {
        $this->expectException(\TypeError::class);
        SharedLock::lock($this->lockName(), 0, 10, 'keepAlive');
    }

    /** @test */
    #[Test]
    public function emptyOptionsLockAsWithoutThem(): void
    {
        $this->assertInstanceOf(SharedLockHandle::class, SharedLock::lock($this->lockName(), 0, 10, []));
    }

    /** @test */
    #[Test]
    public function optionsCanBePassedByName(): void
    {
        $name = $this->lockName();
        SharedLock::lock(name: $name, timeout: 0, ttl: 10, options: ['atLeast' => 3])->release();
        $this->assertCount(1, self::rows($name), 'the released lock did not linger for atLeast');
    }
}
