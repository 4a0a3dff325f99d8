<?php
// Nene\Kit\DistributedLock (lease mode): the seed's examples verbatim and its semantics,
// each case against three backends: the test server (MariaDB or MySQL) through the
// extension's own connection (mysqllock.dsn), the test server through a PDO, and SQLite
// in memory through a PDO (the seed's testing workflow). Rows are crafted and checked with plain SQL on a connection of
// the test's own, never through the class under test.
declare(strict_types=1);

namespace MySqlLockTest;

use Nene\Kit\DistributedLock;
use Nene\Kit\DistributedLockException;
use PHPUnit\Framework\Attributes\DataProvider;
use PHPUnit\Framework\Attributes\Test;

final class DistributedLockTest extends TestCase
{
    /** The test server's tables of these tests (the core's tests use distributed_locks*). */
    private const TABLE = 'phpt_leases';
    private const FENCED = 'phpt_leases_fenced';
    private const MYISAM = 'phpt_leases_myisam';
    private const REFUSING = 'phpt_leases_refusing';
    private const CREATED = 'phpt_leases_created';

    /** The seed's own resource names, used verbatim by its examples. */
    private const SEED_RESOURCES = ['report:monthly', 'job:import', 'job:heavy', 'job:x'];

    private ?\PDO $sqlite = null;
    private ?string $sqliteFile = null;

    public static function setUpBeforeClass(): void
    {
        $db = connect();
        $db->exec('DROP TABLE IF EXISTS ' . self::TABLE . ', ' . self::MYISAM);
        $db->exec(self::ddl(self::TABLE) . ' ENGINE=InnoDB');
        // latin1: MyISAM keys hold 1000 bytes, less than VARCHAR(255) in utf8mb4 (MySQL's
        // default character set; the test server's MariaDB database is latin1).
        $db->exec(self::ddl(self::MYISAM) . ' ENGINE=MyISAM DEFAULT CHARSET=latin1');
    }

    protected function setUp(): void
    {
        parent::setUp();
        // `new DistributedLock()` verbatim runs on this test table.
        ini_set('mysqllock.dsn', getenv('MYSQLLOCK_TEST_DSN') . '?lease_table=' . self::TABLE);
    }

    protected function tearDown(): void
    {
        ini_restore('mysqllock.dsn');
        $this->sqlite = null;
        if ($this->sqliteFile !== null) {
            @unlink($this->sqliteFile);
            $this->sqliteFile = null;
        }
        $names = array_merge(self::SEED_RESOURCES, [$this->prefix() . '%']);
        $st = self::db()->prepare('DELETE FROM `' . self::TABLE . '` WHERE resource IN (?, ?, ?, ?) OR resource LIKE ?');
        $st->execute($names);
        parent::tearDown();
    }

    public static function backends(): array
    {
        return ['server native' => ['native'], 'server PDO' => ['pdo'], 'SQLite in-memory PDO' => ['sqlite']];
    }

    public static function serverBackends(): array
    {
        return ['server native' => ['native'], 'server PDO' => ['pdo']];
    }

    public static function pdoBackends(): array
    {
        return ['server PDO' => ['pdo'], 'SQLite in-memory PDO' => ['sqlite']];
    }

    // -----------------------------------------------------------------------------
    // The seed's examples, verbatim

    /** @test @dataProvider backends */
    #[Test]
    #[DataProvider('backends')]
    public function basicUsageRunsTheExclusiveWorkAndReleasesTheLock(string $backend): void
    {
        $lock = $this->lock($backend);
        $worked = false;

        $owner = bin2hex(random_bytes(8)); // unique per process/request

        if ($lock->acquire('report:monthly', $owner, ttlSeconds: 30)) {
            try {
                // ... do the exclusive work ...
                $worked = $this->row($backend, 'report:monthly')['owner'] === $owner;
            } finally {
                $lock->release('report:monthly', $owner);
            }
        } else {
            // Another process holds the lock — skip or retry later
        }

        $this->assertTrue($worked, 'the work did not run under a lease of $owner');
        $this->assertNull($this->row($backend, 'report:monthly'), 'release() left the row');
    }

    /** @test @dataProvider backends */
    #[Test]
    #[DataProvider('backends')]
    public function staleLockOfACrashedProcessIsReclaimed(string $backend): void
    {
        $lock = $this->lock($backend);
        // Stale lock left by crashed process:
        // owner='worker-A', expires_at='2024-01-01 00:00:00' (past)
        $this->insertRow($backend, 'job:import', 'worker-A', "'2024-01-01 00:00:00'");

        $result = $lock->acquire('job:import', 'worker-B', 30);
        // → true (expired lock claimed by worker-B)

        $this->assertTrue($result);
        $this->assertSame('worker-B', $this->row($backend, 'job:import')['owner']);
    }

    /** @test @dataProvider backends */
    #[Test]
    #[DataProvider('backends')]
    public function renewingEachIterationKeepsALongJobsLease(string $backend): void
    {
        $lock = $this->lock($backend);
        $owner = bin2hex(random_bytes(8));
        $items = [1, 2, 3];
        $renewed = [];
        $process = function (int $item) use ($backend, $owner): void {
            $this->assertSame($owner, $this->row($backend, 'job:heavy')['owner'], "item $item ran without the lease");
        };

        $lock->acquire('job:heavy', $owner, 60);
        foreach ($items as $item) {
            $process($item);
            $renewed[] = $lock->renew('job:heavy', $owner, 60); // reset TTL each iteration
        }
        $lock->release('job:heavy', $owner);

        $this->assertSame([true, true, true], $renewed);
        $this->assertNull($this->row($backend, 'job:heavy'));
    }

    /** @test */
    #[Test]
    public function seedsTestingWorkflowReclaimsACraftedStaleRowWithoutSleeping(): void
    {
        $db = new \PDO('sqlite::memory:');
        // ... create table ...
        $db->exec(self::SEED_DDL);
        $db->exec("INSERT INTO distributed_locks (resource, owner, expires_at, acquired_at)
VALUES ('job:x', 'owner-A', '2000-01-01 00:00:00', '2000-01-01 00:00:00')");
        $lock = new DistributedLock($db);
        $result = $lock->acquire('job:x', 'owner-B', 30); // stale reclaim → true

        $this->assertTrue($result);
        $this->assertSame('owner-B', $db->query("SELECT owner FROM distributed_locks WHERE resource = 'job:x'")->fetchColumn());
    }

    // -----------------------------------------------------------------------------
    // The seed's error semantics table

    /** @test @dataProvider backends */
    #[Test]
    #[DataProvider('backends')]
    public function releaseAndRenewAreTrueForTheCurrentOwner(string $backend): void
    {
        $lock = $this->lock($backend);
        $r = $this->lockName();
        $this->assertTrue($lock->acquire($r, 'owner-A', 30));
        $this->assertTrue($lock->renew($r, 'owner-A', 30));
        $this->assertTrue($lock->release($r, 'owner-A'));
        $this->assertNull($this->row($backend, $r));
    }

    /** @test @dataProvider backends */
    #[Test]
    #[DataProvider('backends')]
    public function releaseAndRenewAreFalseForAnotherOwnerAndLeaveTheLeaseAlone(string $backend): void
    {
        $lock = $this->lock($backend);
        $r = $this->lockName();
        $this->insertRow($backend, $r, 'owner-A', $this->inSeconds($backend, 100));
        $before = $this->row($backend, $r);

        $this->assertFalse($lock->release($r, 'owner-B'));
        $this->assertFalse($lock->renew($r, 'owner-B', 30));
        // The row itself, not the seconds left, which the clock may have taken one from
        // between the two looks.
        $after = $this->row($backend, $r);
        unset($before['left'], $after['left']);
        $this->assertSame($before, $after);
    }

    /** @test @dataProvider backends */
    #[Test]
    #[DataProvider('backends')]
    public function releaseAndRenewAreFalseForAnExpiredLease(string $backend): void
    {
        $lock = $this->lock($backend);
        $r = $this->lockName();
        $this->insertRow($backend, $r, 'owner-A', "'2000-01-01 00:00:00'");

        $this->assertFalse($lock->release($r, 'owner-A'));
        $this->assertFalse($lock->renew($r, 'owner-A', 30));
        $this->assertSame('2000-01-01 00:00:00', $this->row($backend, $r)['expires_at']);
    }

    /** @test @dataProvider backends */
    #[Test]
    #[DataProvider('backends')]
    public function releaseAndRenewAreFalseWhenThereIsNoLease(string $backend): void
    {
        $lock = $this->lock($backend);
        $r = $this->lockName();
        $this->assertFalse($lock->release($r, 'owner-A'));
        $this->assertFalse($lock->renew($r, 'owner-A', 30));
        $this->assertNull($this->row($backend, $r), 'renew() created a row');
    }

    // -----------------------------------------------------------------------------
    // Further semantics

    /** @test @dataProvider backends */
    #[Test]
    #[DataProvider('backends')]
    public function isHeldIsTrueOnlyWhileAnUnexpiredLeaseExists(string $backend): void
    {
        $lock = $this->lock($backend);
        [$free, $live, $expired] = [$this->lockName('free'), $this->lockName('live'), $this->lockName('expired')];
        $this->insertRow($backend, $live, 'owner-A', $this->inSeconds($backend, 100));
        $this->insertRow($backend, $expired, 'owner-A', "'2000-01-01 00:00:00'");

        $this->assertFalse($lock->isHeld($free));
        $this->assertTrue($lock->isHeld($live));
        $this->assertFalse($lock->isHeld($expired));
    }

    /** @test @dataProvider backends */
    #[Test]
    #[DataProvider('backends')]
    public function anotherOwnerCannotAcquireAnUnexpiredLease(string $backend): void
    {
        $lock = $this->lock($backend);
        $r = $this->lockName();
        $this->assertTrue($lock->acquire($r, 'owner-A', 30));
        $this->assertFalse($lock->acquire($r, 'owner-B', 30));
        $this->assertSame('owner-A', $this->row($backend, $r)['owner']);
    }

    /** @test @dataProvider backends */
    #[Test]
    #[DataProvider('backends')]
    public function acquireBySameOwnerRestartsTheTtl(string $backend): void
    {
        $lock = $this->lock($backend);
        $r = $this->lockName();
        $this->insertRow($backend, $r, 'owner-A', $this->inSeconds($backend, 5));

        $this->assertTrue($lock->acquire($r, 'owner-A', 300));

        $left = $this->row($backend, $r)['left'];
        $this->assertGreaterThan(200, $left, 'the lease was not restarted with the new TTL');
        $this->assertLessThanOrEqual(301, $left);
    }

    /** @test @dataProvider backends */
    #[Test]
    #[DataProvider('backends')]
    public function ownersCompareCaseSensitively(string $backend): void
    {
        $lock = $this->lock($backend);
        $r = $this->lockName();
        $this->assertTrue($lock->acquire($r, 'Worker-1', 30));

        $this->assertFalse($lock->acquire($r, 'worker-1', 30));
        $this->assertFalse($lock->release($r, 'worker-1'));
        $this->assertFalse($lock->renew($r, 'WORKER-1', 30));
        $this->assertSame('Worker-1', $this->row($backend, $r)['owner']);
    }

    /** @test @dataProvider backends */
    #[Test]
    #[DataProvider('backends')]
    public function badInputThrowsInvalidArgumentExceptionAndChangesNothing(string $backend): void
    {
        $lock = $this->lock($backend);
        $r = $this->lockName();
        $this->insertRow($backend, $r, 'owner-A', $this->inSeconds($backend, 100));
        $before = $this->leaseRows($backend);
        $long = str_repeat('x', 256);
        $calls = [
            'empty resource' => fn () => $lock->acquire('', 'owner-B', 30),
            'empty owner' => fn () => $lock->acquire($r, '', 30),
            'resource longer than the column' => fn () => $lock->acquire($this->lockName($long), 'owner-B', 30),
            'owner longer than the column' => fn () => $lock->acquire($r, $long, 30),
            'zero TTL' => fn () => $lock->acquire($r, 'owner-A', 0),
            'negative TTL' => fn () => $lock->acquire($r, 'owner-A', -5),
            'absurd TTL' => fn () => $lock->acquire($r, 'owner-A', PHP_INT_MAX),
            'negative wait' => fn () => $lock->acquire($r, 'owner-A', 30, -1.0),
            'renew with zero TTL' => fn () => $lock->renew($r, 'owner-A', 0),
            'release of an empty resource' => fn () => $lock->release('', 'owner-A'),
            'empty owner for release' => fn () => $lock->release($r, ''),
            'isHeld of an empty resource' => fn () => $lock->isHeld(''),
            'owner of an empty resource' => fn () => $lock->owner(''),
            'owner of a resource longer than the column' => fn () => $lock->owner($this->lockName($long)),
            'isHeldBy of an empty owner' => fn () => $lock->isHeldBy($r, ''),
            'isHeldBy of an empty resource' => fn () => $lock->isHeldBy('', 'owner-A'),
            'forceRelease of an empty resource' => fn () => $lock->forceRelease(''),
            'TTL over MAX_TTL' => fn () => $lock->acquire($r, 'owner-A', DistributedLock::MAX_TTL + 1),
        ];
        foreach ($calls as $what => $call) {
            $e = $this->catchThrown($call);
            $this->assertInstanceOf(\InvalidArgumentException::class, $e, "$what: " . get_class($e) . ': ' . $e->getMessage());
            $this->assertStringContainsString('DistributedLock::', $e->getMessage(), $what);
        }
        $this->assertSame($before, $this->leaseRows($backend), 'bad input changed the table');
    }

    /** @test @dataProvider backends */
    #[Test]
    #[DataProvider('backends')]
    public function missingTableNamesTheDdlToCreateIt(string $backend): void
    {
        $lock = $this->lock($backend, 'phpt_no_such_lease_table');
        $e = $this->catchThrown(fn () => $lock->acquire($this->lockName(), 'owner-A', 30));

        $this->assertInstanceOf(DistributedLockException::class, $e);
        $this->assertInstanceOf(\RuntimeException::class, $e);
        $this->assertStringContainsString('phpt_no_such_lease_table does not exist', $e->getMessage());
        $this->assertStringContainsString('CREATE TABLE `phpt_no_such_lease_table`', $e->getMessage());
        $this->assertStringContainsString('createTable()', $e->getMessage());
        if ($backend === 'sqlite') {
            $this->assertStringNotContainsString('mysqllock init', $e->getMessage(), 'the CLI cannot create a SQLite table');
        } else {
            $this->assertStringContainsString('mysqllock init --lease', $e->getMessage());
        }
    }

    /** @test @dataProvider serverBackends */
    #[Test]
    #[DataProvider('serverBackends')]
    public function myisamTableIsRefusedAndNothingWritten(string $backend): void
    {
        $lock = $this->lock($backend, self::MYISAM);
        $r = $this->lockName();
        $e = $this->catchThrown(fn () => $lock->acquire($r, 'owner-A', 30));

        $this->assertInstanceOf(DistributedLockException::class, $e);
        $this->assertStringContainsString('MyISAM', $e->getMessage());
        $this->assertStringContainsString('ENGINE=InnoDB', $e->getMessage());
        $st = self::db()->prepare('SELECT COUNT(*) FROM `' . self::MYISAM . '` WHERE resource = ?');
        $st->execute([$r]);
        $this->assertSame(0, (int) $st->fetchColumn());
    }

    /** @test @dataProvider pdoBackends */
    #[Test]
    #[DataProvider('pdoBackends')]
    public function databaseErrorCarriesThePdoExceptionAsPrevious(string $backend): void
    {
        if ($backend === 'sqlite') {
            // No key on resource: SQLite refuses the upsert's ON CONFLICT(resource).
            $db = $this->sqlite();
            $db->exec('CREATE TABLE ' . self::REFUSING . ' (resource TEXT, owner TEXT, expires_at TEXT, acquired_at TEXT)');
            $lock = new DistributedLock($db, self::REFUSING);
        } else {
            $db = self::db();
            $db->exec('DROP TABLE IF EXISTS ' . self::REFUSING);
            $db->exec(self::ddl(self::REFUSING) . ' ENGINE=InnoDB');
            $db->exec('CREATE TRIGGER ' . self::REFUSING . "_insert BEFORE INSERT ON " . self::REFUSING . " FOR EACH ROW SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'refused by trigger'");
            $lock = $this->lock($backend, self::REFUSING);
        }
        $e = $this->catchThrown(fn () => $lock->acquire($this->lockName(), 'owner-A', 30));

        $this->assertInstanceOf(DistributedLockException::class, $e);
        $this->assertInstanceOf(\PDOException::class, $e->getPrevious(), 'getPrevious() of ' . $e->getMessage());
        if ($backend === 'pdo') {
            $this->assertStringContainsString('refused by trigger', $e->getMessage());
            $this->assertSame(1644, $e->getCode());
        }
    }

    /** @test @dataProvider pdoBackends */
    #[Test]
    #[DataProvider('pdoBackends')]
    public function pdoNotInExceptionModeWorksAndKeepsItsMode(string $backend): void
    {
        foreach ([\PDO::ERRMODE_SILENT, \PDO::ERRMODE_WARNING] as $mode) {
            $pdo = $backend === 'sqlite' ? $this->sqlite() : connect();
            $pdo->setAttribute(\PDO::ATTR_ERRMODE, $mode);
            $lock = new DistributedLock($pdo, $this->table($backend));
            $r = $this->lockName("mode$mode");

            $this->assertTrue($lock->acquire($r, 'owner-A', 30));
            $this->assertFalse($lock->acquire($r, 'owner-B', 30));
            $this->assertTrue($lock->isHeld($r));
            $this->assertSame($mode, $pdo->getAttribute(\PDO::ATTR_ERRMODE));

            $missing = new DistributedLock($pdo, 'phpt_no_such_lease_table');
            $e = $this->catchThrown(fn () => $missing->acquire($r, 'owner-A', 30));
            $this->assertInstanceOf(DistributedLockException::class, $e);
            $this->assertSame($mode, $pdo->getAttribute(\PDO::ATTR_ERRMODE));
        }
    }

    // -----------------------------------------------------------------------------
    // Beyond the seed: who holds what, force release, a replaced PDO

    /** @test @dataProvider backends */
    #[Test]
    #[DataProvider('backends')]
    public function ownerNamesTheHolderOfALiveLeaseOnly(string $backend): void
    {
        $lock = $this->lock($backend);
        [$free, $live, $expired, $mine] = [$this->lockName('free'), $this->lockName('live'), $this->lockName('expired'), $this->lockName('mine')];
        $this->insertRow($backend, $live, 'owner-A', $this->inSeconds($backend, 100));
        $this->insertRow($backend, $expired, 'owner-A', "'2000-01-01 00:00:00'");

        $this->assertNull($lock->owner($free));
        $this->assertSame('owner-A', $lock->owner($live));
        $this->assertNull($lock->owner($expired), 'an expired row named its old owner');
        $this->assertTrue($lock->acquire($mine, 'Owner B ', 30));
        $this->assertSame('Owner B ', $lock->owner($mine), 'the owner is not as stored');
        $this->assertTrue($lock->release($mine, 'Owner B '));
        $this->assertNull($lock->owner($mine));
    }

    /** @test @dataProvider backends */
    #[Test]
    #[DataProvider('backends')]
    public function isHeldByIsTrueOnlyForTheExactOwnerOfALiveLease(string $backend): void
    {
        $lock = $this->lock($backend);
        [$r, $expired] = [$this->lockName(), $this->lockName('expired')];
        $this->assertTrue($lock->acquire($r, 'Worker-1', 30));
        $this->insertRow($backend, $expired, 'Worker-1', "'2000-01-01 00:00:00'");

        $this->assertTrue($lock->isHeldBy($r, 'Worker-1'));
        foreach (['worker-1', 'WORKER-1', 'Worker-1 ', 'Worker-'] as $other) {
            $this->assertFalse($lock->isHeldBy($r, $other), "\"$other\" was taken for \"Worker-1\"");
        }
        $this->assertFalse($lock->isHeldBy($expired, 'Worker-1'), 'an expired lease is nobody\'s');
        $this->assertFalse($lock->isHeldBy($this->lockName('free'), 'Worker-1'));
    }

    /**
     * On the seed's whole-second table a lease lives through the second expires_at names:
     * owner() and isHeldBy() agree with acquire() there (the Symfony bridge's own read,
     * `expires_at > UTC_TIMESTAMP(6)`, once took such a lease for ended).
     *
     * @test @dataProvider serverBackends
     */
    #[Test]
    #[DataProvider('serverBackends')]
    public function readsAgreeWithAcquireOnALeaseInItsLastSecond(string $backend): void
    {
        $lock = $this->lock($backend);
        $r = $this->lockName();
        for ($try = 0; $try < 5; $try++) {
            [$second, $micros] = self::db()->query('SELECT UTC_TIMESTAMP(), MICROSECOND(UTC_TIMESTAMP(6))')->fetch(\PDO::FETCH_NUM);
            if ((int) $micros > 600000) {
                usleep(450000); // start early in a second
                continue;
            }
            self::db()->prepare('DELETE FROM `' . self::TABLE . '` WHERE resource = ?')->execute([$r]);
            $this->insertRow($backend, $r, 'owner-A', "'$second'");
            $verdicts = [$lock->owner($r), $lock->isHeldBy($r, 'owner-A'), $lock->isHeld($r), $lock->acquire($r, 'owner-B', 30)];
            if (self::db()->query('SELECT UTC_TIMESTAMP()')->fetchColumn() !== $second) {
                continue; // the second ended meanwhile: the verdicts may differ rightly
            }
            $this->assertSame(['owner-A', true, true, false], $verdicts);
            return;
        }
        $this->fail('five tries never ran within one second');
    }

    /** @test @dataProvider backends */
    #[Test]
    #[DataProvider('backends')]
    public function forceReleaseEndsWhoeversLiveLeaseItIs(string $backend): void
    {
        $lock = $this->lock($backend);
        [$r, $free, $expired] = [$this->lockName(), $this->lockName('free'), $this->lockName('expired')];
        $this->insertRow($backend, $r, 'owner-A', $this->inSeconds($backend, 100));
        $this->insertRow($backend, $expired, 'owner-A', "'2000-01-01 00:00:00'");

        $this->assertTrue($lock->forceRelease($r));
        $this->assertNull($this->row($backend, $r), 'the row is left, unlike after the owner\'s release');
        $this->assertFalse($lock->isHeld($r));
        $this->assertFalse($lock->release($r, 'owner-A'), 'the owner still held it');
        $this->assertTrue($lock->acquire($r, 'owner-B', 30));
        $this->assertFalse($lock->forceRelease($free), 'ended a lease where there was none');
        $this->assertFalse($lock->forceRelease($expired), 'an expired lease counted as live');
    }

    /** @test @dataProvider backends */
    #[Test]
    #[DataProvider('backends')]
    public function leasesUnderAPrefixAreListedAndEndedExactlyAndNoneElse(string $backend): void
    {
        $lock = $this->lock($backend);
        // LIKE's wildcards in the prefix match only themselves, a case-insensitive
        // collation does not widen it, an expired lease is not live.
        $base = $this->lockName('pre');
        $prefix = "{$base}_%:";
        $under = ["{$prefix}a", "{$prefix}b"];
        $others = [strtoupper($prefix) . 'c', "{$base}xy:d", $this->lockName('other') . ':e'];
        // The last one taken is this object's current lease: under the prefix.
        foreach (array_merge($others, $under) as $i => $resource) {
            $this->assertTrue($lock->acquire($resource, "owner-$i", 30), $resource);
        }
        $this->insertRow($backend, "{$prefix}expired", 'owner-x', "'2000-01-01 00:00:00'");
        $this->assertSame($under, $lock->heldWithPrefix($prefix));
        $this->assertSame(2, $lock->forceReleaseWithPrefix($prefix));
        $this->assertSame([], $lock->heldWithPrefix($prefix));
        $this->assertSame(0.0, $lock->getRemaining(), "this object's own lease under the prefix ended too");
        foreach ($others as $resource) {
            $this->assertTrue($lock->isHeld($resource), "$resource was ended");
        }
        $e = $this->catchThrown(fn () => $lock->forceReleaseWithPrefix(''));
        $this->assertInstanceOf(\InvalidArgumentException::class, $e);
        $this->assertStringContainsString('an empty prefix would name every lease of the table', $e->getMessage());
    }

    /** @test @dataProvider backends */
    #[Test]
    #[DataProvider('backends')]
    public function forceReleaseOfThisObjectsLeaseEndsItsRemainingTime(string $backend): void
    {
        $lock = $this->lock($backend);
        $r = $this->lockName();
        $this->assertTrue($lock->acquire($r, 'owner-A', 30));
        $this->assertGreaterThan(0.0, $lock->getRemaining());
        $this->assertTrue($lock->forceRelease($r));
        $this->assertSame(0.0, $lock->getRemaining());
        $this->assertFalse($lock->renew($r, 'owner-A', 30));
    }

    /** @test @dataProvider serverBackends */
    #[Test]
    #[DataProvider('serverBackends')]
    public function forceReleaseOnAnUpgradedTableKeepsTheRowSoTokensCountOn(string $backend): void
    {
        $db = self::db();
        $db->exec('DROP TABLE IF EXISTS ' . self::FENCED);
        $db->exec(self::ddl(self::FENCED) . ' ENGINE=InnoDB');
        $lock = $this->lock($backend, self::FENCED);
        $lock->upgradeTable();
        $r = $this->lockName();

        $this->assertTrue($lock->acquire($r, 'owner-A', 30));
        $first = $lock->getToken();
        $this->assertTrue($lock->forceRelease($r));
        $st = $db->prepare('SELECT owner, expires_at <= UTC_TIMESTAMP(6) FROM ' . self::FENCED . ' WHERE resource = ?');
        $st->execute([$r]);
        $this->assertSame(['owner-A', 1], array_map(fn ($v) => is_numeric($v) ? (int) $v : $v, $st->fetch(\PDO::FETCH_NUM)), 'the row is not kept, ended');
        $this->assertNull($lock->owner($r));
        $this->assertTrue($lock->acquire($r, 'owner-B', 30));
        $this->assertGreaterThan($first, $lock->getToken());
    }

    /** @test */
    #[Test]
    public function aPdoFromReconnectShowsAFreshLastInsertIdNotTheLostPdosOrTheLeasesOwn(): void
    {
        $pdo = connect();
        $fresh = null;
        $lock = new DistributedLock($pdo, self::TABLE, function () use (&$fresh): \PDO {
            return $fresh = connect();
        });
        $this->assertTrue($lock->acquire($this->lockName(), 'owner-A', 30));
        $id = (int) $pdo->query('SELECT CONNECTION_ID()')->fetchColumn();
        // The application's last insert, the last statement on $pdo before it is lost.
        $pdo->exec('CREATE TEMPORARY TABLE orders (id INT AUTO_INCREMENT PRIMARY KEY, note INT)');
        $pdo->exec('INSERT INTO orders (note) VALUES (1), (2)');
        $this->assertNotSame('0', $pdo->lastInsertId());
        $this->killSession($id);

        $this->assertTrue($lock->acquire($this->lockName('b'), 'owner-A', 30));
        $this->assertInstanceOf(\PDO::class, $fresh, '$reconnect was not called');
        $this->assertSame('0', $fresh->lastInsertId(), 'the new PDO shows an id it never made');
    }

    /** @test */
    #[Test]
    public function aLostPdoIsReplacedByReconnectAndTheStatementSentAgain(): void
    {
        $pdo = connect();
        $calls = 0;
        $lock = new DistributedLock($pdo, self::TABLE, function () use (&$calls): \PDO {
            $calls++;
            return connect();
        });
        $r = $this->lockName();
        $this->assertTrue($lock->acquire($r, 'owner-A', 30));
        $this->killSessionOf($pdo);

        $this->assertTrue($lock->acquire($this->lockName('b'), 'owner-A', 30), 'the statement after the loss failed');
        $this->assertSame(1, $calls, '$reconnect was not called exactly once');
        $this->assertSame('owner-A', $lock->owner($r));
        $this->assertSame('owner-A', $this->row('pdo', $this->lockName('b'))['owner']);
    }

    /** @test */
    #[Test]
    public function withoutReconnectALostPdoFailsWithTheDriversError(): void
    {
        $pdo = connect();
        $lock = new DistributedLock($pdo, self::TABLE);
        $this->assertTrue($lock->acquire($this->lockName(), 'owner-A', 30));
        $this->killSessionOf($pdo);

        $e = $this->catchThrown(fn () => $lock->owner($this->lockName()));
        $this->assertInstanceOf(DistributedLockException::class, $e);
        $this->assertContains($e->getCode(), [2006, 2013], $e->getMessage());
        $this->assertInstanceOf(\PDOException::class, $e->getPrevious());
    }

    /** @test */
    #[Test]
    public function whatReconnectThrowsIsThePreviousOfTheFailure(): void
    {
        $pdo = connect();
        $refusal = new \RuntimeException('no server today');
        $lock = new DistributedLock($pdo, self::TABLE, fn () => throw $refusal);
        $this->assertFalse($lock->isHeld($this->lockName()));
        $this->killSessionOf($pdo);

        $e = $this->catchThrown(fn () => $lock->isHeld($this->lockName()));
        $this->assertInstanceOf(DistributedLockException::class, $e);
        $this->assertSame($refusal, $e->getPrevious());
        $this->assertStringContainsString('no server today', $e->getMessage());

        $lock = new DistributedLock($pdo = connect(), self::TABLE, fn () => 'not a PDO');
        $this->assertFalse($lock->isHeld($this->lockName()));
        $this->killSessionOf($pdo);
        $e = $this->catchThrown(fn () => $lock->isHeld($this->lockName()));
        $this->assertInstanceOf(DistributedLockException::class, $e);
        $this->assertStringContainsString('$reconnect returned string, not a PDO', $e->getMessage());
    }

    /** @test */
    #[Test]
    public function reconnectWithoutAPdoIsRefused(): void
    {
        $e = $this->catchThrown(fn () => new DistributedLock(null, self::TABLE, fn () => connect()));
        $this->assertInstanceOf(\InvalidArgumentException::class, $e);
        $this->assertStringContainsString('$reconnect', $e->getMessage());
        $this->assertInstanceOf(\TypeError::class, $this->catchThrown(fn () => new DistributedLock(connect(), self::TABLE, 'no_such_function')));
    }

    /** @test @dataProvider serverBackends */
    #[Test]
    #[DataProvider('serverBackends')]
    public function maxTtlIsWhereTheDatetimeRangeEndsAndNothingPastItIsTaken(string $backend): void
    {
        $lock = $this->lock($backend);
        $r = $this->lockName();
        // 9999-12-31 23:59:59 UTC counted from 1970: no lease can end later (expires_at is a DATETIME).
        $this->assertSame(253402300799, DistributedLock::MAX_TTL);
        $tenYears = 10 * 366 * 24 * 3600;
        $this->assertTrue($lock->acquire($r, 'owner-A', $tenYears), 'a TTL over a year is the original class\'s too');
        $this->assertGreaterThan($tenYears - 10, $this->row($backend, $r)['left']);
        $this->assertInstanceOf(\InvalidArgumentException::class, $this->catchThrown(fn () => $lock->renew($r, 'owner-A', DistributedLock::MAX_TTL + 1)));
        $this->assertTrue($lock->isHeldBy($r, 'owner-A'), 'the refused renewal left the lease alone');
    }

    // -----------------------------------------------------------------------------
    // Beyond the seed: token, remaining time, wait, table helpers

    /** @test @dataProvider serverBackends */
    #[Test]
    #[DataProvider('serverBackends')]
    public function tokensStrictlyIncreaseAcrossTakeoversOnAnUpgradedTable(string $backend): void
    {
        $db = self::db();
        $db->exec('DROP TABLE IF EXISTS ' . self::FENCED);
        $db->exec(self::ddl(self::FENCED) . ' ENGINE=InnoDB');
        $lock = $this->lock($backend, self::FENCED);
        $this->assertTrue($lock->upgradeTable(), 'upgradeTable() did not change the table');
        $this->assertFalse($lock->upgradeTable(), 'a second upgradeTable() changed the table again');
        $r = $this->lockName();
        $stored = function () use ($db, $r): int {
            $st = $db->prepare('SELECT token FROM ' . self::FENCED . ' WHERE resource = ?');
            $st->execute([$r]);
            return (int) $st->fetchColumn();
        };
        $expire = fn () => $db->prepare('UPDATE ' . self::FENCED . " SET expires_at = '2000-01-01 00:00:00' WHERE resource = ?")->execute([$r]);

        $this->assertTrue($lock->acquire($r, 'owner-A', 30));
        $tokens = [$lock->getToken()];
        $this->assertSame($stored(), $tokens[0]);
        $this->assertTrue($lock->acquire($r, 'owner-A', 30));
        $this->assertSame($tokens[0], $lock->getToken(), 'the same owner acquiring again got a new token');

        $expire();
        $this->assertTrue($lock->acquire($r, 'owner-B', 30));
        $tokens[] = $lock->getToken();
        $this->assertTrue($lock->release($r, 'owner-B'));
        $this->assertTrue($lock->acquire($r, 'owner-C', 30));
        $tokens[] = $lock->getToken();
        $expire();
        $this->assertTrue($lock->acquire($r, 'owner-A', 30));
        $tokens[] = $lock->getToken();

        $this->assertSame($stored(), $tokens[3]);
        for ($i = 1; $i < count($tokens); $i++) {
            $this->assertGreaterThan($tokens[$i - 1], $tokens[$i], 'tokens: ' . json_encode($tokens));
        }
    }

    /** @test @dataProvider backends */
    #[Test]
    #[DataProvider('backends')]
    public function getTokenIsNullWithoutTheUpgrade(string $backend): void
    {
        $lock = $this->lock($backend);
        $this->assertTrue($lock->acquire($this->lockName(), 'owner-A', 30));
        $this->assertNull($lock->getToken());
    }

    /** @test @dataProvider backends */
    #[Test]
    #[DataProvider('backends')]
    public function getRemainingCountsDownFromTheLastGrantUntilReleased(string $backend): void
    {
        $lock = $this->lock($backend);
        $r = $this->lockName();
        $this->assertSame(0.0, $lock->getRemaining(), 'remaining time before any acquire');

        $this->assertTrue($lock->acquire($r, 'owner-A', 30));
        $remaining = $lock->getRemaining();
        $this->assertGreaterThan(25.0, $remaining);
        $this->assertLessThanOrEqual(30.0, $remaining);

        $this->assertTrue($lock->release($r, 'owner-A'));
        $this->assertSame(0.0, $lock->getRemaining(), 'remaining time after release');
    }

    /** @test @dataProvider backends */
    #[Test]
    #[DataProvider('backends')]
    public function createTableCreatesTheSeedsTableOnce(string $backend): void
    {
        if ($backend === 'sqlite') {
            $db = $this->sqlite();
            $lock = new DistributedLock($db, self::CREATED);
            $this->assertTrue($lock->createTable());
            $this->assertFalse($lock->createTable());
            $columns = array_column($db->query('PRAGMA table_info(' . self::CREATED . ')')->fetchAll(\PDO::FETCH_ASSOC), 'name');
        } else {
            self::db()->exec('DROP TABLE IF EXISTS ' . self::CREATED);
            $lock = $this->lock($backend, self::CREATED);
            $this->assertTrue($lock->createTable());
            $this->assertFalse($lock->createTable());
            $st = self::db()->prepare('SELECT COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ? ORDER BY ORDINAL_POSITION');
            $st->execute([self::CREATED]);
            $columns = $st->fetchAll(\PDO::FETCH_COLUMN);
            $st = self::db()->prepare('SELECT ENGINE FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ?');
            $st->execute([self::CREATED]);
            $this->assertSame('InnoDB', $st->fetchColumn());
        }
        $this->assertSame(['resource', 'owner', 'expires_at', 'acquired_at'], $columns);
        $this->assertTrue($lock->acquire($this->lockName(), 'owner-A', 30));
    }

    /** @test */
    #[Test]
    public function withoutPdoOrDsnTheConstructorSaysWhatToSet(): void
    {
        ini_set('mysqllock.dsn', '');
        $e = $this->catchThrown(fn () => new DistributedLock());
        $this->assertInstanceOf(DistributedLockException::class, $e);
        $this->assertStringContainsString('mysqllock.dsn is not set', $e->getMessage());
    }

    // -----------------------------------------------------------------------------
    // Processes

    /** @test @dataProvider backends */
    #[Test]
    #[DataProvider('backends')]
    public function anotherProcessGetsTheLeaseOnlyAfterTheHolderReleasesIt(string $backend): void
    {
        $r = $this->lockName();
        $child = $this->leaseChild($backend);
        $this->assertReply('acquired', $child->call(['acquire', $r, 'child-owner', 60]));
        $lock = $this->sharedLock($backend);

        $this->assertFalse($lock->acquire($r, 'parent-owner', 60));
        $this->assertTrue($lock->isHeld($r));

        $this->assertReply('released', $child->call(['release', $r, 'child-owner']));
        // The release was committed before the child replied: free at once, not after the TTL.
        $this->assertTrue($lock->acquire($r, 'parent-owner', 60), 'the released lease was not free at once');
        $this->assertReply('refused', $child->call(['acquire', $r, 'child-owner', 60]));
        $this->assertSame('parent-owner', $this->sharedRow($backend, $r));
    }

    /** @test @dataProvider backends */
    #[Test]
    #[DataProvider('backends')]
    public function acquireWithWaitTakesTheLeaseWhenTheHoldersExpires(string $backend): void
    {
        $r = $this->lockName();
        $child = $this->leaseChild($backend);
        $this->assertReply('acquired', $child->call(['acquire', $r, 'child-owner', 2]));
        $lock = $this->sharedLock($backend);
        $this->assertFalse($lock->acquire($r, 'parent-owner', 60), 'the child\'s lease was free at once');

        $started = microtime(true);
        $this->assertTrue($lock->acquire($r, 'parent-owner', 60, wait: 20));
        $waited = microtime(true) - $started;

        $this->assertGreaterThan(0.5, $waited, 'acquire() did not wait for the holder');
        $this->assertLessThan(15.0, $waited);
        $this->assertSame('parent-owner', $this->sharedRow($backend, $r));
    }

    // -----------------------------------------------------------------------------
    // Helpers

    /** Ends $pdo's server session, as a restart or wait_timeout would. */
    private function killSessionOf(\PDO $pdo): void
    {
        $this->killSession((int) $pdo->query('SELECT CONNECTION_ID()')->fetchColumn());
    }

    /** Kills session $id from another connection, and waits until it is gone. */
    private function killSession(int $id): void
    {
        self::db()->exec("KILL $id");
        $st = self::db()->prepare('SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = ?');
        $this->assertTrue(self::waitUntil(function () use ($st, $id) {
            $st->execute([$id]);
            return (int) $st->fetchColumn() === 0;
        }, 10), "session $id did not end");
    }

    private static function ddl(string $table): string
    {
        return str_replace('distributed_locks', $table, self::SEED_DDL);
    }

    /** The lease table of a backend: in SQLite the seed's own name. */
    private function table(string $backend): string
    {
        return $backend === 'sqlite' ? 'distributed_locks' : self::TABLE;
    }

    /** This test's in-memory SQLite database, with the seed's table. */
    private function sqlite(): \PDO
    {
        if ($this->sqlite === null) {
            $this->sqlite = new \PDO('sqlite::memory:', null, null, [\PDO::ATTR_ERRMODE => \PDO::ERRMODE_EXCEPTION]);
            $this->sqlite->exec(self::SEED_DDL);
        }
        return $this->sqlite;
    }

    /** A DistributedLock on the backend (the default table: as the seed constructs it). */
    private function lock(string $backend, ?string $table = null): DistributedLock
    {
        switch ($backend) {
            case 'native':
                return $table === null ? new DistributedLock() : new DistributedLock(null, $table);
            case 'pdo':
                return new DistributedLock(connect(), $table ?? self::TABLE);
            default:
                return $table === null ? new DistributedLock($this->sqlite()) : new DistributedLock($this->sqlite(), $table);
        }
    }

    /** The connection this test crafts and reads rows with. */
    private function raw(string $backend): \PDO
    {
        return $backend === 'sqlite' ? $this->sqlite() : self::db();
    }

    /** SQL for "now + $seconds" on the database clock, in UTC. */
    private function inSeconds(string $backend, int $seconds): string
    {
        return $backend === 'sqlite' ? "datetime('now', '+$seconds seconds')" : "UTC_TIMESTAMP() + INTERVAL $seconds SECOND";
    }

    private function insertRow(string $backend, string $resource, string $owner, string $expiresSql): void
    {
        $table = $this->table($backend);
        $this->raw($backend)
            ->prepare("INSERT INTO $table (resource, owner, expires_at, acquired_at) VALUES (?, ?, $expiresSql, '2000-01-01 00:00:00')")
            ->execute([$resource, $owner]);
    }

    /** The row of $resource: owner, expires_at and whole seconds left; null if none. */
    private function row(string $backend, string $resource): ?array
    {
        $table = $this->table($backend);
        $left = $backend === 'sqlite'
            ? "CAST(round((julianday(expires_at) - julianday('now')) * 86400) AS INTEGER)"
            : 'TIMESTAMPDIFF(SECOND, UTC_TIMESTAMP(), expires_at)';
        $st = $this->raw($backend)->prepare("SELECT owner, CAST(expires_at AS CHAR) AS expires_at, $left AS `left` FROM $table WHERE resource = ?");
        $st->execute([$resource]);
        $row = $st->fetch(\PDO::FETCH_ASSOC);
        if ($row === false) {
            return null;
        }
        $row['left'] = (int) $row['left'];
        return $row;
    }

    /** Every row of this test's resources, to compare before and after. */
    private function leaseRows(string $backend): array
    {
        $table = $this->table($backend);
        $st = $this->raw($backend)->prepare("SELECT resource, owner, CAST(expires_at AS CHAR) FROM $table WHERE resource LIKE ? OR resource = '' ORDER BY resource");
        $st->execute([$this->prefix() . '%']);
        return $st->fetchAll(\PDO::FETCH_NUM);
    }

    /**
     * A child process with a DistributedLock on the backend. SQLite's in-memory
     * databases are per process, so two processes share a file instead.
     */
    private function leaseChild(string $backend): Child
    {
        if ($backend === 'sqlite' && $this->sqliteFile === null) {
            $this->sqliteFile = tempnam(sys_get_temp_dir(), 'phpt-lease-'); // an empty file is an empty database
            (new \PDO('sqlite:' . $this->sqliteFile))->exec(self::SEED_DDL);
        }
        $child = $this->startChild('lease_holder.php');
        $this->assertReply('ok', $child->call(['open', $backend, $this->table($backend), $this->sqliteFile]));
        return $child;
    }

    /** This process's DistributedLock on what leaseChild() shares. */
    private function sharedLock(string $backend): DistributedLock
    {
        return $backend === 'sqlite' ? new DistributedLock(new \PDO('sqlite:' . $this->sqliteFile)) : $this->lock($backend);
    }

    /** The owner of $resource in what leaseChild() shares. */
    private function sharedRow(string $backend, string $resource): ?string
    {
        $db = $backend === 'sqlite' ? new \PDO('sqlite:' . $this->sqliteFile) : self::db();
        $st = $db->prepare('SELECT owner FROM ' . $this->table($backend) . ' WHERE resource = ?');
        $st->execute([$resource]);
        $owner = $st->fetchColumn();
        return $owner === false ? null : $owner;
    }
}
