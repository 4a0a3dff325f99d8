<?php
// MySqlLock\SessionLock across processes: one holder at a time, a waiter woken by the
// release, a holder killed with SIGKILL (its lock is free at once, not after any TTL),
// the transaction of the holder's own PDO or mysqli ending with the lock, and the end of
// a CLI process inside synchronized().
declare(strict_types=1);

namespace MySqlLockTest;

use MySqlLock\NotHeldException;
use MySqlLock\SessionLock;
use PHPUnit\Framework\Attributes\DataProvider;
use PHPUnit\Framework\Attributes\Test;

final class SessionLockProcessTest extends TestCase
{
    public static function connections(): array
    {
        return ['native connection' => ['native'], 'PDO' => ['pdo'], 'mysqli' => ['mysqli']];
    }

    public static function userConnections(): array
    {
        return ['PDO' => ['pdo'], 'mysqli' => ['mysqli']];
    }

    /** A child of $kind holding $name; returns it and the id of the session holding the lock. */
    private function holder(string $kind, string $name): array
    {
        $child = $this->startSessionChild($kind);
        $this->assertReply(true, $child->call(['acquire', $name, 0]));
        $session = self::getLockHolder($name);
        $this->assertNotNull($session, 'the child\'s lock is not on the server');
        return [$child, $session];
    }

    /**
     * @test
     * @dataProvider connections
     */
    #[Test]
    #[DataProvider('connections')]
    public function aLockHeldByAnotherProcessIsNotGrantedHere(string $kind): void
    {
        $name = $this->lockName();
        [, $session] = $this->holder($kind, $name);
        $lock = new SessionLock($name);
        $this->assertFalse($lock->acquire(0.3));
        $this->assertSame($session, $lock->holder(), 'the holder changed');
    }

    /**
     * @test
     * @dataProvider connections
     */
    #[Test]
    #[DataProvider('connections')]
    public function aWaitingProcessGetsTheLockAsSoonAsTheHolderReleasesIt(string $kind): void
    {
        $name = $this->lockName();
        [$holder] = $this->holder($kind, $name);
        $waiter = $this->startSessionChild($kind);
        $waiter->command(['acquire', $name, 20]);
        $this->assertNull($waiter->receive(0.5), 'the waiter got the lock while another process held it');
        $this->assertReply('released', $holder->call(['release', $name]));
        $releasedAt = microtime(true);
        $this->assertReply(true, $waiter->receive(10.0));
        $this->assertLessThan(2.0, microtime(true) - $releasedAt, 'the waiter was not woken by the release');
    }

    /**
     * @test
     * @dataProvider connections
     */
    #[Test]
    #[DataProvider('connections')]
    public function exactlyOneOfTwoProcessesTryingAtOnceGetsTheLock(string $kind): void
    {
        $name = $this->lockName();
        $a = $this->startSessionChild($kind);
        $b = $this->startSessionChild($kind);
        $a->command(['acquire', $name, 0]);
        $b->command(['acquire', $name, 0]);
        $replies = [$a->receive(20.0), $b->receive(20.0)];
        $results = array_map(fn (?array $r) => $r['result'] ?? json_encode($r), $replies);
        sort($results);
        $this->assertSame([false, true], $results);
    }

    /**
     * @test
     * @dataProvider connections
     */
    #[Test]
    #[DataProvider('connections')]
    public function theLockOfAHolderKilledWithSigkillGoesToAWaiterAtOnce(string $kind): void
    {
        $name = $this->lockName();
        [$holder, $session] = $this->holder($kind, $name);
        $waiter = $this->startSessionChild('native');
        $waiter->command(['acquire', $name, 60]);
        $this->assertNull($waiter->receive(0.3), 'granted while the holder lived');
        $holder->signal(SIGKILL);
        $killedAt = microtime(true);
        $this->assertReply(true, $waiter->receive(30.0));
        $this->assertLessThan(5.0, microtime(true) - $killedAt, 'the lock outlived its holder');
        $this->assertNotSame($session, self::getLockHolder($name));
    }

    /** A second inspection session that sees uncommitted rows (READ UNCOMMITTED). */
    private static function dirtyReader(): \PDO
    {
        $pdo = connect();
        $pdo->exec('SET SESSION TRANSACTION ISOLATION LEVEL READ UNCOMMITTED');
        return $pdo;
    }

    /** How many rows tagged $tag the TX table has, uncommitted ones included. */
    private static function taggedRows(\PDO $reader, string $tag): int
    {
        $st = $reader->prepare('SELECT COUNT(*) FROM `' . TX_TABLE . '` WHERE tag = ?');
        $st->execute([$tag]);
        return (int) $st->fetchColumn();
    }

    /**
     * A child that inserted a row tagged $name in an open transaction on its own
     * connection and then took $name on that same connection.
     */
    private function holderInATransaction(string $kind, string $name, \PDO $reader): Child
    {
        $child = $this->startSessionChild($kind);
        $this->assertReply('inserted', $child->call(['tx', TX_TABLE, $name]));
        $this->assertReply(true, $child->call(['acquire', $name, 0]));
        $session = $child->call(['session'])['result'] ?? null;
        $this->assertSame($session, self::getLockHolder($name), 'the lock is not in the connection\'s session');
        $this->assertSame(1, self::taggedRows($reader, $name), 'the uncommitted row is not visible to the checker');
        return $child;
    }

    /**
     * @test
     * @dataProvider userConnections
     */
    #[Test]
    #[DataProvider('userConnections')]
    public function killingTheHolderEndsItsTransactionAndItsLockTogether(string $kind): void
    {
        $name = $this->lockName();
        $reader = self::dirtyReader();
        $child = $this->holderInATransaction($kind, $name, $reader);
        $child->signal(SIGKILL);
        $this->assertTrue($child->waitForExit(10), 'the holder did not die');
        $this->assertTrue(self::waitUntilGetLockFree($name), 'the lock outlived the killed holder');
        $this->assertSame(0, self::taggedRows($reader, $name), 'the killed holder\'s transaction was not rolled back');
    }

    /** @test */
    #[Test]
    public function closingTheMysqliEndsItsTransactionAndItsLockTogether(): void
    {
        $name = $this->lockName();
        $reader = self::dirtyReader();
        $child = $this->holderInATransaction('mysqli', $name, $reader);
        $this->assertReply('closed', $child->call(['close']));
        $this->assertTrue(self::waitUntilGetLockFree($name), 'the lock outlived the closed connection');
        $this->assertSame(0, self::taggedRows($reader, $name), 'the transaction outlived the closed connection');
        $this->assertReplyException(NotHeldException::class, $child->call(['release', $name]));
    }

    public static function endsAndConnections(): array
    {
        $cases = [];
        foreach (['exit' => 3, 'fatal' => 255] as $end => $status) {
            foreach (['native', 'pdo', 'mysqli'] as $kind) {
                $cases["$end, $kind"] = [$end, $kind, $status];
            }
        }
        return $cases;
    }

    /**
     * @test
     * @dataProvider endsAndConnections
     */
    #[Test]
    #[DataProvider('endsAndConnections')]
    public function processEndingInsideSynchronizedFreesTheLock(string $end, string $kind, int $status): void
    {
        $name = $this->lockName();
        $cmd = [PHP_BINARY, '-d', 'extension=' . extensionPath(), '-d', 'display_errors=stderr', __DIR__ . '/fixtures/end_inside.php', $end, 'session', $kind, $name];
        [$out, $err, $rc] = self::runToEnd($cmd);
        $this->assertSame("inside\n", $out, "the work did not run as planned; stderr: $err");
        $this->assertSame($status, $rc, "stderr: $err");
        $this->assertTrue(self::waitUntilGetLockFree($name), 'the lock outlived the process');
        $this->assertTrue((new SessionLock($name))->acquire(0.0));
    }
}
