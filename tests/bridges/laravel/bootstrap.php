<?php
// PHPUnit bootstrap of the Laravel bridge's tests: Debian's php-laravel-framework (8.83 on
// Debian 12, 13 in sid), the bridge, the extension and the lease tables. Fails loudly,
// never skips. MYSQLLOCK_LARAVEL=13 (or 8.83, tests/matrix's row): the run is for that
// Laravel, and fails on another.
declare(strict_types=1);

namespace MySqlLockLaravelTest;

use Illuminate\Container\Container;
use Illuminate\Contracts\Cache\Repository;
use MySqlLock\Laravel\LeaseStore;
use Nene\Kit\DistributedLock;
use MySqlLockTest\Support\ChildProcess;
use MySqlLockTest\Support\Polling;
use PHPUnit\Framework\TestCase as PHPUnitTestCase;

require __DIR__ . '/fixtures/app.php';
require_once dirname(__DIR__, 2) . '/php/support/ChildProcess.php';

// Test classes that others extend (LockContractTest).
spl_autoload_register(static function (string $class): void {
    $prefix = __NAMESPACE__ . '\\';
    if (str_starts_with($class, $prefix) && is_file($file = __DIR__ . '/' . str_replace('\\', '/', substr($class, strlen($prefix))) . '.php')) {
        require_once $file;
    }
});

// The first line says which Laravel runs and whether its Laravel 12+ tests are collected.
$told = getenv('MYSQLLOCK_LARAVEL');
fwrite(STDERR, sprintf(
    "Laravel %s (%s), PHP %s, PHPUnit %s: %s%s\n",
    laravelVersion(),
    stream_resolve_include_path('Illuminate/Foundation/Application.php'),
    PHP_VERSION,
    \PHPUnit\Runner\Version::id(),
    laravelAtLeast(12) ? 'the Laravel 12+ tests (Laravel13/) are collected' : 'the Laravel 12+ tests (Laravel13/) are not collected (Laravel < 12)',
    $told === false || $told === '' ? '' : ", MYSQLLOCK_LARAVEL=$told",
));
// Told which Laravel the run is for (tests/matrix: that version or a prefix of it, 13 for
// 13.31.0): another one is a failure, never a quiet run of fewer tests.
if ($told !== false && $told !== '' && laravelVersion() !== $told && !str_starts_with(laravelVersion(), "$told.")) {
    fail("MYSQLLOCK_LARAVEL=$told, but the installed Laravel is " . laravelVersion() . ': the tests of Laravel ' . $told . ' would not run as asked');
}
if ((string) ini_get('mysqllock.dsn') === '') {
    fail('mysqllock.dsn is not set (run with -d mysqllock.dsn=$MYSQLLOCK_TEST_DSN, as tests/suites/36-laravel.sh does)');
}

try {
    $pdo = connect();
    (new DistributedLock($pdo, TABLE))->createTable();
    $upgraded = new DistributedLock($pdo, UPGRADED_TABLE);
    $upgraded->createTable();
    $upgraded->upgradeTable();
    $pdo = null;
} catch (\Throwable $e) {
    fail('cannot prepare the lease tables: ' . $e->getMessage());
}

/** A child PHP process (fixtures/child.php) with its own app, scripted over pipes. */
final class Child extends ChildProcess
{
    public function __construct(array $storeConfig)
    {
        parent::__construct(
            [PHP_BINARY, '-d', 'extension=' . extensionPath(), '-d', 'mysqllock.dsn=' . ini_get('mysqllock.dsn'),
                '-d', 'display_errors=stderr', __DIR__ . '/fixtures/child.php', json_encode($storeConfig)],
            'lvt-child-',
        );
    }

    /** Sends a command and returns its result; fails the test on an exception or no reply. */
    public function run(array $cmd, float $timeout = 20.0): mixed
    {
        $reply = $this->call($cmd, $timeout);
        TestCase::assertNotNull($reply, json_encode($cmd) . ': no reply within ' . $timeout . ' s');
        TestCase::assertTrue($reply['ok'] ?? false, json_encode($cmd) . ' failed in the child: ' . json_encode($reply));
        return $reply['result'];
    }
}

/** The extension this run loaded, for the children. */
function extensionPath(): string
{
    return \MySqlLockTest\Support\extensionPath(dirname(__DIR__, 3));
}

/**
 * Base class: an app per test whose mysqllock store is storeConfig(), lock names unique per
 * test, children cleaned up, and reads of the lease table on a connection of the test's own.
 */
abstract class TestCase extends PHPUnitTestCase
{
    use Polling;

    private static ?\PDO $db = null;
    private static int $counter = 0;
    /** @var Child[] */
    private array $children = [];
    private ?string $unique = null;
    /** @var string[] resources not named after the test (scheduler mutexes), deleted in tearDown */
    protected array $resources = [];
    protected Container $app;

    /** The mysqllock store's config in config/cache.php for this test class. */
    protected function storeConfig(): array
    {
        return ['driver' => 'mysqllock', 'table' => TABLE];
    }

    protected function setUp(): void
    {
        if (!extension_loaded('mysqllock')) {
            $this->fail('the mysqllock extension is not loaded');
        }
        $this->app = makeApp($this->storeConfig());
    }

    protected function tearDown(): void
    {
        foreach ($this->children as $child) {
            $child->destroy();
        }
        $this->children = [];
        if ($this->unique !== null) {
            foreach ([TABLE, UPGRADED_TABLE] as $table) {
                self::db()->prepare("DELETE FROM `$table` WHERE resource LIKE ?")->execute(['%' . $this->unique . '%']);
            }
            $this->unique = null;
        }
        foreach ($this->resources as $resource) {
            foreach ([TABLE, UPGRADED_TABLE] as $table) {
                self::db()->prepare("DELETE FROM `$table` WHERE resource = ?")->execute([$resource]);
            }
        }
        $this->resources = [];
        Container::setInstance(null);
    }

    /** The mysqllock store as the app resolves it (a Repository around the LeaseStore). */
    protected function cache(): Repository
    {
        return $this->app->make('cache')->store('mysqllock');
    }

    protected function leaseStore(): LeaseStore
    {
        $store = $this->cache()->getStore();
        self::assertInstanceOf(LeaseStore::class, $store);
        return $store;
    }

    /** A lock name unique to this test (and process). */
    protected function lockName(string $suffix = 'lock'): string
    {
        $this->unique ??= 'p' . getmypid() . 't' . (++self::$counter);
        return "{$this->unique}-$suffix";
    }

    /** The resource a name becomes in the table (the cache prefix before it). */
    protected function resource(string $name): string
    {
        return $this->leaseStore()->getPrefix() . $name;
    }

    protected function table(): string
    {
        return $this->storeConfig()['table'] ?? 'distributed_locks';
    }

    /** A child process whose app has the same mysqllock store config. */
    protected function child(?array $config = null): Child
    {
        return $this->children[] = new Child($config ?? $this->storeConfig());
    }

    /** The tests' own connection to the server (never the one under test). */
    protected static function db(): \PDO
    {
        return self::$db ??= connect();
    }

    /**
     * The row of $name, read on the tests' own connection: owner, and seconds until
     * expires_at on the database clock (negative: expired).
     *
     * @return array{owner: string, remaining: float}|null
     */
    protected function row(string $name): ?array
    {
        $st = self::db()->prepare(
            'SELECT owner, TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), expires_at) / 1e6 AS remaining FROM `' . $this->table() . '` WHERE resource = ?'
        );
        $st->execute([$this->resource($name)]);
        $row = $st->fetch(\PDO::FETCH_ASSOC);
        return $row === false ? null : ['owner' => $row['owner'], 'remaining' => (float) $row['remaining']];
    }

    /** The owner of $name's lease while it is live (by the table's own time, read here), else null. */
    protected function liveOwner(string $name): ?string
    {
        $row = $this->row($name);
        $upgraded = $this->table() === UPGRADED_TABLE;
        // A whole-second expires_at is live through its second.
        return $row !== null && ($upgraded ? $row['remaining'] > 0 : $row['remaining'] > -1) ? $row['owner'] : null;
    }

    /**
     * Puts the lease of $name a day into the past, on the tests' own connection (as
     * Laravel's DatabaseLockTest moves `expiration`): expired, not ended.
     */
    protected function expireRow(string $name): void
    {
        $st = self::db()->prepare('UPDATE `' . $this->table() . '` SET expires_at = UTC_TIMESTAMP() - INTERVAL 1 DAY WHERE resource = ?');
        $st->execute([$this->resource($name)]);
        self::assertSame(1, $st->rowCount(), "no row of $name to expire");
    }

    /** Runs $fn and returns what it threw; fails if it threw nothing. */
    protected function thrownBy(callable $fn): \Throwable
    {
        try {
            $fn();
        } catch (\Throwable $e) {
            return $e;
        }
        $this->fail('nothing was thrown');
    }
}
