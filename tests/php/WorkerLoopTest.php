<?php
// Worker-mode servers (FrankenPHP's worker mode, RoadRunner, Swoole, Laravel Octane) serve
// many requests in one PHP request, so the extension's request end never comes between
// them: docs/php.md's "Worker-mode servers". One process (fixtures/worker.php) handles 25
// requests that each take a SharedLock, the common SharedLock, two SessionLocks (the
// extension's connection, the worker's PDO) and a DistributedLock lease, and release
// nothing. Without MySqlLock\end_request() every request's locks outlive it; with it
// called after each request, none does, the worker goes on with the settings of its
// bootstrap, and the leases (which outlive requests by design) stay. Every check of
// "held" is made on the inspection connection (rows, IS_USED_LOCK, the process list).
declare(strict_types=1);

namespace MySqlLockTest;

use Nene\Kit\DistributedLock;
use PHPUnit\Framework\Attributes\DataProvider;
use PHPUnit\Framework\Attributes\Test;

final class WorkerLoopTest extends TestCase
{
    private const REQUESTS = 25;
    private const LEASE_TABLE = 'phpt_worker_leases';

    protected function setUp(): void
    {
        parent::setUp();
        (new DistributedLock(self::db(), self::LEASE_TABLE))->createTable();
    }

    protected function tearDown(): void
    {
        self::db()->prepare('DELETE FROM `' . self::LEASE_TABLE . '` WHERE resource LIKE ?')->execute([$this->lockName('%')]);
        parent::tearDown();
    }

    public static function connections(): array
    {
        return ['SharedLock on the native connection' => ['native'], 'SharedLock on the worker\'s PDO' => ['pdo']];
    }

    /**
     * @test
     * @dataProvider connections
     */
    #[Test]
    #[DataProvider('connections')]
    public function endRequestAfterEachRequestLeavesNoneOfItsLocksAndTheWorkerGoesOn(string $conn): void
    {
        $worker = $this->startChild('worker.php', [$conn, self::LEASE_TABLE]);
        $this->assertSame(0, $this->call($worker, ['end'])['result'], 'end_request() before any lock');
        $natives = [];
        for ($i = 0; $i < self::REQUESTS; $i++) {
            $r = $this->call($worker, ['request', $this->prefix(), $i]);
            $this->assertTrue($r['common'], "request $i: the common lock was still held by an earlier request");
            // Held now, as the server sees it: the check below can fail.
            $this->assertSame(self::heldBy($conn, $r), $this->held($i), "request $i: its locks are not held while it runs");
            $this->assertSame(4, $this->call($worker, ['end'])['result'], "request $i: end_request() did not count 4 locks");
            $this->assertSame(self::nothingHeld(), $this->held($i), "request $i: locks outlived end_request()");
            $this->assertCount(1, $this->leaseRows($i), "request $i: end_request() touched the DistributedLock lease");
            $natives[] = $r['native'];
        }
        $this->assertSame(0, $this->call($worker, ['end'])['result'], 'a second end_request() found locks');
        // The extension's own sessions were closed by each end_request() (a new one per
        // request); the worker's PDO stays open (it is the worker's), holding nothing.
        $this->assertCount(self::REQUESTS, array_unique($natives), 'each request locked on a session of its own');
        $this->assertTrue(
            self::waitUntil(fn () => self::liveSessions($natives) === [], 10),
            'sessions closed by end_request() still exist: ' . json_encode(self::liveSessions($natives))
        );
        $this->assertReply('bye', $worker->call(['exit']));
    }

    /**
     * @test
     * @dataProvider connections
     */
    #[Test]
    #[DataProvider('connections')]
    public function withoutEndRequestEveryRequestsLocksOutliveIt(string $conn): void
    {
        $worker = $this->startChild('worker.php', [$conn, self::LEASE_TABLE]);
        $replies = [];
        for ($i = 0; $i < self::REQUESTS; $i++) {
            $replies[$i] = $this->call($worker, ['request', $this->prefix(), $i]);
            $this->assertSame($i === 0, $replies[$i]['common'], "request $i: the common lock");
            for ($j = 0; $j <= $i; $j++) {
                $this->assertSame(self::heldBy($conn, $replies[$j]), $this->held($j), "after request $i: the locks of request $j");
            }
        }
        // The same worker, told now: everything of every request goes at once.
        $this->assertSame(3 * self::REQUESTS + 1, $this->call($worker, ['end'])['result']);
        for ($j = 0; $j < self::REQUESTS; $j++) {
            $this->assertSame(self::nothingHeld(), $this->held($j), "request $j: locks outlived end_request()");
        }
    }

    /** A command that must succeed; its reply. */
    private function call(Child $worker, array $cmd): array
    {
        $reply = $worker->call($cmd);
        $this->assertIsArray($reply, json_encode($cmd) . ': no reply; ' . $worker->stderr());
        $this->assertTrue($reply['ok'] ?? false, json_encode($cmd) . ': ' . json_encode($reply));
        return $reply;
    }

    /**
     * What the server shows of request $i's locks: the session its SharedLock's row names,
     * who holds that lock's GET_LOCK and those of its two session locks.
     */
    private function held(int $i): array
    {
        $rows = self::rows($this->lockName("shared-$i"));
        return [
            'row' => $rows === [] ? null : (int) $rows[0]['connection_id'],
            'shared' => self::getLockHolder($this->lockName("shared-$i")),
            'session' => self::getLockHolder($this->lockName("session-$i")),
            'pdo' => self::getLockHolder($this->lockName("pdo-$i")),
        ];
    }

    /**
     * held() while request $i's locks are held, by the sessions its reply names:
     * SharedLock's is the extension's own (where the native session lock is too) or the
     * worker's PDO's.
     */
    private static function heldBy(string $conn, array $reply): array
    {
        $shared = $conn === 'native' ? $reply['native'] : $reply['pdo'];
        return ['row' => $shared, 'shared' => $shared, 'session' => $reply['native'], 'pdo' => $reply['pdo']];
    }

    private static function nothingHeld(): array
    {
        return ['row' => null, 'shared' => null, 'session' => null, 'pdo' => null];
    }

    private function leaseRows(int $i): array
    {
        $st = self::db()->prepare('SELECT resource, owner FROM `' . self::LEASE_TABLE . '` WHERE resource = ?');
        $st->execute([$this->lockName("lease-$i")]);
        return $st->fetchAll(\PDO::FETCH_ASSOC);
    }

    /** Which of these session ids still exist. */
    private static function liveSessions(array $ids): array
    {
        $list = implode(',', array_map('intval', $ids));
        return self::db()->query("SELECT ID FROM information_schema.PROCESSLIST WHERE ID IN ($list)")->fetchAll(\PDO::FETCH_COLUMN);
    }
}
