<?php

declare(strict_types=1);

namespace MySqlLock\Laravel;

use Illuminate\Cache\Lock;
use Illuminate\Contracts\Cache\LockTimeoutException;
use Nene\Kit\DistributedLock;

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
 * - refresh($seconds) restarts the owner's unexpired lease (Laravel 12's refresh(), here on
 *   every Laravel the bridge supports); isLocked(), isOwnedBy() and isOwnedByCurrentProcess()
 *   read the table (Laravel 13's Lock API, also on Laravel 8, whose base class lacks them).
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
        return $this->leases->acquire($this->name, $this->owner, $this->ttl($this->seconds));
    }

    /**
     * Restarts this owner's lease: it lives $seconds from now (whole seconds, rounded up),
     * shorter or longer than it would have. As Laravel's DatabaseLock: null means the
     * lock's own seconds, and seconds <= 0 (also as the lock's own) the store's
     * `lock_timeout` (a day). A lease that expired, was released or is another owner's
     * is not taken back: false, and nothing changes.
     *
     * @param int|float|null $seconds
     * @throws \InvalidArgumentException for seconds that are not a finite number, or
     *   longer than DistributedLock::MAX_TTL
     */
    public function refresh($seconds = null): bool
    {
        return $this->leases->renew($this->name, $this->owner, $this->ttl($seconds ?? $this->seconds));
    }

    /** Whether anyone holds an unexpired lease on this lock (read from the table). */
    public function isLocked(): bool
    {
        return $this->leases->isHeld($this->name);
    }

    /**
     * Whether $owner holds the unexpired lease; null: whether it is free.
     *
     * @param string|null $owner
     */
    public function isOwnedBy($owner): bool
    {
        return $this->getCurrentOwner() === $owner;
    }

    /** Whether this lock's owner holds the unexpired lease (public as in Laravel 10 and later). */
    public function isOwnedByCurrentProcess(): bool
    {
        return $this->isOwnedBy($this->owner);
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
        } elseif (!$this->leases->acquire($this->name, $this->owner, $this->ttl($this->seconds), $seconds)) {
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

    /**
     * The lease's TTL in whole seconds for a lock of $seconds: rounded up; <= 0 the
     * store's lock_timeout (DatabaseLock's rule).
     *
     * @throws \InvalidArgumentException for what is not a finite number or is too long
     */
    private function ttl(mixed $seconds): int
    {
        if ((!is_int($seconds) && !is_float($seconds) && !(is_string($seconds) && is_numeric($seconds)))
            || !is_finite((float) $seconds)) {
            throw new \InvalidArgumentException(sprintf(
                'The lock "%s" was given %s seconds: a lock lives a number of seconds (<= 0: lock_timeout, %d s)',
                $this->name,
                is_scalar($seconds) ? var_export($seconds, true) : get_debug_type($seconds),
                $this->lockTimeout,
            ));
        }
        $seconds = (float) $seconds;
        if ($seconds <= 0) {
            return $this->lockTimeout;
        }
        if ($seconds > DistributedLock::MAX_TTL) {
            throw new \InvalidArgumentException("The lock \"{$this->name}\" was given {$seconds} seconds: at most " . DistributedLock::MAX_TTL);
        }
        return (int) ceil($seconds);
    }

    private function timedOut(float $seconds): LockTimeoutException
    {
        return new LockTimeoutException("Acquiring the lock \"{$this->name}\" timed out after {$seconds} s: another owner holds it");
    }
}
