<?php
// Laravel 13's lock contract (LockContractTest) on a lease table upgraded with fencing tokens, on a PDO the store opens from a DSN.
declare(strict_types=1);

namespace MySqlLockLaravelTest\Laravel13;

use function MySqlLockLaravelTest\laravelAtLeast;
use function MySqlLockLaravelTest\server;

use const MySqlLockLaravelTest\UPGRADED_TABLE;

if (laravelAtLeast(12)) {
    final class UpgradedTableLockContractTest extends LockContractTest
    {
        protected function storeConfig(): array
        {
            return ['driver' => 'mysqllock', 'dsn' => server()['dsn'], 'table' => UPGRADED_TABLE];
        }
    }
}
