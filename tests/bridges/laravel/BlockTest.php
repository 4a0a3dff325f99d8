<?php
// block(): waiting for a lock, timing out with LockTimeoutException, the callback form,
// and betweenBlockedAttemptsSleepFor(). Tries are counted by the server (the session's
// Com_insert on the Laravel connection the store runs on: one upsert per try).
declare(strict_types=1);

namespace MySqlLockLaravelTest;

use Illuminate\Contracts\Cache\LockTimeoutException;

final class BlockTest extends TestCase
{
    protected function storeConfig(): array
    {
        return ['driver' => 'mysqllock', 'connection' => 'locks', 'table' => TABLE];
    }

    public function testBlockTakesAFreeLockAtOnce(): void
    {
        $started = microtime(true);
        $this->assertTrue($this->cache()->lock($this->lockName(), 10, 'owner-a')->block(5));
        $this->assertLessThan(4, microtime(true) - $started);
        $this->assertSame('owner-a', $this->liveOwner($this->lockName()));
    }

    public function testBlockTimesOutWithLockTimeoutException(): void
    {
        $this->assertTrue($this->cache()->lock($this->lockName(), 60, 'owner-a')->get());
        $started = microtime(true);
        $thrown = $this->thrownBy(fn () => $this->cache()->lock($this->lockName(), 10, 'owner-b')->block(1));
        $waited = microtime(true) - $started;
        $this->assertInstanceOf(LockTimeoutException::class, $thrown);
        $this->assertGreaterThanOrEqual(0.9, $waited, 'block(1) gave up before a second');
        $this->assertLessThan(10, $waited, 'block(1) waited far beyond its second');
        $this->assertSame('owner-a', $this->liveOwner($this->lockName()));
    }

    public function testBlockWithAnIntervalTimesOutWithLockTimeoutException(): void
    {
        $this->assertTrue($this->cache()->lock($this->lockName(), 60, 'owner-a')->get());
        $lock = $this->cache()->lock($this->lockName(), 10, 'owner-b')->betweenBlockedAttemptsSleepFor(100);
        $started = microtime(true);
        $this->assertInstanceOf(LockTimeoutException::class, $this->thrownBy(fn () => $lock->block(1)));
        $this->assertGreaterThanOrEqual(0.9, microtime(true) - $started);
    }

    public function testBlockWithACallbackRunsItAndReleasesAfterwards(): void
    {
        $name = $this->lockName();
        $result = $this->cache()->lock($name, 10, 'owner-a')->block(5, function () use ($name) {
            return $this->liveOwner($name);
        });
        $this->assertSame('owner-a', $result);
        $this->assertNull($this->liveOwner($name));
    }

    public function testBlockWithACallbackReleasesWhenTheCallbackThrows(): void
    {
        $name = $this->lockName();
        $thrown = $this->thrownBy(fn () => $this->cache()->lock($name, 10)->block(5, function () {
            throw new \DomainException('the job failed');
        }));
        $this->assertSame('the job failed', $thrown->getMessage());
        $this->assertNull($this->liveOwner($name));
    }

    public function testBlockTimingOutDoesNotRunTheCallback(): void
    {
        $this->assertTrue($this->cache()->lock($this->lockName(), 60, 'owner-a')->get());
        $ran = false;
        $thrown = $this->thrownBy(fn () => $this->cache()->lock($this->lockName(), 10)->block(0, function () use (&$ran) {
            $ran = true;
        }));
        $this->assertInstanceOf(LockTimeoutException::class, $thrown);
        $this->assertFalse($ran);
    }

    public function testBetweenBlockedAttemptsSleepForSpacesTheTries(): void
    {
        $this->assertTrue($this->cache()->lock($this->lockName(), 60, 'owner-a')->get());
        $slow = $this->triesWhileBlocking(fn ($lock) => $lock->betweenBlockedAttemptsSleepFor(500), 2);
        $fast = $this->triesWhileBlocking(fn ($lock) => $lock->betweenBlockedAttemptsSleepFor(20), 2);
        // 500 ms apart in 2 s: tries at 0, 0.5, 1, 1.5 and 2 s, never more.
        $this->assertGreaterThanOrEqual(2, $slow);
        $this->assertLessThanOrEqual(6, $slow);
        // 20 ms apart: about 100 tries; a loaded machine makes fewer.
        $this->assertGreaterThan(20, $fast);
    }

    public function testBetweenBlockedAttemptsSleepForReturnsTheLock(): void
    {
        $lock = $this->cache()->lock($this->lockName(), 10);
        $this->assertSame($lock, $lock->betweenBlockedAttemptsSleepFor(10));
    }

    public function testBlockWithoutAnIntervalTriesAgainWithinMilliseconds(): void
    {
        $this->assertTrue($this->cache()->lock($this->lockName(), 60, 'owner-a')->get());
        // The extension's backoff (5 ms doubling to 250 ms, jitter x0.5..1.5) tries about 6
        // times in 300 ms; Laravel's own loop (250 ms apart) at most twice.
        $tries = $this->triesWhileBlocking(fn ($lock) => $lock, 0.3);
        $this->assertGreaterThanOrEqual(3, $tries);
        $this->assertLessThanOrEqual(30, $tries);
    }

    public function testBlockGetsTheLockWhenAnotherProcessReleasesIt(): void
    {
        $this->assertTrue($this->cache()->lock($this->lockName(), 60, 'owner-a')->get());
        $waiter = $this->child();
        $waiter->send(['block', $this->lockName(), 60, 'owner-b', 30]);
        $this->assertSame('blocking', $waiter->receive(20)['result'] ?? null);
        $this->assertSame('owner-a', $this->liveOwner($this->lockName()), 'the waiter took a held lock');
        $released = microtime(true);
        $this->assertTrue($this->cache()->restoreLock($this->lockName(), 'owner-a')->release());
        $reply = $waiter->receive(20);
        $this->assertSame(['ok' => true, 'result' => true], $reply);
        $this->assertLessThan(10, microtime(true) - $released, 'the waiter took the lock long after its release');
        $this->assertSame('owner-b', $this->liveOwner($this->lockName()));
    }

    /** How many tries block($seconds) makes on a held lock, counted by the server. */
    private function triesWhileBlocking(callable $configure, float $seconds): int
    {
        $pdo = $this->app->make('db')->connection('locks')->getPdo();
        $inserts = fn (): int => (int) $pdo->query("SHOW SESSION STATUS LIKE 'Com_insert'")->fetch(\PDO::FETCH_NUM)[1];
        $lock = $configure($this->cache()->lock($this->lockName(), 10, 'owner-b'));
        $before = $inserts();
        $this->assertInstanceOf(LockTimeoutException::class, $this->thrownBy(fn () => $lock->block($seconds)));
        return $inserts() - $before;
    }
}
