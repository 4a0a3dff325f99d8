<?php
// A GET_LOCK deadlock: this process holds x and waits for y while another holds y and
// waits for x. The server refuses the wait that closes the cycle (MariaDB: error 1213;
// MySQL 8 and 9: 3058): MySqlLock\DeadlockException for a SessionLock, and for SharedLock the
// usual SharedLockAcquireException with that DeadlockException as getPrevious().
declare(strict_types=1);

namespace MySqlLockTest;

use ItsMieger\MySqlSharedLocks\Exception\SharedLockAcquireException;
use ItsMieger\MySqlSharedLocks\Exception\SharedLockTimeoutException;
use ItsMieger\MySqlSharedLocks\SharedLock;
use MySqlLock\DeadlockException;
use MySqlLock\SessionLock;
use PHPUnit\Framework\Attributes\DataProvider;
use PHPUnit\Framework\Attributes\Test;

final class DeadlockTest extends TestCase
{
    public static function connections(): array
    {
        return ['native connection' => ['native'], 'PDO' => ['pdo'], 'mysqli' => ['mysqli']];
    }

    /** Waits until server session $id sleeps in a GET_LOCK (processlist state "User lock"). */
    private static function waitUntilWaitingForALock(int $id): void
    {
        $st = self::db()->prepare('SELECT STATE FROM information_schema.PROCESSLIST WHERE ID = ?');
        $waiting = self::waitUntil(function () use ($st, $id) {
            $st->execute([$id]);
            return $st->fetchColumn() === 'User lock';
        }, 10);
        self::assertTrue($waiting, "session $id never waited for a lock");
    }

    /**
     * This process holds $x on $conn; a child holds $y (session locks) and waits for $x.
     * Returns the child.
     */
    private function cycleWithAChild(string $x, string $y, SessionLock $mine): Child
    {
        $this->assertTrue($mine->acquire());
        $child = $this->startSessionChild('native');
        $this->assertReply(true, $child->call(['acquire', $y, 0]));
        $child->command(['acquire', $x, 30]);
        self::waitUntilWaitingForALock((int) self::getLockHolder($y));
        return $child;
    }

    /**
     * @test
     * @dataProvider connections
     */
    #[Test]
    #[DataProvider('connections')]
    public function waitingForALockWhoseHolderWaitsForOneWeHoldThrowsDeadlock(string $kind): void
    {
        [$x, $y] = [$this->lockName('x'), $this->lockName('y')];
        $conn = openConnection($kind);
        $mine = new SessionLock($x, $conn);
        $this->cycleWithAChild($x, $y, $mine);
        $e = $this->catchThrown(fn () => (new SessionLock($y, $conn))->acquire(30.0));
        $this->assertInstanceOf(DeadlockException::class, $e);
        $expected = ['mariadb' => 1213, 'mysql' => 3058][serverKind()];
        $this->assertSame($expected, $e->getCode(), 'the server\'s error number');
        $mine->release();
    }

    /**
     * @test
     * @dataProvider connections
     */
    #[Test]
    #[DataProvider('connections')]
    public function aRefusedDeadlockWaitKeepsTheLocksThisSessionHeld(string $kind): void
    {
        [$x, $y] = [$this->lockName('x'), $this->lockName('y')];
        $conn = openConnection($kind);
        $mine = new SessionLock($x, $conn);
        $child = $this->cycleWithAChild($x, $y, $mine);
        $this->catchThrown(fn () => (new SessionLock($y, $conn))->acquire(30.0));
        $this->assertSame($mine->holder(), self::getLockHolder($x), 'the lock held before moved');
        $this->assertTrue($mine->isHeldByMe(), 'the deadlock cost this session the lock it held');
        $mine->release();
        $this->assertReply(true, $child->receive(10.0)); // the other side gets it now
    }

    public static function userConnections(): array
    {
        return ['PDO' => ['pdo', \PDOException::class], 'mysqli' => ['mysqli', \mysqli_sql_exception::class]];
    }

    /**
     * @test
     * @dataProvider userConnections
     */
    #[Test]
    #[DataProvider('userConnections')]
    public function deadlockOnAUserConnectionCarriesTheDriversExceptionAsPrevious(string $kind, string $driverException): void
    {
        [$x, $y] = [$this->lockName('x'), $this->lockName('y')];
        $conn = openConnection($kind);
        $mine = new SessionLock($x, $conn);
        $this->cycleWithAChild($x, $y, $mine);
        $e = $this->catchThrown(fn () => (new SessionLock($y, $conn))->acquire(30.0));
        $this->assertInstanceOf($driverException, $e->getPrevious());
        $mine->release();
    }

    /** @test */
    #[Test]
    public function sharedLockDeadlockIsAnAcquireExceptionCausedByDeadlockException(): void
    {
        [$x, $y] = [$this->lockName('x'), $this->lockName('y')];
        SharedLock::lock($x, 0, 60);
        $child = $this->startHolder($y, 60);
        $child->command(['lock', $x, 30, 60]);
        self::waitUntilWaitingForALock((int) self::rows($y)[0]['connection_id']);
        $e = $this->catchThrown(fn () => SharedLock::lock($y, 30, 60));
        $this->assertInstanceOf(SharedLockAcquireException::class, $e);
        $this->assertNotInstanceOf(SharedLockTimeoutException::class, $e, 'a deadlock is no timeout');
        $this->assertInstanceOf(DeadlockException::class, $e->getPrevious(), 'getPrevious() of ' . $e->getMessage());
        SharedLock::assertTTL($x, 1); // still held
    }
}
