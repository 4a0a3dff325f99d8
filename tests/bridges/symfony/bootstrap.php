<?php
// PHPUnit bootstrap of the Symfony Lock store's tests: the real Debian php-symfony-lock
// (5.4), the real extension, the test server from MYSQLLOCK_TEST_DSN. Fails, never skips,
// when any of them is missing.
declare(strict_types=1);

namespace MySqlLockSymfonyTest;

use MySqlLock\Symfony\MySqlLockStore;
use PHPUnit\Framework\TestCase as PHPUnitTestCase;

require __DIR__ . '/fixtures/common.php';

if (!extension_loaded('mysqllock')) {
    bail('the mysqllock extension is not loaded (run with php -d extension=.../libmysqllock_php.so)');
}
loadFramework();
// The extension's default connection: what MySqlLockStore uses without a DSN or PDO.
ini_set('mysqllock.dsn', testDsn());

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
final class Child
{
    /** @var resource */
    private $proc;
    /** @var resource */
    private $stdin;
    /** @var resource */
    private $stdout;
    private string $buffer = '';
    private string $stderrFile;
    public int $pid;

    public function __construct(string $script = 'child.php', array $args = [])
    {
        $this->stderrFile = (string) tempnam(sys_get_temp_dir(), 'sft-child-');
        $cmd = [PHP_BINARY, '-d', 'extension=' . extensionPath(), '-d', 'mysqllock.dsn=' . testDsn(), '-d', 'display_errors=stderr',
            __DIR__ . '/fixtures/' . $script, ...$args];
        $proc = proc_open($cmd, [0 => ['pipe', 'r'], 1 => ['pipe', 'w'], 2 => ['file', $this->stderrFile, 'w']], $pipes);
        if (!is_resource($proc)) {
            throw new \RuntimeException('cannot start ' . $script);
        }
        $this->proc = $proc;
        [$this->stdin, $this->stdout] = [$pipes[0], $pipes[1]];
        stream_set_blocking($this->stdout, false);
        $this->pid = proc_get_status($proc)['pid'];
        $ready = $this->receive(20.0);
        if (($ready['result'] ?? null) !== 'ready') {
            throw new \RuntimeException('child did not start: ' . json_encode($ready) . ' ' . $this->stderr());
        }
    }

    /** Sends a command without waiting for its reply. */
    public function send(array $cmd): void
    {
        fwrite($this->stdin, json_encode($cmd) . "\n");
        fflush($this->stdin);
    }

    /** The next reply, or null if none arrived within $timeout seconds (0: only one already there). */
    public function receive(float $timeout): ?array
    {
        $deadline = microtime(true) + $timeout;
        while (($nl = strpos($this->buffer, "\n")) === false) {
            $left = max(0.0, $deadline - microtime(true));
            $r = [$this->stdout];
            $w = $e = null;
            if (@stream_select($r, $w, $e, (int) $left, (int) (fmod($left, 1.0) * 1e6)) > 0) {
                $chunk = fread($this->stdout, 65536);
                if ($chunk === '' || $chunk === false) {
                    if (feof($this->stdout)) {
                        return ['ok' => false, 'class' => 'ChildDied', 'message' => $this->stderr()];
                    }
                    continue;
                }
                $this->buffer .= $chunk;
                continue;
            }
            if (microtime(true) >= $deadline) {
                return null;
            }
        }
        $line = substr($this->buffer, 0, $nl);
        $this->buffer = substr($this->buffer, $nl + 1);
        return json_decode($line, true) ?? ['ok' => false, 'class' => 'BadReply', 'message' => $line];
    }

    /** Sends a command and waits for its reply (null on timeout). */
    public function call(array $cmd, float $timeout = 20.0): ?array
    {
        $this->send($cmd);
        return $this->receive($timeout);
    }

    public function kill(): void
    {
        posix_kill($this->pid, SIGKILL);
    }

    public function isRunning(): bool
    {
        return proc_get_status($this->proc)['running'];
    }

    public function stderr(): string
    {
        return (string) @file_get_contents($this->stderrFile);
    }

    public function destroy(): void
    {
        if ($this->isRunning()) {
            posix_kill($this->pid, SIGKILL);
        }
        @fclose($this->stdin);
        @fclose($this->stdout);
        proc_close($this->proc);
        @unlink($this->stderrFile);
    }
}

/** Base class: unique resources per test, both modes, children and locks cleaned up. */
abstract class TestCase extends PHPUnitTestCase
{
    private static ?\PDO $db = null;
    private static int $counter = 0;
    /** @var Child[] */
    private array $children = [];
    private ?string $prefix = null;

    /** Both modes of the store: the data provider of every behaviour Symfony documents. */
    public function modes(): array
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

    /** Polls $condition until it is true or $timeout seconds passed; whether it became true. */
    public static function waitUntil(callable $condition, float $timeout, float $interval = 0.02): bool
    {
        $deadline = microtime(true) + $timeout;
        while (true) {
            if ($condition()) {
                return true;
            }
            if (microtime(true) >= $deadline) {
                return false;
            }
            usleep((int) ($interval * 1e6)); // the poll interval of this wait helper
        }
    }
}
