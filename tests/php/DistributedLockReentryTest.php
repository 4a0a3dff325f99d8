<?php
// PHP code that runs inside a call of the extension (here a PDOStatement subclass; an
// error handler is the same case) may call the extension again: another
// DistributedLock, SharedLock from inside a DistributedLock, a DistributedLock from
// inside SharedLock. Only the very object whose call is running refuses, and it goes on
// working afterwards.
declare(strict_types=1);

namespace MySqlLockTest;

use ItsMieger\MySqlSharedLocks\SharedLock;
use Nene\Kit\DistributedLock;
use PHPUnit\Framework\Attributes\Test;

/** Runs a hook once, before the next execution of any statement of its PDO. */
final class ReentryStatement extends \PDOStatement
{
    /** @var callable|null */
    public static $hook = null;

    protected function __construct()
    {
    }

    public function execute(?array $params = null): bool
    {
        $hook = self::$hook;
        self::$hook = null;
        if ($hook !== null) {
            $hook();
        }
        return parent::execute($params);
    }
}

final class DistributedLockReentryTest extends TestCase
{
    protected function tearDown(): void
    {
        ReentryStatement::$hook = null;
        parent::tearDown();
    }

    /** @test */
    #[Test]
    public function codeRunningInsideOneDistributedLockCanUseAnother(): void
    {
        $outer = new DistributedLock($this->sqlite(hooked: true));
        $inner = new DistributedLock($this->sqlite(hooked: false));
        $innerWon = null;
        ReentryStatement::$hook = function () use ($inner, &$innerWon): void {
            $innerWon = $inner->acquire('job:inner', 'owner-B', 30);
        };

        $this->assertTrue($outer->acquire('job:outer', 'owner-A', 30));
        $this->assertNull(ReentryStatement::$hook, 'the hook never ran');
        $this->assertTrue($innerWon);
        $this->assertSame('owner-B', $inner->owner('job:inner'));
        $this->assertSame('owner-A', $outer->owner('job:outer'));
    }

    /** @test */
    #[Test]
    public function aDistributedLockCalledFromInsideItsOwnCallRefusesAndKeepsWorking(): void
    {
        $lock = new DistributedLock($this->sqlite(hooked: true));
        $inside = null;
        ReentryStatement::$hook = function () use ($lock, &$inside): void {
            $inside = $this->catchThrown(fn () => $lock->isHeld('job:x'));
        };

        $this->assertTrue($lock->acquire('job:x', 'owner-A', 30));
        $this->assertInstanceOf(\Error::class, $inside);
        $this->assertStringContainsString('called from inside another of its calls', $inside->getMessage());
        $this->assertSame('owner-A', $lock->owner('job:x'));
        $this->assertTrue($lock->release('job:x', 'owner-A'));
    }

    /** @test */
    #[Test]
    public function codeRunningInsideADistributedLockCanUseSharedLock(): void
    {
        $lease = new DistributedLock($this->sqlite(hooked: true));
        $name = $this->lockName();
        ReentryStatement::$hook = function () use ($name): void {
            SharedLock::lock($name, 5, 30);
        };

        $this->assertTrue($lease->acquire('job:x', 'owner-A', 30));
        $this->assertNull(ReentryStatement::$hook, 'the hook never ran');
        $this->assertSame([$name], array_column(self::rows($name), 'name'), 'SharedLock::lock() inside left no row');
        SharedLock::unlock($name);
        $this->assertSame('owner-A', $lease->owner('job:x'));
    }

    /** @test */
    #[Test]
    public function codeRunningInsideSharedLockCanUseADistributedLock(): void
    {
        $pdo = connect();
        $pdo->setAttribute(\PDO::ATTR_STATEMENT_CLASS, [ReentryStatement::class, []]);
        SharedLock::setConnection($pdo);
        $lease = new DistributedLock($this->sqlite(hooked: false));
        $won = null;
        ReentryStatement::$hook = function () use ($lease, &$won): void {
            $won = $lease->acquire('job:inner', 'owner-B', 30);
        };

        $name = $this->lockName();
        SharedLock::lock($name, 5, 30);
        $this->assertNull(ReentryStatement::$hook, 'the hook never ran');
        $this->assertTrue($won);
        $this->assertSame('owner-B', $lease->owner('job:inner'));
        SharedLock::unlock($name);
    }

    /** An in-memory SQLite database with the lease table; `hooked`: its statements are ReentryStatements. */
    private function sqlite(bool $hooked): \PDO
    {
        $pdo = new \PDO('sqlite::memory:', null, null, [\PDO::ATTR_ERRMODE => \PDO::ERRMODE_EXCEPTION]);
        $pdo->exec(self::SEED_DDL);
        if ($hooked) {
            $pdo->setAttribute(\PDO::ATTR_STATEMENT_CLASS, [ReentryStatement::class, []]);
        }
        return $pdo;
    }
}
