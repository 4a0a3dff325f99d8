<?php
// PHPUnit bootstrap: the test server (from MYSQLLOCK_TEST_DSN), the locks table, and the
// helpers every test uses. Fails loudly instead of skipping.
declare(strict_types=1);

namespace MySqlLockTest;

use ItsMieger\MySqlSharedLocks\Exception\SharedLockTimeoutException;
use ItsMieger\MySqlSharedLocks\SharedLock;
use MySqlLockTest\Support\ChildProcess;
use MySqlLockTest\Support\Polling;
use PHPUnit\Framework\TestCase as PHPUnitTestCase;

require __DIR__ . '/fixtures/common.php';
require_once __DIR__ . '/support/ChildProcess.php';

/** The extension the children load: the one this run was started with. */
function extensionPath(): string
{
    return Support\extensionPath(dirname(__DIR__, 2));
}

/** SPEC §4: the original package's table, verbatim. */
const CREATE_TABLE = 'CREATE TABLE IF NOT EXISTS `shared_locks` (
  `name` varchar(64) NOT NULL,
  `connection_id` bigint(20) NOT NULL,
  `created` bigint(20) NOT NULL,
  `ttl` bigint(20) NOT NULL,
  `lock_acquired` tinyint(1) NOT NULL,
  UNIQUE KEY `shared_locks_ix1` (`name`)
) ENGINE=MyISAM DEFAULT CHARSET=latin1';

/** An InnoDB table the setConnection scenario writes to inside a transaction. */
const TX_TABLE = 'phpt_tx';

/**
 * A second locks table, upgraded as `mysqllock init --upgrade` does (fencing tokens,
 * holder host name and pid), for the tests of what only an upgraded table offers.
 */
const FENCED_TABLE = 'phpt_fenced_locks';

/** What `mysqllock init --upgrade` (core: Locker::upgrade_table) adds to the original table. */
const UPGRADE_TABLE = 'ALTER TABLE `' . FENCED_TABLE . '`
  ADD COLUMN token BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  ADD COLUMN holder_host VARCHAR(255) NULL DEFAULT NULL,
  ADD COLUMN holder_pid BIGINT UNSIGNED NULL DEFAULT NULL,
  ADD KEY token (token)';

/** Creates the upgraded table (the original package's SQL, then the upgrade) once. */
function createFencedTable(\PDO $pdo): void
{
    $pdo->exec(str_replace('`shared_locks`', '`' . FENCED_TABLE . '`', CREATE_TABLE));
    $st = $pdo->prepare("SELECT COUNT(*) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ? AND COLUMN_NAME = 'token'");
    $st->execute([FENCED_TABLE]);
    if ((int) $st->fetchColumn() === 0) {
        $pdo->exec(UPGRADE_TABLE);
    }
}

if (!extension_loaded('mysqli')) {
    fwrite(STDERR, "the PHP extension mysqli is missing: session locks are tested on it (php8.2-mysql ships it)\n");
    exit(2);
}

try {
    $pdo = connect();
    $pdo->exec(CREATE_TABLE);
    $pdo->exec('CREATE TABLE IF NOT EXISTS `' . TX_TABLE . '` (tag varchar(100) NOT NULL) ENGINE=InnoDB');
    createFencedTable($pdo);
    $pdo = null;
} catch (\PDOException $e) {
    fwrite(STDERR, 'cannot prepare the test database: ' . $e->getMessage() . "\n");
    exit(2);
}

/**
 * A child PHP process running fixtures/holder.php (or another fixture) with the
 * extension, scripted over stdin/stdout with one JSON document per line.
 */
final class Child extends ChildProcess
{
    public function __construct(string $script = 'holder.php', array $args = [])
    {
        parent::__construct(
            [PHP_BINARY, '-d', 'extension=' . extensionPath(), '-d', 'display_errors=stderr', __DIR__ . '/fixtures/' . $script, ...$args],
            'phpt-child-',
        );
    }

    /** Sends a command without waiting for its reply (send()'s name in these tests). */
    public function command(array $cmd): void
    {
        $this->send($cmd);
    }
}

/** Base class: unique lock names, a fresh configuration per test, children cleaned up. */
abstract class TestCase extends PHPUnitTestCase
{
    /** The lease table of Nene\Kit\DistributedLock, as its seed documents it, verbatim. */
    protected const SEED_DDL = 'CREATE TABLE distributed_locks (
resource VARCHAR(255) PRIMARY KEY,
owner VARCHAR(255) NOT NULL,
expires_at DATETIME NOT NULL,
acquired_at DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP
)';

    use Polling;

    private static ?\PDO $db = null;
    private static int $counter = 0;
    /** @var Child[] */
    private array $children = [];
    private ?string $prefix = null;

    /**
     * Runs $cmd to its end (stdin /dev/null) and returns [stdout, stderr, exit status].
     * stderr goes to a file, so a chatty child cannot block on a full pipe while its
     * stdout is read.
     *
     * @return array{0: string, 1: string, 2: int}
     */
    protected static function runToEnd(array $cmd): array
    {
        $errFile = tempnam(sys_get_temp_dir(), 'phpt-err');
        $proc = proc_open($cmd, [0 => ['file', '/dev/null', 'r'], 1 => ['pipe', 'w'], 2 => ['file', $errFile, 'w']], $pipes);
        self::assertIsResource($proc, 'cannot start ' . implode(' ', $cmd));
        $out = stream_get_contents($pipes[1]);
        fclose($pipes[1]);
        $rc = proc_close($proc);
        $err = (string) file_get_contents($errFile);
        unlink($errFile);
        return [$out, $err, $rc];
    }

    protected function setUp(): void
    {
        if (!extension_loaded('mysqllock')) {
            $this->fail('the mysqllock extension is not loaded (expected ' . extensionPath() . ')');
        }
        configure();
        SharedLock::setQuoteStyle(SharedLock::QUOTE_STYLE_DEFAULT);
        if (method_exists(SharedLock::class, 'setTable')) {
            SharedLock::setTable('shared_locks');
        }
    }

    protected function tearDown(): void
    {
        foreach ($this->children as $child) {
            $child->destroy();
        }
        $this->children = [];
        if (extension_loaded('mysqllock')) {
            configure(); // drops this process's session and with it every lock of the test
        }
        if ($this->prefix !== null) {
            foreach (['shared_locks', FENCED_TABLE] as $table) {
                self::db()->prepare("DELETE FROM `$table` WHERE name LIKE ?")->execute([$this->prefix . '%']);
            }
            $this->prefix = null;
        }
    }

    /** The inspection connection (not the one the extension locks on). */
    protected static function db(): \PDO
    {
        return self::$db ??= connect();
    }

    /** Drops the inspection connection (before pcntl_fork, so a child cannot close it). */
    protected static function closeDb(): void
    {
        self::$db = null;
    }

    /** The table's rows for one name, as associative arrays. */
    protected static function rows(string $name): array
    {
        $st = self::db()->prepare('SELECT name, connection_id, created, ttl, lock_acquired FROM shared_locks WHERE name = ? ORDER BY name');
        $st->execute([$name]);
        return $st->fetchAll(\PDO::FETCH_ASSOC);
    }

    /** The rows for one name in the upgraded table, with the upgrade's columns. */
    protected static function fencedRows(string $name): array
    {
        $st = self::db()->prepare('SELECT name, connection_id, created, ttl, lock_acquired, token, holder_host, holder_pid FROM `' . FENCED_TABLE . '` WHERE name = ?');
        $st->execute([$name]);
        return $st->fetchAll(\PDO::FETCH_ASSOC);
    }

    /** Every row of names this test created (and empty names), to compare before/after. */
    protected function ownRows(): array
    {
        $st = self::db()->prepare("SELECT name, connection_id, created, ttl, lock_acquired FROM shared_locks WHERE name LIKE ? OR name = '' ORDER BY name");
        $st->execute([$this->prefix() . '%']);
        return $st->fetchAll(\PDO::FETCH_ASSOC);
    }

    /** This test's prefix: unique per process and test, so suites can share the server. */
    protected function prefix(): string
    {
        return $this->prefix ??= 'phpt-' . getmypid() . '-' . (++self::$counter) . '-';
    }

    /** A lock name unique to this test. */
    protected function lockName(string $suffix = 'lock'): string
    {
        return $this->prefix() . $suffix;
    }

    /** A child PHP process with the extension, ready for commands (killed in tearDown). */
    protected function startChild(string $script = 'holder.php', array $args = []): Child
    {
        return $this->children[] = new Child($script, $args);
    }

    /** A child holding MySqlLock\SessionLocks on a connection of $kind (fixtures/session_holder.php). */
    protected function startSessionChild(string $kind = 'native'): Child
    {
        return $this->startChild('session_holder.php', [$kind]);
    }

    /** Who holds the GET_LOCK $key now (IS_USED_LOCK, asked on the inspection connection). */
    protected static function getLockHolder(string $key): ?int
    {
        $st = self::db()->prepare('SELECT IS_USED_LOCK(?)');
        $st->execute([$key]);
        $id = $st->fetchColumn();
        return $id === null ? null : (int) $id;
    }

    /** Waits (10 s at most) until nobody holds the GET_LOCK $key; whether it became free. */
    protected static function waitUntilGetLockFree(string $key, float $timeout = 10): bool
    {
        return self::waitUntil(fn () => self::getLockHolder($key) === null, $timeout);
    }

    /**
     * Forks; the child runs $inChild (whose return value is written to a file for the
     * parent) and exits normally with status 0, or 1 if it threw. Fails unless the child
     * exited with 0; returns the child's result.
     */
    protected function inForkedChild(callable $inChild): mixed
    {
        $report = tempnam(sys_get_temp_dir(), 'phpt-fork-');
        self::closeDb(); // the child must not close the parent's inspection session
        $pid = pcntl_fork();
        $this->assertNotSame(-1, $pid, 'pcntl_fork failed');
        if ($pid === 0) {
            $status = 0;
            try {
                $result = $inChild();
            } catch (\Throwable $e) {
                $result = describe($e);
                $status = 1;
            }
            file_put_contents($report, json_encode($result));
            exit($status);
        }
        $status = 0;
        $exited = self::waitUntil(function () use ($pid, &$status) {
            return pcntl_waitpid($pid, $status, WNOHANG) === $pid;
        }, 30);
        if (!$exited) {
            posix_kill($pid, SIGKILL);
            pcntl_waitpid($pid, $status);
        }
        $result = json_decode((string) file_get_contents($report), true);
        unlink($report);
        $this->assertTrue($exited, 'the forked child did not exit');
        $this->assertTrue(pcntl_wifexited($status), 'the forked child did not exit normally');
        $this->assertSame(0, pcntl_wexitstatus($status), 'the forked child failed: ' . json_encode($result));
        return $result;
    }

    /** A child that holds $name (ttl seconds, lock()'s $options). */
    protected function startHolder(string $name, float $ttl = 30, array $options = []): Child
    {
        $child = $this->startChild();
        $this->assertReply('locked', $child->call(['lock', $name, 0, $ttl, (object) $options]));
        return $child;
    }

    /** A child whose locks live in the upgraded table. */
    protected function startFencedChild(): Child
    {
        $child = $this->startChild();
        $this->assertReply('ok', $child->call(['table', FENCED_TABLE]));
        return $child;
    }

    /**
     * Whether $name is taken for another process: its lock($name) with a 3 s timeout
     * times out (the child keeps the lock if not). Not tryLock(): the core takes a lease
     * whose TTL passed over from a holder that still lives (by KILLing its session) only
     * after waiting out grace periods of about 1.5 s, never in a single try.
     */
    protected static function takenFor(Child $other, string $name): bool
    {
        $reply = $other->call(['lock', $name, 3, 10]);
        if (($reply['result'] ?? null) === 'locked') {
            return false;
        }
        if (($reply['class'] ?? null) !== SharedLockTimeoutException::class) {
            self::fail('lock() in the other process failed: ' . json_encode($reply));
        }
        return true;
    }

    /** As takenFor(), from this process (which then holds the lock if it was free). */
    protected static function taken(string $name): bool
    {
        try {
            SharedLock::lock($name, 3, 10);
            return false;
        } catch (SharedLockTimeoutException $e) {
            return true;
        }
    }

    /** Keep-alive threads of this process (Linux shows their name, cut to 15 bytes). */
    protected static function keepAliveThreads(): int
    {
        $names = array_map(fn ($f) => trim((string) @file_get_contents($f)), glob('/proc/self/task/*/comm') ?: []);
        self::assertNotEmpty($names, 'cannot read /proc/self/task/*/comm');
        return count(array_filter($names, fn ($n) => strpos($n, 'mysqllock-keep') === 0));
    }

    /** The database clock (UNIX_TIMESTAMP()). */
    protected static function dbNow(): int
    {
        return (int) self::db()->query('SELECT UNIX_TIMESTAMP()')->fetchColumn();
    }

    /** Waits until $name's lease has expired on the database clock, so another process may take it over. */
    protected static function waitUntilExpired(string $name, string $table = 'shared_locks'): void
    {
        self::waitUntilPast($name, 'created + ttl', $table, "the lease of $name did not expire");
    }

    /** Waits until $seconds have passed since $name's row was created, on the database clock. */
    protected static function waitUntilAged(string $name, int $seconds, string $table = 'shared_locks'): void
    {
        self::waitUntilPast($name, "created + $seconds", $table, "the row of $name did not become $seconds s old");
    }

    /** Waits (15 s at most) until the instant $when (SQL over $name's row) is past on the database clock. */
    private static function waitUntilPast(string $name, string $when, string $table, string $failure): void
    {
        $st = self::db()->prepare("SELECT COUNT(*) FROM `$table` WHERE name = ? AND $when < UNIX_TIMESTAMP()");
        $past = self::waitUntil(function () use ($st, $name) {
            $st->execute([$name]);
            return (int) $st->fetchColumn() === 1;
        }, 15, 0.05);
        self::assertTrue($past, $failure);
    }

    /** Asserts a child's reply is the given result. */
    protected function assertReply(string|int|bool $expected, ?array $reply): void
    {
        $this->assertNotNull($reply, "no reply (expected $expected) within the time limit");
        $this->assertSame($expected, $reply['result'] ?? null, 'child replied ' . json_encode($reply));
    }

    /** Asserts a child's reply is an exception of the given class. */
    protected function assertReplyException(string $class, ?array $reply): void
    {
        $this->assertNotNull($reply, "no reply (expected $class) within the time limit");
        $this->assertSame($class, $reply['class'] ?? null, 'child replied ' . json_encode($reply));
    }

    /** Whether a server session with this id exists. */
    protected static function sessionExists(int $id): bool
    {
        $st = self::db()->prepare('SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = ?');
        $st->execute([$id]);
        return (int) $st->fetchColumn() === 1;
    }

    /** The messages of $e's getPrevious() chain (not $e's own). */
    protected static function previousMessages(\Throwable $e): array
    {
        $messages = [];
        for ($p = $e->getPrevious(); $p !== null; $p = $p->getPrevious()) {
            $messages[] = $p->getMessage();
        }
        return $messages;
    }

    /** Runs $fn and returns what it threw; fails if it threw nothing. */
    protected function catchThrown(callable $fn): \Throwable
    {
        try {
            $fn();
        } catch (\Throwable $e) {
            return $e;
        }
        $this->fail('nothing was thrown');
    }
}
