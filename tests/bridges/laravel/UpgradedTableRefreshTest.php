<?php
// refresh() on a lease table upgraded with fencing tokens and microsecond times, on a PDO the
// store opens from a DSN in its config.
declare(strict_types=1);

namespace MySqlLockLaravelTest;

final class UpgradedTableRefreshTest extends RefreshTest
{
    protected function storeConfig(): array
    {
        return ['driver' => 'mysqllock', 'dsn' => server()['dsn'], 'table' => UPGRADED_TABLE, 'lock_timeout' => 3600];
    }
}
