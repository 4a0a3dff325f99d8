<?php
// flushLocks() (Laravel 13's CanFlushLocks; the bridge's own method on older Laravels): it
// ends the live leases under the store's prefix, whoever holds them, and none of another
// prefix (another app), nor leases taken without Laravel; with no prefix it refuses, since
// it would end every lease in the table. Rows are read on the tests' own connection.
declare(strict_types=1);

namespace MySqlLockLaravelTest;

use Illuminate\Container\Container;
use Nene\Kit\DistributedLock;

class FlushLocksTest extends TestCase
{
    /** The mysqllock store of an app whose cache prefix is $prefix (same table and connection). */
    protected function storeWithPrefix(string $prefix): \Illuminate\Contracts\Cache\Repository
    {
        $app = makeApp($this->storeConfig(), $prefix);
        Container::setInstance($this->app);
        return $app->make('cache')->store('mysqllock');
    }

    /** Owners of the live leases on these resources (by the table's time, read here). */
    private function liveOwners(string ...$resources): array
    {
        $upgraded = $this->table() === UPGRADED_TABLE;
        $st = self::db()->prepare(
            'SELECT resource, owner, TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), expires_at) / 1e6 AS remaining FROM `' . $this->table() . '` WHERE resource = ?'
        );
        $owners = [];
        foreach ($resources as $resource) {
            $st->execute([$resource]);
            $row = $st->fetch(\PDO::FETCH_ASSOC);
            $live = $row !== false && ($upgraded ? (float) $row['remaining'] > 0 : (float) $row['remaining'] > -1);
            $owners[$resource] = $live ? $row['owner'] : null;
        }
        return $owners;
    }

    public function testFlushLocksEndsTheLeasesUnderTheStoresPrefixOnly(): void
    {
        $unique = $this->lockName('app');
        $mine = $this->storeWithPrefix("$unique-mine_");
        // Names of an app whose prefix begins like this one's are under this prefix too.
        $longer = $this->storeWithPrefix("$unique-mine_x");
        $neighbour = $this->storeWithPrefix("$unique-other_");
        $plain = new DistributedLock(connect(), $this->table());

        $this->assertTrue($mine->lock('a', 60, 'owner-a')->get());
        $this->assertTrue($mine->lock('b', 0, 'owner-b')->get());
        $this->assertTrue($neighbour->lock('a', 60, 'owner-c')->get());
        $this->assertTrue($longer->lock('z', 60, 'owner-d')->get());
        $this->assertTrue($plain->acquire("$unique-plain", 'owner-e', 60));

        $this->assertTrue($mine->getStore()->flushLocks());

        $this->assertSame([
            "$unique-mine_a" => null,
            "$unique-mine_b" => null,
            // "mine_x" + "z" begins with "mine_": the prefix is a prefix, nothing more.
            "$unique-mine_xz" => null,
            "$unique-other_a" => 'owner-c',
            "$unique-plain" => 'owner-e',
        ], $this->liveOwners("$unique-mine_a", "$unique-mine_b", "$unique-mine_xz", "$unique-other_a", "$unique-plain"));
        $this->assertTrue($mine->lock('a', 60, 'owner-f')->get(), 'a flushed lock could not be taken again');
        $this->assertFalse($neighbour->lock('a', 60, 'owner-f')->get());
    }

    public function testAPrefixThatDiffersInCaseOnlyIsAnotherPrefix(): void
    {
        $unique = $this->lockName('app');
        $lower = $this->storeWithPrefix("$unique-case_");
        $plain = new DistributedLock(connect(), $this->table());
        // Taken without Laravel under the upper-case name: the SELECT may find it (a
        // case-insensitive collation), but it does not begin with the prefix, so it stays.
        $this->assertTrue($plain->acquire(strtoupper("$unique-case_") . 'k', 'owner-u', 60));
        $this->assertTrue($lower->getStore()->flushLocks());
        $this->assertSame('owner-u', $plain->owner(strtoupper("$unique-case_") . 'k'));
    }

    public function testFlushLocksEndsLeasesWhoeverHoldsThem(): void
    {
        $store = $this->storeWithPrefix($this->lockName('app') . '_');
        $this->assertTrue($store->lock('job', 600, 'worker-1')->get());
        $other = $this->child();
        $this->assertTrue($other->run(['get', $this->lockName('x'), 600, 'worker-2']));
        $this->assertTrue($store->getStore()->flushLocks());
        $this->assertFalse($store->lock('job')->isLocked());
        $this->assertFalse($store->restoreLock('job', 'worker-1')->release(), 'the flushed lease was still the owner\'s');
        // The child's lease is under the tests' prefix (lvt_), not this store's: it stays.
        $this->assertSame('worker-2', $this->liveOwner($this->lockName('x')));
    }

    public function testFlushLocksWithNothingToEndIsTrue(): void
    {
        $this->assertTrue($this->storeWithPrefix($this->lockName('app') . '_')->getStore()->flushLocks());
    }

    public function testWithoutAPrefixFlushLocksRefusesAndEndsNothing(): void
    {
        $store = $this->storeWithPrefix('');
        $this->assertTrue($store->lock($this->lockName(), 60, 'owner-a')->get());
        $thrown = $this->thrownBy(fn () => $store->getStore()->flushLocks());
        $this->assertInstanceOf(\RuntimeException::class, $thrown);
        $this->assertStringContainsString('no prefix', $thrown->getMessage());
        $this->assertStringContainsString("other apps' and non-Laravel ones", $thrown->getMessage());
        $this->assertSame([$this->lockName() => 'owner-a'], $this->liveOwners($this->lockName()));
    }

    public function testTheLockStoreIsSeparateFromAnyCacheStore(): void
    {
        $this->assertTrue($this->leaseStore()->hasSeparateLockStore());
    }
}
