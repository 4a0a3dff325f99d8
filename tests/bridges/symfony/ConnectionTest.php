<?php
// How a store is built: DSN, PDO, the extension's default connection, the store factory.
declare(strict_types=1);

namespace MySqlLockSymfonyTest;

use ItsMieger\MySqlSharedLocks\SharedLock;
use MySqlLock\Symfony\MySqlLockStore;
use MySqlLock\Symfony\MySqlLockStoreFactory;
use PHPUnit\Framework\Attributes\DataProvider;
use Symfony\Component\Lock\Exception\InvalidArgumentException;
use Symfony\Component\Lock\Exception\LockStorageException;
use Symfony\Component\Lock\Key;
use Symfony\Component\Lock\Store\FlockStore;
use Symfony\Component\Lock\Store\StoreFactory;

final class ConnectionTest extends TestCase
{
    public static function dsnSchemes(): array
    {
        return [
            'mysqllock://, SharedLock mode' => ['mysqllock', 'shared'],
            'mysqllock://, lease mode' => ['mysqllock', 'lease'],
            'mysql://, SharedLock mode' => ['mysql', 'shared'],
            'mysql://, lease mode' => ['mysql', 'lease'],
        ];
    }

    /** @dataProvider dsnSchemes */
    #[DataProvider('dsnSchemes')]
    public function testAStoreFromADsnLocksOnThatServerInTheModeItNames(string $scheme, string $mode): void
    {
        $store = new MySqlLockStore(preg_replace('#^mysql:#', "$scheme:", testDsn()) . '?mode=' . $mode);
        $this->assertSame($mode, $store->getMode());
        $key = new Key($this->resource());
        $store->save($key);
        $this->assertTrue($store->exists($key));
        $this->assertSame(1, $this->rows($mode, $this->resource()));
        $store->delete($key);
        $this->assertSame(0, $this->rows($mode, $this->resource()));
    }

    public function testSharedModeOnAPdoLocksInThatPdosSession(): void
    {
        $pdo = connect();
        $store = new MySqlLockStore($pdo);
        $store->save(new Key($this->resource()));
        $this->assertSame((int) $pdo->query('SELECT CONNECTION_ID()')->fetchColumn(), SharedLock::holder($this->resource())['connectionId']);
    }

    public function testLeaseModeOnAPdoWritesThroughIt(): void
    {
        $pdo = connect();
        $store = new MySqlLockStore($pdo, ['mode' => 'lease']);
        $key = new Key($this->resource());
        $pdo->beginTransaction();
        $store->save($key);
        $this->assertSame(0, $this->rows('lease', $this->resource()), 'visible before the PDO\'s transaction committed');
        $pdo->commit();
        $this->assertSame(1, $this->rows('lease', $this->resource()));
    }

    public function testTheDefaultConnectionDsnPicksTheMode(): void
    {
        $store = new MySqlLockStore('mysqllock:?mode=lease');
        $this->assertSame('lease', $store->getMode());
        $store->save(new Key($this->resource()));
        $this->assertSame(1, $this->rows('lease', $this->resource()));
        $this->assertSame('shared', (new MySqlLockStore('mysqllock://'))->getMode());
    }

    public function testOnTheDefaultConnectionLeaseModeUsesTheLeaseTableTheIniDsnNames(): void
    {
        ini_set('mysqllock.dsn', testDsn() . '?lease_table=sft_ini_leases');
        try {
            $store = new MySqlLockStore(null, ['mode' => 'lease']);
        } finally {
            ini_set('mysqllock.dsn', defaultDsn());
        }
        $store->createTable();
        $store->save(new Key($this->resource()));
        $st = self::db()->prepare('SELECT COUNT(*) FROM sft_ini_leases WHERE resource = ?');
        $st->execute([$this->resource()]);
        $this->assertSame(1, (int) $st->fetchColumn());
        self::db()->exec('DROP TABLE sft_ini_leases');
    }

    public function testOptionsWinOverTheDsnQuery(): void
    {
        $this->assertSame('shared', (new MySqlLockStore('mysqllock:?mode=lease', ['mode' => 'shared']))->getMode());
    }

    public static function badStores(): array
    {
        return [
            'another scheme' => ['pgsql://u:p@h/db', []],
            'no host' => ['mysqllock:///db', []],
            'unknown query option' => ['mysqllock://u:p@h/db?moed=lease', []],
            'unknown mode' => [null, ['mode' => 'redis']],
            'unknown option' => [null, ['ttl' => 3]],
            'bad table' => [null, ['table' => 'locks; DROP TABLE x']],
            'bad initial TTL' => [null, ['initial_ttl' => 0]],
            'NAN initial TTL' => [null, ['initial_ttl' => NAN]],
            'array initial TTL' => [null, ['initial_ttl' => [5]]],
        ];
    }

    /** @dataProvider badStores */
    #[DataProvider('badStores')]
    public function testAnUnusableDsnOrOptionIsRefusedAtConstruction(?string $dsn, array $options): void
    {
        $this->expectException(InvalidArgumentException::class);
        new MySqlLockStore($dsn, $options);
    }

    public function testAPasswordNeverAppearsInTheMessage(): void
    {
        try {
            new MySqlLockStore('mysqllock://app:t0p-s3cret@h/db?bogus=1');
            $this->fail('accepted');
        } catch (InvalidArgumentException $e) {
            $this->assertStringNotContainsString('t0p-s3cret', $e->getMessage());
        }
    }

    public function testAPdoOfAnotherDriverIsRefused(): void
    {
        $this->expectException(InvalidArgumentException::class);
        new MySqlLockStore(new \PDO('sqlite::memory:'));
    }

    public function testSharedModeRefusesToSwitchTheProcesssConnectionWhileAnotherStoreHoldsLocks(): void
    {
        $default = $this->store('shared');
        $default->save(new Key($this->resource('held')));
        $other = new MySqlLockStore(connect());

        $this->expectException(LockStorageException::class);
        $other->save(new Key($this->resource('other')));
    }

    public function testSharedModeSwitchesTheConnectionWhenNothingIsHeld(): void
    {
        $pdo = connect();
        $onPdo = new MySqlLockStore($pdo);
        $key = new Key($this->resource());
        $onPdo->save($key);
        $onPdo->delete($key);

        $default = $this->store('shared');
        $default->save($key);
        $this->assertNotSame((int) $pdo->query('SELECT CONNECTION_ID()')->fetchColumn(), SharedLock::holder($this->resource())['connectionId']);
    }

    public function testTheFactoryBuildsOurStoreForMysqllockDsnsAndSymfonysForTheRest(): void
    {
        $store = MySqlLockStoreFactory::createStore(preg_replace('#^mysql:#', 'mysqllock:', testDsn()) . '?mode=lease');
        $this->assertInstanceOf(MySqlLockStore::class, $store);
        $this->assertSame('lease', $store->getMode());
        $this->assertInstanceOf(FlockStore::class, MySqlLockStoreFactory::createStore('flock'));
    }

    public function testSymfonysOwnStoreFactoryDoesNotKnowMysqllockDsns(): void
    {
        // Why MySqlLockBundle exists: framework.lock hands DSNs to this closed list.
        $this->expectException(InvalidArgumentException::class);
        StoreFactory::createStore('mysqllock://u:p@127.0.0.1/db');
    }

    public function testADsnTakesTheTlsSettingsOfMysqllockDsn(): void
    {
        $store = new MySqlLockStore(preg_replace('#^mysql:#', 'mysqllock:', testDsn()) . '?ssl-mode=sometimes');
        try {
            $store->save(new Key($this->resource()));
            $this->fail('an invalid ssl-mode was accepted');
        } catch (LockStorageException $e) {
            $this->assertStringContainsString('ssl-mode', (string) $e->getPrevious()?->getMessage());
        }
    }

    public function testTheDefaultConnectionDsnRefusesTlsSettingsOfItsOwn(): void
    {
        $this->expectException(InvalidArgumentException::class);
        $this->expectExceptionMessage('mysqllock.dsn');
        new MySqlLockStore('mysqllock:?ssl-mode=REQUIRED');
    }

    private function rows(string $mode, string $name): int
    {
        $sql = $mode === 'shared'
            ? 'SELECT COUNT(*) FROM shared_locks WHERE name = ?'
            : 'SELECT COUNT(*) FROM distributed_locks WHERE resource = ? AND expires_at > UTC_TIMESTAMP()';
        $st = self::db()->prepare($sql);
        $st->execute([$name]);
        return (int) $st->fetchColumn();
    }
}
