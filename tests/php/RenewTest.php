<?php
// Renewing a lease (issue 5): SharedLockHandle::renew() and SharedLock::renew().
declare(strict_types=1);

namespace MySqlLockTest;

use ItsMieger\MySqlSharedLocks\Exception\SharedLockRemainingTTLException;
use ItsMieger\MySqlSharedLocks\SharedLock;
use PHPUnit\Framework\Attributes\Test;

final class RenewTest extends TestCase
{
    /** @test */
    #[Test]
    public function handleRenewExtendsTheRemainingTTL(): void
    {
        $handle = SharedLock::lock($this->lockName(), 0, 5);
        $handle->renew(60);
        $this->assertGreaterThan(55.0, $handle->getRemainingTTL());
    }

    /** @test */
    #[Test]
    public function handleRenewReturnsTheHandle(): void
    {
        $handle = SharedLock::lock($this->lockName(), 0, 5);
        $this->assertSame($handle, $handle->renew(30));
    }

    /** @test */
    #[Test]
    public function staticRenewExtendsTheRemainingTTL(): void
    {
        $name = $this->lockName();
        $handle = SharedLock::lock($name, 0, 5);
        $this->assertNull(SharedLock::renew($name, 60));
        $this->assertGreaterThan(55.0, $handle->getRemainingTTL());
    }

    /** @test */
    #[Test]
    public function renewedLockIsNotTakenOverAfterItsFirstTtl(): void
    {
        $name = $this->lockName();
        SharedLock::lock($name, 0, 1)->renew(30);
        $child = $this->startChild();
        self::waitUntilAged($name, 1); // the first TTL has passed on the database clock
        $this->assertTrue(self::takenFor($child, $name), 'another process took the renewed lock');
    }

    /** @test */
    #[Test]
    public function renewNeverShortensTheLock(): void
    {
        $handle = SharedLock::lock($this->lockName(), 0, 60);
        $handle->renew(5);
        $this->assertGreaterThan(55.0, $handle->getRemainingTTL());
    }

    /** Locks $name with a 1 s TTL and lets another process take it over after it. */
    private function loseToATakeover(string $name): Child
    {
        SharedLock::lock($name, 0, 1);
        self::waitUntilExpired($name);
        $child = $this->startChild();
        $this->assertReply('locked', $child->call(['lock', $name, 5, 30]));
        return $child;
    }

    /** @test */
    #[Test]
    public function renewAfterATakeoverThrowsRemainingTTLException(): void
    {
        $name = $this->lockName();
        $this->loseToATakeover($name);
        $e = $this->catchThrown(fn () => SharedLock::renew($name, 30));
        $this->assertInstanceOf(SharedLockRemainingTTLException::class, $e);
        $this->assertSame($name, $e->getLockName());
        $this->assertSame(30, $e->getTTL());
    }

    /** @test */
    #[Test]
    public function renewFailureNamesTheLockAndTheCause(): void
    {
        $name = $this->lockName();
        $this->loseToATakeover($name);
        $e = $this->catchThrown(fn () => SharedLock::renew($name, 30));
        $this->assertStringContainsString("\"$name\"", $e->getMessage());
        $this->assertMatchesRegularExpression('/not held: .+/', $e->getMessage());
        $this->assertNotNull($e->getPrevious(), 'no underlying error as getPrevious()');
    }

    /** @test */
    #[Test]
    public function handleRenewAfterATakeoverThrowsRemainingTTLException(): void
    {
        $name = $this->lockName();
        $handle = SharedLock::lock($name, 0, 1);
        self::waitUntilExpired($name);
        $this->assertReply('locked', $this->startChild()->call(['lock', $name, 5, 30]));
        $this->expectException(SharedLockRemainingTTLException::class);
        $handle->renew(30);
    }

    /** @test */
    #[Test]
    public function renewAfterATakeoverLeavesTheNewHoldersRowAlone(): void
    {
        $name = $this->lockName();
        $this->loseToATakeover($name);
        $before = self::rows($name);
        $this->catchThrown(fn () => SharedLock::renew($name, 300));
        $this->assertSame($before, self::rows($name));
    }

    /** @test */
    #[Test]
    public function renewOfALockNeverTakenThrowsRemainingTTLException(): void
    {
        $this->expectException(SharedLockRemainingTTLException::class);
        SharedLock::renew($this->lockName(), 30);
    }

    /** @test */
    #[Test]
    public function renewWithANegativeTtlThrowsRemainingTTLExceptionExplainedAsBadInput(): void
    {
        $handle = SharedLock::lock($this->lockName(), 0, 10);
        $e = $this->catchThrown(fn () => $handle->renew(-1));
        $this->assertInstanceOf(SharedLockRemainingTTLException::class, $e);
        $this->assertInstanceOf(\InvalidArgumentException::class, $e->getPrevious());
        $this->assertMatchesRegularExpression('/ttl/i', $e->getPrevious()->getMessage());
    }

    /** @test */
    #[Test]
    public function renewWithANegativeTtlKeepsTheLock(): void
    {
        $handle = SharedLock::lock($this->lockName(), 0, 10);
        $this->catchThrown(fn () => $handle->renew(-1));
        $this->assertGreaterThan(8.0, $handle->getRemainingTTL());
    }

    /** @test */
    #[Test]
    public function renewWithATtlThatIsNotANumberThrowsTypeError(): void
    {
        $handle = SharedLock::lock($this->lockName(), 0, 10);
        $this->expectException(\TypeError::class);
        $handle->renew('long');
    }
}
