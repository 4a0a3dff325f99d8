<?php
// What an acquirer meets between two of its statements and in the last fraction of a
// second of its wait (SPEC §4): the owner's row vanishing right before the acquirer
// looks at it, and a release while less than a second of the wait is left (MySQL rounds
// GET_LOCK's timeout to whole seconds, MariaDB waits the fraction).
declare(strict_types=1);

namespace MySqlLockTest;

use ItsMieger\MySqlSharedLocks\Exception\SharedLockTimeoutException;
use ItsMieger\MySqlSharedLocks\SharedLock;
use PHPUnit\Framework\Attributes\Test;

/**
 * Runs a hook right before the first execution of a statement whose text contains a
 * marker: the test's way into the gap between two statements of the extension, which
 * runs its SQL through the PDO handed to SharedLock::setConnection().
 */
final class HookedStatement extends \PDOStatement
{
    /** @var array<string, callable> marker => hook, removed once it ran */
    public static array $before = [];

    protected function __construct()
    {
    }

    public function execute(?array $params = null): bool
    {
        foreach (self::$before as $marker => $hook) {
            if (str_contains($this->queryString, $marker)) {
                unset(self::$before[$marker]);
                $hook();
            }
        }
        return parent::execute($params);
    }
}

final class WaitWindowTest extends TestCase
{
    protected function tearDown(): void
    {
        HookedStatement::$before = [];
        parent::tearDown();
    }

    /**
     * The acquirer claims the row, finds it taken, and looks at it; the owner releases
     * in between (here: its row is deleted right before the look). The look finds no
     * row, which on MySQL must not reach IS_USED_LOCK(NULL) (error 3057): the one try
     * ends as a timeout, the owner still holding the GET_LOCK.
     *
     * @test
     */
    #[Test]
    public function aRowThatVanishesRightBeforeTheAcquirerLooksAtItEndsTheTryAsATimeout(): void
    {
        $name = $this->lockName();
        $this->startHolder($name);
        $pdo = connect();
        $pdo->setAttribute(\PDO::ATTR_STATEMENT_CLASS, [HookedStatement::class, []]);
        SharedLock::setConnection($pdo);
        // The look at the row: the core's `inspect` statement (core/src/locker/sql.rs).
        HookedStatement::$before['AS probe LEFT JOIN'] = function () use ($name): void {
            self::db()->prepare('DELETE FROM shared_locks WHERE name = ?')->execute([$name]);
        };

        $e = $this->catchThrown(fn () => SharedLock::lock($name, 0, 10));

        $this->assertSame([], HookedStatement::$before, 'the acquisition never looked at the row');
        $this->assertInstanceOf(SharedLockTimeoutException::class, $e, json_encode(describe($e)));
        $this->assertSame([], self::rows($name), 'the try left a row behind');
    }

    /**
     * A waiter with less than a second to wait (0.49 s) is handed a lock released while
     * it waits at once, as a waiter with whole seconds is: not only at the end of its
     * wait, which would be about 0.4 s after this release.
     *
     * @test
     */
    #[Test]
    public function aWaiterWithASubSecondTimeoutIsHandedALockReleasedWhileItWaitsAtOnce(): void
    {
        $name = $this->lockName();
        $holder = $this->startHolder($name);
        $waiter = $this->startChild();
        // The waiter's connection is open before it starts waiting.
        $this->assertReply('locked', $waiter->call(['lock', $this->lockName('warm-up'), 0, 10]));
        $waiter->command(['lock', $name, 0.49, 10]);
        $this->assertNull($waiter->receive(0.1), 'the waiter got the lock while another process held it');
        $this->assertReply('released', $holder->call(['release', $name]));
        $releasedAt = microtime(true);
        $this->assertReply('locked', $waiter->receive(5.0));
        $this->assertLessThan(0.2, microtime(true) - $releasedAt, 'the waiter was not woken by the release');
    }
}
