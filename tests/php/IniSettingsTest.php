<?php
// php.ini's connection settings are layers over the core's one Config: their defaults are
// the core's, every value is read by the core's own parser (Config::set, as a URL's and
// the CLI's are), and a value the core refuses is an error that names the setting in the
// core's words, never quietly the default (issue 35: the extension's own parser turned
// 0, an hour or more, and anything unreadable into the default, where a URL refused them).
declare(strict_types=1);

namespace MySqlLockTest;

use ItsMieger\MySqlSharedLocks\Exception\SharedLockAcquireException;
use ItsMieger\MySqlSharedLocks\SharedLock;
use Nene\Kit\DistributedLock;
use Nene\Kit\DistributedLockException;
use PHPUnit\Framework\Attributes\Test;

final class IniSettingsTest extends TestCase
{
    private const SETTINGS = ['mysqllock.dsn', 'mysqllock.connect_timeout', 'mysqllock.read_timeout', 'mysqllock.write_timeout', 'mysqllock.allow_cluster'];

    /** @var resource|null */
    private $server = null;

    protected function tearDown(): void
    {
        if ($this->server !== null) {
            proc_terminate($this->server, SIGKILL);
            proc_close($this->server);
            $this->server = null;
        }
        foreach (self::SETTINGS as $setting) {
            ini_restore($setting);
        }
        configure();
        parent::tearDown();
    }

    /** @test */
    #[Test]
    public function theDefaultsAreTheCoresAndPhpRiShowsThem(): void
    {
        exec(escapeshellarg(PHP_BINARY) . ' -n -d extension=' . escapeshellarg(extensionPath()) . ' --ri mysqllock', $out, $status);
        $this->assertSame(0, $status, implode("\n", $out));
        foreach (['mysqllock.connect_timeout => 10 => 10', 'mysqllock.read_timeout => 30 => 30', 'mysqllock.write_timeout => 30 => 30', 'mysqllock.table => shared_locks => shared_locks', 'mysqllock.allow_cluster => 0 => 0'] as $line) {
            $this->assertContains($line, $out);
        }
    }

    /** @test */
    #[Test]
    public function iniRestoreGivesASettingItsOriginalValueBack(): void
    {
        foreach (self::SETTINGS as $setting) {
            $original = ini_get_all('mysqllock')[$setting]['global_value'];
            ini_set($setting, '7');
            ini_restore($setting);
            $this->assertSame($original, ini_get($setting), $setting);
        }
    }

    /** @test */
    #[Test]
    public function aValueTheCoreRefusesIsAnErrorNamingTheSettingNotTheDefault(): void
    {
        $cases = [
            'mysqllock.read_timeout' => ['0', 'must be more than 0 seconds (every read and write has a bound)'],
            'mysqllock.write_timeout' => ['soon', '"soon" is not a duration: expected seconds (90, 1.5), or a number with a unit'],
            'mysqllock.connect_timeout' => ['-1', '-1 is negative'],
            'mysqllock.allow_cluster' => ['maybe', '"maybe" is neither 1 (on) nor 0 (off)'],
        ];
        foreach ($cases as $setting => [$value, $says]) {
            ini_set($setting, $value);
            $e = $this->catchThrown(fn () => configure());
            $this->assertInstanceOf(\InvalidArgumentException::class, $e, "$setting=$value");
            $this->assertStringContainsString("invalid $setting: $says", $e->getMessage());
            ini_restore($setting);
        }
    }

    /** @test */
    #[Test]
    public function mysqllockDsnMeetsABadSettingWithTheSameWords(): void
    {
        ini_set('mysqllock.dsn', (string) getenv('MYSQLLOCK_TEST_DSN'));
        ini_set('mysqllock.read_timeout', '0');
        $e = $this->catchThrown(fn () => new DistributedLock());
        $this->assertInstanceOf(DistributedLockException::class, $e);
        $this->assertStringContainsString('invalid mysqllock.read_timeout: must be more than 0 seconds (every read and write has a bound)', $e->getMessage());
        // A URL that names the setting wins over php.ini's, and is judged in the same words.
        ini_restore('mysqllock.read_timeout');
        ini_set('mysqllock.dsn', getenv('MYSQLLOCK_TEST_DSN') . '?read_timeout=0');
        $e = $this->catchThrown(fn () => new DistributedLock());
        $this->assertStringContainsString('mysqllock.dsn: invalid read_timeout: must be more than 0 seconds (every read and write has a bound)', $e->getMessage());
    }

    /** @test */
    #[Test]
    public function aTimeoutTakesTheUnitsAUrlTakes(): void
    {
        $port = $this->startStalledServer();
        ini_set('mysqllock.connect_timeout', '500ms');
        SharedLock::configureConnection('127.0.0.1', 'db', 'u', 'p', 'utf8mb4', $port, 'ssl-mode=DISABLED');
        $start = microtime(true);
        $e = $this->catchThrown(fn () => SharedLock::lock($this->lockName(), 5, 60));
        $took = microtime(true) - $start;
        $this->assertInstanceOf(SharedLockAcquireException::class, $e);
        $text = implode("\n", array_merge([$e->getMessage()], self::previousMessages($e)));
        $this->assertStringContainsString('stopped answering for 0.5 s during the connect', $text);
        $this->assertLessThan(0.5 + 3.0, $took, 'within the half second, and scheduling');
    }

    /** A fake server that greets and then says nothing ($MYSQLLOCK_BIN/freezeproxy --stall); its port. */
    private function startStalledServer(): int
    {
        $bin = getenv('MYSQLLOCK_BIN');
        $this->assertNotFalse($bin, 'MYSQLLOCK_BIN is not set (the target/release directory)');
        $this->server = proc_open([$bin . '/freezeproxy', '--stall', 'after-greeting'], [0 => ['file', '/dev/null', 'r'], 1 => ['pipe', 'w'], 2 => STDERR], $pipes);
        $this->assertIsResource($this->server);
        $line = trim((string) fgets($pipes[1]));
        $this->assertMatchesRegularExpression('/^port \d+$/', $line, 'the fake server did not start');
        return (int) substr($line, 5);
    }
}
