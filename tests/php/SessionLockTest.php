<?php
// MySqlLock\SessionLock in one process: a plain GET_LOCK on the extension's own
// connection, on a PDO and on a mysqli handed over; acquire, release, who holds it, the
// names it takes, and the exceptions. Every check of "held" goes through the server
// (IS_USED_LOCK on the inspection connection), not through the class under test.
declare(strict_types=1);

namespace MySqlLockTest;

use MySqlLock\AlreadyHeldException;
use MySqlLock\ConnectionException;
use MySqlLock\LockTimeoutException;
use MySqlLock\NotHeldException;
use MySqlLock\SessionLock;
use PHPUnit\Framework\Attributes\DataProvider;
use PHPUnit\Framework\Attributes\Test;

final class SessionLockTest extends TestCase
{
    /** @var SessionLock[] every lock a test made, released in tearDown if still held */
    private array $locks = [];

    protected function tearDown(): void
    {
        foreach ($this->locks as $lock) {
            try {
                if ($lock->isHeldByMe()) {
                    $lock->release(); // else the extension keeps the test's connection until the run ends
                }
            } catch (\Throwable $e) {
                // a connection the test killed: nothing held there any more
            }
        }
        $this->locks = [];
        parent::tearDown();
    }

    private function lock(string $name, \PDO|\mysqli|null $conn = null): SessionLock
    {
        return $this->locks[] = new SessionLock($name, $conn);
    }

    public static function connections(): array
    {
        return ['native connection' => ['native'], 'PDO' => ['pdo'], 'mysqli' => ['mysqli']];
    }

    /** The session the locks of a connection of $kind live in; null: the native one, unknown until used. */
    private static function sessionOf(\PDO|\mysqli|null $conn): ?int
    {
        return $conn === null ? null : connectionId($conn);
    }

    /**
     * @test
     * @dataProvider connections
     */
    #[Test]
    #[DataProvider('connections')]
    public function acquireOfAFreeLockReturnsTrueAndTheServerShowsItHeldByThatConnection(string $kind): void
    {
        $conn = openConnection($kind);
        $lock = $this->lock($this->lockName(), $conn);
        $this->assertTrue($lock->acquire());
        $holder = self::getLockHolder($lock->getKey());
        $this->assertNotNull($holder, 'the server shows no holder');
        if ($conn !== null) {
            $this->assertSame(self::sessionOf($conn), $holder, 'the lock is not in the given connection\'s session');
        }
    }

    /**
     * @test
     * @dataProvider connections
     */
    #[Test]
    #[DataProvider('connections')]
    public function releaseFreesTheLockOnTheServer(string $kind): void
    {
        $lock = $this->lock($this->lockName(), openConnection($kind));
        $this->assertTrue($lock->acquire());
        $lock->release();
        $this->assertNull(self::getLockHolder($lock->getKey()));
    }

    /**
     * @test
     * @dataProvider connections
     */
    #[Test]
    #[DataProvider('connections')]
    public function acquireReturnsFalseAtOnceWithZeroTimeoutWhileAnotherSessionHoldsIt(string $kind): void
    {
        $name = $this->lockName();
        $other = connect();
        $other->query("SELECT GET_LOCK('$name', 0)");
        $lock = $this->lock($name, openConnection($kind));
        $start = microtime(true);
        $this->assertFalse($lock->acquire(0.0));
        $this->assertLessThan(1.0, microtime(true) - $start, 'a timeout of 0 must be one try');
        $this->assertSame(connectionId($other), self::getLockHolder($name), 'the holder lost it');
    }

    /**
     * @test
     * @dataProvider connections
     */
    #[Test]
    #[DataProvider('connections')]
    public function acquireWithAFractionalTimeoutWaitsThatFractionWhileAnotherSessionHoldsIt(string $kind): void
    {
        $name = $this->lockName();
        $other = connect();
        $other->query("SELECT GET_LOCK('$name', 0)");
        $lock = $this->lock($name, openConnection($kind));
        $start = microtime(true);
        $this->assertFalse($lock->acquire(0.4));
        $elapsed = microtime(true) - $start;
        $this->assertGreaterThanOrEqual(0.35, $elapsed, 'gave up before the timeout');
        $this->assertLessThan(2.0, $elapsed, 'waited far longer than the timeout');
    }

    /**
     * @test
     * @dataProvider connections
     */
    #[Test]
    #[DataProvider('connections')]
    public function acquireWithATimeoutGetsTheLockWhenTheOtherSessionReleasesIt(string $kind): void
    {
        $name = $this->lockName();
        $other = connectMysqli();
        $other->query("SELECT GET_LOCK('$name', 0)");
        // The other session releases after 0.3 s, inside one statement of its own.
        $other->query("SELECT SLEEP(0.3), RELEASE_LOCK('$name')", MYSQLI_ASYNC);
        $lock = $this->lock($name, openConnection($kind));
        $this->assertTrue($lock->acquire(10.0));
        $other->reap_async_query();
    }

    /**
     * @test
     * @dataProvider connections
     */
    #[Test]
    #[DataProvider('connections')]
    public function isHeldByMeIsTrueOnlyWhileThisConnectionHoldsTheLock(string $kind): void
    {
        $lock = $this->lock($this->lockName(), openConnection($kind));
        $this->assertFalse($lock->isHeldByMe(), 'before acquire');
        $lock->acquire();
        $this->assertTrue($lock->isHeldByMe(), 'after acquire');
        $lock->release();
        $this->assertFalse($lock->isHeldByMe(), 'after release');
    }

    /**
     * @test
     * @dataProvider connections
     */
    #[Test]
    #[DataProvider('connections')]
    public function isHeldByMeIsFalseWhenTheLockWasReleasedBehindItsBack(string $kind): void
    {
        $conn = openConnection($kind);
        $lock = $this->lock($this->lockName(), $conn);
        $lock->acquire();
        $holder = self::getLockHolder($lock->getKey());
        self::db()->exec('KILL ' . $holder);
        $this->assertTrue(self::waitUntil(fn () => !self::sessionExists($holder), 10), 'the killed session stayed');
        $this->assertFalse($lock->isHeldByMe());
    }

    /**
     * @test
     * @dataProvider connections
     */
    #[Test]
    #[DataProvider('connections')]
    public function holderIsTheConnectionIdOfTheHoldingSessionOfAnyClient(string $kind): void
    {
        $name = $this->lockName();
        $lock = $this->lock($name, openConnection($kind));
        $this->assertNull($lock->holder(), 'free');
        $other = connect();
        $other->query("SELECT GET_LOCK('$name', 0)");
        $this->assertSame(connectionId($other), $lock->holder(), 'held by a hand-written GET_LOCK');
        $other->query("SELECT RELEASE_LOCK('$name')");
        $lock->acquire();
        $this->assertSame(self::getLockHolder($name), $lock->holder(), 'held by the lock itself');
    }

    /**
     * @test
     * @dataProvider connections
     */
    #[Test]
    #[DataProvider('connections')]
    public function acquiringALockThisConnectionHoldsThrowsAlreadyHeld(string $kind): void
    {
        $lock = $this->lock($this->lockName(), openConnection($kind));
        $lock->acquire();
        $this->expectException(AlreadyHeldException::class);
        $lock->acquire();
    }

    /**
     * @test
     * @dataProvider connections
     */
    #[Test]
    #[DataProvider('connections')]
    public function releasingALockNotHeldThrowsNotHeld(string $kind): void
    {
        $lock = $this->lock($this->lockName(), openConnection($kind));
        $this->expectException(NotHeldException::class);
        $lock->release();
    }

    /**
     * @test
     * @dataProvider connections
     */
    #[Test]
    #[DataProvider('connections')]
    public function releasingTwiceThrowsNotHeldTheSecondTime(string $kind): void
    {
        $lock = $this->lock($this->lockName(), openConnection($kind));
        $lock->acquire();
        $lock->release();
        $this->expectException(NotHeldException::class);
        $lock->release();
    }

    /**
     * @test
     * @dataProvider connections
     */
    #[Test]
    #[DataProvider('connections')]
    public function destroyingTheObjectDoesNotReleaseTheLock(string $kind): void
    {
        $conn = openConnection($kind);
        $name = $this->lockName();
        $lock = new SessionLock($name, $conn);
        $lock->acquire();
        $holder = self::getLockHolder($name);
        $lock = null;
        gc_collect_cycles();
        $this->assertSame($holder, self::getLockHolder($name), 'the lock went with the object');
        (new SessionLock($name, $conn))->release(); // the session's lock, released by another object on it
        $this->assertNull(self::getLockHolder($name));
    }

    /**
     * @test
     * @dataProvider connections
     */
    #[Test]
    #[DataProvider('connections')]
    public function synchronizedRunsTheWorkUnderTheLockAndReturnsItsValue(string $kind): void
    {
        $lock = $this->lock($this->lockName(), openConnection($kind));
        $seen = $lock->synchronized(fn (SessionLock $l) => [$l === $lock, self::getLockHolder($l->getKey()) !== null]);
        $this->assertSame([true, true], $seen);
        $this->assertNull(self::getLockHolder($lock->getKey()), 'not released after the work');
    }

    /**
     * @test
     * @dataProvider connections
     */
    #[Test]
    #[DataProvider('connections')]
    public function synchronizedReleasesTheLockWhenTheWorkThrowsAndRethrowsItsException(string $kind): void
    {
        $lock = $this->lock($this->lockName(), openConnection($kind));
        $thrown = new \DomainException('the work failed');
        $e = $this->catchThrown(fn () => $lock->synchronized(function () use ($thrown) {
            throw $thrown;
        }));
        $this->assertSame($thrown, $e);
        $this->assertNull(self::getLockHolder($lock->getKey()), 'not released after the work threw');
    }

    /**
     * @test
     * @dataProvider connections
     */
    #[Test]
    #[DataProvider('connections')]
    public function synchronizedThrowsLockTimeoutWithoutRunningTheWorkWhileAnotherSessionHoldsIt(string $kind): void
    {
        $name = $this->lockName();
        $other = connect();
        $other->query("SELECT GET_LOCK('$name', 0)");
        $lock = $this->lock($name, openConnection($kind));
        $ran = false;
        $e = $this->catchThrown(fn () => $lock->synchronized(function () use (&$ran) {
            $ran = true;
        }, 0.2));
        $this->assertInstanceOf(LockTimeoutException::class, $e);
        $this->assertFalse($ran, 'the work ran without the lock');
    }

    /**
     * @test
     * @dataProvider connections
     */
    #[Test]
    #[DataProvider('connections')]
    public function synchronizedThrowsNotHeldWhenTheLockWasLostWhileTheWorkRan(string $kind): void
    {
        $lock = $this->lock($this->lockName(), openConnection($kind));
        $e = $this->catchThrown(fn () => $lock->synchronized(function (SessionLock $l) {
            $holder = self::getLockHolder($l->getKey());
            self::db()->exec('KILL ' . $holder);
            self::assertTrue(self::waitUntil(fn () => !self::sessionExists($holder), 10), 'the killed session stayed');
        }));
        $this->assertInstanceOf(NotHeldException::class, $e);
    }

    /**
     * @test
     * @dataProvider connections
     */
    #[Test]
    #[DataProvider('connections')]
    public function aNameTakesTheGetLockOfItsKeySoAHandWrittenGetLockOfTheKeyExcludesIt(string $kind): void
    {
        $lock = $this->lock($this->prefix() . 'Nightly-Rapport-Été', openConnection($kind));
        $this->assertSame($this->prefix() . 'nightly-rapport-ete', $lock->getKey());
        $script = connect(); // a script still written with GET_LOCK by hand
        $script->query('SELECT GET_LOCK(' . $script->quote($lock->getKey()) . ', 0)');
        $this->assertFalse($lock->acquire(0.0));
        $this->assertSame(connectionId($script), $lock->holder());
    }

    /**
     * With mysqli's exceptions off (the user's choice, process-wide), failures come back
     * as return values and errno: a lost session must still be told from a busy lock.
     *
     * @test
     */
    #[Test]
    public function onAMysqliWithReportingOffALostSessionIsStillAConnectionException(): void
    {
        $mode = (new \mysqli_driver())->report_mode;
        mysqli_report(MYSQLI_REPORT_OFF);
        try {
            $conn = connectMysqli();
            $lock = $this->lock($this->lockName(), $conn);
            $this->assertTrue($lock->acquire());
            $lock->release();
            self::db()->exec('KILL ' . $conn->thread_id);
            $this->assertTrue(self::waitUntil(fn () => !self::sessionExists($conn->thread_id), 10), 'the killed session stayed');
            $this->expectException(ConnectionException::class);
            $lock->acquire();
        } finally {
            mysqli_report($mode);
        }
    }

    /**
     * real_connect() gives a mysqli another session: the locks of the old one ended with
     * it, and the lock must not claim otherwise (nor release a namesake of the new one).
     *
     * @test
     */
    #[Test]
    public function aMysqliConnectedAnewNoLongerHoldsTheLocksOfItsOldSession(): void
    {
        $conn = connectMysqli();
        $name = $this->lockName();
        $lock = $this->lock($name, $conn);
        $this->assertTrue($lock->acquire());
        $old = $conn->thread_id;
        $s = server();
        $conn->real_connect($s['host'], $s['user'], $s['pass'], $s['db'], $s['port']);
        $this->assertNotSame($old, $conn->thread_id, 'real_connect() kept the session');
        $this->assertTrue(self::waitUntil(fn () => !self::sessionExists($old), 10), 'the old session stayed');
        $this->assertFalse($lock->isHeldByMe());
        $again = $this->lock($name, $conn);
        $this->assertTrue($again->acquire(), 'the new session was refused the lock its old session held');
        $this->assertSame($conn->thread_id, $again->holder());
    }

    /** A global status counter of the server (this suite's server: nothing else runs statements on it). */
    private static function globalStatus(string $name): int
    {
        return (int) self::db()->query("SHOW GLOBAL STATUS LIKE '$name'")->fetchColumn(1);
    }

    public static function preparingConnections(): array
    {
        return ['PDO with real prepares' => ['pdo'], 'mysqli' => ['mysqli']];
    }

    /**
     * Session-lock statements bind the name, so one statement per text serves every name:
     * prepared once per session and kept (not prepared and closed per call, and not one
     * per name left on the server until max_prepared_stmt_count).
     *
     * @test
     * @dataProvider preparingConnections
     */
    #[Test]
    #[DataProvider('preparingConnections')]
    public function manyNamesOnAUserConnectionPrepareEachStatementOnceAndKeepIt(string $kind): void
    {
        $conn = openConnection($kind);
        if ($conn instanceof \PDO) {
            $this->assertFalse((bool) $conn->getAttribute(\PDO::ATTR_EMULATE_PREPARES), 'connect() prepares for real');
        }
        $warm = $this->lock($this->lockName('warm'), $conn);
        $this->assertTrue($warm->acquire());
        $warm->release();
        $keptBefore = self::globalStatus('Prepared_stmt_count');
        // What reading the counter costs by itself, so the loop is measured alone.
        $first = self::globalStatus('Com_stmt_prepare');
        $before = self::globalStatus('Com_stmt_prepare');
        for ($i = 0; $i < 20; $i++) {
            $lock = $this->lock($this->lockName("n$i"), $conn);
            $this->assertTrue($lock->acquire());
            $lock->release();
        }
        $after = self::globalStatus('Com_stmt_prepare');
        $this->assertSame($before - $first, $after - $before, 'statements were prepared again for new names');
        $this->assertSame($keptBefore, self::globalStatus('Prepared_stmt_count'), 'statements stayed prepared per name');
        if ($conn instanceof \PDO) {
            $this->assertFalse((bool) $conn->getAttribute(\PDO::ATTR_EMULATE_PREPARES), 'the PDO\'s own setting changed');
        }
    }

    /** @test */
    #[Test]
    public function aPlainLowercaseAsciiNameIsItsOwnKey(): void
    {
        $name = $this->lockName('cron:invoices_2026-11');
        $this->assertSame($name, $this->lock($name)->getKey());
    }

    /** @test */
    #[Test]
    public function getNameReturnsTheNameAsGiven(): void
    {
        $this->assertSame('Müller-Größe', $this->lock('Müller-Größe')->getName());
    }

    public static function connectionPairs(): array
    {
        $pairs = [];
        foreach (['native', 'pdo', 'mysqli'] as $a) {
            foreach (['native', 'pdo', 'mysqli'] as $b) {
                if ($a !== $b) {
                    $pairs["$a holds, $b asks"] = [$a, $b];
                }
            }
        }
        return $pairs;
    }

    /**
     * @test
     * @dataProvider connectionPairs
     */
    #[Test]
    #[DataProvider('connectionPairs')]
    public function caseAndAccentVariantsOfANameAreOneLockAcrossConnections(string $holds, string $asks): void
    {
        $holder = $this->lock($this->prefix() . 'Müller-Größe', openConnection($holds));
        $this->assertTrue($holder->acquire());
        foreach (['MÜLLER-GRÖSSE', 'muller-grosse', "Mu\u{308}ller-Gro\u{308}sse"] as $variant) {
            $other = $this->lock($this->prefix() . $variant, openConnection($asks));
            $this->assertFalse($other->acquire(0.0), "$variant was granted while Müller-Größe is held");
        }
    }

    /**
     * @test
     * @dataProvider connections
     */
    #[Test]
    #[DataProvider('connections')]
    public function aCaseVariantOfALockThisConnectionHoldsIsAlreadyHeld(string $kind): void
    {
        $conn = openConnection($kind);
        $this->lock($this->prefix() . 'Invoices', $conn)->acquire();
        $this->expectException(AlreadyHeldException::class);
        $this->lock($this->prefix() . 'INVOICES', $conn)->acquire();
    }

    /** @test */
    #[Test]
    public function theNativeConnectionIsTheSessionSharedLockUses(): void
    {
        \ItsMieger\MySqlSharedLocks\SharedLock::lock($this->lockName('lease'), 0, 30);
        $leaseSession = (int) self::rows($this->lockName('lease'))[0]['connection_id'];
        $lock = $this->lock($this->lockName('session'));
        $lock->acquire();
        $this->assertSame($leaseSession, $lock->holder());
    }

    public static function badNames(): array
    {
        return [
            'empty' => [''],
            '65 characters' => [str_repeat('x', 65)],
            '30 ligatures that unfold into 90 letters' => [str_repeat("\u{FB03}", 30)],
            'not UTF-8' => ["caf\xE9"],
        ];
    }

    /**
     * @test
     * @dataProvider badNames
     */
    #[Test]
    #[DataProvider('badNames')]
    public function constructingWithAnUnusableNameThrowsInvalidArgument(string $name): void
    {
        $this->expectException(\InvalidArgumentException::class);
        $this->lock($name);
    }

    /** @test */
    #[Test]
    public function aNameOf64AccentedCharactersIsAccepted(): void
    {
        $this->assertSame(str_repeat('e', 64), $this->lock(str_repeat('É', 64))->getKey());
    }

    public static function badTimeouts(): array
    {
        return ['negative' => [-1.0], 'NaN' => [NAN], 'infinite' => [INF]];
    }

    /**
     * @test
     * @dataProvider badTimeouts
     */
    #[Test]
    #[DataProvider('badTimeouts')]
    public function acquireWithAnUnusableTimeoutThrowsInvalidArgumentAndTakesNothing(float $timeout): void
    {
        $lock = $this->lock($this->lockName());
        $e = $this->catchThrown(fn () => $lock->acquire($timeout));
        $this->assertInstanceOf(\InvalidArgumentException::class, $e);
        $this->assertNull(self::getLockHolder($lock->getKey()));
    }

    /** @test */
    #[Test]
    public function aConnectionOtherThanPdoOrMysqliIsATypeError(): void
    {
        $this->expectException(\TypeError::class);
        $this->lock($this->lockName(), new \stdClass());
    }

    /** @test */
    #[Test]
    public function aPdoOfAnotherDriverIsRefused(): void
    {
        $this->expectException(\InvalidArgumentException::class);
        $this->lock($this->lockName(), new \PDO('sqlite::memory:'));
    }
}
