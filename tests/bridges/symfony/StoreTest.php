<?php
// What Symfony documents for a store (PersistingStoreInterface, BlockingStoreInterface,
// expiration, serialized keys), in one process, for both modes. The Debian package
// ships no store test base classes (Symfony keeps AbstractStoreTestCase & co. in its
// Tests directory), so these tests state the same expectations themselves.
declare(strict_types=1);

namespace MySqlLockSymfonyTest;

use MySqlLock\Symfony\MySqlLockStore;
use PHPUnit\Framework\Attributes\DataProvider;
use Symfony\Component\Lock\BlockingStoreInterface;
use Symfony\Component\Lock\Exception\InvalidTtlException;
use Symfony\Component\Lock\Exception\LockAcquiringException;
use Symfony\Component\Lock\Exception\LockConflictedException;
use Symfony\Component\Lock\Exception\LockExpiredException;
use Symfony\Component\Lock\Exception\LockStorageException;
use Symfony\Component\Lock\Exception\UnserializableKeyException;
use Symfony\Component\Lock\Key;
use Symfony\Component\Lock\PersistingStoreInterface;

final class StoreTest extends TestCase
{
    public function testTheStoreIsAPersistingAndBlockingStore(): void
    {
        $store = $this->store('shared');
        $this->assertInstanceOf(PersistingStoreInterface::class, $store);
        $this->assertInstanceOf(BlockingStoreInterface::class, $store);
    }

    /** @dataProvider modes */
    #[DataProvider('modes')]
    public function testASavedKeyExistsUntilItIsDeleted(string $mode): void
    {
        $store = $this->store($mode);
        $key = new Key($this->resource());

        $this->assertFalse($store->exists($key));
        $store->save($key);
        $this->assertTrue($store->exists($key));
        $store->delete($key);
        $this->assertFalse($store->exists($key));
    }

    /** @dataProvider modes */
    #[DataProvider('modes')]
    public function testKeysOfDifferentResourcesAreIndependent(string $mode): void
    {
        $store = $this->store($mode);
        $one = new Key($this->resource('one'));
        $two = new Key($this->resource('two'));

        $store->save($one);
        $this->assertFalse($store->exists($two));
        $store->save($two);
        $this->assertTrue($store->exists($one));
        $store->delete($one);
        $this->assertFalse($store->exists($one));
        $this->assertTrue($store->exists($two));
    }

    /** @dataProvider modes */
    #[DataProvider('modes')]
    public function testASecondKeyOfTheSameResourceConflictsAndChangesNothing(string $mode): void
    {
        $store = $this->store($mode);
        $first = new Key($this->resource());
        $second = new Key($this->resource());
        $store->save($first);

        try {
            $store->save($second);
            $this->fail('the second key was saved while the first held the resource');
        } catch (LockConflictedException) {
        }
        $this->assertTrue($store->exists($first));
        $this->assertFalse($store->exists($second));

        $store->delete($first);
        $store->save($second);
        $this->assertFalse($store->exists($first));
        $this->assertTrue($store->exists($second));
    }

    /** @dataProvider modes */
    #[DataProvider('modes')]
    public function testSavingAKeyTwiceKeepsItsLock(string $mode): void
    {
        $store = $this->store($mode);
        $key = new Key($this->resource());
        $store->save($key);
        $store->save($key);
        $this->assertTrue($store->exists($key));
        $store->delete($key);
        $this->assertFalse($store->exists($key));
    }

    /** @dataProvider modes */
    #[DataProvider('modes')]
    public function testDeletingAKeyThatDoesNotHoldTheResourceLeavesTheLockHeld(string $mode): void
    {
        $store = $this->store($mode);
        $holder = new Key($this->resource());
        $other = new Key($this->resource());
        $store->save($holder);
        try {
            $store->save($other);
        } catch (LockConflictedException) {
        }

        $store->delete($other);
        $store->delete(new Key($this->resource('never-saved')));
        $this->assertTrue($store->exists($holder));
        $this->assertFalse($store->exists($other));
    }

    /** @dataProvider modes */
    #[DataProvider('modes')]
    public function testStoresOnTheSameServerShareTheLocks(string $mode): void
    {
        $a = $this->store($mode);
        $b = $this->store($mode);
        $key = new Key($this->resource());

        $a->save($key);
        $this->assertTrue($b->exists($key));
        try {
            $b->save(new Key($this->resource()));
            $this->fail('another key was saved through the second store');
        } catch (LockConflictedException) {
        }
        $b->delete($key);
        $this->assertFalse($a->exists($key));
    }

    /** @dataProvider modes */
    #[DataProvider('modes')]
    public function testResourcesDifferingOnlyInCaseAreDifferentLocks(string $mode): void
    {
        $store = $this->store($mode);
        $lower = new Key($this->resource('case'));
        $upper = new Key(strtoupper($this->resource('case')));

        $store->save($lower);
        $store->save($upper);
        $this->assertTrue($store->exists($lower));
        $this->assertTrue($store->exists($upper));
        $store->delete($upper);
        $this->assertTrue($store->exists($lower));
    }

    /** @dataProvider modes */
    #[DataProvider('modes')]
    public function testLongAndUnusualResourceNamesWork(string $mode): void
    {
        $store = $this->store($mode);
        $key = new Key($this->resource(str_repeat('Ü ', 200) . '日本'));
        $store->save($key);
        $this->assertTrue($store->exists($key));
        $this->assertFalse($store->exists(new Key((string) $key . 'x')));
        $store->delete($key);
        $this->assertFalse($store->exists($key));
    }

    /** @dataProvider modes */
    #[DataProvider('modes')]
    public function testSaveLimitsTheKeyLifetimeToTheInitialTtl(string $mode): void
    {
        $store = $this->store($mode, ['initial_ttl' => 42]);
        $key = new Key($this->resource());
        $store->save($key);
        $this->assertGreaterThan(40, $key->getRemainingLifetime());
        $this->assertLessThanOrEqual(42, $key->getRemainingLifetime());
    }

    /** @dataProvider modes */
    #[DataProvider('modes')]
    public function testPutOffExpirationSetsTheTtlInTheKeyAndOnTheServer(string $mode): void
    {
        $store = $this->store($mode, ['initial_ttl' => 5]);
        $key = new Key($this->resource());
        $store->save($key);
        $key->resetLifetime(); // as Lock::refresh() does
        $store->putOffExpiration($key, 120);

        $this->assertGreaterThan(118, $key->getRemainingLifetime());
        $this->assertLessThanOrEqual(120, $key->getRemainingLifetime());
        $this->assertEqualsWithDelta(120, $this->serverRemaining($mode, $key), 2.0);
        $this->assertTrue($store->exists($key));
    }

    /**
     * putOffExpiration() sets the TTL, shorter than the lock had too: Symfony's own stores
     * and Lock::refresh($ttl) mean "the lock ends $ttl seconds from now".
     *
     * @dataProvider modes
     */
    #[DataProvider('modes')]
    public function testPutOffExpirationToLessThanTheInitialTtlShortensTheLockOnTheServer(string $mode): void
    {
        $store = $this->store($mode, ['initial_ttl' => 300]);
        $key = new Key($this->resource());
        $store->save($key);
        $key->resetLifetime();
        $store->putOffExpiration($key, 2);

        $this->assertLessThanOrEqual(2, $key->getRemainingLifetime());
        $this->assertEqualsWithDelta(2.0, $this->serverRemaining($mode, $key), 1.5, 'the server kept the lock for initial_ttl');
        $this->assertTrue($store->exists($key));
    }

    /** @dataProvider modes */
    #[DataProvider('modes')]
    public function testAnExpiredKeyIsNotHeld(string $mode): void
    {
        $store = $this->store($mode);
        $key = new Key($this->resource());
        $store->save($key);
        $key->resetLifetime();
        $store->putOffExpiration($key, 1);
        $this->assertTrue($store->exists($key));

        $this->assertTrue(self::waitUntil(fn () => $key->isExpired(), 5), 'the key did not expire');
        $this->assertFalse($store->exists($key));
    }

    /** @dataProvider modes */
    #[DataProvider('modes')]
    public function testPuttingOffATtlThatIsAlreadyGoneThrowsLockExpiredAndReleases(string $mode): void
    {
        $store = $this->store($mode);
        $key = new Key($this->resource());
        $store->save($key);
        $key->resetLifetime();

        try {
            $store->putOffExpiration($key, 1e-6);
            $this->fail('no LockExpiredException');
        } catch (LockExpiredException) {
        }
        $this->assertFalse($store->exists($key));
        $next = new Key($this->resource());
        $store->save($next);
        $this->assertTrue($store->exists($next));
    }

    /** @dataProvider modes */
    #[DataProvider('modes')]
    public function testSavingAKeyWhoseLifetimeIsOverThrowsLockExpiredAndLeavesTheResourceFree(string $mode): void
    {
        $store = $this->store($mode);
        $expired = new Key($this->resource());
        $expired->reduceLifetime(0);

        try {
            $store->save($expired);
            $this->fail('an expired key was saved');
        } catch (LockExpiredException) {
        }
        $this->assertFalse($store->exists($expired));
        $next = new Key($this->resource());
        $store->save($next);
        $this->assertTrue($store->exists($next));
    }

    /** @dataProvider modes */
    #[DataProvider('modes')]
    public function testPutOffExpirationOfAKeyThatHoldsNothingConflicts(string $mode): void
    {
        $store = $this->store($mode);
        $holder = new Key($this->resource());
        $store->save($holder);

        $this->expectException(LockConflictedException::class);
        $store->putOffExpiration(new Key($this->resource()), 30);
    }

    /** @dataProvider modes */
    #[DataProvider('modes')]
    public function testATtlThatIsNotPositiveIsRefused(string $mode): void
    {
        $store = $this->store($mode);
        $key = new Key($this->resource());
        $store->save($key);

        foreach ([0.0, -1.0, NAN] as $ttl) {
            try {
                $store->putOffExpiration($key, $ttl);
                $this->fail("TTL $ttl was accepted");
            } catch (InvalidTtlException) {
            }
        }
        $this->assertTrue($store->exists($key));
    }

    /** @dataProvider modes */
    #[DataProvider('modes')]
    public function testWaitAndSaveTakesAFreeResourceAtOnce(string $mode): void
    {
        $store = $this->store($mode);
        $key = new Key($this->resource());
        $store->waitAndSave($key);
        $this->assertTrue($store->exists($key));
        $this->assertGreaterThan(290, $key->getRemainingLifetime());
    }

    public function testWaitAndSaveOnAResourceAnotherKeyOfThisProcessHoldsConflictsInsteadOfWaitingForItself(): void
    {
        $store = $this->store('shared');
        $store->save(new Key($this->resource()));

        $this->expectException(LockConflictedException::class);
        $store->waitAndSave(new Key($this->resource()));
    }

    public function testSharedModeKeysCannotBeSerializedOnceSaved(): void
    {
        $store = $this->store('shared');
        $key = new Key($this->resource());
        serialize($key); // not yet bound to this process's session
        $store->save($key);
        $this->assertTrue($store->exists($key));

        $this->expectException(UnserializableKeyException::class);
        serialize($key);
    }

    public function testLeaseModeKeysSurviveSerialization(): void
    {
        $store = $this->store('lease');
        $key = new Key($this->resource());
        $store->save($key);

        $copy = unserialize(serialize($key));
        $this->assertTrue($store->exists($copy));
        $store->delete($copy);
        $this->assertFalse($store->exists($key));
    }

    /** @dataProvider modes */
    #[DataProvider('modes')]
    public function testAStorageFailureIsLockAcquiringExceptionWithTheCause(string $mode): void
    {
        $store = $this->store($mode, ['table' => 'sft_no_such_table']);
        try {
            $store->save(new Key($this->resource()));
            $this->fail('no exception');
        } catch (LockAcquiringException $e) {
            $this->assertNotNull($e->getPrevious());
            $this->assertStringContainsString('sft_no_such_table', self::messages($e));
        }
    }

    public function testALeaseModeStorageFailureInExistsIsLockStorageException(): void
    {
        $store = $this->store('lease', ['table' => 'sft_no_such_table']);
        $key = new Key($this->resource());
        $key->setState(MySqlLockStore::class, 'some-owner');

        $this->expectException(LockStorageException::class);
        $store->exists($key);
    }

    public function testLowercaseResourcesAreTheLockOfTheSameNameForSharedLockAndTheCli(): void
    {
        $store = $this->store('shared');
        $key = new Key($this->resource());
        $store->save($key);
        $st = self::db()->prepare('SELECT COUNT(*) FROM shared_locks WHERE name = ?');
        $st->execute([$this->resource()]);
        $this->assertSame(1, (int) $st->fetchColumn());
        $this->assertSame('#', MySqlLockStore::lockName(new Key('Upper'))[0]);
    }

    /** Seconds the server gives the key's lock (read from the table, not through the store). */
    private function serverRemaining(string $mode, Key $key): float
    {
        $name = MySqlLockStore::lockName($key);
        if ($mode === 'shared') {
            $st = self::db()->prepare('SELECT created + ttl - UNIX_TIMESTAMP(NOW(6)) FROM shared_locks WHERE name = ?');
        } else {
            $st = self::db()->prepare('SELECT TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), expires_at) / 1e6 FROM distributed_locks WHERE resource = ?');
        }
        $st->execute([$name]);
        $remaining = $st->fetchColumn();
        $this->assertNotFalse($remaining, "no row for $name");
        return (float) $remaining;
    }

    private static function messages(\Throwable $e): string
    {
        $all = [];
        for (; $e !== null; $e = $e->getPrevious()) {
            $all[] = $e->getMessage();
        }
        return implode(' | ', $all);
    }
}
