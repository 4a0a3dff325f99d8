<?php

declare(strict_types=1);

namespace MySqlLock\Symfony;

use Symfony\Component\Lock\PersistingStoreInterface;
use Symfony\Component\Lock\Store\StoreFactory;

/**
 * Symfony's StoreFactory::createStore() plus `mysqllock:` DSNs. Symfony's factory is a
 * closed list (5.4 to 7.x), so framework.lock cannot name a new kind of store by itself:
 * MySqlLockBundle makes FrameworkBundle call this factory instead, and every other DSN or
 * connection goes on to Symfony's.
 */
final class MySqlLockStoreFactory
{
    /**
     * @param object|string $connection `mysqllock://user:password@host:port/db?mode=...`,
     *        `mysqllock:` (the extension's default connection), or anything
     *        Symfony's StoreFactory accepts
     */
    public static function createStore(object|string $connection): PersistingStoreInterface
    {
        if (is_string($connection) && str_starts_with($connection, 'mysqllock:')) {
            return new MySqlLockStore($connection);
        }
        return StoreFactory::createStore($connection);
    }
}
