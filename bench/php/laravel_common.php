<?php
// Shared by the Laravel benchmark (bench/laravel.sh): a minimal Laravel 8.83 application
// (Debian's php-laravel-framework) with two lock stores on the same MariaDB, the ways of
// blocking on a Cache::lock() that are compared, and statistics. Run with the extension
// and -d mysqllock.dsn=... (the same server as MYSQLLOCK_BENCH_DSN, with ssl-mode=MYSQLLOCK_BENCH_SSL_MODE).
declare(strict_types=1);

namespace MySqlLockBench\Laravel;

use Illuminate\Cache\CacheServiceProvider;
use Illuminate\Config\Repository as Config;
use Illuminate\Container\Container;
use Illuminate\Contracts\Cache\Lock;
use Illuminate\Database\DatabaseServiceProvider;
use Illuminate\Database\Schema\Blueprint;
use MySqlLock\Laravel\MySqlLockServiceProvider;
use Nene\Kit\DistributedLock;

use function MySqlLockBench\fail;
use function MySqlLockBench\server;

require_once __DIR__ . '/common.php';

foreach (['Contracts', 'Support', 'Container', 'Config', 'Events', 'Cache', 'Database'] as $component) {
    if (stream_resolve_include_path("Illuminate/$component/autoload.php") === false) {
        fail("Laravel's Illuminate/$component is missing (apt-get install php-laravel-framework)");
    }
    require_once "Illuminate/$component/autoload.php";
}
spl_autoload_register(static function (string $class): void {
    $prefix = 'MySqlLock\\Laravel\\';
    if (str_starts_with($class, $prefix)) {
        require dirname(__DIR__, 2) . '/bridges/laravel/src/' . str_replace('\\', '/', substr($class, strlen($prefix))) . '.php';
    }
});

/** Seconds every lock is taken for: never runs out during a run. */
const TTL = 60;

/**
 * What is compared: the store, and the interval block() sleeps between tries (null: the
 * store's default: the extension's backoff for mysqllock, Laravel's 250 ms for database).
 */
const IMPLS = [
    'ours' => ['store' => 'mysqllock', 'interval' => null,
        'label' => '(a) mysqllock driver, `block()`: the extension\'s backoff (5 ms doubling to 250 ms, jitter)'],
    'ours250' => ['store' => 'mysqllock', 'interval' => 250,
        'label' => '(b) mysqllock driver, `betweenBlockedAttemptsSleepFor(250)`: Laravel\'s fixed loop'],
    'database' => ['store' => 'database', 'interval' => null,
        'label' => '(c) Laravel `DatabaseLock` (`database` store, `cache_locks`), `block()`: Laravel\'s 250 ms loop'],
];

/** The app: stores "mysqllock" (the extension's own connection) and "database" (connection "mysql"). */
function app(): Container
{
    $s = server();
    $app = new Container();
    Container::setInstance($app);
    $app->instance('config', new Config([
        'cache' => [
            'default' => 'database',
            'prefix' => 'bench_',
            'stores' => [
                'mysqllock' => ['driver' => 'mysqllock', 'table' => 'distributed_locks'],
                'database' => ['driver' => 'database', 'connection' => 'mysql', 'table' => 'cache', 'lock_table' => 'cache_locks'],
            ],
        ],
        'database' => [
            'default' => 'mysql',
            'connections' => [
                'mysql' => [
                    'driver' => 'mysql', 'host' => $s['host'], 'port' => $s['port'], 'database' => $s['db'],
                    'username' => $s['user'], 'password' => $s['pass'], 'charset' => 'utf8mb4',
                    'collation' => 'utf8mb4_unicode_ci', 'prefix' => '',
                ],
            ],
        ],
    ]));
    $app->alias('cache', \Illuminate\Contracts\Cache\Factory::class);
    $app->alias('db', \Illuminate\Database\ConnectionResolverInterface::class);
    (new CacheServiceProvider($app))->register();
    (new DatabaseServiceProvider($app))->register();
    (new MySqlLockServiceProvider($app))->register();
    return $app;
}

/** Creates both lock tables: distributed_locks, and cache_locks as Laravel's `cache:table` migration does. */
function setup(Container $app): void
{
    (new DistributedLock(\MySqlLockBench\pdo(), 'distributed_locks'))->createTable();
    $schema = $app->make('db')->connection('mysql')->getSchemaBuilder();
    if (!$schema->hasTable('cache_locks')) {
        $schema->create('cache_locks', function (Blueprint $table) {
            $table->string('key')->primary();
            $table->string('owner');
            $table->integer('expiration');
        });
    }
}

/** Cache::store(...)->lock($name, TTL, $owner) for $impl, with its block() interval. */
function lock(Container $app, string $impl, string $name, string $owner): Lock
{
    $lock = $app->make('cache')->store(IMPLS[$impl]['store'])->lock($name, TTL, $owner);
    if (IMPLS[$impl]['interval'] !== null) {
        $lock->betweenBlockedAttemptsSleepFor(IMPLS[$impl]['interval']);
    }
    return $lock;
}

/** The $p-th percentile (0..100) of $values (nearest rank). */
function percentile(array $values, float $p): float
{
    sort($values);
    return (float) $values[max(0, (int) ceil($p / 100 * count($values)) - 1)];
}

/** SHOW GLOBAL STATUS counters of the statement kinds both locks send. */
function statements(\PDO $admin): int
{
    $n = 0;
    foreach ($admin->query("SHOW GLOBAL STATUS WHERE Variable_name IN ('Com_insert', 'Com_update', 'Com_delete', 'Com_select')", \PDO::FETCH_NUM) as $row) {
        $n += (int) $row[1];
    }
    return $n;
}

function ms(float $ns): string
{
    return $ns >= 10e6 ? sprintf('%.0f ms', $ns / 1e6) : sprintf('%.1f ms', $ns / 1e6);
}
