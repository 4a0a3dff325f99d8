<?php
// flushLocks() on a lease table upgraded with fencing tokens (its rows stay, ended, and the
// next lease's token counts on), on a PDO the store opens from a DSN in its config.
declare(strict_types=1);

namespace MySqlLockLaravelTest;

use Nene\Kit\DistributedLock;

final class UpgradedTableFlushLocksTest extends FlushLocksTest
{
    protected function storeConfig(): array
    {
        return ['driver' => 'mysqllock', 'dsn' => server()['dsn'], 'table' => UPGRADED_TABLE];
    }

    public function testAFlushedLeaseKeepsItsRowAndTheNextTokenIsLarger(): void
    {
        $prefix = $this->lockName('app') . '_';
        $store = $this->storeWithPrefix($prefix);
        $plain = new DistributedLock(connect(), UPGRADED_TABLE);
        $this->assertTrue($plain->acquire("{$prefix}fenced", 'owner-a', 60));
        $before = $plain->getToken();
        $this->assertIsInt($before);
        $this->assertTrue($store->getStore()->flushLocks());
        $st = self::db()->prepare('SELECT COUNT(*) FROM `' . UPGRADED_TABLE . '` WHERE resource = ?');
        $st->execute(["{$prefix}fenced"]);
        $this->assertSame(1, (int) $st->fetchColumn(), 'the flush deleted the row (and its token)');
        $this->assertFalse($plain->isHeld("{$prefix}fenced"));
        $this->assertTrue($plain->acquire("{$prefix}fenced", 'owner-b', 60));
        $this->assertGreaterThan($before, $plain->getToken());
    }
}
