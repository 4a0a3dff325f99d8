<?php
// The Lock contract on a lease table upgraded with fencing tokens and microsecond times
// (a release keeps the row, ended), on a PDO the store opens from a DSN in its config.
declare(strict_types=1);

namespace MySqlLockLaravelTest;

final class UpgradedTableLockContractTest extends LockContractTest
{
    protected function storeConfig(): array
    {
        return ['driver' => 'mysqllock', 'dsn' => server()['dsn'], 'table' => UPGRADED_TABLE];
    }
}
