<?php

declare(strict_types=1);

namespace MySqlLock\Laravel;

use Illuminate\Cache\CacheManager;
use Illuminate\Support\ServiceProvider;

/**
 * Registers the `mysqllock` cache driver (Cache::extend) and, unless config/cache.php has
 * one already, the store `cache.stores.mysqllock` on the extension's own connection
 * (php.ini mysqllock.dsn). Found by Laravel's package discovery.
 */
class MySqlLockServiceProvider extends ServiceProvider
{
    /** The driver name, and the name of the store registered by default. */
    public const DRIVER = 'mysqllock';

    public function register(): void
    {
        $config = $this->app->make('config');
        if (!$config->has('cache.stores.' . self::DRIVER)) {
            $config->set('cache.stores.' . self::DRIVER, ['driver' => self::DRIVER]);
        }

        // At the cache manager's first resolution (or now, if it is resolved already), so
        // the driver is there before any provider's boot() or command asks for a store.
        $this->callAfterResolving('cache', static function (CacheManager $cache): void {
            // CacheManager binds the creator to itself: $this below is the manager. The
            // config goes on to repository() as for Laravel's own drivers: from Laravel 11
            // it names the store in the Repository and its events (CacheLocksFlushed, ...)
            // and may turn events off ('events' => false); Laravel 8 and 10 take the store
            // alone (PHP drops the extra argument).
            $cache->extend(self::DRIVER, function ($app, array $config) {
                return $this->repository(LeaseStore::fromConfig($config, $app), $config);
            });
        });
    }
}
