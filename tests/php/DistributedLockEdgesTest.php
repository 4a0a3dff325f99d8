<?php
// Nene\Kit\DistributedLock at its edges (issue 23): what a SQLite PDO's errors are called,
// what a MySQL PDO's lastInsertId() says after the lease statements ran on it, and the
// longest TTL the table can hold. Rows are crafted and read on a connection of the
// test's own.
declare(strict_types=1);

namespace MySqlLockTest;

use Nene\Kit\DistributedLock;
use Nene\Kit\DistributedLockException;
use PHPUnit\Framework\Attributes\DataProvider;
use PHPUnit\Framework\Attributes\Test;

final class DistributedLockEdgesTest extends TestCase
{
    private const TABLE = 'phpt_lease_edges';
    private const FENCED = 'phpt_lease_edges_fenced';
    /** An application's own table with an AUTO_INCREMENT key, on the same PDO as the leases. */
    private const ORDERS = 'phpt_lease_edges_orders';

    /** expires_at is a DATETIME: its range ends here (the lease mode's times are UTC). */
    private const DATETIME_END = '9999-12-31 23:59:59';
    /** 9999-12-31 23:59:59 UTC in seconds since 1970: no TTL above can fit. */
    private const NEVER_FITS = 253402300800;

    private ?\PDO $sqlite = null;
    private ?string $sqliteFile = null;

    public static function setUpBeforeClass(): void
    {
        $db = connect();
        $db->exec('DROP TABLE IF EXISTS ' . self::TABLE . ', ' . self::FENCED . ', ' . self::ORDERS);
        $db->exec(self::ddl(self::TABLE) . ' ENGINE=InnoDB');
        $db->exec(self::ddl(self::FENCED) . ' ENGINE=InnoDB');
        (new DistributedLock($db, self::FENCED))->upgradeTable();
        $db->exec('CREATE TABLE ' . self::ORDERS . ' (id BIGINT UNSIGNED AUTO_INCREMENT PRIMARY KEY, note VARCHAR(20)) ENGINE=InnoDB');
    }

    protected function setUp(): void
    {
        parent::setUp();
        ini_set('mysqllock.dsn', getenv('MYSQLLOCK_TEST_DSN'));
    }

    protected function tearDown(): void
    {
        ini_restore('mysqllock.dsn');
        $this->sqlite = null;
        if ($this->sqliteFile !== null) {
            @unlink($this->sqliteFile);
            $this->sqliteFile = null;
        }
        foreach ([self::TABLE, self::FENCED] as $table) {
            self::db()->prepare("DELETE FROM $table WHERE resource LIKE ?")->execute([$this->prefix() . '%']);
        }
        parent::tearDown();
    }

    public static function backends(): array
    {
        return ['server native' => ['native'], 'server PDO' => ['pdo'], 'SQLite in-memory PDO' => ['sqlite']];
    }

    public static function tables(): array
    {
        return ['seed table' => [self::TABLE], 'upgraded table' => [self::FENCED]];
    }

    // -----------------------------------------------------------------------------
    // SQLite's errors are SQLite's

    /** @test */
    #[Test]
    public function sqliteBusyIsReportedAsASqliteErrorNotAMysqlOne(): void
    {
        $this->sqliteFile = tempnam(sys_get_temp_dir(), 'phpt-lease-edges-');
        $holder = new \PDO('sqlite:' . $this->sqliteFile, null, null, [\PDO::ATTR_ERRMODE => \PDO::ERRMODE_EXCEPTION]);
        $holder->exec(self::SEED_DDL);
        $holder->exec('BEGIN EXCLUSIVE');
        // No busy wait: the locked database answers at once.
        $pdo = new \PDO('sqlite:' . $this->sqliteFile, null, null, [\PDO::ATTR_TIMEOUT => 0]);
        $lock = new DistributedLock($pdo);

        $e = $this->catchThrown(fn () => $lock->acquire($this->lockName(), 'owner-A', 30));
        $holder->exec('ROLLBACK');

        $this->assertInstanceOf(DistributedLockException::class, $e);
        $this->assertStringContainsString('database is locked (sqlite error 5)', $e->getMessage());
        $this->assertStringNotContainsStringIgnoringCase('mysql', $e->getMessage());
        $this->assertSame(5, $e->getCode());
        $this->assertInstanceOf(\PDOException::class, $e->getPrevious());
    }

    /** @test */
    #[Test]
    public function sqliteConstraintErrorIsReportedAsASqliteError(): void
    {
        $db = new \PDO('sqlite::memory:', null, null, [\PDO::ATTR_ERRMODE => \PDO::ERRMODE_EXCEPTION]);
        $db->exec(self::SEED_DDL);
        $db->exec("CREATE TRIGGER refuse BEFORE INSERT ON distributed_locks BEGIN SELECT RAISE(ABORT, 'refused by trigger'); END");
        $lock = new DistributedLock($db);

        $e = $this->catchThrown(fn () => $lock->acquire($this->lockName(), 'owner-A', 30));

        $this->assertInstanceOf(DistributedLockException::class, $e);
        $this->assertMatchesRegularExpression('/refused by trigger \(sqlite error \d+\)/', $e->getMessage());
        $this->assertStringNotContainsStringIgnoringCase('mysql', $e->getMessage());
    }

    // -----------------------------------------------------------------------------
    // A MySQL PDO's lastInsertId() is the application's

    /** @test @dataProvider tables */
    #[Test]
    #[DataProvider('tables')]
    public function lastInsertIdAfterAcquireAndRenewIsTheCallersOwnLastInsert(string $table): void
    {
        foreach ([false, true] as $emulated) {
            $pdo = connect();
            $pdo->setAttribute(\PDO::ATTR_EMULATE_PREPARES, $emulated);
            $lock = new DistributedLock($pdo, $table);
            $other = new DistributedLock(connect(), $table);
            $r = $this->lockName('e' . (int) $emulated);
            $mode = $emulated ? 'emulated prepares' : 'real prepares';

            $id = $this->insertOrder($pdo);
            $this->assertTrue($lock->acquire($r, 'owner-A', 30), $mode);
            $this->assertSame($id, $pdo->lastInsertId(), "$mode: after the first acquire (a fresh row)");
            $this->assertTrue($lock->acquire($r, 'owner-A', 30));
            $this->assertSame($id, $pdo->lastInsertId(), "$mode: after the owner's acquire again");
            $this->assertTrue($lock->renew($r, 'owner-A', 30));
            $this->assertSame($id, $pdo->lastInsertId(), "$mode: after renew");

            $id = $this->insertOrder($pdo);
            $this->assertTrue($other->acquire($r . '-b', 'owner-B', 30));
            $this->assertFalse($lock->acquire($r . '-b', 'owner-A', 30));
            $this->assertSame($id, $pdo->lastInsertId(), "$mode: after a lost acquire");
            $this->assertFalse($lock->renew($r . '-b', 'owner-A', 30));
            $this->assertSame($id, $pdo->lastInsertId(), "$mode: after a refused renew");
            $this->assertFalse($lock->acquire($r . '-b', 'owner-A', 30, 0.05));
            $this->assertSame($id, $pdo->lastInsertId(), "$mode: after an acquire that waited and lost");
            if ($table === self::FENCED) {
                $this->assertTrue($lock->acquire($r, 'owner-A', 30));
                $this->assertIsInt($lock->getToken(), "$mode: the token still comes back");
                $this->assertSame($id, $pdo->lastInsertId(), "$mode: after acquire with a token");
            }
        }
    }

    /** @test */
    #[Test]
    public function lastInsertIdStaysZeroWhenTheCallerInsertedNothing(): void
    {
        $pdo = connect();
        $lock = new DistributedLock($pdo, self::TABLE);
        $r = $this->lockName();

        $this->assertTrue($lock->acquire($r, 'owner-A', 30));
        $this->assertTrue($lock->acquire($r, 'owner-A', 30));
        $this->assertFalse($lock->acquire($r, 'owner-B', 30));
        $this->assertSame('0', $pdo->lastInsertId());
    }

    // -----------------------------------------------------------------------------
    // TTLs: as long as expires_at can hold

    /** @test @dataProvider backends */
    #[Test]
    #[DataProvider('backends')]
    public function ttlsOfYearsAreAccepted(string $backend): void
    {
        $lock = $this->lock($backend);
        $r = $this->lockName();
        $tenYears = 10 * 366 * 86400;

        $this->assertTrue($lock->acquire($r, 'owner-A', 2 * 366 * 86400));
        $this->assertEqualsWithDelta(2 * 366 * 86400, $this->secondsLeft($backend, $r), 5);
        $this->assertTrue($lock->renew($r, 'owner-A', $tenYears));
        $this->assertEqualsWithDelta($tenYears, $this->secondsLeft($backend, $r), 5);
        $this->assertFalse($lock->acquire($r, 'owner-B', 30), 'a lease of years excludes others');
        $this->assertGreaterThan($tenYears - 5, $lock->getRemaining());
    }

    /** @test @dataProvider backends */
    #[Test]
    #[DataProvider('backends')]
    public function ttlEndingAtTheEndOfTheDatetimeRangeIsAccepted(string $backend): void
    {
        $lock = $this->lock($backend);
        $r = $this->lockName();

        // A few seconds short of the end, so the clock ticking during the call cannot pass it.
        $this->assertTrue($lock->acquire($r, 'owner-A', $this->secondsToDatetimeEnd($backend) - 3));
        $this->assertStringStartsWith('9999-12-31 23:59:5', $this->expiresAt($backend, $r));
        $this->assertTrue($lock->renew($r, 'owner-A', $this->secondsToDatetimeEnd($backend) - 3));
        $this->assertStringStartsWith('9999-12-31 23:59:5', $this->expiresAt($backend, $r));
        $this->assertTrue($lock->isHeld($r));
        $this->assertTrue($lock->release($r, 'owner-A'));
    }

    /** @test */
    #[Test]
    public function ttlEndingAtTheEndOfTheDatetimeRangeIsAcceptedOnAnUpgradedTable(): void
    {
        $lock = new DistributedLock(connect(), self::FENCED);
        $r = $this->lockName();

        $this->assertTrue($lock->acquire($r, 'owner-A', $this->secondsToDatetimeEnd('pdo') - 3));
        $this->assertIsInt($lock->getToken());
        $this->assertStringStartsWith('9999-12-31 23:59:5', $this->expiresAt('pdo', $r, self::FENCED));
        $this->assertTrue($lock->renew($r, 'owner-A', $this->secondsToDatetimeEnd('pdo') - 3));
        $this->assertTrue($lock->release($r, 'owner-A'));
    }

    /** @test @dataProvider backends */
    #[Test]
    #[DataProvider('backends')]
    public function ttlEndingPastTheDatetimeRangeIsRefusedAndChangesNothing(string $backend): void
    {
        $lock = $this->lock($backend);
        $r = $this->lockName();
        $mine = $this->lockName('mine');
        $this->assertTrue($lock->acquire($mine, 'owner-A', 30));
        $before = [$this->expiresAt($backend, $r), $this->expiresAt($backend, $mine)];
        $past = $this->secondsToDatetimeEnd($backend) + 60;
        $calls = [
            'acquire of a free resource' => fn () => $lock->acquire($r, 'owner-A', $past),
            'acquire again by its owner' => fn () => $lock->acquire($mine, 'owner-A', $past),
            'renew' => fn () => $lock->renew($mine, 'owner-A', $past),
            'acquire, more than fits after 1970' => fn () => $lock->acquire($r, 'owner-A', self::NEVER_FITS),
            'renew, more than fits after 1970' => fn () => $lock->renew($mine, 'owner-A', self::NEVER_FITS),
        ];
        foreach ($calls as $what => $call) {
            $e = $this->catchThrown($call);
            $this->assertInstanceOf(\InvalidArgumentException::class, $e, "$what: " . get_class($e) . ': ' . $e->getMessage());
            $this->assertStringContainsString(self::DATETIME_END, $e->getMessage(), $what);
        }

        $this->assertSame($before, [$this->expiresAt($backend, $r), $this->expiresAt($backend, $mine)]);
        $this->assertTrue($lock->isHeld($mine), 'a refused TTL ended the lease');
    }

    /** @test */
    #[Test]
    public function ttlEndingPastTheDatetimeRangeIsRefusedOnAnUpgradedTable(): void
    {
        $lock = new DistributedLock(connect(), self::FENCED);
        $r = $this->lockName();
        $this->assertTrue($lock->acquire($r, 'owner-A', 30));
        $before = $this->expiresAt('pdo', $r, self::FENCED);

        foreach (['acquire', 'renew'] as $method) {
            $e = $this->catchThrown(fn () => $lock->$method($r, 'owner-A', $this->secondsToDatetimeEnd('pdo') + 60));
            $this->assertInstanceOf(\InvalidArgumentException::class, $e, "$method: " . $e->getMessage());
            $this->assertStringContainsString(self::DATETIME_END, $e->getMessage());
        }
        $this->assertSame($before, $this->expiresAt('pdo', $r, self::FENCED));
    }

    /** @test */
    #[Test]
    public function ttlPastTheDatetimeRangeIsRefusedInAnySqlMode(): void
    {
        $pdo = connect("SET SESSION sql_mode = ''");
        $lock = new DistributedLock($pdo, self::TABLE);
        $r = $this->lockName();
        $this->assertTrue($lock->acquire($r, 'owner-A', 30));
        $before = $this->expiresAt('pdo', $r);

        foreach (['acquire', 'renew'] as $method) {
            $e = $this->catchThrown(fn () => $lock->$method($r, 'owner-A', $this->secondsToDatetimeEnd('pdo') + 60));
            $this->assertInstanceOf(\InvalidArgumentException::class, $e, "$method: " . $e->getMessage());
        }
        $this->assertSame($before, $this->expiresAt('pdo', $r), 'a non-strict sql_mode let an overflow through');
    }

    // -----------------------------------------------------------------------------
    // Helpers

    private static function ddl(string $table): string
    {
        return str_replace('distributed_locks', $table, self::SEED_DDL);
    }

    /** Inserts a row into the application's table through $pdo; its id. */
    private function insertOrder(\PDO $pdo): string
    {
        $pdo->prepare('INSERT INTO ' . self::ORDERS . ' (note) VALUES (?)')->execute(['order']);
        $id = $pdo->lastInsertId();
        $this->assertNotSame('0', $id);
        return $id;
    }

    private function sqlite(): \PDO
    {
        if ($this->sqlite === null) {
            $this->sqlite = new \PDO('sqlite::memory:', null, null, [\PDO::ATTR_ERRMODE => \PDO::ERRMODE_EXCEPTION]);
            $this->sqlite->exec(self::SEED_DDL);
        }
        return $this->sqlite;
    }

    private function lock(string $backend): DistributedLock
    {
        switch ($backend) {
            case 'native':
                return new DistributedLock(null, self::TABLE);
            case 'pdo':
                return new DistributedLock(connect(), self::TABLE);
            default:
                return new DistributedLock($this->sqlite());
        }
    }

    private function raw(string $backend): \PDO
    {
        return $backend === 'sqlite' ? $this->sqlite() : self::db();
    }

    /** Whole seconds from the database clock (UTC) to the end of the DATETIME range. */
    private function secondsToDatetimeEnd(string $backend): int
    {
        $sql = $backend === 'sqlite'
            ? "SELECT CAST(round((julianday('" . self::DATETIME_END . "') - julianday('now')) * 86400) AS INTEGER)"
            : "SELECT TIMESTAMPDIFF(SECOND, UTC_TIMESTAMP(), '" . self::DATETIME_END . "')";
        return (int) $this->raw($backend)->query($sql)->fetchColumn();
    }

    /** expires_at of $resource as text; null when there is no row. */
    private function expiresAt(string $backend, string $resource, ?string $table = null): ?string
    {
        $table ??= $backend === 'sqlite' ? 'distributed_locks' : self::TABLE;
        $st = $this->raw($backend)->prepare("SELECT CAST(expires_at AS CHAR) FROM $table WHERE resource = ?");
        $st->execute([$resource]);
        $at = $st->fetchColumn();
        return $at === false ? null : $at;
    }

    private function secondsLeft(string $backend, string $resource): int
    {
        $table = $backend === 'sqlite' ? 'distributed_locks' : self::TABLE;
        $left = $backend === 'sqlite'
            ? "CAST(round((julianday(expires_at) - julianday('now')) * 86400) AS INTEGER)"
            : 'TIMESTAMPDIFF(SECOND, UTC_TIMESTAMP(), expires_at)';
        $st = $this->raw($backend)->prepare("SELECT $left FROM $table WHERE resource = ?");
        $st->execute([$resource]);
        return (int) $st->fetchColumn();
    }
}
