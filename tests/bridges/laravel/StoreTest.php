<?php
// The mysqllock store itself: the provider's registration, cache operations refused with a
// clear message, the three connections (the extension's own, a DSN, a Laravel database
// connection), a lost connection replaced, and bad configuration.
declare(strict_types=1);

namespace MySqlLockLaravelTest;

use Illuminate\Cache\Repository;
use Illuminate\Contracts\Cache\LockProvider;
use Illuminate\Contracts\Cache\Store;
use MySqlLock\Laravel\LeaseStore;
use MySqlLock\Laravel\UnsupportedCacheOperation;
use PHPUnit\Framework\Attributes\DataProvider;

final class StoreTest extends TestCase
{
    public function testTheProviderRegistersTheDriverAndADefaultStore(): void
    {
        $app = makeApp(null);
        $this->assertSame(['driver' => 'mysqllock'], $app->make('config')->get('cache.stores.mysqllock'));
        $repository = $app->make('cache')->store('mysqllock');
        $this->assertInstanceOf(Repository::class, $repository);
        $this->assertInstanceOf(LeaseStore::class, $repository->getStore());
        $this->assertInstanceOf(Store::class, $repository->getStore());
        $this->assertInstanceOf(LockProvider::class, $repository->getStore());
        $this->assertSame('lvt_', $repository->getStore()->getPrefix());
    }

    public function testTheDefaultStoreLocksOnTheExtensionsOwnConnectionAndTable(): void
    {
        $store = makeApp(null)->make('cache')->store('mysqllock');
        $store->getStore()->createTable();
        $lock = $store->lock($this->lockName(), 10, 'owner-a');
        $this->assertTrue($lock->get());
        $st = self::db()->prepare('SELECT owner FROM distributed_locks WHERE resource = ?');
        $st->execute(['lvt_' . $this->lockName()]);
        $this->assertSame('owner-a', $st->fetchColumn());
        $this->assertTrue($lock->release());
    }

    public function testTheProviderKeepsAStoreConfiguredInTheApp(): void
    {
        $app = makeApp(['driver' => 'mysqllock', 'table' => UPGRADED_TABLE, 'prefix' => 'own_']);
        $this->assertSame('own_', $app->make('cache')->store('mysqllock')->getStore()->getPrefix());
    }

    public function testTheStoreCanBeTheDefaultCacheStoreForLocks(): void
    {
        $this->app->make('config')->set('cache.default', 'mysqllock');
        $lock = $this->app->make(\Illuminate\Contracts\Cache\Repository::class)->lock($this->lockName(), 10);
        $this->assertTrue($lock->get());
        $this->assertSame($lock->owner(), $this->liveOwner($this->lockName()));
    }

    /** @return array<string, array{\Closure(Repository): mixed, string}> */
    public static function cacheOperations(): array
    {
        return [
            'get' => [fn (Repository $c) => $c->get('users:1'), 'get("users:1")'],
            'has' => [fn (Repository $c) => $c->has('users:1'), 'get("users:1")'],
            'missing' => [fn (Repository $c) => $c->missing('users:1'), 'get("users:1")'],
            'remember' => [fn (Repository $c) => $c->remember('users:1', 60, fn () => 'x'), 'get("users:1")'],
            'pull' => [fn (Repository $c) => $c->pull('users:1'), 'get("users:1")'],
            'put' => [fn (Repository $c) => $c->put('users:1', 'x', 60), 'put("users:1")'],
            'put forever' => [fn (Repository $c) => $c->put('users:1', 'x'), 'forever("users:1")'],
            'add' => [fn (Repository $c) => $c->add('users:1', 'x', 60), 'add("users:1")'],
            'add a scheduler name with another value' => [fn (Repository $c) => $c->add('framework/schedule-abc', 'x', 60), 'add("framework/schedule-abc")'],
            'many' => [fn (Repository $c) => $c->many(['a', 'b']), 'many("a, b")'],
            'putMany' => [fn (Repository $c) => $c->putMany(['a' => 1], 60), 'putMany("a")'],
            'increment' => [fn (Repository $c) => $c->increment('hits'), 'increment("hits")'],
            'decrement' => [fn (Repository $c) => $c->decrement('hits'), 'decrement("hits")'],
            'forever' => [fn (Repository $c) => $c->forever('users:1', 'x'), 'forever("users:1")'],
            'forget' => [fn (Repository $c) => $c->forget('users:1'), 'forget("users:1")'],
            'flush' => [fn (Repository $c) => $c->flush(), 'flush()'],
            'clear' => [fn (Repository $c) => $c->clear(), 'flush()'],
        ];
    }

    /** @dataProvider cacheOperations */
    #[DataProvider('cacheOperations')]
    public function testCacheOperationsFailWithAClearMessage(\Closure $operation, string $named): void
    {
        $thrown = $this->thrownBy(fn () => $operation($this->cache()));
        $this->assertInstanceOf(UnsupportedCacheOperation::class, $thrown);
        $this->assertInstanceOf(\BadMethodCallException::class, $thrown);
        $this->assertStringContainsString("The mysqllock cache store holds locks only: $named is a cache operation", $thrown->getMessage());
        $this->assertStringContainsString('Keep your normal cache store', $thrown->getMessage());
        $this->assertStringContainsString("Cache::store('mysqllock')->lock(", $thrown->getMessage());
    }

    public function testATableCanBeCreatedThroughTheStore(): void
    {
        $table = 'lv_created_' . getmypid();
        self::db()->exec("DROP TABLE IF EXISTS `$table`");
        try {
            $app = makeApp(['driver' => 'mysqllock', 'table' => $table]);
            $this->assertTrue($app->make('cache')->store('mysqllock')->getStore()->createTable());
            $this->assertFalse($app->make('cache')->store('mysqllock')->getStore()->createTable());
            $this->assertTrue($app->make('cache')->store('mysqllock')->lock($this->lockName(), 10)->get());
        } finally {
            self::db()->exec("DROP TABLE IF EXISTS `$table`");
        }
    }

    public function testAMissingTableIsAClearError(): void
    {
        $app = makeApp(['driver' => 'mysqllock', 'dsn' => server()['dsn'], 'table' => 'lv_no_such_table']);
        $thrown = $this->thrownBy(fn () => $app->make('cache')->store('mysqllock')->lock($this->lockName(), 10)->get());
        $this->assertStringContainsString('does not exist', $thrown->getMessage());
        $thrown = $this->thrownBy(fn () => $app->make('cache')->store('mysqllock')->lock($this->lockName(), 10)->forceRelease());
        $this->assertInstanceOf(\Nene\Kit\DistributedLockException::class, $thrown);
        $this->assertStringContainsString('lease table lv_no_such_table does not exist', $thrown->getMessage());
    }

    public function testWithoutAnyConnectionTheStoreSaysHowToGiveOne(): void
    {
        $dsn = ini_get('mysqllock.dsn');
        ini_set('mysqllock.dsn', '');
        try {
            $thrown = $this->thrownBy(fn () => makeApp(null)->make('cache')->store('mysqllock'));
        } finally {
            ini_set('mysqllock.dsn', $dsn);
        }
        $this->assertInstanceOf(\InvalidArgumentException::class, $thrown);
        $this->assertStringContainsString('set mysqllock.dsn in php.ini', $thrown->getMessage());
    }

    public function testAMalformedDsnIsRefused(): void
    {
        $app = makeApp(['driver' => 'mysqllock', 'dsn' => 'pgsql://user@host/db']);
        $thrown = $this->thrownBy(fn () => $app->make('cache')->store('mysqllock'));
        $this->assertInstanceOf(\InvalidArgumentException::class, $thrown);
        $this->assertStringContainsString('mysql://user:password@host:port/database', $thrown->getMessage());
    }

    public function testAConnectionOfAnotherDatabaseIsRefused(): void
    {
        $app = makeApp(['driver' => 'mysqllock', 'connection' => 'lite']);
        $thrown = $this->thrownBy(fn () => $app->make('cache')->store('mysqllock')->lock($this->lockName(), 10)->get());
        $this->assertInstanceOf(\InvalidArgumentException::class, $thrown);
        $this->assertStringContainsString('need MySQL or MariaDB; the database connection [lite] uses the PDO driver sqlite', $thrown->getMessage());
    }

    public function testAnInvalidTableNameIsRefused(): void
    {
        $app = makeApp(['driver' => 'mysqllock', 'table' => 'locks; DROP TABLE x']);
        $thrown = $this->thrownBy(fn () => $app->make('cache')->store('mysqllock'));
        $this->assertInstanceOf(\InvalidArgumentException::class, $thrown);
    }

    public function testOnALaravelConnectionTheLockJoinsItsOpenTransaction(): void
    {
        $app = makeApp(['driver' => 'mysqllock', 'connection' => 'locks', 'table' => TABLE]);
        $db = $app->make('db')->connection('locks');
        $db->beginTransaction();
        $this->assertTrue($app->make('cache')->store('mysqllock')->lock($this->lockName(), 10, 'owner-a')->get());
        $this->assertNull($this->liveOwner($this->lockName()), 'seen before the transaction committed');
        $db->rollBack();
        $this->assertNull($this->liveOwner($this->lockName()));
        $this->assertTrue($app->make('cache')->store('mysqllock')->lock($this->lockName(), 10, 'owner-b')->get());
    }

    public function testALaravelConnectionLostIsReplaced(): void
    {
        $app = makeApp(['driver' => 'mysqllock', 'connection' => 'locks', 'table' => TABLE]);
        $store = $app->make('cache')->store('mysqllock');
        $this->assertTrue($store->lock($this->lockName('a'), 10)->get());
        $this->killSession((int) $app->make('db')->connection('locks')->getPdo()->query('SELECT CONNECTION_ID()')->fetchColumn());
        $this->assertTrue($store->lock($this->lockName('b'), 10, 'owner-b')->get());
        $this->killSession((int) $app->make('db')->connection('locks')->getPdo()->query('SELECT CONNECTION_ID()')->fetchColumn());
        $store->lock($this->lockName('b'))->forceRelease();
        $this->assertNull($this->liveOwner($this->lockName('b')));
    }

    public function testADsnConnectionLostIsReplaced(): void
    {
        $app = makeApp(['driver' => 'mysqllock', 'dsn' => server()['dsn'], 'table' => TABLE]);
        $store = $app->make('cache')->store('mysqllock');
        [$session] = $this->sessionsOpenedBy(fn () => $this->assertTrue($store->lock($this->lockName('a'), 10)->get()));
        $this->killSession($session);
        $this->assertTrue($store->lock($this->lockName('b'), 10, 'owner-b')->get());
        $this->assertSame('owner-b', $this->liveOwner($this->lockName('b')));
    }

    public function testOnTheExtensionsConnectionOwnersAreReadOnItAndItIsReplacedWhenLost(): void
    {
        $store = $this->cache();
        $opened = $this->sessionsOpenedBy(fn () => $this->assertTrue($store->lock($this->lockName(), 10, 'owner-a')->get()));
        $this->assertCount(1, $opened, 'the first lock did not open exactly one connection');
        $this->assertSame([], $this->sessionsOpenedBy(function () use ($store) {
            $lock = $store->lock($this->lockName(), 10, 'owner-b');
            $this->assertSame('owner-a', \Closure::bind(fn () => $this->getCurrentOwner(), $lock, \Illuminate\Cache\Lock::class)());
            $store->lock($this->lockName())->forceRelease();
        }), 'owner reads or forceRelease opened a connection of their own');
        $this->assertNull($this->liveOwner($this->lockName()));
        $this->killSession($opened[0]);
        $this->assertTrue($store->lock($this->lockName(), 10, 'owner-b')->get());
        $this->assertSame('owner-b', $this->liveOwner($this->lockName()));
        $store->lock($this->lockName())->forceRelease();
        $this->assertNull($this->liveOwner($this->lockName()));
    }

    /** Runs $fn; the ids of the server sessions that appeared meanwhile (and still exist). */
    private function sessionsOpenedBy(callable $fn): array
    {
        $ids = fn (): array => array_map('intval', self::db()->query('SELECT ID FROM information_schema.PROCESSLIST')->fetchAll(\PDO::FETCH_COLUMN));
        $before = $ids();
        $fn();
        return array_values(array_diff($ids(), $before));
    }

    private function killSession(int $id): void
    {
        self::db()->exec("KILL $id");
        $st = self::db()->prepare('SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = ?');
        $gone = self::waitUntil(function () use ($st, $id) {
            $st->execute([$id]);
            return (int) $st->fetchColumn() === 0;
        }, 10);
        $this->assertTrue($gone, "session $id did not end");
    }
}
