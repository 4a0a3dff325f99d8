<?php
// The store across processes, for both modes: contention, blocking waits woken by a
// release, a serialized key resumed elsewhere, expired and dead holders.
declare(strict_types=1);

namespace MySqlLockSymfonyTest;

use PHPUnit\Framework\Attributes\DataProvider;
use Symfony\Component\Lock\Exception\LockConflictedException;
use Symfony\Component\Lock\Key;

final class ProcessesTest extends TestCase
{
    /** @dataProvider modes */
    #[DataProvider('modes')]
    public function testAKeyHeldByAnotherProcessConflicts(string $mode): void
    {
        $other = $this->child($mode);
        $this->assertOk($other->call(['save', $this->resource()]), 'saved');

        $store = $this->store($mode);
        $key = new Key($this->resource());
        try {
            $store->save($key);
            $this->fail('saved a resource another process holds');
        } catch (LockConflictedException) {
        }
        $this->assertFalse($store->exists($key));
        $this->assertOk($other->call(['exists', $this->resource()]), true);

        $this->assertOk($other->call(['delete', $this->resource()]), 'deleted');
        $store->save($key);
        $this->assertTrue($store->exists($key));
    }

    /** @dataProvider modes */
    #[DataProvider('modes')]
    public function testABlockedWaitAndSaveIsWokenWhenTheHolderReleases(string $mode): void
    {
        $store = $this->store($mode);
        $key = new Key($this->resource());
        $store->save($key);
        $waiter = $this->child($mode);
        $waiter->send(['wait', $this->resource()]);
        $this->assertOk($waiter->receive(20), 'waiting');
        if ($mode === 'shared') {
            $this->assertTrue(self::waitUntil(fn () => self::someoneWaitsInServer($this->resource()), 10), 'the waiter never slept in GET_LOCK');
        }
        $this->assertNull($waiter->receive(0), 'the waiter got the lock while it was held');

        $store->delete($key);
        $released = microtime(true);
        $this->assertOk($waiter->receive(20), 'saved');
        $this->assertLessThan(5.0, microtime(true) - $released, 'the waiter was not woken by the release');
        $this->assertOk($waiter->call(['exists', $this->resource()]), true);
        $this->assertFalse($store->exists($key));
    }

    /** @dataProvider modes */
    #[DataProvider('modes')]
    public function testAKeyCanBeSavedAgainAfterTheHolderDeletedIt(string $mode): void
    {
        $holder = $this->child($mode);
        $this->assertOk($holder->call(['save', $this->resource()]), 'saved');
        $this->assertOk($holder->call(['delete', $this->resource()]), 'deleted');
        $this->assertOk($holder->call(['exists', $this->resource()]), false);

        $store = $this->store($mode);
        $key = new Key($this->resource());
        $store->save($key);
        $this->assertTrue($store->exists($key));
    }

    public static function contention(): array
    {
        return [
            'SharedLock mode, blocking acquire' => ['shared', true],
            'SharedLock mode, non-blocking retries' => ['shared', false],
            'lease mode, blocking acquire' => ['lease', true],
            'lease mode, non-blocking retries' => ['lease', false],
        ];
    }

    /**
     * Two processes take the same lock 40 times each; their guarded sections, journaled
     * on the monotonic clock, never overlap and the unguarded counter loses no update.
     *
     * @dataProvider contention
     */
    #[DataProvider('contention')]
    public function testTwoContendingProcessesNeverHoldTheLockAtOnce(string $mode, bool $blocking): void
    {
        $rounds = 40;
        $journal = (string) tempnam(sys_get_temp_dir(), 'sft-journal-');
        try {
            $workers = [$this->child($mode), $this->child($mode)];
            foreach ($workers as $worker) {
                $worker->send(['contend', $this->resource(), $rounds, $journal, $blocking]);
            }
            foreach ($workers as $worker) {
                $this->assertOk($worker->receive(120), $rounds);
            }

            $sections = [];
            foreach (file($journal, FILE_IGNORE_NEW_LINES) as $line) {
                [$pid, $start, $end] = array_map('intval', explode(' ', $line));
                $sections[] = [$start, $end, $pid];
            }
            $this->assertCount(2 * $rounds, $sections);
            $this->assertCount(2, array_unique(array_column($sections, 2)), 'one process did all the work');
            sort($sections);
            $overlaps = 0;
            for ($i = 1; $i < count($sections); $i++) {
                if ($sections[$i][0] < $sections[$i - 1][1]) {
                    $overlaps++;
                }
            }
            $this->assertSame(0, $overlaps, 'guarded sections of the two processes overlapped');
            $this->assertSame(2 * $rounds, (int) file_get_contents($journal . '.counter'), 'the guarded counter lost updates');
        } finally {
            @unlink($journal);
            @unlink($journal . '.counter');
        }
    }

    public function testLeaseModeResumesASerializedKeyInAnotherProcessAndReleasesItThere(): void
    {
        $store = $this->store('lease');
        $key = new Key($this->resource());
        $store->save($key);

        $other = $this->child('lease');
        $this->assertOk($other->call(['resume', base64_encode(serialize($key))]));
        $this->assertOk($other->call(['exists', $this->resource()]), true);
        $this->assertOk($other->call(['putoff', $this->resource(), 60]));
        $this->assertOk($other->call(['save', $this->resource()]), 'saved');
        $this->assertThrew(LockConflictedException::class, $this->child('lease')->call(['save', $this->resource()]));

        $this->assertOk($other->call(['delete', $this->resource()]), 'deleted');
        $this->assertFalse($store->exists($key));
        $next = new Key($this->resource());
        $store->save($next);
        $this->assertTrue($store->exists($next));
    }

    public function testSharedModeKeysAreRefusedForSerializationInAnotherProcessToo(): void
    {
        $other = $this->child('shared');
        $this->assertOk($other->call(['save', $this->resource()]), 'saved');
        $this->assertThrew('Symfony\Component\Lock\Exception\UnserializableKeyException', $other->call(['serialize', $this->resource()]));
    }

    /** @dataProvider modes */
    #[DataProvider('modes')]
    public function testALockPastItsTtlIsTakenByAnotherProcess(string $mode): void
    {
        $holder = $this->child($mode, ['initial_ttl' => 1]);
        $this->assertOk($holder->call(['save', $this->resource()]), 'saved');
        $taker = $this->child($mode);

        // The lease mode gives an expired lease to the next save(); the SharedLock
        // protocol takes a live holder's expired lease over in a blocking acquire.
        $command = $mode === 'lease' ? 'save' : 'wait';
        $taken = self::waitUntil(function () use ($taker, $command) {
            $reply = $taker->call([$command, $this->resource()]);
            if (($reply['result'] ?? null) === 'waiting') {
                $reply = $taker->receive(20);
            }
            return ($reply['result'] ?? null) === 'saved';
        }, 15, 0.1);
        $this->assertTrue($taken, 'the lock past its TTL was never taken');
        $this->assertOk($holder->call(['exists', $this->resource()]), false);
        $this->assertOk($taker->call(['exists', $this->resource()]), true);
    }

    /**
     * A holder that puts its lock off to 2 s lets another process have it about 2 s later,
     * not after initial_ttl (300 s), as with Symfony's own stores.
     *
     * @dataProvider modes
     */
    #[DataProvider('modes')]
    public function testAnotherProcessTakesTheLockWhenAPutOffTtlHasPassed(string $mode): void
    {
        $holder = $this->child($mode, ['initial_ttl' => 300]);
        $this->assertOk($holder->call(['save', $this->resource()]), 'saved');
        $this->assertOk($holder->call(['putoff', $this->resource(), 2]));
        $putOff = microtime(true);

        $taker = $this->child($mode);
        $this->assertOk($taker->call(['wait', $this->resource()]), 'waiting');
        $this->assertOk($taker->receive(20), 'saved');
        $waited = microtime(true) - $putOff;
        $this->assertGreaterThan(1.5, $waited, 'taken before the 2 s were over');
        $this->assertLessThan(8.0, $waited, 'the taker waited for far more than the 2 s put off');
        $this->assertOk($holder->call(['exists', $this->resource()]), false);
        $this->assertOk($taker->call(['exists', $this->resource()]), true);
    }

    public function testSharedModeGivesADeadProcesssLockToAnotherProcessAtOnce(): void
    {
        $holder = $this->child('shared', ['initial_ttl' => 60]);
        $this->assertOk($holder->call(['save', $this->resource()]), 'saved');
        $store = $this->store('shared');
        $key = new Key($this->resource());

        $holder->kill();
        $killed = microtime(true);
        $saved = self::waitUntil(function () use ($store, $key) {
            try {
                $store->save($key);
                return true;
            } catch (LockConflictedException) {
                return false;
            }
        }, 10);
        $this->assertTrue($saved, 'the dead holder\'s lock was not taken within 10 s');
        $this->assertLessThan(10.0, microtime(true) - $killed, 'waited for the TTL (60 s)');
        $this->assertTrue($store->exists($key));
    }

    public function testLeaseModeGivesADeadProcesssLockToAnotherProcessAfterItsTtl(): void
    {
        $holder = $this->child('lease', ['initial_ttl' => 3]);
        $this->assertOk($holder->call(['save', $this->resource()]), 'saved');
        $saved = microtime(true);
        $store = $this->store('lease');
        $key = new Key($this->resource());

        $holder->kill();
        $this->assertTrue(self::waitUntil(fn () => !$holder->isRunning(), 10), 'the holder did not die');
        try {
            $store->save($key);
            $this->fail('the lease of the dead holder was taken before its TTL');
        } catch (LockConflictedException) {
        }
        $taken = self::waitUntil(function () use ($store, $key) {
            try {
                $store->save($key);
                return true;
            } catch (LockConflictedException) {
                return false;
            }
        }, 20, 0.1);
        $this->assertTrue($taken, 'the dead holder\'s lease was never taken');
        $this->assertGreaterThan(2.0, microtime(true) - $saved, 'taken before the 3 s TTL could pass');
        $this->assertTrue($store->exists($key));
    }
}
