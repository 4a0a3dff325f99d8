<?php
// Laravel 13's CanFlushLocks on the mysqllock store: Repository::flushLocks() (with its
// events) and `php artisan cache:clear mysqllock --locks` end the app's leases (those under
// its cache prefix) and no others. Laravel 13 and later (the contract is new in 13); on
// older Laravels this file declares nothing, so PHPUnit collects nothing.
declare(strict_types=1);

namespace MySqlLockLaravelTest\Laravel13;

use Illuminate\Cache\Console\ClearCommand;
use Illuminate\Cache\Events\CacheLocksFlushed;
use Illuminate\Cache\Events\CacheLocksFlushing;
use Illuminate\Contracts\Cache\CanFlushLocks;
use Illuminate\Events\Dispatcher;
use Illuminate\Filesystem\Filesystem;
use MySqlLockLaravelTest\TestCase;
use Symfony\Component\Console\Input\ArrayInput;
use Symfony\Component\Console\Output\BufferedOutput;

use function MySqlLockLaravelTest\laravelAtLeast;
use function MySqlLockLaravelTest\makeApp;

if (laravelAtLeast(13)) {
    final class CanFlushLocksTest extends TestCase
    {
        private string $prefix;

        protected function setUp(): void
        {
            parent::setUp();
            // A prefix of this test's own, so the flush ends no other test's leases.
            $this->prefix = $this->lockName('app') . '_';
            $this->app = makeApp($this->storeConfig(), $this->prefix);
        }

        public function testTheStoreIsACanFlushLocksWithASeparateLockStore(): void
        {
            $repository = $this->cache();
            $this->assertInstanceOf(CanFlushLocks::class, $repository->getStore());
            $this->assertTrue($repository->supportsFlushingLocks());
            $this->assertTrue($repository->getStore()->hasSeparateLockStore());
            $this->assertSame('mysqllock', $repository->getName(), 'the Repository does not know its store\'s name');
        }

        public function testRepositoryFlushLocksEndsTheAppsLeasesAndSaysSo(): void
        {
            $repository = $this->cache();
            $events = new Dispatcher($this->app);
            $seen = [];
            // Each event names the store, as for Laravel's own drivers.
            $events->listen(CacheLocksFlushing::class, function (CacheLocksFlushing $e) use (&$seen) {
                $seen[] = "flushing {$e->storeName}";
            });
            $events->listen(CacheLocksFlushed::class, function (CacheLocksFlushed $e) use (&$seen) {
                $seen[] = "flushed {$e->storeName}";
            });
            $repository->setEventDispatcher($events);
            $this->assertTrue($repository->lock('a', 600, 'owner-a')->get());
            $this->assertTrue($this->child()->run(['get', $this->lockName('elsewhere'), 600, 'owner-b']));

            $this->assertTrue($repository->flushLocks());

            $this->assertSame(['flushing mysqllock', 'flushed mysqllock'], $seen);
            $this->assertFalse($repository->lock('a')->isLocked());
            // The child's app has the tests' prefix (lvt_): another app's lease stays.
            $this->assertSame('owner-b', $this->ownerOf('lvt_' . $this->lockName('elsewhere')));
        }

        public function testCacheClearLocksEndsTheAppsLeases(): void
        {
            // Artisan commands run in a Foundation Application (the console asks it whether it runs unit tests).
            require_once 'Illuminate/autoload.php'; // the whole framework, Foundation included
            $this->app = makeApp($this->storeConfig(), $this->prefix, new \Illuminate\Foundation\Application(sys_get_temp_dir()));
            $this->assertTrue($this->cache()->lock('job', 600, 'owner-a')->get());
            $command = new ClearCommand($this->app->make('cache'), new Filesystem());
            $command->setLaravel($this->app);
            $output = new BufferedOutput();
            $status = $command->run(new ArrayInput(['store' => 'mysqllock', '--locks' => true]), $output);
            $this->assertSame(0, $status, $output->fetch());
            $this->assertNull($this->ownerOf($this->prefix . 'job'));
        }

        /** The owner of the live lease on $resource, read on the tests' own connection. */
        private function ownerOf(string $resource): ?string
        {
            $st = self::db()->prepare('SELECT owner FROM `' . $this->table() . '` WHERE resource = ? AND expires_at > UTC_TIMESTAMP()');
            $st->execute([$resource]);
            $owner = $st->fetchColumn();
            return $owner === false ? null : $owner;
        }
    }
}
