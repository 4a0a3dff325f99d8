<?php
// The store as applications use it: through Symfony's own LockFactory and Lock.
declare(strict_types=1);

namespace MySqlLockSymfonyTest;

use PHPUnit\Framework\Attributes\DataProvider;
use Symfony\Component\Lock\Exception\LockAcquiringException;
use Symfony\Component\Lock\Exception\LockExpiredException;
use Symfony\Component\Lock\LockFactory;

final class LockFactoryTest extends TestCase
{
    /** @dataProvider modes */
    #[DataProvider('modes')]
    public function testABlockingAcquireHoldsTheLockUntilRelease(string $mode): void
    {
        $lock = (new LockFactory($this->store($mode)))->createLock($this->resource(), 30);
        $this->assertTrue($lock->acquire(true));
        $this->assertTrue($lock->isAcquired());
        $other = $this->child($mode);
        $this->assertOk($other->call(['acquire', $this->resource(), 30, false]), false);

        $lock->release();
        $this->assertFalse($lock->isAcquired());
        $this->assertOk($other->call(['acquire', $this->resource(), 30, false]), true);
        $this->assertOk($other->call(['isAcquired', $this->resource()]), true);
    }

    /** @dataProvider modes */
    #[DataProvider('modes')]
    public function testAcquireAppliesTheLockTtlAndRefreshSetsANewOne(string $mode): void
    {
        $lock = (new LockFactory($this->store($mode)))->createLock($this->resource(), 30);
        $lock->acquire();
        $this->assertGreaterThan(28, $lock->getRemainingLifetime());
        $this->assertLessThanOrEqual(30, $lock->getRemainingLifetime());

        $lock->refresh(90);
        $this->assertGreaterThan(88, $lock->getRemainingLifetime());
        $this->assertTrue($lock->isAcquired());
        $this->assertFalse($lock->isExpired());
    }

    /** @dataProvider modes */
    #[DataProvider('modes')]
    public function testAWaitingAcquireInAnotherProcessGetsTheLockWhenItIsReleased(string $mode): void
    {
        $lock = (new LockFactory($this->store($mode)))->createLock($this->resource(), 30);
        $lock->acquire();
        $other = $this->child($mode);
        $other->send(['acquire', $this->resource(), 30, true]);
        $this->assertOk($other->receive(20), 'waiting');
        if ($mode === 'shared') {
            $this->assertTrue(self::waitUntil(fn () => self::someoneWaitsInServer($this->resource()), 10), 'the waiter never slept in GET_LOCK');
        }
        $this->assertNull($other->receive(0), 'acquired while held');

        $lock->release();
        $this->assertOk($other->receive(20), true);
        $this->assertFalse($lock->isAcquired());
        $this->assertOk($other->call(['isAcquired', $this->resource()]), true);
    }

    /** @dataProvider modes */
    #[DataProvider('modes')]
    public function testALockWhoseTtlIsGoneBeforeItIsStoredFailsAndIsReleased(string $mode): void
    {
        $factory = new LockFactory($this->store($mode));
        $lock = $factory->createLock($this->resource(), 1e-6);
        try {
            $lock->acquire();
            $this->fail('acquired a lock whose TTL was gone');
        } catch (LockAcquiringException $e) {
            // Lock::refresh() and Lock::acquire() each wrap what the store threw.
            $causes = [];
            for ($p = $e->getPrevious(); $p !== null; $p = $p->getPrevious()) {
                $causes[] = get_class($p);
            }
            $this->assertContains(LockExpiredException::class, $causes);
        }
        $this->assertFalse($lock->isAcquired());
        $this->assertTrue($factory->createLock($this->resource(), 30)->acquire());
    }

    /** @dataProvider modes */
    #[DataProvider('modes')]
    public function testALockReleasesItselfWhenItIsDestroyed(string $mode): void
    {
        $factory = new LockFactory($this->store($mode));
        $lock = $factory->createLock($this->resource(), 30);
        $lock->acquire();
        $other = $this->child($mode);
        $this->assertOk($other->call(['acquire', $this->resource(), 30, false]), false);

        unset($lock);
        $this->assertOk($other->call(['acquire', $this->resource(), 30, false]), true);
    }
}
