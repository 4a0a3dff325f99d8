<?php
// Shared by the benchmark's PHP scripts (run by target/release/mysqllock-bench, always with
// the extension loaded): the server, the two PHP ways of locking, server status snapshots.
// Output is one line per fact: "TAG key=value ..." or "TAG number number ...".
declare(strict_types=1);

namespace MySqlLockBench;

use ItsMieger\MySqlSharedLocks\SharedLock;

/** TTL of every lease taken: never expires during a run. */
const TTL = 60;

function fail(string $message): void
{
    fwrite(STDERR, 'bench/php: ' . $message . "\n");
    exit(1);
}

/**
 * MYSQLLOCK_BENCH_DSN (mysql://user:password@host:port/db) as its parts. Its query (the
 * product's TLS keys, see productTls()) is not among them: the floors connect in the clear.
 */
function server(): array
{
    $dsn = getenv('MYSQLLOCK_BENCH_DSN');
    $u = is_string($dsn) ? parse_url($dsn) : false;
    if (!is_array($u) || !isset($u['host'], $u['user'], $u['path'])) {
        fail('MYSQLLOCK_BENCH_DSN is not a mysql://user:password@host:port/db URL');
    }
    return [
        'host' => $u['host'],
        'db' => ltrim($u['path'], '/'),
        'user' => rawurldecode($u['user']),
        'pass' => rawurldecode($u['pass'] ?? ''),
        'port' => (int) ($u['port'] ?? 3306),
    ];
}

/**
 * The TLS keys of MYSQLLOCK_BENCH_DSN's query (bench/lib.sh puts ssl-mode there, from
 * MYSQLLOCK_BENCH_SSL_MODE) as SharedLock::configureConnection()'s $additionalDsn, so that
 * the extension's native connection is encrypted or not as the product's other connections
 * (mysqllock.dsn, the C ABI, the CLI) of the same run; null when the URL has none.
 */
function productTls(): ?string
{
    $query = parse_url((string) getenv('MYSQLLOCK_BENCH_DSN'), PHP_URL_QUERY);
    $keys = [];
    foreach (explode('&', is_string($query) ? $query : '') as $pair) {
        $key = str_replace('_', '-', strtolower(explode('=', $pair, 2)[0]));
        if (in_array($key, ['ssl-mode', 'ssl-ca', 'ssl-cert', 'ssl-key'], true)) {
            $keys[] = rawurldecode($pair);
        }
    }
    return $keys === [] ? null : implode(';', $keys);
}

/** A PDO on the server over TCP: exceptions on, real prepares (no emulation). */
function pdo(): \PDO
{
    $s = server();
    return new \PDO(
        "mysql:host={$s['host']};port={$s['port']};dbname={$s['db']};charset=utf8mb4",
        $s['user'],
        $s['pass'],
        [\PDO::ATTR_ERRMODE => \PDO::ERRMODE_EXCEPTION, \PDO::ATTR_EMULATE_PREPARES => false] + pdoTls()
    );
}

/**
 * PDO's TLS options when MYSQLLOCK_BENCH_PDO_SSL_CA names a CA (bench/tls.sh): encrypted,
 * the certificate not verified (mysqlnd's verification checks the name too, and the test
 * certificate names `localhost`, which PDO reaches over the socket): as ssl-mode=REQUIRED.
 */
function pdoTls(): array
{
    $ca = getenv('MYSQLLOCK_BENCH_PDO_SSL_CA');
    if (!is_string($ca) || $ca === '') {
        return [];
    }
    return [\PDO::MYSQL_ATTR_SSL_CA => $ca, \PDO::MYSQL_ATTR_SSL_VERIFY_SERVER_CERT => false];
}

/** One way of locking a name. */
interface Locks
{
    public function lock(string $name, float $timeout): void;

    public function release(string $name): void;
}

/** The extension: SharedLock::lock() / SharedLockHandle::release(), native connection. */
final class Ext implements Locks
{
    /** @var array<string, \ItsMieger\MySqlSharedLocks\SharedLockHandle> */
    private array $held = [];

    public function __construct()
    {
        $s = server();
        SharedLock::configureConnection($s['host'], $s['db'], $s['user'], $s['pass'], 'utf8mb4', $s['port'], productTls());
    }

    public function lock(string $name, float $timeout): void
    {
        $this->held[$name] = SharedLock::lock($name, $timeout, TTL);
    }

    public function release(string $name): void
    {
        $this->held[$name]->release();
        unset($this->held[$name]);
    }
}

/** The floor: raw GET_LOCK / RELEASE_LOCK through PDO, each prepared once. */
final class Raw implements Locks
{
    private \PDO $pdo;
    private \PDOStatement $get;
    private \PDOStatement $rel;

    public function __construct()
    {
        $this->pdo = pdo();
        $this->get = $this->pdo->prepare('SELECT GET_LOCK(?, ?)');
        $this->rel = $this->pdo->prepare('SELECT RELEASE_LOCK(?)');
    }

    public function lock(string $name, float $timeout): void
    {
        $this->get->execute([$name, $timeout]);
        $got = $this->get->fetchColumn();
        if ((int) $got !== 1) {
            throw new \RuntimeException("GET_LOCK($name, $timeout) returned " . var_export($got, true));
        }
    }

    public function release(string $name): void
    {
        $this->rel->execute([$name]);
        $done = $this->rel->fetchColumn();
        if ((int) $done !== 1) {
            throw new \RuntimeException("RELEASE_LOCK($name) returned " . var_export($done, true));
        }
    }
}

/** "ext" or "pdo", warmed up with one cycle on $warmName. */
function locks(string $impl, string $warmName): Locks
{
    switch ($impl) {
        case 'ext':
            $l = new Ext();
            break;
        case 'pdo':
            $l = new Raw();
            break;
        default:
            fail("unknown implementation $impl (ext or pdo)");
    }
    $l->lock($warmName, 5);
    $l->release($warmName);
    return $l;
}

/** SHOW GLOBAL STATUS on a separate connection, the counters the driver asks for. */
final class Admin
{
    private \PDO $pdo;
    private string $sql;

    public function __construct()
    {
        $vars = array_filter(explode(',', (string) getenv('MYSQLLOCK_BENCH_VARS')));
        if ($vars === []) {
            fail('MYSQLLOCK_BENCH_VARS is not set');
        }
        $this->pdo = pdo();
        $list = implode(', ', array_map(fn ($v) => $this->pdo->quote($v), $vars));
        $this->sql = "SHOW GLOBAL STATUS WHERE Variable_name IN ($list)";
    }

    /** The counters as "k=v k=v ...". */
    public function snapshot(): string
    {
        $out = [];
        foreach ($this->pdo->query($this->sql, \PDO::FETCH_NUM) as $row) {
            $out[] = $row[0] . '=' . $row[1];
        }
        return implode(' ', $out);
    }
}

/** VmRSS of this process in kB. */
function rssKb(): int
{
    $status = (string) @file_get_contents('/proc/self/status');
    return preg_match('/^VmRSS:\s+(\d+)/m', $status, $m) ? (int) $m[1] : -1;
}

/**
 * Overlapping holds among $holds ([got, released, ...] each, from the workers' own
 * journals, never from the lock): each hold that starts before every earlier-starting one
 * has ended counts once. A lock that excludes must give 0.
 */
function overlaps(array $holds): int
{
    usort($holds, static fn ($a, $b) => $a[0] <=> $b[0]);
    $overlaps = 0;
    $busyUntil = PHP_INT_MIN;
    foreach ($holds as [$got, $released]) {
        if ($got < $busyUntil) {
            $overlaps++;
        }
        $busyUntil = max($busyUntil, $released);
    }
    return $overlaps;
}

/** Argument $i or a usage error. */
function arg(int $i, string $what): string
{
    global $argv;
    if (!isset($argv[$i])) {
        fail("missing argument $i ($what)");
    }
    return $argv[$i];
}
