<?php
// PHPUnit bootstrap of the Symfony Lock store's tests: the real Debian php-symfony-lock
// (5.4), the real extension, the test server from MYSQLLOCK_TEST_DSN. Fails, never skips,
// when any of them is missing.
declare(strict_types=1);

namespace MySqlLockSymfonyTest;

use MySqlLock\Symfony\MySqlLockStore;
use MySqlLockTest\Support\ChildProcess;
use MySqlLockTest\Support\Polling;
use PHPUnit\Framework\TestCase as PHPUnitTestCase;

require __DIR__ . '/fixtures/common.php';

if (!extension_loaded('mysqllock')) {
    bail('the mysqllock extension is not loaded (run with php -d extension=.../libmysqllock_php.so)');
}
loadFramework();
// The extension's default connection: what MySqlLockStore uses without a DSN or PDO.
ini_set('mysqllock.dsn', defaultDsn());

try {
    (new MySqlLockStore(null, ['mode' => 'shared']))->createTable();
    (new MySqlLockStore(null, ['mode' => 'lease']))->createTable();
} catch (\Throwable $e) {
    bail('cannot create the locks tables: ' . $e->getMessage() . ' ' . ($e->getPrevious()?->getMessage() ?? ''));
}

/**
 * A child PHP process running fixtures/child.php with the extension and the Symfony
 * packages: one JSON command per line on stdin, one JSON reply per line on stdout.
 */
final class Child extends ChildProcess
{
    public function __construct(string $script = 'child.php', array $args = [])
    {
        parent::__construct(
            [PHP_BINARY, '-d', 'extension=' . extensionPath(), '-d', 'mysqllock.dsn="' . defaultDsn() . '"', '-d', 'display_errors=stderr',
                __DIR__ . '/fixtures/' . $script, ...$args],
            'sft-child-',
        );
    }
}

/** Base class: unique resources per test, both modes, children and locks cleaned up. */
abstract class TestCase extends PHPUnitTestCase
{
    use Polling;

    private static ?\PDO $db = null;
    private static int $counter = 0;
    /** @var Child[] */
    private array $children = [];
    private ?string $prefix = null;

    /** Both modes of the store: the data provider of every behaviour Symfony documents. */
    public static function modes(): array
    {
        return ['SharedLock mode' => ['shared'], 'lease mode' => ['lease']];
    }

    protected function setUp(): void
    {
        if (!extension_loaded('mysqllock')) {
            $this->fail('the mysqllock extension is not loaded (expected ' . extensionPath() . ')');
        }
    }

    protected function tearDown(): void
    {
        foreach ($this->children as $child) {
            $child->destroy();
        }
        $this->children = [];
        forgetSharedLocks();
        if ($this->prefix !== null) {
            self::db()->prepare('DELETE FROM distributed_locks WHERE resource LIKE ?')->execute([$this->prefix . '%']);
            self::db()->prepare('DELETE FROM shared_locks WHERE name LIKE ?')->execute([$this->prefix . '%']);
            $this->prefix = null;
        }
    }

    /** A store on the extension's default connection (the test server). */
    protected function store(string $mode, array $options = []): MySqlLockStore
    {
        return new MySqlLockStore(null, ['mode' => $mode] + $options);
    }

    /** A resource name unique to this test: lowercase, so it is the lock's name in the table too. */
    protected function resource(string $suffix = 'r'): string
    {
        return $this->prefix() . $suffix;
    }

    protected function prefix(): string
    {
        return $this->prefix ??= 'sft-' . getmypid() . '-' . (++self::$counter) . '-';
    }

    /** A child process with a store of $mode (killed in tearDown). */
    protected function child(string $mode, array $options = []): Child
    {
        $child = $this->children[] = new Child();
        $this->assertOk($child->call(['store', $mode, (object) $options]));
        return $child;
    }

    /** The inspection connection (never the one a store locks on). */
    protected static function db(): \PDO
    {
        return self::$db ??= connect();
    }

    /** Whether any session sleeps in GET_LOCK on $name right now (the server's process list). */
    protected static function someoneWaitsInServer(string $name): bool
    {
        $st = self::db()->prepare("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE STATE = 'User lock'
            AND (INFO LIKE CONCAT('%', ?, '%') OR UPPER(INFO) LIKE CONCAT('%', HEX(?), '%'))");
        $st->execute([$name, $name]);
        return (int) $st->fetchColumn() > 0;
    }

    protected function assertOk(?array $reply, mixed $result = 'ok'): void
    {
        $this->assertNotNull($reply, 'no reply within the time limit');
        $this->assertTrue($reply['ok'] ?? false, 'child replied ' . json_encode($reply));
        $this->assertSame($result, $reply['result'] ?? null, 'child replied ' . json_encode($reply));
    }

    protected function assertThrew(string $class, ?array $reply): void
    {
        $this->assertNotNull($reply, "no reply (expected $class) within the time limit");
        $this->assertSame($class, $reply['class'] ?? null, 'child replied ' . json_encode($reply));
    }
}
