<?php
// The one config line: a real FrameworkBundle 5.4 kernel whose framework.lock is a
// mysqllock:// DSN from an environment variable, with MySqlLockBundle registered.
declare(strict_types=1);

namespace MySqlLockSymfonyTest;

use MySqlLock\Symfony\MySqlLockBundle;
use PHPUnit\Framework\Attributes\DataProvider;
use Symfony\Bundle\FrameworkBundle\FrameworkBundle;
use Symfony\Bundle\FrameworkBundle\Kernel\MicroKernelTrait;
use Symfony\Component\DependencyInjection\Loader\Configurator\ContainerConfigurator;
use Symfony\Component\HttpKernel\Kernel;
use Symfony\Component\Lock\Exception\InvalidArgumentException;
use Symfony\Component\Lock\LockFactory;
use Symfony\Component\Routing\Loader\Configurator\RoutingConfigurator;

final class FrameworkBundleTest extends TestCase
{
    private ?string $dir = null;

    protected function tearDown(): void
    {
        if ($this->dir !== null) {
            exec('rm -rf ' . escapeshellarg($this->dir));
        }
        putenv('SFT_LOCK_DSN');
        unset($_SERVER['SFT_LOCK_DSN'], $_ENV['SFT_LOCK_DSN']);
        parent::tearDown();
    }

    public static function dsns(): array
    {
        return ['SharedLock mode' => ['shared', 'shared_locks', 'name'], 'lease mode' => ['lease', 'distributed_locks', 'resource']];
    }

    /** @dataProvider dsns */
    #[DataProvider('dsns')]
    public function testFrameworkLockWithAMysqllockDsnGivesLockFactoryOurStore(string $mode, string $table, string $column): void
    {
        $factory = $this->bootKernel(true, preg_replace('#^mysql:#', 'mysqllock:', testDsn()) . "?mode=$mode")->get('sft.lock_factory');

        $lock = $factory->createLock($this->resource(), 30);
        $this->assertTrue($lock->acquire(true));
        $st = self::db()->prepare("SELECT COUNT(*) FROM $table WHERE $column = ?");
        $st->execute([$this->resource()]);
        $this->assertSame(1, (int) $st->fetchColumn(), "the lock is not in $table");
        $lock->release();
    }

    public function testWithoutTheBundleFrameworkBundleRefusesTheDsn(): void
    {
        $container = $this->bootKernel(false, preg_replace('#^mysql:#', 'mysqllock:', testDsn()));

        // Symfony's StoreFactory refuses it: 'Unsupported Connection: "mysqllock:..."' on
        // 5.4, 7.4 and 8.1, 'No lock store supports the given DSN.' on 6.4.
        $this->expectException(InvalidArgumentException::class);
        $this->expectExceptionMessageMatches('/^(Unsupported Connection: "mysqllock:|No lock store supports the given DSN\.)/');
        $container->get('sft.lock_factory');
    }

    public function testOtherDsnsStillReachSymfonysStores(): void
    {
        $factory = $this->bootKernel(true, 'flock://' . sys_get_temp_dir())->get('sft.lock_factory');
        $lock = $factory->createLock($this->resource());
        $this->assertTrue($lock->acquire());
        $lock->release();
    }

    /** Boots a kernel in a temporary directory; its container. */
    private function bootKernel(bool $withBundle, string $dsn): \Symfony\Component\DependencyInjection\ContainerInterface
    {
        $this->dir = sys_get_temp_dir() . '/sft-kernel-' . getmypid() . '-' . bin2hex(random_bytes(4));
        mkdir($this->dir);
        putenv("SFT_LOCK_DSN=$dsn");
        $_SERVER['SFT_LOCK_DSN'] = $_ENV['SFT_LOCK_DSN'] = $dsn;
        $kernel = new LockTestKernel($this->dir, $withBundle);
        $kernel->boot();
        return $kernel->getContainer();
    }
}

final class LockTestKernel extends Kernel
{
    use MicroKernelTrait;

    public function __construct(private string $dir, private bool $withBundle)
    {
        parent::__construct('test', false);
    }

    public function registerBundles(): iterable
    {
        yield new FrameworkBundle();
        if ($this->withBundle) {
            yield new MySqlLockBundle();
        }
    }

    public function getProjectDir(): string
    {
        return $this->dir;
    }

    public function getCacheDir(): string
    {
        return $this->dir . '/cache';
    }

    public function getLogDir(): string
    {
        return $this->dir . '/log';
    }

    protected function configureContainer(ContainerConfigurator $container): void
    {
        $container->extension('framework', [
            'secret' => 'test',
            'test' => true,
            'http_method_override' => false,
            'lock' => '%env(SFT_LOCK_DSN)%', // the one line an application changes
        ]);
        // What an application's services get injected, reachable from the test.
        $container->services()->alias('sft.lock_factory', LockFactory::class)->public();
    }

    protected function configureRoutes(RoutingConfigurator $routes): void
    {
    }
}
