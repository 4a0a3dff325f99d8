<?php
// Unique jobs (ShouldBeUnique) whose uniqueVia() is the mysqllock store: Laravel's
// UniqueLock takes the lock when the job is dispatched (web request), the queue worker's
// CallQueuedHandler releases it after the job ran, in another process.
declare(strict_types=1);

namespace MySqlLockLaravelTest;

use Illuminate\Bus\UniqueLock;

final class UniqueJobTest extends TestCase
{
    private function uniqueLock(): UniqueLock
    {
        return new UniqueLock($this->app->make(\Illuminate\Contracts\Cache\Repository::class));
    }

    /**
     * The lock name Laravel's UniqueLock gives $job: its own getKey() where it has one
     * (protected on Laravel 10, public and static from 11.39 on; called as a method of the
     * UniqueLock either way), Laravel 8's inline format before.
     */
    private function keyOf(ReportJob $job): string
    {
        return method_exists(UniqueLock::class, 'getKey')
            ? (fn (ReportJob $job): string => $this->getKey($job))->call($this->uniqueLock(), $job)
            : 'laravel_unique_job:' . ReportJob::class . $job->uniqueId();
    }

    public function testAUniqueJobIsDispatchedOnlyOnceUntilItsLockIsReleased(): void
    {
        $job = new ReportJob($this->lockName('report'));
        $this->assertTrue($this->uniqueLock()->acquire($job));
        $this->assertFalse($this->uniqueLock()->acquire(new ReportJob($this->lockName('report'))));
        $this->assertFalse($this->child()->run(['uniqueAcquire', $this->lockName('report')]), 'another web request dispatched it again');
        $this->assertTrue($this->uniqueLock()->acquire(new ReportJob($this->lockName('other-report'))));
    }

    public function testTheWorkerReleasesTheUniqueLockInAnotherProcess(): void
    {
        $job = new ReportJob($this->lockName('report'));
        $this->assertTrue($this->uniqueLock()->acquire($job));
        $this->assertSame('done', $this->child()->run(['uniqueRelease', $this->lockName('report')]));
        $this->assertNull($this->liveOwner($this->keyOf($job)));
        $this->assertTrue($this->uniqueLock()->acquire($job));
    }

    public function testUniqueForIsTheLockTime(): void
    {
        $job = new ReportJob($this->lockName('report'), 90);
        $this->assertTrue($this->uniqueLock()->acquire($job));
        $remaining = $this->row($this->keyOf($job))['remaining'];
        $this->assertGreaterThan(80, $remaining);
        $this->assertLessThanOrEqual(91, $remaining);
    }

    public function testWithoutUniqueForTheLockLastsADay(): void
    {
        $job = new ReportJob($this->lockName('report'));
        $this->assertTrue($this->uniqueLock()->acquire($job));
        $this->assertGreaterThan(86400 - 60, $this->row($this->keyOf($job))['remaining']);
    }
}
