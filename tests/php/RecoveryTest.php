<?php
// What the core recovers from by itself, seen from PHP (the same as from C and the CLI):
// a session that died between two acquisitions (the next one runs on a fresh session)
// and a MyISAM lock table marked as crashed (REPAIR TABLE, then the acquisition again).
declare(strict_types=1);

namespace MySqlLockTest;

use ItsMieger\MySqlSharedLocks\Exception\TableRepairException;
use ItsMieger\MySqlSharedLocks\SharedLock;
use MySqlLock\ConnectionException;
use MySqlLock\SessionLock;
use PHPUnit\Framework\Attributes\DataProvider;
use PHPUnit\Framework\Attributes\Test;

final class RecoveryTest extends TestCase
{
    private ?string $crashTable = null;

    protected function tearDown(): void
    {
        parent::tearDown();
        if ($this->crashTable !== null) {
            self::db()->exec("DROP TABLE IF EXISTS `{$this->crashTable}`");
            $this->crashTable = null;
        }
    }

    /** KILLs server session $id from the inspection connection and waits until it is gone. */
    private static function kill(int $id): void
    {
        self::db()->exec('KILL ' . $id);
        self::assertTrue(self::waitUntil(fn () => !self::sessionExists($id), 10), "session $id survived KILL");
    }

    /** @test */
    #[Test]
    public function sharedLockAfterItsSessionWasKilledSucceedsOnAFreshSession(): void
    {
        $first = $this->lockName('first');
        SharedLock::lock($first, 0, 30);
        $killed = (int) self::rows($first)[0]['connection_id'];
        SharedLock::unlock($first);
        self::kill($killed);

        $second = $this->lockName('second');
        SharedLock::lock($second, 0, 30);
        $rows = self::rows($second);
        $this->assertCount(1, $rows);
        $this->assertNotSame($killed, (int) $rows[0]['connection_id']);
        $this->assertTrue(self::sessionExists((int) $rows[0]['connection_id']));
    }

    /** @test */
    #[Test]
    public function sessionLockOnTheNativeConnectionAfterItsSessionWasKilledSucceedsOnAFreshSession(): void
    {
        $first = new SessionLock($this->lockName('first'));
        $this->assertTrue($first->acquire());
        $killed = (int) $first->holder();
        $first->release();
        self::kill($killed);

        $second = new SessionLock($this->lockName('second'));
        $this->assertTrue($second->acquire());
        $holder = self::getLockHolder($second->getKey());
        $this->assertNotNull($holder);
        $this->assertNotSame($killed, $holder);
    }

    public static function userConnections(): array
    {
        return ['PDO' => ['pdo'], 'mysqli' => ['mysqli']];
    }

    /**
     * The user's connection cannot be replaced: its session is the point.
     *
     * @test
     * @dataProvider userConnections
     */
    #[Test]
    #[DataProvider('userConnections')]
    public function sessionLockOnAUserConnectionWhoseSessionWasKilledThrowsConnectionException(string $kind): void
    {
        $conn = openConnection($kind);
        self::kill(connectionId($conn));
        $this->expectException(ConnectionException::class);
        (new SessionLock($this->lockName(), $conn))->acquire();
    }

    /** A MyISAM locks table of this test's own (the original package's DDL). */
    private function createCrashTable(): string
    {
        $this->crashTable = 'phpt_crash_' . getmypid();
        self::db()->exec(str_replace('`shared_locks`', "`{$this->crashTable}`", CREATE_TABLE));
        return $this->crashTable;
    }

    /** Marks $table crashed as a server crash mid-write would (the test server's script: crash-table). */
    private static function crash(string $table): void
    {
        $root = getenv('MYSQLLOCK_ROOT');
        $dir = getenv('MYSQLLOCK_TEST_DIR');
        $script = getenv('MYSQLLOCK_SERVER_SCRIPT');
        self::assertNotEmpty($script, 'MYSQLLOCK_SERVER_SCRIPT is not set (scripts/mariadb.sh or scripts/mysql.sh, from the test server\'s env file)');
        self::assertNotEmpty($root, 'MYSQLLOCK_ROOT is not set (the repository root)');
        self::assertNotEmpty($dir, 'MYSQLLOCK_TEST_DIR is not set (the test server\'s directory, written to its env file by scripts/mariadb.sh)');
        $cmd = ['bash', $script, 'crash-table', $dir, server()['db'], $table];
        [$out, $err, $rc] = self::runToEnd($cmd);
        self::assertSame(0, $rc, "crash-table failed: $out$err");
        // The checker: the server itself now refuses the table.
        $e = null;
        try {
            self::db()->query("SELECT COUNT(*) FROM `$table`")->fetchColumn();
        } catch (\PDOException $e) {
        }
        self::assertNotNull($e, "$table still works after crash-table");
        self::assertStringContainsString('crashed', $e->getMessage());
    }

    /** The names in $table (the checker reads it on the inspection connection). */
    private static function names(string $table): array
    {
        return self::db()->query("SELECT name FROM `$table` ORDER BY name")->fetchAll(\PDO::FETCH_COLUMN);
    }

    /** @test */
    #[Test]
    public function sharedLockOnACrashedTableRepairsItAndSucceeds(): void
    {
        $table = $this->createCrashTable();
        SharedLock::setTable($table);
        SharedLock::lock($this->lockName('before'), 0, 30);
        SharedLock::unlock($this->lockName('before'));
        self::crash($table);

        $name = $this->lockName('after');
        SharedLock::lock($name, 0, 30);
        $this->assertSame([$name], self::names($table), 'the table does not work after the repair');
        SharedLock::unlock($name);
        $this->assertSame([], self::names($table));
    }

    /** @test */
    #[Test]
    public function tryRepairTableRepairsACrashedTable(): void
    {
        $table = $this->createCrashTable();
        SharedLock::setTable($table);
        self::crash($table);
        SharedLock::tryRepairTable();
        $this->assertSame([], self::names($table), 'the table does not work after the repair');
    }

    /** @test */
    #[Test]
    public function tryRepairTableThatCannotRepairThrowsTableRepairExceptionWithTheServersReason(): void
    {
        // A view, which no server repairs. (An InnoDB or MEMORY table is no longer such a
        // table: MariaDB 11.8 answers REPAIR TABLE on them with status OK, where 10.11 and
        // MySQL answer with a note that the engine does not support repair.)
        $view = 'phpt_repair_view_' . getmypid();
        self::db()->exec("CREATE OR REPLACE VIEW `$view` AS SELECT 1 AS x");
        try {
            // The server's own answer, row by row ("Error: ... is not of type 'BASE TABLE'",
            // "status: Operation failed" on MariaDB), which the exception must carry.
            $rows = self::db()->query("REPAIR TABLE `$view`")->fetchAll(\PDO::FETCH_NUM);
            $answer = array_map(fn (array $row): string => "$row[2]: $row[3]", $rows);
            $this->assertNotContains('status: ok', array_map('strtolower', $answer), 'the server repaired a view: ' . implode('; ', $answer));
            SharedLock::setTable($view);
            $e = $this->catchThrown(fn () => SharedLock::tryRepairTable());
            $this->assertInstanceOf(TableRepairException::class, $e);
            $this->assertSame('Repairing the lock table failed: ' . implode('; ', $answer), $e->getMessage());
        } finally {
            self::db()->exec("DROP VIEW IF EXISTS `$view`");
        }
    }
}
