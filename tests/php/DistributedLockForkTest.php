<?php
// Nene\Kit\DistributedLock under pcntl_fork: a child works on a session of its own and
// never closes the one it inherited, so the parent keeps its connection.
declare(strict_types=1);

namespace MySqlLockTest;

use Nene\Kit\DistributedLock;
use PHPUnit\Framework\Attributes\Test;

final class DistributedLockForkTest extends TestCase
{
    private const TABLE = 'phpt_leases_fork';

    public static function setUpBeforeClass(): void
    {
        connect()->exec('CREATE TABLE IF NOT EXISTS ' . self::TABLE . ' (
resource VARCHAR(255) PRIMARY KEY,
owner VARCHAR(255) NOT NULL,
expires_at DATETIME NOT NULL,
acquired_at DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP
) ENGINE=InnoDB');
    }

    protected function setUp(): void
    {
        parent::setUp();
        ini_set('mysqllock.dsn', getenv('MYSQLLOCK_TEST_DSN'));
    }

    protected function tearDown(): void
    {
        ini_restore('mysqllock.dsn');
        self::db()->prepare('DELETE FROM ' . self::TABLE . ' WHERE resource LIKE ?')->execute([$this->prefix() . '%']);
        parent::tearDown();
    }

    /** @test */
    #[Test]
    public function forkedChildUsesItsOwnSessionAndLeavesTheParentsOpen(): void
    {
        $lock = new DistributedLock(null, self::TABLE);
        [$parents, $childs] = [$this->lockName('parent'), $this->lockName('child')];
        $this->assertTrue($lock->acquire($parents, 'parent', 60)); // the parent's session is open now

        $report = tempnam(sys_get_temp_dir(), 'phpt-fork-');
        self::closeDb(); // the child must not close the parent's inspection session either
        $pid = pcntl_fork();
        $this->assertNotSame(-1, $pid, 'pcntl_fork failed');
        if ($pid === 0) {
            try {
                $result = $lock->acquire($childs, 'child', 60) ? 'acquired' : 'refused';
            } catch (\Throwable $e) {
                $result = describe($e);
            }
            file_put_contents($report, json_encode($result));
            exit(0); // destructors run: the child's own session closes, the inherited one must not
        }
        $status = 0;
        $exited = self::waitUntil(fn () => pcntl_waitpid($pid, $status, WNOHANG) === $pid, 30);
        $result = json_decode((string) file_get_contents($report), true);
        unlink($report);
        $this->assertTrue($exited, 'the forked child did not exit');
        $this->assertSame('acquired', $result);

        $connections = fn () => (int) self::db()->query("SHOW GLOBAL STATUS LIKE 'Connections'")->fetch(\PDO::FETCH_NUM)[1];
        $before = $connections();
        $this->assertTrue($lock->isHeld($parents));
        $this->assertFalse($lock->acquire($childs, 'parent', 60), 'the child\'s lease is missing');
        $this->assertSame($before, $connections(), 'the parent had to reconnect: its inherited session was closed by the child');
    }

    /** @test */
    #[Test]
    public function forkedChildThatNeverCallsTheLockLeavesTheParentsSessionOpen(): void
    {
        $lock = new DistributedLock(null, self::TABLE);
        $r = $this->lockName('parent');
        $this->assertTrue($lock->acquire($r, 'parent', 60)); // the parent's session is open now

        self::closeDb(); // the child must not close the parent's inspection session either
        $pid = pcntl_fork();
        $this->assertNotSame(-1, $pid, 'pcntl_fork failed');
        if ($pid === 0) {
            exit(0); // the destructor and request end run without any call in the child
        }
        $status = 0;
        $this->assertTrue(self::waitUntil(fn () => pcntl_waitpid($pid, $status, WNOHANG) === $pid, 30), 'the forked child did not exit');

        $connections = fn () => (int) self::db()->query("SHOW GLOBAL STATUS LIKE 'Connections'")->fetch(\PDO::FETCH_NUM)[1];
        $before = $connections();
        $this->assertSame('parent', $lock->owner($r));
        $this->assertSame($before, $connections(), 'the parent had to reconnect: its inherited session was closed by the child');
    }
}
