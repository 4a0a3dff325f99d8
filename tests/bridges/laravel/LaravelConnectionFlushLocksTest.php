<?php
// flushLocks() on a Laravel database connection's PDO.
declare(strict_types=1);

namespace MySqlLockLaravelTest;

final class LaravelConnectionFlushLocksTest extends FlushLocksTest
{
    protected function storeConfig(): array
    {
        return ['driver' => 'mysqllock', 'connection' => 'locks', 'table' => TABLE];
    }
}
