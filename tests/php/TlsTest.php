<?php
// TLS against the TLS test server: a MariaDB with require_secure_transport=ON whose
// certificate, from a test CA, is for the host name localhost only. Its DIR/env names
// MYSQLLOCK_TEST_DSN (an account at 127.0.0.1), MYSQLLOCK_TEST_TLS_DIR (ca.pem,
// wrong-ca.pem, client-cert.pem, client-key.pem) and MYSQLLOCK_TEST_X509_DSN (an account
// created REQUIRE X509). Only in the TLS suite:
//
//   MYSQLLOCK_SERVER_TLS=require bash scripts/mariadb.sh start DIR
//   (set -a; . DIR/env; set +a; php -d extension=$PWD/target/release/libmysqllock_php.so \
//       /usr/bin/phpunit -c tests/php/phpunit.xml --group tls)
//
// The server refuses every TCP login without TLS, so a lock taken over TCP proves the
// extension's own connection used TLS (each such test checks that refusal first); the
// PDOs are asked directly (Ssl_cipher).
declare(strict_types=1);

namespace MySqlLockTest;

use ItsMieger\MySqlSharedLocks\Exception\SharedLockAcquireException;
use ItsMieger\MySqlSharedLocks\SharedLock;
use MySqlLock\ConnectionException;
use MySqlLock\PdoFactory;
use MySqlLock\SessionLock;
use Nene\Kit\DistributedLock;
use PHPUnit\Framework\Attributes\Group;
use PHPUnit\Framework\Attributes\Test;

/** @group tls */
#[Group('tls')]
final class TlsTest extends TestCase
{
    /** The lease table of the DistributedLock test. */
    private const LEASES = 'phpt_tls_leases';

    protected function setUp(): void
    {
        parent::setUp();
        $this->tlsFile('ca.pem'); // every test needs the TLS test server
    }

    /** A file of MYSQLLOCK_TEST_TLS_DIR; fails (never skips) when the TLS server's env is missing. */
    private function tlsFile(string $name): string
    {
        $dir = getenv('MYSQLLOCK_TEST_TLS_DIR');
        if ($dir === false || $dir === '') {
            $this->fail('MYSQLLOCK_TEST_TLS_DIR is not set: the tls group runs against the TLS test server '
                . '(MYSQLLOCK_SERVER_TLS=require bash scripts/mariadb.sh start DIR, then load DIR/env)');
        }
        $this->assertFileIsReadable("$dir/$name", "MYSQLLOCK_TEST_TLS_DIR has no $name");
        return "$dir/$name";
    }

    /** MYSQLLOCK_TEST_X509_DSN's parts; fails when it is missing. */
    private function x509Account(): array
    {
        $dsn = getenv('MYSQLLOCK_TEST_X509_DSN');
        $this->assertNotFalse($dsn, 'MYSQLLOCK_TEST_X509_DSN is not set (the TLS test server\'s DIR/env has it)');
        $u = parse_url((string) $dsn);
        $this->assertIsArray($u, 'MYSQLLOCK_TEST_X509_DSN is not a mysql:// URL');
        return [
            'host' => $u['host'] ?? '',
            'port' => (int) ($u['port'] ?? 3306),
            'user' => rawurldecode($u['user'] ?? ''),
            'pass' => isset($u['pass']) ? rawurldecode($u['pass']) : null,
            'db' => ltrim($u['path'] ?? '', '/'),
        ];
    }

    /**
     * That the server refuses a TCP login without TLS, and that localhost reaches it by
     * TCP here (no Unix socket stands in): then a login that works was made over TLS.
     */
    private function assertOnlyTlsLoginsWork(): void
    {
        $s = server();
        try {
            new \PDO("mysql:host=127.0.0.1;port={$s['port']};dbname={$s['db']}", $s['user'], $s['pass'], [\PDO::ATTR_ERRMODE => \PDO::ERRMODE_EXCEPTION]);
            $this->fail('the TLS test server accepted a login without TLS: require_secure_transport is off');
        } catch (\PDOException $e) {
            // MariaDB answers with "Access denied", MySQL with ER_SECURE_TRANSPORT_REQUIRED.
            $this->assertContains($e->errorInfo[1] ?? null, [1045, 3159], 'a login without TLS failed otherwise: ' . $e->getMessage());
        }
        $socket = (string) ini_get('pdo_mysql.default_socket');
        $this->assertFalse($socket !== '' && file_exists($socket), "the extension would take localhost to mean the socket $socket, not TCP");
    }

    /** configureConnection() to the test server at $host with $tls as the additional DSN. */
    private function configureTls(string $host, string $tls): void
    {
        $s = server();
        SharedLock::configureConnection($host, $s['db'], $s['user'], $s['pass'], 'utf8mb4', $s['port'], $tls);
    }

    /** verify-identity to localhost with the right CA, as additional DSN. */
    private function verifiedLocalhost(): string
    {
        return 'ssl-mode=VERIFY_IDENTITY;ssl-ca=' . $this->tlsFile('ca.pem');
    }

    /** What lock() threw, as one string: message and getPrevious() chain. */
    private function lockFailure(): string
    {
        $name = $this->lockName();
        $e = $this->catchThrown(fn () => SharedLock::lock($name, 0, 10));
        $this->assertInstanceOf(SharedLockAcquireException::class, $e, 'lock() threw ' . get_class($e) . ': ' . $e->getMessage());
        return implode("\n", array_merge([$e->getMessage()], self::previousMessages($e)));
    }

    /** The Ssl_cipher of a PDO's session ('' without TLS). */
    private static function cipher(\PDO $pdo): string
    {
        return (string) $pdo->query("SHOW SESSION STATUS LIKE 'Ssl_cipher'")->fetch(\PDO::FETCH_NUM)[1];
    }

    // ---------------------------------------------------------------------------------
    // The extension's own connection

    /** @test */
    #[Test]
    public function verifyIdentityToLocalhostWithTheRightCaLocksAndUnlocks(): void
    {
        $this->assertOnlyTlsLoginsWork();
        $name = $this->lockName();
        $this->configureTls('localhost', $this->verifiedLocalhost());
        $handle = SharedLock::lock($name, 0, 10);
        $this->assertCount(1, self::rows($name), 'lock() left no row');
        $handle->release();
        $this->assertSame([], self::rows($name), 'release() left the row');
    }

    /** @test */
    #[Test]
    public function mysqllockDsnWithVerifyIdentityLocksAndUnlocks(): void
    {
        $this->assertOnlyTlsLoginsWork();
        $s = server();
        $url = sprintf(
            'mysql://%s:%s@localhost:%d/%s?ssl-mode=VERIFY_IDENTITY&ssl-ca=%s',
            rawurlencode($s['user']),
            rawurlencode($s['pass']),
            $s['port'],
            rawurlencode($s['db']),
            rawurlencode($this->tlsFile('ca.pem')),
        );
        $code = '$h = ItsMieger\MySqlSharedLocks\SharedLock::lock($argv[1], 0, 10); $h->release(); echo "released\n";';
        [$out, $err, $rc] = self::runToEnd([PHP_BINARY, '-d', 'extension=' . extensionPath(), '-d', 'mysqllock.dsn="' . $url . '"', '-r', $code, $this->lockName()]);
        $this->assertSame([0, "released\n"], [$rc, $out], "the child failed: $err");
    }

    /** @test */
    #[Test]
    public function wrongCaIsRefusedNamingTheCa(): void
    {
        $this->configureTls('localhost', 'ssl-mode=VERIFY_IDENTITY;ssl-ca=' . $this->tlsFile('wrong-ca.pem'));
        $this->assertStringContainsString('CA', $this->lockFailure());
    }

    /** @test */
    #[Test]
    public function verifyIdentityToAnIpAddressIsRefusedNamingTheHost(): void
    {
        $this->configureTls('127.0.0.1', 'ssl-mode=VERIFY_IDENTITY;ssl-ca=' . $this->tlsFile('ca.pem'));
        // The TLS part of the message names the host (the target before it always does).
        $this->assertMatchesRegularExpression('/TLS:.*127\.0\.0\.1/', $this->lockFailure());
    }

    /** @test */
    #[Test]
    public function verifyCaToAnIpAddressLocksAndUnlocks(): void
    {
        $this->assertOnlyTlsLoginsWork();
        $name = $this->lockName();
        $this->configureTls('127.0.0.1', 'ssl-ca=' . $this->tlsFile('ca.pem'));
        SharedLock::lock($name, 0, 10)->release();
        $this->assertSame([], self::rows($name), 'release() left the row');
    }

    /** @test */
    #[Test]
    public function disabledIsRefusedNamingTlsAndSslMode(): void
    {
        $this->configureTls('127.0.0.1', 'ssl-mode=DISABLED');
        $failure = $this->lockFailure();
        $this->assertStringContainsString('TLS', $failure);
        $this->assertStringContainsString('ssl-mode', $failure);
    }

    /** @test */
    #[Test]
    public function x509AccountLogsInWithSslCertAndSslKey(): void
    {
        $this->assertOnlyTlsLoginsWork();
        $a = $this->x509Account();
        $name = $this->lockName();
        $mode = $a['host'] === 'localhost' ? 'VERIFY_IDENTITY' : 'VERIFY_CA';
        SharedLock::configureConnection($a['host'], $a['db'], $a['user'], $a['pass'], 'utf8mb4', $a['port'], "ssl-mode=$mode;ssl-ca="
            . $this->tlsFile('ca.pem') . ';ssl-cert=' . $this->tlsFile('client-cert.pem') . ';ssl-key=' . $this->tlsFile('client-key.pem'));
        SharedLock::lock($name, 0, 10)->release();
        $this->assertSame([], self::rows($name), 'release() left the row');
    }

    /** @test */
    #[Test]
    public function x509AccountWithoutACertificateIsRefusedNamingSslCert(): void
    {
        $a = $this->x509Account();
        SharedLock::configureConnection($a['host'], $a['db'], $a['user'], $a['pass'], 'utf8mb4', $a['port'], 'ssl-mode=REQUIRED');
        $this->assertStringContainsString('ssl-cert', $this->lockFailure());
    }

    /** @test */
    #[Test]
    public function sessionLockOnAConnectionWithTheWrongCaThrowsConnectionException(): void
    {
        $this->configureTls('localhost', 'ssl-mode=VERIFY_IDENTITY;ssl-ca=' . $this->tlsFile('wrong-ca.pem'));
        $e = $this->catchThrown(fn () => (new SessionLock($this->lockName()))->acquire());
        $this->assertInstanceOf(ConnectionException::class, $e, get_class($e) . ': ' . $e->getMessage());
        $this->assertStringContainsString('CA', $e->getMessage());
    }

    /** @test */
    #[Test]
    public function distributedLockOnMysqllockDsnWithTlsAcquiresAndReleases(): void
    {
        $this->assertOnlyTlsLoginsWork();
        $s = server();
        ini_set('mysqllock.dsn', sprintf(
            'mysql://%s:%s@localhost:%d/%s?ssl-mode=VERIFY_IDENTITY&ssl-ca=%s&lease_table=%s',
            rawurlencode($s['user']),
            rawurlencode($s['pass']),
            $s['port'],
            rawurlencode($s['db']),
            rawurlencode($this->tlsFile('ca.pem')),
            self::LEASES,
        ));
        try {
            $lock = new DistributedLock();
            $lock->createTable();
            $resource = $this->lockName();
            $this->assertSame([true, true], [$lock->acquire($resource, 'me', 10), $lock->release($resource, 'me')]);
        } finally {
            ini_restore('mysqllock.dsn');
        }
    }

    // ---------------------------------------------------------------------------------
    // The PDOs the extension opens

    /** @test */
    #[Test]
    public function getConnectionPdoIsEncrypted(): void
    {
        $this->configureTls('127.0.0.1', 'ssl-mode=REQUIRED');
        $this->assertNotSame('', self::cipher(SharedLock::getConnection()));
    }

    /** @test */
    #[Test]
    public function getConnectionPdoLocksAndUnlocks(): void
    {
        $name = $this->lockName();
        $this->configureTls('127.0.0.1', 'ssl-mode=REQUIRED');
        SharedLock::getConnection();
        SharedLock::lock($name, 0, 10)->release();
        $this->assertSame([], self::rows($name), 'release() left the row');
    }

    /** @test */
    #[Test]
    public function getConnectionPdoChecksTheCertificateInVerifyingModes(): void
    {
        // Right CA, wrong name: never an unchecked connection.
        $this->configureTls('127.0.0.1', 'ssl-mode=VERIFY_IDENTITY;ssl-ca=' . $this->tlsFile('ca.pem'));
        $e = $this->catchThrown(fn () => SharedLock::getConnection());
        $this->assertInstanceOf(\PDOException::class, $e, get_class($e) . ': ' . $e->getMessage());
        $this->assertSame(2002, $e->errorInfo[1] ?? null, $e->getMessage());
    }

    /** @test */
    #[Test]
    public function pdoFactoryGivesAnX509AccountItsCertificate(): void
    {
        $a = $this->x509Account();
        $this->assertNotSame('localhost', $a['host'], 'a PDO reaches localhost over the Unix socket, without TLS: the X509 account must be at an IP');
        $url = sprintf(
            'mysql://%s%s@%s:%d/%s?ssl-mode=REQUIRED&ssl-cert=%s&ssl-key=%s',
            rawurlencode($a['user']),
            $a['pass'] === null ? '' : ':' . rawurlencode($a['pass']),
            $a['host'],
            $a['port'],
            rawurlencode($a['db']),
            rawurlencode($this->tlsFile('client-cert.pem')),
            rawurlencode($this->tlsFile('client-key.pem')),
        );
        $this->assertNotSame('', self::cipher(PdoFactory::fromUrl($url)));
    }
}
