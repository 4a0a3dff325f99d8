<?php
// Several processes on one name (SPEC §4): exclusion, waiting, timeouts, dead, hung and
// never-started holders, request end.
declare(strict_types=1);

namespace MySqlLockTest;

use ItsMieger\MySqlSharedLocks\Exception\SharedLockReleaseException;
use ItsMieger\MySqlSharedLocks\Exception\SharedLockRemainingTTLException;
use ItsMieger\MySqlSharedLocks\Exception\SharedLockTimeoutException;
use ItsMieger\MySqlSharedLocks\SharedLock;
use ItsMieger\MySqlSharedLocks\SharedLockHandle;
use PHPUnit\Framework\Attributes\DataProvider;
use PHPUnit\Framework\Attributes\Test;

final class MultiProcessTest extends TestCase
{
    /** A session other than every lock holder's, kept open while the test runs. */
    private ?\PDO $bystander = null;

    protected function tearDown(): void
    {
        $this->bystander = null;
        parent::tearDown();
    }

    /** @test */
    #[Test]
    public function lockTimesOutWhileAnotherProcessHoldsIt(): void
    {
        $name = $this->lockName();
        $this->startHolder($name);
        $this->expectException(SharedLockTimeoutException::class);
        SharedLock::lock($name, 1, 10);
    }

    /** @test */
    #[Test]
    public function lockTimesOutAfterTheGivenSeconds(): void
    {
        $name = $this->lockName();
        $this->startHolder($name);
        $start = microtime(true);
        $this->catchThrown(fn () => SharedLock::lock($name, 1, 10));
        $elapsed = microtime(true) - $start;
        $this->assertGreaterThanOrEqual(0.95, $elapsed, 'gave up before the timeout');
        $this->assertLessThan(4.0, $elapsed, 'waited far longer than the timeout');
    }

    /** @test */
    #[Test]
    public function timeoutExceptionCarriesNameTimeoutAndTheOriginalMessage(): void
    {
        $name = $this->lockName();
        $this->startHolder($name);
        $e = $this->catchThrown(fn () => SharedLock::lock($name, 1, 10));
        $this->assertSame(
            [SharedLockTimeoutException::class, $name, 1.0, "Acquiring lock \"$name\" timed out after 1 seconds"],
            [get_class($e), $e->getLockName(), (float) $e->getTimeout(), $e->getMessage()]
        );
    }

    /** @test */
    #[Test]
    public function lockWithFractionalTimeoutTimesOutAfterThatFraction(): void
    {
        $name = $this->lockName();
        $this->startHolder($name);
        $start = microtime(true);
        $e = $this->catchThrown(fn () => SharedLock::lock($name, 0.5, 10));
        $elapsed = microtime(true) - $start;
        $this->assertSame("Acquiring lock \"$name\" timed out after 0.5 seconds", $e->getMessage());
        $this->assertGreaterThanOrEqual(0.45, $elapsed, 'gave up before the timeout');
        $this->assertLessThan(3.0, $elapsed, 'waited far longer than the timeout');
    }

    /** @test */
    #[Test]
    public function lockWithZeroTimeoutFailsAtOnceWhileAnotherProcessHoldsIt(): void
    {
        $name = $this->lockName();
        $this->startHolder($name);
        $start = microtime(true);
        $e = $this->catchThrown(fn () => SharedLock::lock($name, 0, 10));
        $this->assertInstanceOf(SharedLockTimeoutException::class, $e);
        $this->assertLessThan(1.0, microtime(true) - $start);
    }

    /** @test */
    #[Test]
    public function timedOutLockLeavesTheHoldersRowAlone(): void
    {
        $name = $this->lockName();
        $this->startHolder($name);
        $before = self::rows($name);
        $this->catchThrown(fn () => SharedLock::lock($name, 0.2, 10));
        $this->assertSame($before, self::rows($name));
    }

    /** @test */
    #[Test]
    public function explicitReleaseHandsTheLockToAWaiterAtOnce(): void
    {
        $name = $this->lockName();
        $holder = $this->startHolder($name, 30);
        $waiter = $this->startChild();
        $waiter->command(['lock', $name, 10, 10]);
        $this->assertNull($waiter->receive(1.0), 'the waiter got the lock while another process held it');
        $this->assertReply('released', $holder->call(['release', $name]));
        $releasedAt = microtime(true);
        $this->assertReply('locked', $waiter->receive(9.0));
        $this->assertLessThan(1.0, microtime(true) - $releasedAt, 'the waiter was not woken by the release');
    }

    /** @test */
    #[Test]
    public function lockOfAHolderKilledWithSigkillIsTakenAtOnceWithZeroTimeout(): void
    {
        $name = $this->lockName();
        $holder = $this->startHolder($name, 60);
        $session = (int) self::rows($name)[0]['connection_id'];
        $holder->signal(SIGKILL);
        $this->assertTrue($holder->waitForExit(10), 'the holder did not die');
        $this->assertTrue(self::waitUntil(fn () => !self::sessionExists($session), 10), 'the server kept the dead holder\'s session');
        $this->assertInstanceOf(SharedLockHandle::class, SharedLock::lock($name, 0, 10));
    }

    /** @test */
    #[Test]
    public function lockOfAHolderKilledWithSigkillIsTakenWithoutWaitingForTheTTL(): void
    {
        $name = $this->lockName();
        $holder = $this->startHolder($name, 60);
        $holder->signal(SIGKILL);
        $this->assertTrue($holder->waitForExit(10), 'the holder did not die');
        $start = microtime(true);
        SharedLock::lock($name, 30, 10);
        $this->assertLessThan(5.0, microtime(true) - $start, 'waited for the dead holder\'s TTL');
    }

    /** @test */
    #[Test]
    public function lockOfAHolderKilledWithSigkillBelongsToTheNewHolder(): void
    {
        $name = $this->lockName();
        $holder = $this->startHolder($name, 60);
        $dead = (int) self::rows($name)[0]['connection_id'];
        $holder->signal(SIGKILL);
        $this->assertTrue($holder->waitForExit(10), 'the holder did not die');
        SharedLock::lock($name, 30, 10);
        $rows = self::rows($name);
        $this->assertCount(1, $rows);
        $this->assertNotSame($dead, (int) $rows[0]['connection_id']);
    }

    public static function unacquiredRowOwners(): array
    {
        return ['owner is a live session' => ['live'], 'owner is a dead session' => ['dead']];
    }

    /** A row as a process leaves it between its INSERT and its GET_LOCK (ttl 3). */
    private function insertUnacquiredRow(string $name, string $owner): void
    {
        $other = connect();
        $id = (int) $other->query('SELECT CONNECTION_ID()')->fetchColumn();
        if ($owner === 'live') {
            $this->bystander = $other;
        } else {
            $other = null;
            $this->assertTrue(self::waitUntil(fn () => !self::sessionExists($id), 10), 'the closed session stayed');
        }
        self::db()->prepare('INSERT INTO shared_locks (name, connection_id, created, ttl, lock_acquired) VALUES (?, ?, UNIX_TIMESTAMP(), 3, 0)')
            ->execute([$name, $id]);
    }

    /**
     * @test
     * @dataProvider unacquiredRowOwners
     */
    #[Test]
    #[DataProvider('unacquiredRowOwners')]
    public function rowNotMarkedAcquiredBlocksZeroTimeoutLockUntilItsTTL(string $owner): void
    {
        $name = $this->lockName();
        $this->insertUnacquiredRow($name, $owner);
        $start = microtime(true);
        $e = $this->catchThrown(fn () => SharedLock::lock($name, 0, 10));
        $this->assertInstanceOf(SharedLockTimeoutException::class, $e);
        $this->assertLessThan(1.5, microtime(true) - $start, 'a zero timeout must fail at once');
    }

    /**
     * @test
     * @dataProvider unacquiredRowOwners
     */
    #[Test]
    #[DataProvider('unacquiredRowOwners')]
    public function rowNotMarkedAcquiredIsReclaimedOnlyAfterItsTTL(string $owner): void
    {
        $name = $this->lockName();
        $this->insertUnacquiredRow($name, $owner);
        $start = microtime(true);
        SharedLock::lock($name, 6, 10);
        $elapsed = microtime(true) - $start;
        $this->assertGreaterThanOrEqual(2.0, $elapsed, 'the row was taken before its TTL of 3 s');
        $this->assertLessThan(6.0, $elapsed);
    }

    /**
     * A child that holds $name with ttl 2 on its own PDO inside an open transaction (with
     * one INSERT into the InnoDB table), then hangs (SIGSTOP) while this process takes
     * the lock over. Returns the child, resumed, and how long the takeover took.
     *
     * @return array{Child, float}
     */
    private function takeOverFromAStoppedHolder(string $name): array
    {
        self::db()->prepare('DELETE FROM ' . TX_TABLE . ' WHERE tag = ?')->execute([$name]);
        $child = $this->startChild();
        $this->assertReply('locked', $child->call(['txlock', $name, 2, TX_TABLE]));
        $child->signal(SIGSTOP);
        $leaseEnd = (int) self::db()->query('SELECT created + ttl FROM shared_locks WHERE name = ' . self::db()->quote($name))->fetchColumn();
        $start = microtime(true);
        SharedLock::lock($name, 10, 10);
        $elapsed = microtime(true) - $start;
        $child->signal(SIGCONT);
        return [$child, $elapsed, $leaseEnd];
    }

    /** @test */
    #[Test]
    public function stoppedHolderPastItsTTLLosesTheLockToAnotherProcess(): void
    {
        $name = $this->lockName();
        [, $elapsed] = $this->takeOverFromAStoppedHolder($name);
        $this->assertLessThan(6.0, $elapsed, 'the takeover took far longer than the TTL of 2 s');
        $this->assertCount(1, self::rows($name));
    }

    /** @test */
    #[Test]
    public function stoppedHolderIsNotTakenOverBeforeItsTTL(): void
    {
        $name = $this->lockName();
        [, , $leaseEnd] = $this->takeOverFromAStoppedHolder($name);
        // On the database clock, where the lease is defined: the new row can only have
        // been claimed once `created + ttl < UNIX_TIMESTAMP()`, so after the old lease's end.
        $created = (int) self::rows($name)[0]['created'];
        $this->assertGreaterThan($leaseEnd, $created, 'the lock was taken over before the stopped holder\'s lease ended');
    }

    /** @test */
    #[Test]
    public function stoppedHoldersSetConnectionTransactionFailsAfterTheTakeover(): void
    {
        $name = $this->lockName();
        [$child] = $this->takeOverFromAStoppedHolder($name);
        $this->assertReplyException(\PDOException::class, $child->call(['commit']));
    }

    /** @test */
    #[Test]
    public function stoppedHoldersTransactionLeavesNoRowAfterTheTakeover(): void
    {
        $name = $this->lockName();
        [$child] = $this->takeOverFromAStoppedHolder($name);
        $child->call(['commit']);
        $st = self::db()->prepare('SELECT COUNT(*) FROM ' . TX_TABLE . ' WHERE tag = ?');
        $st->execute([$name]);
        $this->assertSame(0, (int) $st->fetchColumn());
    }

    /** @test */
    #[Test]
    public function stoppedHoldersUnlockThrowsReleaseExceptionAfterTheTakeover(): void
    {
        $name = $this->lockName();
        [$child] = $this->takeOverFromAStoppedHolder($name);
        $this->assertReplyException(SharedLockReleaseException::class, $child->call(['unlock', $name]));
    }

    /** @test */
    #[Test]
    public function stoppedHoldersUnlockLeavesTheNewHoldersRow(): void
    {
        $name = $this->lockName();
        [$child] = $this->takeOverFromAStoppedHolder($name);
        $mine = self::rows($name);
        $child->call(['unlock', $name]);
        $this->assertSame($mine, self::rows($name));
    }

    public static function sameLockSpellings(): array
    {
        return [
            'case' => ['Foo', 'foo'],
            'trailing space' => ['Foo', 'Foo '],
            'case and trailing spaces' => ['foo  ', 'FOO'],
        ];
    }

    /**
     * @test
     * @dataProvider sameLockSpellings
     */
    #[Test]
    #[DataProvider('sameLockSpellings')]
    public function namesDifferingOnlyInCaseOrTrailingSpacesAreOneLockAcrossProcesses(string $held, string $wanted): void
    {
        $this->startHolder($this->lockName($held));
        $this->expectException(SharedLockTimeoutException::class);
        SharedLock::lock($this->lockName($wanted), 0, 10);
    }

    /**
     * @test
     * @dataProvider sameLockSpellings
     */
    #[Test]
    #[DataProvider('sameLockSpellings')]
    public function otherSpellingCanBeLockedOnceTheHolderReleased(string $held, string $wanted): void
    {
        $holder = $this->startHolder($this->lockName($held));
        $this->assertReply('released', $holder->call(['release', $this->lockName($held)]));
        $this->assertInstanceOf(SharedLockHandle::class, SharedLock::lock($this->lockName($wanted), 0, 10));
    }

    /** @test */
    #[Test]
    public function lockIsReleasedWhenTheHoldingProcessExitsWithoutUnlocking(): void
    {
        $name = $this->lockName();
        $holder = $this->startHolder($name);
        $this->assertReply('bye', $holder->call(['exit']));
        $this->assertTrue($holder->waitForExit(10), 'the holder did not exit');
        $this->assertSame([], self::rows($name));
    }

    /** @test */
    #[Test]
    public function anotherProcessCanLockAtOnceAfterTheHolderExited(): void
    {
        $name = $this->lockName();
        $holder = $this->startHolder($name);
        $this->assertReply('bye', $holder->call(['exit']));
        $this->assertTrue($holder->waitForExit(10), 'the holder did not exit');
        $this->assertInstanceOf(SharedLockHandle::class, SharedLock::lock($name, 0, 10));
    }

    /** @test */
    #[Test]
    public function discardedHandleDoesNotReleaseTheLock(): void
    {
        $name = $this->lockName();
        SharedLock::lock($name, 0, 10);
        gc_collect_cycles();
        $this->assertReplyException(SharedLockTimeoutException::class, $this->startChild()->call(['lock', $name, 0, 10]));
    }

    /** @test */
    #[Test]
    public function discardedHandleKeepsTheRow(): void
    {
        $name = $this->lockName();
        SharedLock::lock($name, 0, 10);
        gc_collect_cycles();
        $this->assertCount(1, self::rows($name));
    }

    /** @test */
    #[Test]
    public function concurrentProcessesNeverHoldTheLockAtTheSameTime(): void
    {
        [$processes, $rounds] = [4, 15];
        $name = $this->lockName();
        $counter = tempnam(sys_get_temp_dir(), 'phpt-counter-');
        file_put_contents($counter, '0');
        [$procs, $errors] = [[], []];
        foreach (range(1, $processes) as $i) {
            $cmd = [PHP_BINARY, '-d', 'extension=' . extensionPath(), __DIR__ . '/fixtures/contender.php', $name, (string) $rounds, $counter];
            $procs[] = proc_open($cmd, [0 => ['file', '/dev/null', 'r'], 1 => ['file', '/dev/null', 'w'], 2 => ['pipe', 'w']], $pipes);
            $errors[] = $pipes[2];
        }
        $statuses = [];
        foreach ($procs as $i => $proc) {
            $stderr = stream_get_contents($errors[$i]);
            $statuses[] = proc_close($proc) . ($stderr === '' ? '' : ": $stderr");
        }
        $total = (int) file_get_contents($counter);
        unlink($counter);
        $this->assertSame(array_fill(0, $processes, '0'), $statuses, 'a contender failed');
        $this->assertSame($processes * $rounds, $total, 'increments were lost: two processes held the lock at once');
    }

    /** @test */
    #[Test]
    public function runningHolderLearnsAtItsNextAssertTTLThatItsLockWasTakenOver(): void
    {
        $name = $this->lockName();
        $holder = $this->startHolder($name, 1);
        SharedLock::lock($name, 10, 10);
        $this->assertReplyException(SharedLockRemainingTTLException::class, $holder->call(['assert', $name, 0]));
    }

    /** @test */
    #[Test]
    public function configureConnectionDropsTheLocksOfTheCurrentConnection(): void
    {
        $name = $this->lockName();
        SharedLock::lock($name, 0, 10);
        configure();
        $this->assertReply('locked', $this->startChild()->call(['lock', $name, 0, 10]));
    }

    /** @test */
    #[Test]
    public function unlockAfterConfigureConnectionThrowsReleaseException(): void
    {
        $name = $this->lockName();
        SharedLock::lock($name, 0, 10);
        configure();
        $this->expectException(SharedLockReleaseException::class);
        SharedLock::unlock($name);
    }

    /** @test */
    #[Test]
    public function sessionHoldingTheGetLockWithoutARowIsKilledByTheNewOwner(): void
    {
        $name = $this->lockName();
        $this->bystander = connect();
        $id = (int) $this->bystander->query('SELECT CONNECTION_ID()')->fetchColumn();
        $st = $this->bystander->prepare('SELECT GET_LOCK(?, 0)');
        $st->execute([$name]);
        $this->assertSame(1, (int) $st->fetchColumn(), 'the bystander did not get the GET_LOCK');
        SharedLock::lock($name, 5, 10);
        $this->assertTrue(self::waitUntil(fn () => !self::sessionExists($id), 5), 'the session holding the GET_LOCK was left alive');
    }
}
