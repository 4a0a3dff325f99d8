<?php
// The topology check's PHP side: mysqllock.allow_cluster and the ClusterNodeException
// users catch as getPrevious() of a lock refused on a cluster node. (The refusal itself
// needs a Galera node or a Group Replication member; this standalone server is neither.)
declare(strict_types=1);

namespace MySqlLockTest;

use ItsMieger\MySqlSharedLocks\Exception\ClusterNodeException;
use ItsMieger\MySqlSharedLocks\SharedLock;
use PHPUnit\Framework\Attributes\Test;

final class ClusterSettingTest extends TestCase
{
    /** @test */
    #[Test]
    public function allowClusterIsOffByDefaultAndShownByPhpRi(): void
    {
        exec(escapeshellarg(PHP_BINARY) . ' -n -d extension=' . escapeshellarg(extensionPath()) . ' --ri mysqllock', $out, $status);
        $this->assertSame(0, $status, implode("\n", $out));
        $this->assertContains('mysqllock.allow_cluster => 0 => 0', $out);
    }

    /** @test */
    #[Test]
    public function clusterNodeExceptionIsARuntimeExceptionUsersCanCreateAndCatch(): void
    {
        $e = new ClusterNodeException('the server is a Galera node', 7);
        $this->assertInstanceOf(\RuntimeException::class, $e);
        $this->assertSame(7, $e->getCode());
    }

    /** @test */
    #[Test]
    public function onAStandaloneServerLocksWorkWhetherOrNotClustersAreAllowed(): void
    {
        foreach (['0', '1'] as $allowed) {
            ini_set('mysqllock.allow_cluster', $allowed);
            try {
                configure(); // a new connection, which reads the setting
                $name = $this->lockName("allow-$allowed");
                $handle = SharedLock::lock($name, 0, 10);
                $this->assertSame('1', (string) (self::rows($name)[0]['lock_acquired'] ?? null), "allow_cluster=$allowed: no acquired row");
                $handle->release();
                $this->assertSame([], self::rows($name), "allow_cluster=$allowed: release left the row");
            } finally {
                ini_restore('mysqllock.allow_cluster');
            }
        }
    }
}
