<?php
// The TLS settings as the extension reads them (configureConnection()'s $additionalDsn,
// mysqllock.dsn, php --ri) and what it refuses before connecting. No TLS server needed;
// TLS against a real one is TlsTest (group tls).
declare(strict_types=1);

namespace MySqlLockTest;

use ItsMieger\MySqlSharedLocks\SharedLock;
use MySqlLock\PdoFactory;
use PHPUnit\Framework\Attributes\Test;

final class TlsSettingsTest extends TestCase
{
    /** configureConnection() to the test server at $host with $extra as the additional DSN. */
    private static function configureWith(string $host, string $extra): void
    {
        $s = server();
        SharedLock::configureConnection($host, $s['db'], $s['user'], $s['pass'], 'utf8mb4', $s['port'], $extra);
    }

    /** What configureConnection() threw for $extra; fails if it accepted it. */
    private function refusedSetting(string $extra): \Throwable
    {
        return $this->catchThrown(fn () => self::configureWith('127.0.0.1', $extra));
    }

    /** `php --ri mysqllock` with $dsn as mysqllock.dsn. */
    private static function phpRi(string $dsn): string
    {
        [$out, $err, $rc] = self::runToEnd([PHP_BINARY, '-d', 'extension=' . extensionPath(), '-d', 'mysqllock.dsn="' . $dsn . '"', '--ri', 'mysqllock']);
        self::assertSame(0, $rc, "php --ri failed: $err");
        return $out;
    }

    /** @test */
    #[Test]
    public function anUnknownSslModeIsRefusedNamingTheKey(): void
    {
        $e = $this->refusedSetting('ssl-mode=sometimes');
        $this->assertInstanceOf(\InvalidArgumentException::class, $e);
        $this->assertStringContainsString('ssl-mode', $e->getMessage());
    }

    /** @test */
    #[Test]
    public function sslCertWithoutSslKeyIsRefusedNamingBoth(): void
    {
        $e = $this->refusedSetting('ssl-cert=/etc/mysql/client-cert.pem');
        $this->assertInstanceOf(\InvalidArgumentException::class, $e);
        $this->assertStringContainsString('ssl-cert/ssl-key', $e->getMessage());
    }

    /** @test */
    #[Test]
    public function disabledWinsOverSslCaOnThePdoToo(): void
    {
        // As for the extension's own connection (an option file's CA, turned off later).
        self::configureWith(server()['host'], 'ssl-ca=/nonexistent/mysqllock-ca.pem;ssl-mode=DISABLED');
        $cipher = SharedLock::getConnection()->query("SHOW SESSION STATUS LIKE 'Ssl_cipher'")->fetch(\PDO::FETCH_NUM)[1];
        $this->assertSame('', $cipher);
    }

    /** @test */
    #[Test]
    public function underscoreSpellingsSetTheMode(): void
    {
        // The mode reached the settings if getConnection() refuses TLS over the socket.
        self::configureWith('localhost', 'ssl_mode=verify_identity');
        $e = $this->catchThrown(fn () => SharedLock::getConnection());
        $this->assertInstanceOf(\InvalidArgumentException::class, $e);
        $this->assertStringContainsString('ssl-mode=VERIFY_IDENTITY', $e->getMessage());
    }

    /** @test */
    #[Test]
    public function getConnectionRefusesTlsOverTheUnixSocket(): void
    {
        self::configureWith('localhost', 'ssl-mode=REQUIRED');
        $e = $this->catchThrown(fn () => SharedLock::getConnection());
        $this->assertInstanceOf(\InvalidArgumentException::class, $e);
        $this->assertStringContainsString('Unix socket', $e->getMessage());
    }

    /** @test */
    #[Test]
    public function getConnectionNamesACaFileItCannotRead(): void
    {
        self::configureWith('127.0.0.1', 'ssl-ca=/nonexistent/mysqllock-ca.pem');
        $e = $this->catchThrown(fn () => SharedLock::getConnection());
        $this->assertInstanceOf(\InvalidArgumentException::class, $e);
        $this->assertStringContainsString('ssl-ca', $e->getMessage());
    }

    /** @test */
    #[Test]
    public function getConnectionInPreferredModeIsUnencrypted(): void
    {
        // mysqlnd cannot fall back to plain, so PREFERRED (the default) gives no TLS to PDOs.
        self::configureWith(server()['host'], 'ssl-mode=PREFERRED');
        $cipher = SharedLock::getConnection()->query("SHOW SESSION STATUS LIKE 'Ssl_cipher'")->fetch(\PDO::FETCH_NUM)[1];
        $this->assertSame('', $cipher);
    }

    /** @test */
    #[Test]
    public function sslKeysLeaveTheOtherDsnSettingsInForce(): void
    {
        $name = $this->lockName();
        $s = server();
        SharedLock::configureConnection('no-such-host.invalid', $s['db'], $s['user'], $s['pass'], 'utf8mb4', 1, "ssl-mode=DISABLED;host={$s['host']};port={$s['port']}");
        SharedLock::getConnection();
        SharedLock::lock($name, 0, 10)->release();
        $this->assertSame([], self::rows($name), 'release() left the row');
    }

    /** @test */
    #[Test]
    public function pdoFactoryRefusesAnUnknownUrlSetting(): void
    {
        $e = $this->catchThrown(fn () => PdoFactory::fromUrl('mysql://u@127.0.0.1/db?ssl-mood=REQUIRED'));
        $this->assertInstanceOf(\InvalidArgumentException::class, $e);
        $this->assertStringContainsString('ssl-mood', $e->getMessage());
    }

    /** @test */
    #[Test]
    public function pdoFactoryOpensAPdoOnTheUrlsServer(): void
    {
        $s = server();
        $url = sprintf('mysql://%s:%s@%s:%d/%s?ssl-mode=DISABLED', rawurlencode($s['user']), rawurlencode($s['pass']), $s['host'], $s['port'], rawurlencode($s['db']));
        $this->assertSame($s['db'], PdoFactory::fromUrl($url)->query('SELECT DATABASE()')->fetchColumn());
    }

    /** @test */
    #[Test]
    public function phpRiShowsTheTlsModeInForce(): void
    {
        $this->assertMatchesRegularExpression('/^TLS \(mysqllock\.dsn\) => VERIFY_IDENTITY, ssl-ca=\/etc\/mysql\/ca\.pem$/m', self::phpRi('mysql://app:s3cret-pw@db.example/app?ssl-mode=verify_identity&ssl-ca=/etc/mysql/ca.pem'));
    }

    /** @test */
    #[Test]
    public function phpRiShowsVerifyCaForSslCaAlone(): void
    {
        $this->assertMatchesRegularExpression('/^TLS \(mysqllock\.dsn\) => VERIFY_CA /m', self::phpRi('mysql://app:s3cret-pw@db.example/app?ssl-ca=/etc/mysql/ca.pem'));
    }

    /** @test */
    #[Test]
    public function phpRiMasksThePasswordOfADsnWithTlsSettings(): void
    {
        $this->assertStringNotContainsString('s3cret-pw', self::phpRi('mysql://app:s3cret-pw@db.example/app?ssl-mode=REQUIRED&ssl-cert=/c.pem&ssl-key=/k.pem'));
    }

    /** @test */
    #[Test]
    public function anInvalidSslModeInMysqllockDsnIsReportedAtFirstUse(): void
    {
        $code = 'try { ItsMieger\MySqlSharedLocks\SharedLock::lock("x", 0, 10); } catch (Throwable $e) { echo get_class($e), ": ", $e->getMessage(); }';
        [$out, $err, $rc] = self::runToEnd([PHP_BINARY, '-d', 'extension=' . extensionPath(), '-d', 'mysqllock.dsn="mysql://u@127.0.0.1/db?ssl-mode=sometimes"', '-r', $code]);
        $this->assertSame(0, $rc, $err);
        $this->assertStringContainsString('ssl-mode', $out);
    }
}
