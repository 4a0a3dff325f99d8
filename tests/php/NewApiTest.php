<?php
// Beyond the original (SPEC §3): tryLock, synchronized, handle introspection.
declare(strict_types=1);

namespace MySqlLockTest;

use ItsMieger\MySqlSharedLocks\SharedLock;
use ItsMieger\MySqlSharedLocks\SharedLockHandle;
use PHPUnit\Framework\Attributes\Test;

final class NewApiTest extends TestCase
{
    /**
     * Calls SharedLock::$method with arguments matched to its parameters by name
     * (name, timeout, ttl, and a callable), so the tests do not depend on their order.
     */
    private static function call(string $method, array $args)
    {
        if (!method_exists(SharedLock::class, $method)) {
            self::fail("SharedLock::$method() does not exist");
        }
        $params = (new \ReflectionMethod(SharedLock::class, $method))->getParameters();
        $named = [];
        foreach ($params as $p) {
            $n = strtolower($p->getName());
            $role = preg_match('/name/', $n) ? 'name'
                : (preg_match('/timeout|wait/', $n) ? 'timeout'
                : (preg_match('/ttl/', $n) ? 'ttl'
                : (preg_match('/call|fn|func|task|work|closure|code/', $n) ? 'callable' : $n)));
            if (array_key_exists($role, $args)) {
                $named[$p->getName()] = $args[$role];
            } elseif (!$p->isOptional()) {
                self::fail("SharedLock::$method() has a parameter \${$p->getName()} this test does not know");
            }
        }
        return SharedLock::$method(...$named);
    }

    /** @test */
    #[Test]
    public function tryLockReturnsAHandleWhenTheLockIsFree(): void
    {
        $name = $this->lockName();
        $handle = self::call('tryLock', ['name' => $name, 'ttl' => 10]);
        $this->assertInstanceOf(SharedLockHandle::class, $handle);
        $this->assertCount(1, self::rows($name));
    }

    /** @test */
    #[Test]
    public function tryLockReturnsNullWhileAnotherProcessHoldsTheLock(): void
    {
        $name = $this->lockName();
        $this->startHolder($name);
        $this->assertNull(self::call('tryLock', ['name' => $name, 'ttl' => 10]));
    }

    /** @test */
    #[Test]
    public function tryLockDoesNotWaitWhileAnotherProcessHoldsTheLock(): void
    {
        $name = $this->lockName();
        $this->startHolder($name);
        $start = microtime(true);
        self::call('tryLock', ['name' => $name, 'ttl' => 10, 'timeout' => 0]);
        $this->assertLessThan(1.0, microtime(true) - $start);
    }

    /** @test */
    #[Test]
    public function synchronizedRunsTheCallableUnderTheLock(): void
    {
        $name = $this->lockName();
        $seen = null;
        self::call('synchronized', ['name' => $name, 'timeout' => 0, 'ttl' => 10, 'callable' => function () use ($name, &$seen) {
            $seen = self::rows($name);
        }]);
        $this->assertCount(1, $seen ?? [], 'the callable ran without the lock\'s row');
    }

    /** @test */
    #[Test]
    public function synchronizedReturnsTheCallablesValue(): void
    {
        $result = self::call('synchronized', ['name' => $this->lockName(), 'timeout' => 0, 'ttl' => 10, 'callable' => fn () => 42]);
        $this->assertSame(42, $result);
    }

    /** @test */
    #[Test]
    public function synchronizedReleasesTheLockAfterwards(): void
    {
        $name = $this->lockName();
        self::call('synchronized', ['name' => $name, 'timeout' => 0, 'ttl' => 10, 'callable' => fn () => null]);
        $this->assertSame([], self::rows($name));
    }

    /** @test */
    #[Test]
    public function synchronizedRethrowsWhatTheCallableThrew(): void
    {
        $thrown = new \DomainException('from the job');
        $e = $this->catchThrown(fn () => self::call('synchronized', [
            'name' => $this->lockName(), 'timeout' => 0, 'ttl' => 10, 'callable' => function () use ($thrown) { throw $thrown; },
        ]));
        $this->assertSame($thrown, $e);
    }

    /** @test */
    #[Test]
    public function synchronizedReleasesTheLockWhenTheCallableThrows(): void
    {
        $name = $this->lockName();
        $this->catchThrown(fn () => self::call('synchronized', [
            'name' => $name, 'timeout' => 0, 'ttl' => 10, 'callable' => function () { throw new \DomainException('x'); },
        ]));
        $this->assertSame([], self::rows($name));
    }

    /** @test */
    #[Test]
    public function synchronizedDoesNotRunTheCallableWhileAnotherProcessHoldsTheLock(): void
    {
        $name = $this->lockName();
        $this->startHolder($name);
        $ran = false;
        $this->catchThrown(fn () => self::call('synchronized', [
            'name' => $name, 'timeout' => 0, 'ttl' => 10, 'callable' => function () use (&$ran) { $ran = true; },
        ]));
        $this->assertFalse($ran);
    }

    /** @test */
    #[Test]
    public function handleGetNameReturnsTheLockName(): void
    {
        $name = $this->lockName();
        $this->assertSame($name, SharedLock::lock($name, 0, 10)->getName());
    }

    /** @test */
    #[Test]
    public function handleGetRemainingTTLIsCloseToTheTTL(): void
    {
        $remaining = SharedLock::lock($this->lockName(), 0, 10)->getRemainingTTL();
        $this->assertIsFloat($remaining);
        $this->assertGreaterThan(8.0, $remaining);
        // the table stores whole seconds: up to one more second before anyone may take it
        $this->assertLessThanOrEqual(11.0, $remaining);
    }
}
