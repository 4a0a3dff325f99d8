<?php
// What the three PHPUnit suites (tests/php, tests/bridges/symfony, tests/bridges/laravel)
// share: a scripted child PHP process and the poll-with-a-deadline helper. Each bootstrap
// requires this file and adds only what differs (the child's command line, call()).
declare(strict_types=1);

namespace MySqlLockTest\Support;

/** The extension under test: $MYSQLLOCK_BIN's, else the one under $root/target/release. */
function extensionPath(string $root): string
{
    // A PHP other than the host's (the test matrix's chroot cells) has its own build.
    $ext = getenv('MYSQLLOCK_PHP_EXT');
    if ($ext !== false && $ext !== '') {
        return $ext;
    }
    $bin = getenv('MYSQLLOCK_BIN');
    return ($bin === false || $bin === '' ? $root . '/target/release' : $bin) . '/libmysqllock_php.so';
}

/**
 * The pdo_mysql attribute NAME (SSL_CA, INIT_COMMAND, ...): Pdo\Mysql::ATTR_NAME where that
 * class exists (PHP 8.4 and later; PHP 8.5 deprecates PDO::MYSQL_ATTR_NAME), else
 * PDO::MYSQL_ATTR_NAME (PHP 8.2 and 8.3 have only that).
 */
function pdoMysqlAttribute(string $name): int
{
    return \constant(\class_exists('Pdo\\Mysql', false) ? "Pdo\\Mysql::ATTR_$name" : "PDO::MYSQL_ATTR_$name");
}

/** Polling a condition until a deadline: the only way the tests wait for another process. */
trait Polling
{
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

/**
 * A child PHP process scripted over pipes: one JSON command per line on its stdin, one JSON
 * reply per line on its stdout, stderr kept in a file for failure messages. The child's
 * first line must be {"result":"ready"}.
 */
abstract class ChildProcess
{
    use Polling;

    /** @var resource */
    private $proc;
    /** @var resource */
    private $stdin;
    /** @var resource */
    private $stdout;
    private string $buffer = '';
    private string $stderrFile;
    public int $pid;

    /** Starts $cmd (argv) and waits (20 s at most) for its ready line; $tempPrefix names its stderr file. */
    protected function __construct(array $cmd, string $tempPrefix)
    {
        $this->stderrFile = (string) tempnam(sys_get_temp_dir(), $tempPrefix);
        $proc = proc_open($cmd, [0 => ['pipe', 'r'], 1 => ['pipe', 'w'], 2 => ['file', $this->stderrFile, 'w']], $pipes);
        if (!is_resource($proc)) {
            throw new \RuntimeException('cannot start ' . implode(' ', $cmd));
        }
        $this->proc = $proc;
        [$this->stdin, $this->stdout] = [$pipes[0], $pipes[1]];
        stream_set_blocking($this->stdout, false);
        $this->pid = proc_get_status($proc)['pid'];
        $ready = $this->receive(20.0);
        if (($ready['result'] ?? null) !== 'ready') {
            throw new \RuntimeException('the child did not start: ' . json_encode($ready) . ' ' . $this->stderr());
        }
    }

    /** Sends a command without waiting for its reply. */
    public function send(array $cmd): void
    {
        fwrite($this->stdin, json_encode($cmd) . "\n");
        fflush($this->stdin);
    }

    /** Sends a command and waits for its reply (null on timeout). */
    public function call(array $cmd, float $timeout = 20.0): ?array
    {
        $this->send($cmd);
        return $this->receive($timeout);
    }

    /**
     * The next reply, or null if none arrived within $timeout seconds (0: only one already
     * there). A child that ended replies ChildDied (with its stderr), a line that is not
     * JSON BadReply.
     */
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
                        return ['ok' => false, 'class' => 'ChildDied', 'message' => $this->stderr(), 'previous' => []];
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
        return json_decode($line, true) ?? ['ok' => false, 'class' => 'BadReply', 'message' => $line, 'previous' => []];
    }

    public function signal(int $signal): void
    {
        posix_kill($this->pid, $signal);
    }

    public function kill(): void
    {
        $this->signal(SIGKILL);
    }

    public function isRunning(): bool
    {
        return proc_get_status($this->proc)['running'];
    }

    /** Waits for the process to end; false if it did not within $timeout seconds. */
    public function waitForExit(float $timeout): bool
    {
        return self::waitUntil(fn () => !$this->isRunning(), $timeout);
    }

    public function stderr(): string
    {
        return (string) @file_get_contents($this->stderrFile);
    }

    /** Kills the process (also a stopped one) and reaps it. */
    public function destroy(): void
    {
        if ($this->isRunning()) {
            posix_kill($this->pid, SIGCONT);
            posix_kill($this->pid, SIGKILL);
        }
        @fclose($this->stdin);
        @fclose($this->stdout);
        proc_close($this->proc);
        @unlink($this->stderrFile);
    }
}
