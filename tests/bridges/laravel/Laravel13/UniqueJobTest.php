<?php
// Unique jobs of Laravel 13 on the mysqllock store: a job with the Queueable trait keeps its
// lock's owner (uniqueLockOwner), which travels with the serialized job to the worker, and
// the worker releases through restoreLock(key, owner)->release(): only that owner's lease,
// never one another dispatch took after it expired. Laravel 12 and later; on Laravel 8 this
// file declares nothing, so PHPUnit collects nothing.
declare(strict_types=1);

namespace MySqlLockLaravelTest\Laravel13;

use Illuminate\Bus\Queueable;
use Illuminate\Bus\UniqueLock;
use Illuminate\Container\Container;
use Illuminate\Contracts\Queue\ShouldBeUnique;
use MySqlLockLaravelTest\TestCase;

use function MySqlLockLaravelTest\laravelAtLeast;

if (laravelAtLeast(12)) {
    /** A queued unique job as an app writes one (Queueable), its lock on the mysqllock store. */
    final class ExportJob implements ShouldBeUnique
    {
        use Queueable;

        public function __construct(public string $exportId, public int $uniqueFor = 600)
        {
        }

        public function uniqueId(): string
        {
            return $this->exportId;
        }

        public function uniqueVia(): \Illuminate\Contracts\Cache\Repository
        {
            return Container::getInstance()->make('cache')->store('mysqllock');
        }
    }

    final class UniqueJobTest extends TestCase
    {
        private function uniqueLock(): UniqueLock
        {
            return new UniqueLock($this->app->make(\Illuminate\Contracts\Cache\Repository::class));
        }

        public function testTheJobKeepsItsLocksOwnerAndTheWorkerReleasesWithIt(): void
        {
            $job = new ExportJob($this->lockName('export'));
            $this->assertTrue($this->uniqueLock()->acquire($job));
            $this->assertNotSame('', $job->uniqueLockOwner);
            $this->assertSame($job->uniqueLockOwner, $this->liveOwner(UniqueLock::getKey($job)));
            $this->assertFalse($this->uniqueLock()->acquire(new ExportJob($this->lockName('export'))), 'a second dispatch got the lock');
            $this->assertGreaterThan(590, $this->row(UniqueLock::getKey($job))['remaining']);

            // The queue serializes the job; the worker releases with the owner it carries.
            $worker = unserialize(serialize($job));
            $this->uniqueLock()->release($worker);
            $this->assertNull($this->liveOwner(UniqueLock::getKey($job)));
            $this->assertTrue($this->uniqueLock()->acquire(new ExportJob($this->lockName('export'))));
        }

        public function testTheWorkerDoesNotReleaseALockAnotherDispatchTookAfterItsExpired(): void
        {
            $job = new ExportJob($this->lockName('export'));
            $this->assertTrue($this->uniqueLock()->acquire($job));
            $this->expireRow(UniqueLock::getKey($job));
            $later = new ExportJob($this->lockName('export'));
            $this->assertTrue($this->uniqueLock()->acquire($later));
            $this->uniqueLock()->release(unserialize(serialize($job)));
            $this->assertSame($later->uniqueLockOwner, $this->liveOwner(UniqueLock::getKey($job)));
        }
    }
}
