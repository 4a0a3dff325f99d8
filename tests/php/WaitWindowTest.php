<?php
// What an acquirer meets between two of its statements (SPEC §4): the owner's row
// vanishing right before the acquirer looks at it.
declare(strict_types=1);

namespace MySqlLockTest;

use ItsMieger\MySqlSharedLocks\Exception\SharedLockTimeoutException;
use ItsMieger\MySqlSharedLocks\SharedLock;

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
    public function aRowThatVanishesRightBeforeTheAcquirerLooksAtItEndsTheTryAsATimeout(): void
    {
        $name = $this->lockName();
        $this->startHolder($name);
        $pdo = connect();
        $pdo->setAttribute(\PDO::ATTR_STATEMENT_CLASS, [HookedStatement::class, []]);
        SharedLock::setConnection($pdo);
        // The look at the row: the core's `inspect` statement (core/src/sql.rs).
        HookedStatement::$before['AS probe LEFT JOIN'] = function () use ($name): void {
            self::db()->prepare('DELETE FROM shared_locks WHERE name = ?')->execute([$name]);
        };

        $e = $this->catchThrown(fn () => SharedLock::lock($name, 0, 10));

        $this->assertSame([], HookedStatement::$before, 'the acquisition never looked at the row');
        $this->assertInstanceOf(SharedLockTimeoutException::class, $e, json_encode(describe($e)));
        $this->assertSame([], self::rows($name), 'the try left a row behind');
    }
}
