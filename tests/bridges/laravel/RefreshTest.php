<?php
// refresh($seconds = null) (Laravel 12's Lock::refresh(), which the bridge has on every
// Laravel it supports): the owner's unexpired lease restarts with $seconds from now; another
// owner, an expired or a released lease get false and the row stays as it was; null means
// the lock's own seconds, <= 0 the store's lock_timeout (Laravel's DatabaseLock). Every
// expiry is read from the table on the tests' own connection (plain PDO), never from the
// bridge. On the original table; the subclass runs the same on the upgraded one.
declare(strict_types=1);

namespace MySqlLockLaravelTest;

use PHPUnit\Framework\Attributes\DataProvider;

class RefreshTest extends TestCase
{
    protected function storeConfig(): array
    {
        // lock_timeout an hour, so "the lock_timeout" and "a day" differ.
        return ['driver' => 'mysqllock', 'table' => TABLE, 'lock_timeout' => 3600];
    }

    /** Asserts the lease of $name ends about $seconds from now (by the database's clock). */
    private function assertExpiresIn(int $seconds, string $name): void
    {
        $row = $this->row($name);
        $this->assertNotNull($row, "no row for $name");
        // A whole-second expires_at may be up to a second short; the test may take 10 s.
        $this->assertGreaterThan($seconds - 10, $row['remaining'], "the lease of $name ends too soon");
        $this->assertLessThanOrEqual($seconds + 1, $row['remaining'], "the lease of $name ends too late");
    }

    public function testTheOwnerRefreshesItsLeaseForTheSecondsGiven(): void
    {
        $lock = $this->cache()->lock($this->lockName(), 30, 'owner-a');
        $this->assertTrue($lock->get());
        $this->assertExpiresIn(30, $this->lockName());
        $this->assertTrue($lock->refresh(600));
        $this->assertExpiresIn(600, $this->lockName());
        $this->assertSame('owner-a', $this->liveOwner($this->lockName()));
        $this->assertFalse($this->cache()->lock($this->lockName(), 10, 'owner-b')->get(), 'the refreshed lock was free for another owner');
    }

    public function testARefreshMayShortenTheLease(): void
    {
        $lock = $this->cache()->lock($this->lockName(), 600, 'owner-a');
        $this->assertTrue($lock->get());
        $this->assertTrue($lock->refresh(20));
        $this->assertExpiresIn(20, $this->lockName());
    }

    public function testNullRefreshesForTheLocksOwnSeconds(): void
    {
        $lock = $this->cache()->lock($this->lockName(), 120, 'owner-a');
        $this->assertTrue($lock->get());
        $this->assertTrue($lock->refresh(900));
        $this->assertExpiresIn(900, $this->lockName());
        $this->assertTrue($lock->refresh());
        $this->assertExpiresIn(120, $this->lockName());
        $this->assertTrue($lock->refresh(null));
        $this->assertExpiresIn(120, $this->lockName());
    }

    public function testNullOnALockOfNoSecondsRefreshesForTheLockTimeout(): void
    {
        $lock = $this->cache()->lock($this->lockName(), 0, 'owner-a');
        $this->assertTrue($lock->get());
        $this->assertExpiresIn(3600, $this->lockName());
        $this->assertTrue($lock->refresh(30));
        $this->assertExpiresIn(30, $this->lockName());
        $this->assertTrue($lock->refresh());
        $this->assertExpiresIn(3600, $this->lockName());
    }

    public function testARestoredLockRefreshesForTheLockTimeoutUnlessGivenSeconds(): void
    {
        // restoreLock() knows no seconds (Laravel's stores restore with 0, as this one).
        $this->assertTrue($this->cache()->lock($this->lockName(), 30, 'owner-a')->get());
        $restored = $this->cache()->restoreLock($this->lockName(), 'owner-a');
        $this->assertTrue($restored->refresh());
        $this->assertExpiresIn(3600, $this->lockName());
        $this->assertTrue($restored->refresh(45));
        $this->assertExpiresIn(45, $this->lockName());
    }

    /** @return array<string, array{int|float|string}> */
    public static function secondsThatMeanTheLockTimeout(): array
    {
        return ['zero' => [0], 'negative' => [-5], 'negative float' => [-0.5], 'zero as a string' => ['0']];
    }

    /**
     * @dataProvider secondsThatMeanTheLockTimeout
     * @param int|float|string $seconds
     */
    #[DataProvider('secondsThatMeanTheLockTimeout')]
    public function testSecondsOfZeroOrLessRefreshForTheLockTimeout($seconds): void
    {
        $lock = $this->cache()->lock($this->lockName(), 30, 'owner-a');
        $this->assertTrue($lock->get());
        $this->assertTrue($lock->refresh($seconds));
        $this->assertExpiresIn(3600, $this->lockName());
    }

    public function testFractionalSecondsAreRoundedUp(): void
    {
        $lock = $this->cache()->lock($this->lockName(), 30, 'owner-a');
        $this->assertTrue($lock->get());
        $this->assertTrue($lock->refresh(99.2));
        $this->assertExpiresIn(100, $this->lockName());
        $this->assertTrue($lock->refresh('250'));
        $this->assertExpiresIn(250, $this->lockName());
    }

    /** @return array<string, array{mixed}> */
    public static function secondsThatAreNotSeconds(): array
    {
        return [
            'a word' => ['soon'],
            'NAN' => [NAN],
            'INF' => [INF],
            'an array' => [[10]],
            'true' => [true],
            'beyond MAX_TTL' => [\Nene\Kit\DistributedLock::MAX_TTL + 1],
        ];
    }

    /**
     * @dataProvider secondsThatAreNotSeconds
     * @param mixed $seconds
     */
    #[DataProvider('secondsThatAreNotSeconds')]
    public function testSecondsThatAreNotANumberOfSecondsAreRefusedAndChangeNothing($seconds): void
    {
        $lock = $this->cache()->lock($this->lockName(), 60, 'owner-a');
        $this->assertTrue($lock->get());
        $before = $this->row($this->lockName());
        $thrown = $this->thrownBy(fn () => $lock->refresh($seconds));
        $this->assertInstanceOf(\InvalidArgumentException::class, $thrown);
        $this->assertStringContainsString('was given', $thrown->getMessage());
        $after = $this->row($this->lockName());
        $this->assertSame('owner-a', $after['owner']);
        $this->assertEqualsWithDelta($before['remaining'], $after['remaining'], 5.0);
    }

    public function testAnotherOwnerCannotRefreshAndTheLeaseStaysAsItWas(): void
    {
        $this->assertTrue($this->cache()->lock($this->lockName(), 60, 'owner-a')->get());
        $this->assertFalse($this->cache()->restoreLock($this->lockName(), 'owner-b')->refresh(900));
        $this->assertFalse($this->cache()->lock($this->lockName(), 60, 'owner-b')->refresh());
        $this->assertSame('owner-a', $this->row($this->lockName())['owner']);
        $this->assertExpiresIn(60, $this->lockName());
    }

    public function testAnExpiredLeaseCannotBeRefreshedByItsFormerOwner(): void
    {
        $lock = $this->cache()->lock($this->lockName(), 60, 'owner-a');
        $this->assertTrue($lock->get());
        $this->expireRow($this->lockName());
        $this->assertFalse($lock->refresh(900));
        $this->assertNull($this->liveOwner($this->lockName()), 'the refresh revived an expired lease');
        $this->assertTrue($this->cache()->lock($this->lockName(), 60, 'owner-b')->get());
    }

    public function testALeaseThatTimedOutOnItsOwnCannotBeRefreshed(): void
    {
        $lock = $this->cache()->lock($this->lockName(), 1, 'owner-a');
        $this->assertTrue($lock->get());
        $expired = self::waitUntil(fn () => $this->liveOwner($this->lockName()) === null, 10, 0.1);
        $this->assertTrue($expired, 'a lease of 1 s was still live after 10 s');
        $this->assertFalse($lock->refresh(900));
        $this->assertNull($this->liveOwner($this->lockName()));
    }

    public function testAReleasedLeaseCannotBeRefreshed(): void
    {
        $lock = $this->cache()->lock($this->lockName(), 60, 'owner-a');
        $this->assertTrue($lock->get());
        $this->assertTrue($lock->release());
        $this->assertFalse($lock->refresh(60));
        $this->assertNull($this->liveOwner($this->lockName()));
    }

    public function testTheOwnerRefreshesFromAnotherProcess(): void
    {
        $this->assertTrue($this->cache()->lock($this->lockName(), 30, 'owner-a')->get());
        $child = $this->child();
        $this->assertTrue($child->run(['refresh', $this->lockName(), 'owner-a', 700]));
        $this->assertExpiresIn(700, $this->lockName());
        $this->assertFalse($child->run(['refresh', $this->lockName(), 'owner-b', 10]));
        $this->assertExpiresIn(700, $this->lockName());
        $this->assertTrue($child->run(['isLocked', $this->lockName()]));
        $this->assertTrue($this->cache()->restoreLock($this->lockName(), 'owner-a')->release());
        $this->assertFalse($child->run(['isLocked', $this->lockName()]));
        $this->assertFalse($child->run(['refresh', $this->lockName(), 'owner-a', 10]));
    }
}
