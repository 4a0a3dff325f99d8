<?php

declare(strict_types=1);

namespace MySqlLock\Laravel;

use Illuminate\Cache\Lock;
use Illuminate\Contracts\Cache\LockTimeoutException;

/**
 * A Laravel lock (what `Cache::store('mysqllock')->lock($name, $seconds, $owner)` returns):
 * a lease in the lease table, held by the owner string, not by this process.
 *
 * - Any process that knows the owner (`restoreLock($name, $owner)`) can release it; a lock
 *   outlives the process that took it until it is released or its time is up. A holder
 *   that dies (kill -9) keeps it until then; forceRelease() ends it at once.
 * - `$seconds` > 0: the lease lives that long (whole seconds, rounded up) unless released
 *   or taken again by the same owner (the time then restarts), as with Laravel's
 *   DatabaseLock. `$seconds` <= 0: as DatabaseLock, a day (the store's `lock_timeout`).
 * - block() without betweenBlockedAttemptsSleepFor(): the extension's waiting acquire,
 *   which tries again after 5 ms, doubling up to 250 ms (Laravel's fixed interval), with
 *   jitter; a lease cannot be woken by the server. After betweenBlockedAttemptsSleepFor($ms):
 *   a try every $ms, as Laravel's own loop, and a last one at the deadline.
 */
class LeaseLock extends Lock
{
    /** Whether betweenBlockedAttemptsSleepFor() chose a fixed interval. */
    private bool $fixedInterval = false;

    /**
     * @param string $name the resource (the store's prefix included)
     * @param int|float $seconds
     * @param string|null $owner null: a random one (Laravel's Str::random())
     * @param int $lockTimeout seconds a lock with $seconds <= 0 lives
     */
    public function __construct(private Leases $leases, $name, $seconds, $owner = null, private int $lockTimeout = 86400)
    {
        parent::__construct($name, $seconds, $owner);
    }

    /** One try: whether the lease is this owner's now. */
    public function acquire(): bool
    {
        return $this->leases->acquire($this->name, $this->owner, $this->ttl());
    }

    /** Ends the lease if this owner holds it; false otherwise (nothing changes). */
    public function release(): bool
    {
        return $this->leases->release($this->name, $this->owner);
    }

    /** Ends the lease whoever holds it. */
    public function forceRelease(): void
    {
        $this->leases->forceRelease($this->name);
    }

    /**
     * Waits up to $seconds for the lock.
     *
     * @param int|float $seconds
     * @param callable|null $callback run under the lock, which is released afterwards (also when it throws)
     * @return mixed true, or what $callback returned
     * @throws LockTimeoutException if another owner still held it after $seconds
     */
    public function block($seconds, $callback = null)
    {
        $seconds = max(0.0, (float) $seconds);
        if ($this->fixedInterval) {
            $deadline = hrtime(true) + (int) ($seconds * 1e9);
            while (!$this->acquire()) {
                $left = $deadline - hrtime(true);
                if ($left <= 0) {
                    throw $this->timedOut($seconds);
                }
                usleep((int) min($this->sleepMilliseconds * 1000, intdiv($left, 1000)));
            }
        } elseif (!$this->leases->acquire($this->name, $this->owner, $this->ttl(), $seconds)) {
            throw $this->timedOut($seconds);
        }

        if (is_callable($callback)) {
            try {
                return $callback();
            } finally {
                $this->release();
            }
        }
        return true;
    }

    /**
     * block() tries every $milliseconds (Laravel's loop) instead of the extension's backoff.
     *
     * @param int $milliseconds
     * @return $this
     */
    public function betweenBlockedAttemptsSleepFor($milliseconds)
    {
        $this->fixedInterval = true;
        return parent::betweenBlockedAttemptsSleepFor($milliseconds);
    }

    /**
     * The owner of the unexpired lease, null when it is free.
     *
     * @return string|null
     */
    protected function getCurrentOwner()
    {
        return $this->leases->owner($this->name);
    }

    /** The lease's TTL in whole seconds. */
    private function ttl(): int
    {
        return $this->seconds > 0 ? (int) ceil($this->seconds) : $this->lockTimeout;
    }

    private function timedOut(float $seconds): LockTimeoutException
    {
        return new LockTimeoutException("Acquiring the lock \"{$this->name}\" timed out after {$seconds} s: another owner holds it");
    }
}
