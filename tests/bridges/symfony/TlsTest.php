<?php
// TLS settings in a store's DSN and in mysqllock.dsn reach the extension, in both modes,
// against the TLS test server (require_secure_transport; a certificate from a test CA
// for localhost only). Only in the TLS suite:
//
//   MYSQLLOCK_SERVER_TLS=require bash scripts/mariadb.sh start DIR
//   (set -a; . DIR/env; set +a; php -d extension=$PWD/target/release/libmysqllock_php.so \
//       /usr/bin/phpunit -c tests/bridges/symfony/phpunit.xml --group tls)
//
// The server refuses every login without TLS over TCP, so a lock taken proves TLS.
declare(strict_types=1);

namespace MySqlLockSymfonyTest;

use MySqlLock\Symfony\MySqlLockStore;
use PHPUnit\Framework\Attributes\DataProvider;
use PHPUnit\Framework\Attributes\Group;
use Symfony\Component\Lock\Exception\LockAcquiringException;
use Symfony\Component\Lock\Key;

/** @group tls */
#[Group('tls')]
final class TlsTest extends TestCase
{
    protected function setUp(): void
    {
        parent::setUp();
        if (tlsDir() === null) {
            $this->fail('MYSQLLOCK_TEST_TLS_DIR is not set: the tls group runs against the TLS test server '
                . '(MYSQLLOCK_SERVER_TLS=require bash scripts/mariadb.sh start DIR, then load DIR/env)');
        }
        $this->assertOnlyTlsLoginsWork();
    }

    protected function tearDown(): void
    {
        ini_set('mysqllock.dsn', defaultDsn());
        parent::tearDown();
    }

    /** That the server refuses a TCP login without TLS: a lock taken then was taken over TLS. */
    private function assertOnlyTlsLoginsWork(): void
    {
        $u = parse_url(testDsn());
        try {
            new \PDO(sprintf('mysql:host=%s;port=%d', $u['host'], $u['port'] ?? 3306), rawurldecode($u['user'] ?? ''), rawurldecode($u['pass'] ?? ''), [\PDO::ATTR_ERRMODE => \PDO::ERRMODE_EXCEPTION]);
            $this->fail('the TLS test server accepted a login without TLS: require_secure_transport is off');
        } catch (\PDOException $e) {
            $this->assertContains($e->errorInfo[1] ?? null, [1045, 3159], 'a login without TLS failed otherwise: ' . $e->getMessage());
        }
    }

    /** The test server as a mysqllock:// DSN at $host, with $query. */
    private static function dsnAt(string $host, string $query): string
    {
        $u = parse_url(testDsn());
        return sprintf('mysqllock://%s:%s@%s:%d%s?%s', $u['user'], $u['pass'] ?? '', $host, $u['port'] ?? 3306, $u['path'], $query);
    }

    /** Saves and deletes a key on $store; whether the save held the lock. */
    private function saveAndDelete(MySqlLockStore $store): bool
    {
        $key = new Key($this->resource());
        $store->save($key);
        $held = $store->exists($key);
        $store->delete($key);
        return $held;
    }

    /** @dataProvider modes */
    #[DataProvider('modes')]
    public function testADsnWithSslModeRequiredLocksInEitherMode(string $mode): void
    {
        $store = new MySqlLockStore(self::dsnAt('127.0.0.1', "mode=$mode&ssl-mode=REQUIRED"));
        $this->assertTrue($this->saveAndDelete($store));
    }

    public function testSharedModeVerifiesTheServerNamedInTheDsn(): void
    {
        $store = new MySqlLockStore(self::dsnAt('localhost', 'ssl_mode=VERIFY_IDENTITY&ssl_ca=' . rawurlencode(tlsDir() . '/ca.pem')));
        $this->assertTrue($this->saveAndDelete($store));
    }

    public function testAWrongCaInTheDsnIsRefusedNamingTheCa(): void
    {
        $store = new MySqlLockStore(self::dsnAt('localhost', 'ssl-mode=VERIFY_IDENTITY&ssl-ca=' . rawurlencode(tlsDir() . '/wrong-ca.pem')));
        $e = $this->catchThrown(fn () => $store->save(new Key($this->resource())));
        $this->assertInstanceOf(LockAcquiringException::class, $e);
        $this->assertStringContainsString('CA', (string) $e->getPrevious()?->getMessage());
    }

    public function testLeaseModeOnTheDefaultConnectionTakesTheTlsOfMysqllockDsn(): void
    {
        // Without the ini's ssl-mode its PDO would be unencrypted, and refused.
        ini_set('mysqllock.dsn', testDsn() . '?ssl-mode=REQUIRED');
        $this->assertTrue($this->saveAndDelete(new MySqlLockStore(null, ['mode' => 'lease'])));
    }

    public function testSharedModeBackOnTheDefaultConnectionTakesTheTlsOfMysqllockDsn(): void
    {
        // Another store points SharedLock elsewhere; back on the default connection the
        // store configures it from mysqllock.dsn, whose wrong CA must then be in force.
        $this->saveAndDelete(new MySqlLockStore(self::dsnAt('127.0.0.1', 'ssl-mode=REQUIRED')));
        ini_set('mysqllock.dsn', str_replace('mysqllock://', 'mysql://', self::dsnAt('localhost', 'ssl-mode=VERIFY_IDENTITY&ssl-ca=' . rawurlencode(tlsDir() . '/wrong-ca.pem'))));
        $e = $this->catchThrown(fn () => (new MySqlLockStore())->save(new Key($this->resource())));
        $this->assertInstanceOf(LockAcquiringException::class, $e);
        $this->assertStringContainsString('CA', (string) $e->getPrevious()?->getMessage());
    }

    private function catchThrown(callable $fn): \Throwable
    {
        try {
            $fn();
        } catch (\Throwable $e) {
            return $e;
        }
        $this->fail('nothing was thrown');
    }
}
