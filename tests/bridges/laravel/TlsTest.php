<?php
// TLS the application already configures reaches the locks, against the TLS test server
// (require_secure_transport; a certificate from a test CA for localhost only): a database
// connection's PDO options, a store DSN's ssl-mode, mysqllock.dsn's. Only in the TLS suite:
//
//   MYSQLLOCK_SERVER_TLS=require bash scripts/mariadb.sh start DIR
//   (set -a; . DIR/env; set +a; php -d extension=$PWD/target/release/libmysqllock_php.so \
//       -d mysqllock.dsn="$MYSQLLOCK_TEST_DSN" /usr/bin/phpunit -c tests/bridges/laravel/phpunit.xml --group tls)
//
// The server refuses every login without TLS over TCP, so a lock taken proves TLS.
declare(strict_types=1);

namespace MySqlLockLaravelTest;

use PHPUnit\Framework\Attributes\Group;

/** @group tls */
#[Group('tls')]
final class TlsTest extends TestCase
{
    private string $iniDsn = '';

    protected function setUp(): void
    {
        if (tlsDir() === null) {
            $this->fail('MYSQLLOCK_TEST_TLS_DIR is not set: the tls group runs against the TLS test server '
                . '(MYSQLLOCK_SERVER_TLS=require bash scripts/mariadb.sh start DIR, then load DIR/env)');
        }
        $this->assertOnlyTlsLoginsWork();
        $this->iniDsn = (string) ini_get('mysqllock.dsn');
        parent::setUp();
    }

    protected function tearDown(): void
    {
        ini_set('mysqllock.dsn', $this->iniDsn);
        parent::tearDown();
    }

    /** That the server refuses a TCP login without TLS: a lock taken then was taken over TLS. */
    private function assertOnlyTlsLoginsWork(): void
    {
        $s = server();
        try {
            new \PDO("mysql:host={$s['host']};port={$s['port']}", $s['user'], $s['pass'], [\PDO::ATTR_ERRMODE => \PDO::ERRMODE_EXCEPTION]);
            $this->fail('the TLS test server accepted a login without TLS: require_secure_transport is off');
        } catch (\PDOException $e) {
            $this->assertContains($e->errorInfo[1] ?? null, [1045, 3159], 'a login without TLS failed otherwise: ' . $e->getMessage());
        }
    }

    /** A store of $config locks and unlocks a name, and force-releases it (reading its owner). */
    private function locksAndForceReleases(array $config): void
    {
        $this->app = makeApp(['driver' => 'mysqllock', 'table' => TABLE] + $config);
        $name = $this->lockName();
        $lock = $this->cache()->lock($name, 30);
        $this->assertTrue($lock->acquire(), 'acquire() failed');
        $this->assertFalse($this->cache()->lock($name, 30)->acquire(), 'a second owner acquired it too');
        $lock->forceRelease();
        $this->assertTrue($this->cache()->lock($name, 30)->acquire(), 'forceRelease() left it taken');
    }

    public function testAStoreOnADatabaseConnectionWithSslOptionsLocksOverTls(): void
    {
        $this->locksAndForceReleases(['connection' => 'locks']);
        $pdo = $this->app->make('db')->connection('locks')->getPdo();
        $this->assertNotSame('', $pdo->query("SHOW SESSION STATUS LIKE 'Ssl_cipher'")->fetch(\PDO::FETCH_NUM)[1]);
    }

    public function testAStoreWithADsnTakesItsSslMode(): void
    {
        $this->locksAndForceReleases(['dsn' => server()['dsn'] . '?ssl-mode=REQUIRED']);
    }

    public function testTheExtensionsConnectionTakesTheSslModeOfMysqllockDsn(): void
    {
        // The leases go through the extension's own connection, the owner is read on a PDO.
        ini_set('mysqllock.dsn', server()['dsn'] . '?ssl-mode=REQUIRED');
        $this->locksAndForceReleases([]);
    }
}
