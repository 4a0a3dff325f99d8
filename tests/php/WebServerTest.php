<?php
// docs/php.md's promise for web requests ("Request end, PHP-FPM, fork"): a lock taken in
// a request and never unlocked is released when the request ends (not when the worker
// process ends), so the next request gets it at once, on the extension's own connection
// and on a PDO set with setConnection(), and no server session is left behind. The same for MySqlLock\SessionLock
// on the extension's own connection and on the request's PDO or mysqli, persistent ones
// (which outlive the request) included. Run under the php-fpm of the PHP that runs the
// tests (Debian's, or the ZTS row's own; requests sent with cgi-fcgi) and under `php -S`,
// each started here with the extension.
declare(strict_types=1);

namespace MySqlLockTest;

use PHPUnit\Framework\Attributes\DataProvider;
use PHPUnit\Framework\Attributes\Test;

final class WebServerTest extends TestCase
{
    private const REQUESTS = 200;
    private const SESSION_REQUESTS = 50;

    /** @var WebServer[] */
    private array $servers = [];

    protected function tearDown(): void
    {
        foreach ($this->servers as $server) {
            $server->stop();
        }
        $this->servers = [];
        parent::tearDown();
    }

    public static function serversAndConnections(): array
    {
        return [
            'php-fpm, native connection' => ['fpm', 'native'],
            'php-fpm, PDO connection' => ['fpm', 'pdo'],
            'php -S, native connection' => ['builtin', 'native'],
            'php -S, PDO connection' => ['builtin', 'pdo'],
        ];
    }

    /**
     * @test
     * @dataProvider serversAndConnections
     */
    #[Test]
    #[DataProvider('serversAndConnections')]
    public function lockLeftByEachOf200RequestsIsFreeForTheNextAtOnceAndNoSessionIsLeft(string $kind, string $conn): void
    {
        $server = $this->startServer($kind);
        $name = $this->lockName();
        $before = self::userSessions();
        $sessions = [];
        for ($i = 0; $i < self::REQUESTS; $i++) {
            // Timeout 0: a lock the previous request still held would throw SharedLockTimeoutException.
            $reply = $server->request(['name' => $name, 'conn' => $conn, 'mode' => 'lock']);
            $this->assertTrue($reply['locked'] ?? false, "request $i: " . json_encode($reply));
            $sessions[] = (int) $reply['session'];
        }
        $this->assertCount(self::REQUESTS, array_unique($sessions), 'each request locks on a session of its own');
        $this->assertSame([], self::rows($name), 'the last request left its row');
        // Sessions go away asynchronously after the client hangs up: poll, with a deadline.
        $this->assertTrue(
            self::waitUntil(fn () => self::userSessions() <= $before, 10),
            sprintf('server sessions of the test user grew from %d to %d over %d requests', $before, self::userSessions(), self::REQUESTS)
        );
        $this->assertSame([], self::liveSessions($sessions), 'sessions of finished requests still exist');
    }

    /**
     * @test
     * @dataProvider serversAndConnections
     */
    #[Test]
    #[DataProvider('serversAndConnections')]
    public function exitAndFatalErrorInsideSynchronizedReleaseTheLockAtRequestEnd(string $kind, string $conn): void
    {
        $server = $this->startServer($kind);
        foreach (['exit', 'fatal'] as $mode) {
            $name = $this->lockName($mode);
            $reply = $server->request(['name' => $name, 'conn' => $conn, 'mode' => $mode]);
            $this->assertTrue($reply['locked'] ?? false, "$mode: " . json_encode($reply));
            // The worker lives on: only the request's end can have released it.
            $this->assertSame([], self::rows($name), "$mode: the row is still there after the request");
            $this->assertNull(self::db()->query('SELECT IS_USED_LOCK(' . self::db()->quote($name) . ')')->fetchColumn(), "$mode: the GET_LOCK is still held");
            $next = $server->request(['name' => $name, 'conn' => $conn, 'mode' => 'lock']);
            $this->assertTrue($next['locked'] ?? false, "$mode: the next request: " . json_encode($next));
        }
    }

    public static function serversAndSessionConnections(): array
    {
        $cases = [];
        foreach (['php-fpm' => 'fpm', 'php -S' => 'builtin'] as $server => $kind) {
            foreach (['native', 'pdo', 'mysqli', 'ppdo' => 'persistent PDO', 'pmysqli' => 'persistent mysqli'] as $conn => $label) {
                $conn = is_int($conn) ? $label : $conn;
                $cases["$server, session lock on $label"] = [$kind, $conn];
            }
        }
        return $cases;
    }

    /**
     * The request releases the session lock when it ends, on its own connection and on a
     * persistent one that outlives it (a new session would not show that: GET_LOCK is
     * re-entrant, so the next request on the same persistent session would get it anyway;
     * hence the server is asked right after each request).
     *
     * @test
     * @dataProvider serversAndSessionConnections
     */
    #[Test]
    #[DataProvider('serversAndSessionConnections')]
    public function sessionLockLeftByEachRequestIsFreeWhenItEndsAndNoSessionIsLeft(string $kind, string $conn): void
    {
        $server = $this->startServer($kind);
        $name = $this->lockName();
        $before = self::userSessions();
        for ($i = 0; $i < self::SESSION_REQUESTS; $i++) {
            $reply = $server->request(['name' => $name, 'conn' => $conn, 'mode' => 'session']);
            $this->assertTrue($reply['locked'] ?? false, "request $i: " . json_encode($reply));
            $this->assertNull(self::getLockHolder($name), "request $i: the session lock outlived the request");
        }
        // Persistent connections stay, one per worker at most (php-fpm runs 2, php -S 1).
        $kept = str_starts_with($conn, 'p') ? $server->workers() : 0;
        $this->assertTrue(
            self::waitUntil(fn () => self::userSessions() <= $before + $kept, 10),
            sprintf('server sessions of the test user grew from %d to %d over %d requests (%d may stay)', $before, self::userSessions(), self::SESSION_REQUESTS, $kept)
        );
    }

    /**
     * @test
     * @dataProvider serversAndSessionConnections
     */
    #[Test]
    #[DataProvider('serversAndSessionConnections')]
    public function exitAndFatalErrorInsideSessionLockSynchronizedReleaseItAtRequestEnd(string $kind, string $conn): void
    {
        $server = $this->startServer($kind);
        foreach (['session-exit', 'session-fatal'] as $mode) {
            $name = $this->lockName($mode);
            $reply = $server->request(['name' => $name, 'conn' => $conn, 'mode' => $mode]);
            $this->assertTrue($reply['locked'] ?? false, "$mode: " . json_encode($reply));
            $this->assertNull(self::getLockHolder($name), "$mode: the session lock outlived the request");
        }
    }

    private function startServer(string $kind): WebServer
    {
        return $this->servers[] = $kind === 'fpm' ? WebServer::fpm() : WebServer::builtin();
    }

    /** Server sessions of the test user (every client of this suite logs in as it). */
    private static function userSessions(): int
    {
        return (int) self::db()->query("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE USER = SUBSTRING_INDEX(CURRENT_USER(), '@', 1)")->fetchColumn();
    }

    /** Which of these session ids still exist. */
    private static function liveSessions(array $ids): array
    {
        $list = implode(',', array_map('intval', $ids));
        return self::db()->query("SELECT ID FROM information_schema.PROCESSLIST WHERE ID IN ($list)")->fetchAll(\PDO::FETCH_COLUMN);
    }
}

/** A php-fpm master or a `php -S` server with the extension, serving fixtures/web/. */
final class WebServer
{
    /**
     * The php-fpm of the PHP running the tests: MYSQLLOCK_PHP_FPM (the ZTS PHP's, set by
     * tests/suites/lib/php.sh), else Debian's, named by version.
     */
    private static function fpmBinary(): string
    {
        $fpm = getenv('MYSQLLOCK_PHP_FPM');
        return $fpm !== false && $fpm !== '' ? $fpm : '/usr/sbin/php-fpm' . PHP_MAJOR_VERSION . '.' . PHP_MINOR_VERSION;
    }

    private const FPM_WORKERS = 2;
    private const CGI_FCGI = '/usr/bin/cgi-fcgi';

    /** @var resource */
    private $proc;
    private string $dir;
    private string $docroot;
    private ?string $socket = null;
    private ?int $port = null;

    private function __construct(string $dir)
    {
        $this->dir = $dir;
        $this->docroot = __DIR__ . '/fixtures/web';
    }

    /** php-fpm with its own config, pool and unix socket under a temp dir, as this user. */
    public static function fpm(): self
    {
        $fpmPackage = getenv('MYSQLLOCK_PHP_FPM') ? 'the PHP of scripts/php-src.sh' : 'php' . PHP_MAJOR_VERSION . '.' . PHP_MINOR_VERSION . '-fpm';
        foreach ([self::fpmBinary() => $fpmPackage, self::CGI_FCGI => 'libfcgi-bin'] as $tool => $package) {
            if (!is_executable($tool)) {
                TestCase::fail("$tool is missing: install $package (scripts/install-deps.sh does)");
            }
        }
        $server = new self(self::tempDir('fpm'));
        $server->socket = $server->dir . '/fpm.sock';
        $user = posix_getpwuid(posix_geteuid())['name'];
        $group = posix_getgrgid(posix_getegid())['name'];
        $root = posix_geteuid() === 0;
        $config = "[global]\npid = {$server->dir}/fpm.pid\nerror_log = {$server->dir}/fpm.log\ndaemonize = no\n\n"
            . "[test]\nlisten = {$server->socket}\npm = static\npm.max_children = " . self::FPM_WORKERS . "\nclear_env = no\n"
            . "catch_workers_output = yes\nphp_admin_flag[log_errors] = on\nphp_admin_value[error_log] = {$server->dir}/php.log\n"
            // Only a root master switches users: then it is told to stay root (with -R).
            . ($root ? "user = $user\ngroup = $group\n" : '');
        file_put_contents($server->dir . '/fpm.conf', $config);
        $cmd = [self::fpmBinary(), '-F', '-y', $server->dir . '/fpm.conf', '-d', 'extension=' . extensionPath()];
        if ($root) {
            $cmd[] = '-R';
        }
        $server->launch($cmd, fn () => file_exists($server->socket));
        return $server;
    }

    /** `php -S` on a free port of 127.0.0.1. */
    public static function builtin(): self
    {
        $server = new self(self::tempDir('builtin'));
        $probe = stream_socket_server('tcp://127.0.0.1:0');
        $server->port = (int) substr(strrchr(stream_socket_get_name($probe, false), ':'), 1);
        fclose($probe);
        $cmd = [PHP_BINARY, '-d', 'extension=' . extensionPath(), '-S', "127.0.0.1:{$server->port}", '-t', $server->docroot];
        $server->launch($cmd, function () use ($server) {
            $s = @fsockopen('127.0.0.1', $server->port, $errno, $errstr, 0.2);
            if ($s === false) {
                return false;
            }
            fclose($s);
            return true;
        });
        return $server;
    }

    private static function tempDir(string $kind): string
    {
        $dir = sys_get_temp_dir() . '/phpt-' . $kind . '-' . getmypid() . '-' . bin2hex(random_bytes(4));
        mkdir($dir, 0700);
        return $dir;
    }

    /** Starts the server and waits (with a deadline) until $ready says it serves. */
    private function launch(array $cmd, callable $ready): void
    {
        $log = $this->dir . '/server.out';
        $proc = proc_open($cmd, [0 => ['file', '/dev/null', 'r'], 1 => ['file', $log, 'w'], 2 => ['file', $log, 'a']], $pipes);
        TestCase::assertIsResource($proc, 'cannot start ' . $cmd[0]);
        $this->proc = $proc;
        $up = TestCase::waitUntil(fn () => $ready() || !proc_get_status($proc)['running'], 20);
        TestCase::assertTrue($up && proc_get_status($proc)['running'], $cmd[0] . ' did not start: ' . @file_get_contents($log) . @file_get_contents($this->dir . '/fpm.log'));
    }

    /** One GET of fixtures/web/lock.php; its JSON answer (the first line of the body). */
    public function request(array $query): array
    {
        $qs = http_build_query($query);
        if ($this->socket !== null) {
            $script = $this->docroot . '/lock.php';
            $env = [
                'SCRIPT_FILENAME' => $script, 'SCRIPT_NAME' => '/lock.php', 'REQUEST_URI' => "/lock.php?$qs",
                'QUERY_STRING' => $qs, 'REQUEST_METHOD' => 'GET', 'SERVER_PROTOCOL' => 'HTTP/1.1',
                'GATEWAY_INTERFACE' => 'CGI/1.1', 'SERVER_NAME' => 'localhost', 'REMOTE_ADDR' => '127.0.0.1',
                'PATH' => getenv('PATH') ?: '/usr/bin:/bin',
            ];
            $proc = proc_open([self::CGI_FCGI, '-bind', '-connect', $this->socket], [0 => ['file', '/dev/null', 'r'], 1 => ['pipe', 'w'], 2 => ['pipe', 'w']], $pipes, null, $env);
            TestCase::assertIsResource($proc, 'cannot run cgi-fcgi');
            $out = stream_get_contents($pipes[1]);
            $err = stream_get_contents($pipes[2]);
            fclose($pipes[1]);
            fclose($pipes[2]);
            $rc = proc_close($proc);
            TestCase::assertSame(0, $rc, "cgi-fcgi failed: $err");
            $parts = preg_split("/\r?\n\r?\n/", $out, 2);
            $body = $parts[1] ?? '';
        } else {
            $context = stream_context_create(['http' => ['timeout' => 20, 'ignore_errors' => true]]);
            $body = @file_get_contents("http://127.0.0.1:{$this->port}/lock.php?$qs", false, $context);
            TestCase::assertNotFalse($body, 'the request to php -S failed');
        }
        $line = strtok($body, "\n");
        $reply = json_decode((string) $line, true);
        TestCase::assertIsArray($reply, "not a JSON answer: $body");
        return $reply;
    }

    /** How many PHP processes serve requests (each may keep persistent connections). */
    public function workers(): int
    {
        return $this->socket !== null ? self::FPM_WORKERS : 1;
    }

    public function stop(): void
    {
        if (is_resource($this->proc)) {
            proc_terminate($this->proc, SIGTERM);
            TestCase::waitUntil(fn () => !proc_get_status($this->proc)['running'], 10);
            if (proc_get_status($this->proc)['running']) {
                proc_terminate($this->proc, SIGKILL);
            }
            proc_close($this->proc);
        }
        foreach (glob($this->dir . '/*') ?: [] as $f) {
            @unlink($f);
        }
        @rmdir($this->dir);
    }
}
