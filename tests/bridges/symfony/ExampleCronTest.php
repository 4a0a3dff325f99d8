<?php
// examples/symfony-cron: its console command run as three concurrent processes, as cron
// starts it on three nodes. Judged from the journal the command writes, not from the lock.
declare(strict_types=1);

namespace MySqlLockSymfonyTest;

use PHPUnit\Framework\Attributes\DataProvider;

final class ExampleCronTest extends TestCase
{
    /** @dataProvider modes */
    #[DataProvider('modes')]
    public function testOfThreeConcurrentRunsExactlyOneBuildsTheReport(string $mode): void
    {
        $journal = (string) tempnam(sys_get_temp_dir(), 'sft-cron-');
        $dsn = preg_replace('#^mysql:#', 'mysqllock:', testDsn()) . "?mode=$mode";
        $runs = [];
        try {
            foreach (['node-a', 'node-b', 'node-c'] as $node) {
                $runs[$node] = proc_open(
                    [PHP_BINARY, '-d', 'extension=' . extensionPath(), root() . '/examples/symfony-cron/bin/console',
                        'app:nightly-report', "--node=$node", "--journal=$journal", '--work=4'],
                    [1 => ['file', '/dev/null', 'w'], 2 => ['file', $journal . ".$node.err", 'w']],
                    $pipes,
                    null,
                    ['LOCK_DSN' => $dsn] + getenv(),
                );
            }
            $this->assertTrue(self::waitUntil(function () use ($runs) {
                foreach ($runs as $run) {
                    if (proc_get_status($run)['running']) {
                        return false;
                    }
                }
                return true;
            }, 60, 0.05), 'the runs did not end within 60 s');

            $events = [];
            foreach (file($journal, FILE_IGNORE_NEW_LINES) as $line) {
                [$node, , $event, $at] = explode(' ', $line);
                $events[$event][$node] = (int) $at;
            }
            $errors = implode("\n", array_map(fn ($n) => (string) @file_get_contents("$journal.$n.err"), array_keys($runs)));
            $this->assertCount(1, $events['started'] ?? [], "not exactly one run built the report:\n" . implode("\n", file($journal)) . $errors);
            $this->assertSame(array_keys($events['started']), array_keys($events['finished'] ?? []), 'the builder did not finish');
            $this->assertCount(2, $events['skipped'] ?? [], 'the two other runs did not skip');
            // The skips came before the report was finished: the runs were concurrent.
            $worker = array_key_first($events['started']);
            foreach ($events['skipped'] as $at) {
                $this->assertLessThan($events['finished'][$worker], $at);
            }
        } finally {
            foreach ($runs as $node => $run) {
                proc_terminate($run, SIGKILL);
                proc_close($run);
                @unlink("$journal.$node.err");
            }
            @unlink($journal);
        }
    }
}
