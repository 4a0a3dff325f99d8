<?php

declare(strict_types=1);

namespace MySqlLock\Laravel;

use Illuminate\Contracts\Cache\CanFlushLocks;

// Laravel 13's CanFlushLocks (what `php artisan cache:clear --locks` and
// Repository::flushLocks() ask of a store) where the installed Laravel has it; the same two
// methods as an interface of the bridge's own on Laravel 8 to 12, which lack it. Chosen
// once, when the class is first loaded.
if (interface_exists(CanFlushLocks::class)) {
    /** Laravel's CanFlushLocks: LeaseStore::flushLocks() and hasSeparateLockStore(). */
    interface FlushesLocks extends CanFlushLocks
    {
    }
} else {
    /** LeaseStore::flushLocks() and hasSeparateLockStore() (Laravel 13's CanFlushLocks). */
    interface FlushesLocks
    {
        public function flushLocks(): bool;

        public function hasSeparateLockStore(): bool;
    }
}
