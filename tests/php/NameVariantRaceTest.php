<?php
// Names the table's key folds together (case, and accents the latin1 collation ignores:
// `Fóo` is `foo`) are one lock also when 8 processes race for them at the same instant.
// Each process journals [acquire returned, release called] on the monotonic clock; the
// test, not the lock, checks that no two of these intervals overlap.
declare(strict_types=1);

namespace MySqlLockTest;

use PHPUnit\Framework\Attributes\Test;

final class NameVariantRaceTest extends TestCase
{
    private const VARIANTS = ['Foo', 'foo', 'FOO', 'Fóo'];

    /** @test */
    #[Test]
    public function theVariantsAreOneRow(): void
    {
        // The table's own unique key, on an empty copy of it: every variant after the first
        // is a duplicate of the first.
        $db = self::db();
        $db->exec('CREATE TEMPORARY TABLE phpt_name_variants LIKE shared_locks');
        try {
            $st = $db->prepare('INSERT INTO phpt_name_variants (name, connection_id, created, ttl, lock_acquired) VALUES (?, 0, 0, 0, 0)');
            [$first, $others] = [self::VARIANTS[0], array_slice(self::VARIANTS, 1)];
            $st->execute([$this->prefix() . $first]);
            foreach ($others as $variant) {
                try {
                    $st->execute([$this->prefix() . $variant]);
                    $this->fail("$variant is not the same key as $first: it got a row of its own");
                } catch (\PDOException $e) {
                    $this->assertSame(1062, $e->errorInfo[1] ?? null, "$variant: " . $e->getMessage());
                }
            }
        } finally {
            $db->exec('DROP TEMPORARY TABLE phpt_name_variants');
        }
    }

    /** @test */
    #[Test]
    public function eightProcessesRacingOnTheVariantsNeverHoldItTogetherAndAllGetItInTurn(): void
    {
        $results = $this->race(10, 30);
        $this->assertSame(8, count(array_filter($results, fn ($r) => $r[0] === 'acquired')), 'with 10 s each, every racer gets it: ' . json_encode($results));
        $this->assertNoOverlap($results);
    }

    /** @test */
    #[Test]
    public function eightProcessesTryingTheVariantsOnceAtTheSameInstantLetExactlyOneWin(): void
    {
        // The winner holds 3 s: far longer than any racer can lag behind the start signal.
        $results = $this->race(0, 3000);
        $winners = array_filter($results, fn ($r) => $r[0] === 'acquired');
        $this->assertCount(1, $winners, json_encode($results));
        $this->assertCount(7, array_filter($results, fn ($r) => $r[0] === 'timeout'), 'every other try times out: ' . json_encode($results));
    }

    /**
     * Starts 8 racers (2 per variant), waits until all are connected and blocked on the
     * barrier, releases them together; returns each journal line split into words.
     */
    private function race(float $timeout, int $holdMs): array
    {
        $dir = sys_get_temp_dir() . '/phpt-race-' . getmypid() . '-' . bin2hex(random_bytes(4));
        mkdir($dir);
        $go = "$dir/go";
        $procs = [];
        try {
            for ($i = 0; $i < 8; $i++) {
                $name = $this->prefix() . self::VARIANTS[$i % 4];
                $cmd = [PHP_BINARY, '-d', 'extension=' . extensionPath(), __DIR__ . '/fixtures/race.php', $name, (string) $timeout, (string) $holdMs, "$dir/ready-$i", $go, "$dir/journal-$i"];
                $procs[$i] = proc_open($cmd, [0 => ['file', '/dev/null', 'r'], 1 => ['file', "$dir/out-$i", 'w'], 2 => ['file', "$dir/out-$i", 'a']], $pipes);
                $this->assertIsResource($procs[$i]);
            }
            $ready = fn () => count(glob("$dir/ready-*")) === 8;
            $this->assertTrue(self::waitUntil($ready, 30), 'not every racer got ready: ' . implode(' ', array_map(fn ($f) => (string) file_get_contents($f), glob("$dir/out-*"))));
            touch($go);
            foreach ($procs as $i => $proc) {
                $this->assertTrue(self::waitUntil(fn () => !proc_get_status($proc)['running'], 30), "racer $i did not finish");
            }
            $results = [];
            for ($i = 0; $i < 8; $i++) {
                $line = trim((string) @file_get_contents("$dir/journal-$i"));
                $this->assertNotSame('', $line, "racer $i wrote no journal: " . @file_get_contents("$dir/out-$i"));
                $results[$i] = explode(' ', $line);
                $this->assertContains($results[$i][0], ['acquired', 'timeout'], "racer $i: $line");
            }
            return $results;
        } finally {
            foreach ($procs as $proc) {
                if (proc_get_status($proc)['running']) {
                    proc_terminate($proc, SIGKILL);
                }
                proc_close($proc);
            }
            array_map('unlink', glob("$dir/*") ?: []);
            rmdir($dir);
        }
    }

    private function assertNoOverlap(array $results): void
    {
        $intervals = [];
        foreach ($results as $i => $r) {
            if ($r[0] === 'acquired') {
                $intervals[] = [(int) $r[1], (int) $r[2], $i];
            }
        }
        usort($intervals, fn ($a, $b) => $a[0] <=> $b[0]);
        for ($k = 1; $k < count($intervals); $k++) {
            [$s0, $e0, $i0] = $intervals[$k - 1];
            [$s1, , $i1] = $intervals[$k];
            $this->assertLessThan($s1, $e0, sprintf('racers %d (%s) and %d (%s) held it together for %.3f ms', $i0, self::VARIANTS[$i0 % 4], $i1, self::VARIANTS[$i1 % 4], ($e0 - $s1) / 1e6));
        }
    }
}
