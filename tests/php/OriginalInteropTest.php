<?php
// Processes still running the original package beside mysqllock on the original table
// (issue 34), one behaviour each. The original's processes are fixtures/original.php: a
// model of its-mieger/mysql-shared-locks 1.x's protocol for interop tests (tests/chaos/
// original-model.php), in a PHP without the extension, on its own PDO, which also reports
// the steps it took. A holder that dies without releasing leaves its row marked acquired
// (a "left row"; the original's rows always outlive its process), which the original,
// `isLocked()`, `mysqllock status` and every claim must read as free. (Issue 34 also had
// mysqllock leave such rows at release; measured costlier on MyISAM, that was not kept:
// bench/RESULTS.md.)
declare(strict_types=1);

namespace MySqlLockTest;

use ItsMieger\MySqlSharedLocks\Exception\SharedLockReleaseException;
use ItsMieger\MySqlSharedLocks\Exception\SharedLockTimeoutException;
use ItsMieger\MySqlSharedLocks\SharedLock;
use MySqlLockTest\Support\ChildProcess;
use PHPUnit\Framework\Attributes\DataProvider;
use PHPUnit\Framework\Attributes\Test;

/** A child running the original package's protocol (fixtures/original.php), without the extension. */
final class OriginalChild extends ChildProcess
{
    public function __construct()
    {
        parent::__construct([PHP_BINARY, '-d', 'display_errors=stderr', __DIR__ . '/fixtures/original.php'], 'phpt-original-');
    }
}

final class OriginalInteropTest extends TestCase
{
    /** What the original's lock() does on a name that is free: register, GET_LOCK, mark. */
    private const FREE = ['register ok', 'get_lock 1', 'mark 1'];

    /** @var OriginalChild[] */
    private array $originals = [];

    protected function tearDown(): void
    {
        foreach ($this->originals as $child) {
            $child->destroy();
        }
        $this->originals = [];
        parent::tearDown();
    }

    private function original(): OriginalChild
    {
        return $this->originals[] = new OriginalChild();
    }

    /** What a child's reply carried, failing unless the call succeeded. */
    private function resultOf(?array $reply): mixed
    {
        $this->assertNotNull($reply, 'no reply within the time limit');
        $this->assertTrue($reply['ok'] ?? false, 'the child replied ' . json_encode($reply));
        return $reply['result'];
    }

    /**
     * $name held by a mysqllock process that is then killed (kill -9: no release, no
     * request end): its row stays, marked acquired, and its GET_LOCK ends with its
     * session. Returns that session's id.
     */
    private function leaveRow(string $name, int $ttl = 30): int
    {
        $holder = $this->startChild();
        $this->assertReply('locked', $holder->call(['lock', $name, 0, $ttl]));
        $id = self::getLockHolder($name);
        $this->assertNotNull($id);
        $holder->kill();
        $this->assertTrue(self::waitUntil(fn () => !self::sessionExists($id), 10), 'the killed holder\'s session did not end');
        $this->assertSame([['name' => $name, 'connection_id' => $id, 'lock_acquired' => 1]], $this->shape($name), 'a killed holder leaves its row');
        $this->assertNull(self::getLockHolder($name), 'and its GET_LOCK ends with its session');
        return $id;
    }

    /** The rows of $name: name, connection_id, lock_acquired (as ints). */
    private function shape(string $name): array
    {
        return array_map(fn ($r) => ['name' => $r['name'], 'connection_id' => (int) $r['connection_id'], 'lock_acquired' => (int) $r['lock_acquired']], self::rows($name));
    }

    /** Asserts that $id holds $name as the original protocol reads it: its row, marked, and its GET_LOCK. */
    private function assertHeldBy(int $id, string $name, string $why = ''): void
    {
        $this->assertSame([['name' => $name, 'connection_id' => $id, 'lock_acquired' => 1]], $this->shape($name), $why);
        $this->assertSame($id, self::getLockHolder($name), $why);
    }

    /** `mysqllock status NAME --json`: the row's fields as the CLI shows them. */
    private function cliStatus(string $name): array
    {
        $bin = getenv('MYSQLLOCK_BIN');
        $this->assertNotFalse($bin, 'MYSQLLOCK_BIN is not set (the target/release directory)');
        $this->assertFileExists("$bin/mysqllock");
        [$out, $err, $rc] = self::runToEnd(['env', 'MYSQLLOCK_DSN=' . getenv('MYSQLLOCK_TEST_DSN'), "$bin/mysqllock", 'status', $name, '--json']);
        $this->assertSame(0, $rc, "mysqllock status failed: $err");
        $rows = json_decode($out, true);
        $this->assertIsArray($rows, "mysqllock status printed no JSON: $out");
        $this->assertCount(1, $rows, $out);
        return $rows[0];
    }

    /** @test */
    #[Test]
    public function aRowADeadMysqllockHolderLeftIsTakenByAnOriginalProcessAtOnceWhichThenExcludesMysqllock(): void
    {
        $name = $this->lockName();
        $this->leaveRow($name);
        $original = $this->original();
        $id = $this->resultOf($original->call(['id']));
        // Timeout 0: no waiting. Its cleanup deletes the row (marked acquired, its owner
        // holds no GET_LOCK), and it registers and locks as on a free name.
        $this->assertReply('locked', $original->call(['lock', $name, 0, 30]));
        $this->assertSame(['register duplicate', 'clean 1', ...self::FREE], $this->resultOf($original->call(['trace'])));
        $this->assertHeldBy($id, $name);
        // Excluded: this process and another.
        $this->assertTrue(self::taken($name), 'mysqllock took the name from the original');
        $this->assertReply('busy', $this->startChild()->call(['trylock', $name, 30]));
        $this->assertHeldBy($id, $name, 'mysqllock changed the row of a live original holder');
        $this->assertReply('unlocked', $original->call(['unlock', $name]));
        SharedLock::lock($name, 0, 30);
    }

    /** @test */
    #[Test]
    public function anOriginalHoldersRowIsNeverTakenOverByMysqllockWhileItHoldsIt(): void
    {
        $name = $this->lockName();
        $original = $this->original();
        $id = $this->resultOf($original->call(['id']));
        $this->assertReply('locked', $original->call(['lock', $name, 0, 30]));
        $this->assertSame(self::FREE, $this->resultOf($original->call(['trace'])));
        // Twice from this process: its first claim finds the name busy, its second
        // queues at once (the waiter's batch, with the takeover clause); and once from
        // a process whose claim is the one-statement try.
        $this->assertTrue(self::taken($name));
        $this->assertTrue(self::taken($name));
        $this->assertReply('busy', $this->startChild()->call(['trylock', $name, 30]));
        $this->assertHeldBy($id, $name);
        // The original's own view agrees: its row is still there, and unlock deletes it.
        $this->assertReply('ok', $original->call(['assert', $name, 5]));
        $this->assertReply('unlocked', $original->call(['unlock', $name]));
        $this->assertSame(['unregister 1', 'release_lock 1', 'release_lock 0'], $this->resultOf($original->call(['trace'])));
    }

    public static function waysMysqllockClaims(): array
    {
        return [
            'one try, a session new to the name' => [0.0, false],
            'one try, after taking a dead holder\'s row over on this session' => [0.0, true],
            'waiting (the queue-and-claim batch)' => [1.5, true],
        ];
    }

    /**
     * The original between its registration and its GET_LOCK: its row is marked 0 and the
     * GET_LOCK is free for a moment. A mysqllock claim then gets the GET_LOCK and meets
     * the row: it must see that the row is not free (not "take it over"), give the
     * GET_LOCK back and wait, and the original then gets the lock. (Here the original is
     * held in that state: a bare GET_LOCK keeps it waiting, it is stopped, the GET_LOCK
     * goes, and mysqllock claims.)
     *
     * @test
     * @dataProvider waysMysqllockClaims
     */
    #[Test]
    #[DataProvider('waysMysqllockClaims')]
    public function anOriginalsRegistrationIsNeverTakenOverByAMysqllockClaim(float $timeout, bool $tookOverBefore): void
    {
        $name = $this->lockName();
        if ($tookOverBefore) {
            // A takeover of a dead holder's row on this process's session first.
            $other = $this->lockName('other');
            $this->leaveRow($other);
            SharedLock::lock($other, 0, 30)->release();
        }
        if ($timeout > 0) {
            // A name this process found busy before: its next acquisition queues at once.
            $holder = $this->startHolder($name);
            $this->assertTrue(self::taken($name));
            $this->assertReply('released', $holder->call(['release', $name]));
        }
        $get = self::db()->prepare('SELECT GET_LOCK(?, 0)');
        $get->execute([$name]);
        $this->assertSame(1, (int) $get->fetchColumn());
        $original = $this->original();
        $id = $this->resultOf($original->call(['id']));
        $original->send(['lock', $name, 20, 30]);
        $pending = [['name' => $name, 'connection_id' => $id, 'lock_acquired' => 0]];
        $this->assertTrue(self::waitUntil(fn () => $this->shape($name) === $pending, 5), 'the original did not register');
        $original->signal(SIGSTOP);
        $this->assertTrue(self::waitUntil(fn () => self::processState($original->pid) === 'T', 5));
        $release = self::db()->prepare('SELECT RELEASE_LOCK(?)');
        $release->execute([$name]);
        $this->assertNull(self::getLockHolder($name), 'the GET_LOCK is free, the row is the original\'s registration');

        try {
            SharedLock::lock($name, $timeout, 30);
            $this->fail('mysqllock reported the lock acquired; the table: ' . json_encode(self::rows($name)) . ', GET_LOCK held by ' . json_encode(self::getLockHolder($name)));
        } catch (SharedLockTimeoutException $expected) {
        }
        $this->assertSame($pending, $this->shape($name), 'mysqllock changed the original\'s registration');
        $this->assertNull(self::getLockHolder($name), 'mysqllock kept the GET_LOCK of a row that is not its own');

        $original->signal(SIGCONT);
        $this->assertReply('locked', $original->receive(10));
        $this->assertHeldBy($id, $name);
    }

    /** The state letter of a process (R, S, T, ...), from /proc. */
    private static function processState(int $pid): ?string
    {
        $stat = @file_get_contents("/proc/$pid/stat");
        if ($stat === false) {
            return null;
        }
        return substr(trim(substr($stat, strrpos($stat, ')') + 1)), 0, 1);
    }

    public static function historiesOfTheName(): array
    {
        return ['mysqllock never had the name' => [false], 'a dead mysqllock holder left a row of it before' => [true]];
    }

    /**
     * @test
     * @dataProvider historiesOfTheName
     */
    #[Test]
    #[DataProvider('historiesOfTheName')]
    public function anOriginalHolderThatDiesIsTakenOverByMysqllockAtOnce(bool $leftBefore): void
    {
        $name = $this->lockName();
        if ($leftBefore) {
            $this->leaveRow($name);
        }
        $original = $this->original();
        $id = $this->resultOf($original->call(['id']));
        $this->assertReply('locked', $original->call(['lock', $name, 0, 30]));
        $original->kill();
        $this->assertTrue(self::waitUntil(fn () => !self::sessionExists($id), 10), 'the killed process\'s session did not end');
        // The original's rows outlive its session: marked acquired, owner gone.
        $this->assertSame([['name' => $name, 'connection_id' => $id, 'lock_acquired' => 1]], $this->shape($name));
        SharedLock::lock($name, 0, 30); // timeout 0: at once, long before the TTL of 30 s
        $mine = self::getLockHolder($name);
        $this->assertNotNull($mine);
        $this->assertNotSame($id, $mine);
        $this->assertHeldBy($mine, $name);
    }

    public static function waysTheHungHolderLetsGo(): array
    {
        return [
            'it resumes, its first acquisition' => ['resume', 1],
            'it resumes, a name it took before' => ['resume', 2],
            'a mysqllock acquirer KILLs it' => ['kill', 2],
        ];
    }

    /**
     * The original's own takeover of a hung mysqllock holder: it deletes the expired row
     * and registers, then waits for the GET_LOCK, which the hung holder keeps, without
     * KILLing anybody (its bug: it KILLs only a holder whose session id is 1). The GET_LOCK
     * goes when the hung holder resumes and releases (which reports the loss), or when a
     * mysqllock acquirer, which owns the row once the original gave up, KILLs its session.
     *
     * @test
     * @dataProvider waysTheHungHolderLetsGo
     */
    #[Test]
    #[DataProvider('waysTheHungHolderLetsGo')]
    public function theOriginalsOwnTakeoverOfAHungMysqllockHolderStillWorks(string $how, int $acquisitions): void
    {
        $name = $this->lockName();
        $hung = $this->startChild();
        for ($i = 1; $i < $acquisitions; $i++) {
            $this->assertReply('locked', $hung->call(['lock', $name, 0, 30]));
            $this->assertReply('released', $hung->call(['release', $name]));
        }
        $this->assertReply('locked', $hung->call(['lock', $name, 0, 2]));
        $hungId = self::getLockHolder($name);
        $this->assertNotNull($hungId);
        $hung->signal(SIGSTOP);
        self::waitUntilExpired($name);

        $original = $this->original();
        $id = $this->resultOf($original->call(['id']));
        $original->send(['lock', $name, 20, 30]);
        // It deleted the expired row and registered; the GET_LOCK is still the hung holder's.
        $registered = fn () => $this->shape($name) === [['name' => $name, 'connection_id' => $id, 'lock_acquired' => 0]];
        $this->assertTrue(self::waitUntil($registered, 5), 'the original did not claim the expired row: ' . json_encode(self::rows($name)));
        $this->assertSame($hungId, self::getLockHolder($name));
        $this->assertTrue(self::sessionExists($hungId));

        if ($how === 'resume') {
            $hung->signal(SIGCONT);
            $this->assertReplyException(SharedLockReleaseException::class, $hung->call(['release', $name]));
            $this->assertReply('locked', $original->receive(10));
            $this->assertHeldBy($id, $name, 'the original holds it once the hung holder let go');
            $this->assertTrue(self::sessionExists($hungId), 'nobody KILLed the hung holder');
        } else {
            // A mysqllock acquirer waits behind the original's registration; the original
            // gives up after its 21 tries (4.2 s), deleting its row; the acquirer then owns
            // the row and KILLs the session that keeps the GET_LOCK.
            $acquirer = $this->startChild();
            $acquirer->send(['lock', $name, 20, 30]);
            $this->assertReplyException('MySqlLockTest\\Original\\AcquireFailed', $original->receive(10));
            $this->assertReply('locked', $acquirer->receive(15));
            $this->assertTrue(self::waitUntil(fn () => !self::sessionExists($hungId), 5), 'the hung holder\'s session was not KILLed');
            $acquirerId = self::getLockHolder($name);
            $this->assertNotSame($hungId, $acquirerId);
            $this->assertHeldBy((int) $acquirerId, $name);
            $hung->signal(SIGCONT);
            $this->assertReplyException(SharedLockReleaseException::class, $hung->call(['release', $name]));
            $this->assertHeldBy((int) $acquirerId, $name, 'the hung holder\'s release changed the new holder\'s lock');
        }
        $trace = $this->resultOf($original->call(['trace']));
        $this->assertSame(['register duplicate', 'clean 1', 'register ok', 'get_lock 0'], array_slice($trace, 0, 4), json_encode($trace));
        $this->assertNotContains('kill 1', $trace, 'the original KILLed');
        $this->assertContains('pause', $trace, 'the original did not wait for the GET_LOCK');
    }

    /** @test */
    #[Test]
    public function isLockedAndStatusReadALeftRowAsFree(): void
    {
        $name = $this->lockName();
        $this->leaveRow($name);
        $this->assertFalse(SharedLock::isLocked($name));
        $row = $this->cliStatus($name);
        $this->assertSame('dead', $row['state'], json_encode($row));
        // The same, seen from another process: free for it to take.
        $this->assertReply('locked', $this->startChild()->call(['trylock', $name, 30]));
    }
}
