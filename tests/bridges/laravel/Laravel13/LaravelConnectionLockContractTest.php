<?php
// Laravel 13's lock contract (LockContractTest) on the PDO of a Laravel database connection.
declare(strict_types=1);

namespace MySqlLockLaravelTest\Laravel13;

use function MySqlLockLaravelTest\laravelAtLeast;

use const MySqlLockLaravelTest\TABLE;

if (laravelAtLeast(12)) {
    final class LaravelConnectionLockContractTest extends LockContractTest
    {
        protected function storeConfig(): array
        {
            return ['driver' => 'mysqllock', 'connection' => 'locks', 'table' => TABLE];
        }
    }
}
