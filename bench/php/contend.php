<?php
// Figure 3: one contention worker. Says "ready" once connected and warmed up, reads
// "START END" (hrtime ns) from stdin, sleeps until START, then loops lock (long
// timeout) -> hold HOLD_US -> release on NAME until END. Logs per acquisition
// "start-of-wait got release-start released" (hrtime ns) to LOG, says "done", and exits
// at the end of its input.
// Args: ext|pdo NAME HOLD_US LOG
declare(strict_types=1);

namespace MySqlLockBench;

require __DIR__ . '/common.php';

$impl = arg(1, 'ext|pdo');
$name = arg(2, 'lock name');
$holdUs = (int) arg(3, 'hold in microseconds');
$logFile = arg(4, 'log file');

$l = locks($impl, "$name-warm-" . getmypid());
echo "ready\n";
fflush(STDOUT);
$line = fgets(STDIN);
if ($line === false || !preg_match('/^(\d+) (\d+)$/', trim($line), $m)) {
    fail('expected "START END" on stdin');
}
[$start, $end] = [(int) $m[1], (int) $m[2]];
while (($left = $start - hrtime(true)) > 0) {
    usleep(max(1, intdiv($left, 1000)));
}
$log = [];
while (($wait = hrtime(true)) < $end) {
    $l->lock($name, 60);
    $got = hrtime(true);
    if ($holdUs > 0) {
        usleep($holdUs);
    }
    $releaseStart = hrtime(true);
    $l->release($name);
    $log[] = "$wait $got $releaseStart " . hrtime(true);
}
file_put_contents($logFile, implode("\n", $log) . "\n");
echo "done\n";
fflush(STDOUT);
// Stay connected until the driver has read the server's counters (end of input): a
// session's COM_QUIT counts as a question.
while (fgets(STDIN) !== false) {
}
