<?php
// The Lock contract on the PDO of a Laravel database connection (config/database.php).
declare(strict_types=1);

namespace MySqlLockLaravelTest;

final class LaravelConnectionLockContractTest extends LockContractTest
{
    protected function storeConfig(): array
    {
        return ['driver' => 'mysqllock', 'connection' => 'locks', 'table' => TABLE];
    }
}
