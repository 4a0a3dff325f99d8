<?php

declare(strict_types=1);

namespace MySqlLock\Laravel;

/**
 * A cache operation (get, put, increment, flush, ...) on the mysqllock store, which holds
 * locks only: the app keeps its normal cache store for cached values.
 */
final class UnsupportedCacheOperation extends \BadMethodCallException
{
    public static function for(string $operation, mixed $key = null): self
    {
        $what = $key === null ? "$operation()" : sprintf('%s(%s)', $operation, is_string($key) ? "\"$key\"" : get_debug_type($key));
        return new self(
            "The mysqllock cache store holds locks only: $what is a cache operation it does not do. "
            . 'Keep your normal cache store (redis, memcached, file, database, ...) as the default for cached values, '
            . "and use this one for locks: Cache::store('mysqllock')->lock(...), SCHEDULE_CACHE_DRIVER=mysqllock "
            . "(cache.schedule_store) for onOneServer()/withoutOverlapping(), or uniqueVia() returning Cache::store('mysqllock') for unique jobs."
        );
    }
}
