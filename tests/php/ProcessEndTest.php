<?php
// What the end of a PHP process does to its locks: exit() and a fatal error inside
// synchronized() release the lock (the row is deleted, not merely left by a dead
// session), and, as with the original package, a row no longer marked
// lock_acquired = 1 outlives its process until its TTL.
declare(strict_types=1);

namespace MySqlLockTest;

use ItsMieger\MySqlSharedLocks\Exception\SharedLockTimeoutException;
use ItsMieger\MySqlSharedLocks\SharedLock;
use PHPUnit\Framework\Attributes\DataProvider;
use PHPUnit\Framework\Attributes\Test;

final class ProcessEndTest extends TestCase
{
    public static function endsAndConnections(): array
    {
        return [
            'exit(), native connection' => ['exit', 'native', 3],
            'exit(), PDO connection' => ['exit', 'pdo', 3],
            'fatal error, native connection' => ['fatal', 'native', 255],
            'fatal error, PDO connection' => ['fatal', 'pdo', 255],
        ];
    }

    /**
     * @test
     * @dataProvider endsAndConnections
     */
    #[Test]
    #[DataProvider('endsAndConnections')]
    public function processEndingInsideSynchronizedReleasesTheLock(string $end, string $conn, int $status): void
    {
        $name = $this->lockName();
        $cmd = [PHP_BINARY, '-d', 'extension=' . extensionPath(), '-d', 'display_errors=stderr', __DIR__ . '/fixtures/end_inside.php', $end, 'shared', $conn, $name];
        [$out, $err, $rc] = self::runToEnd($cmd);
        $this->assertSame("inside\n", $out, "the callback did not run as planned; stderr: $err");
        $this->assertSame($status, $rc, "stderr: $err");
        if ($end === 'fatal') {
            $this->assertStringContainsString('Allowed memory size', $err);
        }
        // Right after the process ended: a dead session would leave its row (marked
        // acquired); a release deletes it and lets the GET_LOCK go.
        $this->assertSame([], self::rows($name), 'the row outlived the process: nothing released it');
        $this->assertNull(self::db()->query('SELECT IS_USED_LOCK(' . self::db()->quote($name) . ')')->fetchColumn());
        SharedLock::lock($name, 0, 10); // timeout 0: free at once
        $this->assertSame(1, count(self::rows($name)));
    }

    /**
     * The original package's own test (a waiter with a 10 s timeout waits more than 6 s
     * for such a row with TTL 8 s), shorter: a holder whose row was marked
     * lock_acquired = 0 ends (normally, not killed); the row stays until its TTL.
     *
     * @test
     */
    #[Test]
    public function rowMarkedNotAcquiredOutlivesItsHoldersProcessUntilItsTTL(): void
    {
        $name = $this->lockName();
        $child = $this->startHolder($name, 3);
        $marked = self::db()->prepare('UPDATE shared_locks SET lock_acquired = 0 WHERE name = ?');
        $marked->execute([$name]);
        $this->assertSame(1, $marked->rowCount());
        $row = self::rows($name)[0];
        $leaseEnd = (int) $row['created'] + (int) $row['ttl'];
        $this->assertReply('bye', $child->call(['exit']));
        $this->assertTrue($child->waitForExit(10), 'the holder did not exit');
        $this->assertTrue(self::waitUntil(fn () => !self::sessionExists((int) $row['connection_id']), 10), 'its session stayed');

        $this->assertSame([$row], self::rows($name), 'the holder\'s end removed the row');
        $e = $this->catchThrown(fn () => SharedLock::lock($name, 0, 10));
        $this->assertInstanceOf(SharedLockTimeoutException::class, $e, 'taken over before its TTL');
        SharedLock::lock($name, 10, 10);
        $this->assertGreaterThan($leaseEnd, (int) self::rows($name)[0]['created'], 'taken over before the lease ended (database clock)');
    }

    /** @test */
    #[Test]
    public function rowMarkedAcquiredIsFreeAtOnceAfterItsHoldersProcessEnded(): void
    {
        $name = $this->lockName();
        $child = $this->startHolder($name, 300);
        $this->assertReply('bye', $child->call(['exit']));
        $this->assertTrue($child->waitForExit(10), 'the holder did not exit');
        SharedLock::lock($name, 0, 10);
        $this->assertCount(1, self::rows($name));
    }
}
