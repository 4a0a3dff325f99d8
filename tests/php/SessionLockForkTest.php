<?php
// pcntl_fork and MySqlLock\SessionLock: a child inherits the parent's sockets but neither
// uses nor releases the parent's sessions; its own session locks are its own.
declare(strict_types=1);

namespace MySqlLockTest;

use MySqlLock\ConnectionException;
use MySqlLock\NotHeldException;
use MySqlLock\SessionLock;
use PHPUnit\Framework\Attributes\DataProvider;
use PHPUnit\Framework\Attributes\Test;

final class SessionLockForkTest extends TestCase
{
    /** @test */
    #[Test]
    public function aForkedChildDoesNotHoldTheParentsSessionLockAndCannotTakeIt(): void
    {
        $name = $this->lockName();
        $lock = new SessionLock($name);
        $this->assertTrue($lock->acquire());
        $holder = $lock->holder();
        $seen = $this->inForkedChild(function () use ($name) {
            $theirs = new SessionLock($name);
            return [$theirs->isHeldByMe(), $theirs->acquire(0.0)];
        });
        $this->assertSame([false, false], $seen, '[isHeldByMe, acquire] in the child');
        $this->assertSame($holder, self::getLockHolder($name), 'the parent lost the lock');
        $this->assertTrue($lock->isHeldByMe());
    }

    /** @test */
    #[Test]
    public function aForkedChildCannotReleaseTheParentsSessionLock(): void
    {
        $name = $this->lockName();
        $lock = new SessionLock($name);
        $lock->acquire();
        $holder = $lock->holder();
        $thrown = $this->inForkedChild(function () use ($name) {
            try {
                (new SessionLock($name))->release();
                return 'released';
            } catch (NotHeldException $e) {
                return get_class($e);
            }
        });
        $this->assertSame(NotHeldException::class, $thrown);
        $this->assertSame($holder, self::getLockHolder($name), 'the child\'s end released the parent\'s lock');
    }

    /** @test */
    #[Test]
    public function aForkedChildsOwnSessionLockIsReleasedWhenItEnds(): void
    {
        $name = $this->lockName();
        $held = $this->inForkedChild(fn () => (new SessionLock($name))->acquire());
        $this->assertTrue($held);
        $this->assertTrue(self::waitUntilGetLockFree($name), 'the child\'s lock outlived it');
    }

    public static function userConnections(): array
    {
        return ['PDO' => ['pdo'], 'mysqli' => ['mysqli']];
    }

    /**
     * @test
     * @dataProvider userConnections
     */
    #[Test]
    #[DataProvider('userConnections')]
    public function aForkedChildRefusesTheParentsConnectionThatHoldsALock(string $kind): void
    {
        $conn = openConnection($kind);
        $lock = new SessionLock($this->lockName('parent'), $conn);
        $lock->acquire();
        $other = $this->lockName('child');
        $thrown = $this->inForkedChild(function () use ($other, $conn) {
            try {
                (new SessionLock($other, $conn))->acquire();
                return 'acquired on the parent\'s session';
            } catch (ConnectionException $e) {
                return get_class($e);
            }
        });
        $this->assertSame(ConnectionException::class, $thrown);
        // The child's end closed its copy of $conn, and with it the parent's session (PHP
        // closes inherited connections; only the extension's own are left alone).
        try {
            $lock->release();
        } catch (\Throwable $e) {
        }
    }
}
