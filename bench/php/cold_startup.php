<?php
// The driver of bench/cold.sh: cold starts, one fresh process each, timed from spawn to
// exit with hrtime() (proc_open, no shell, output read), its CPU time (user + system) from
// getrusage() of the children, rounds of one run of every implementation in an order
// shuffled each round. Not rotated: a rotation keeps every row behind the same neighbour
// in every round (the row after a server-touching row starts while the server still
// handles that disconnect), which biased the paired differences by as much as the figures
// measured (the load read -0.24 ms that way; 0.6 ms with the order shuffled, as in a
// separate two-row harness). Statements per run as the server counts them
// (`Questions`, which counts the disconnect too, and `Com_stmt_prepare`), around one
// untimed run of each. A failed run stops the bench (exit 1).
//
//   cold_startup.php RUNS SPEC_FILE
//
// SPEC_FILE: JSON, a list of {"key", "label", "argv", "group", "floor"}: group "php" rows
// also get their time minus `php -r ''` (key "empty", paired: the median over rounds of
// the difference within a round), group "bare" rows (PHP without the extension) minus
// `php -r ''` without it (key "bare"); "floor" names the row each is compared with.
// Prints the table rows.
declare(strict_types=1);

namespace MySqlLockBench;

require __DIR__ . '/session_common.php';

$runs = (int) arg(1, 'runs');
$spec = json_decode((string) file_get_contents(arg(2, 'spec file')), true, 8, JSON_THROW_ON_ERROR);
$impls = [];
foreach ($spec as $s) {
    $impls[$s['key']] = $s;
}

/** The CPU time (user + system) of the waited-for children so far, in nanoseconds. */
function childrenCpu(): int
{
    $u = getrusage(1);
    return ($u['ru_utime.tv_sec'] + $u['ru_stime.tv_sec']) * 1_000_000_000
        + ($u['ru_utime.tv_usec'] + $u['ru_stime.tv_usec']) * 1_000;
}

/** Runs one command; returns [nanoseconds, exit code, stderr, CPU nanoseconds]. */
function spawnOnce(array $argv): array
{
    $cpu = childrenCpu();
    $start = hrtime(true);
    $proc = proc_open($argv, [0 => ['file', '/dev/null', 'r'], 1 => ['pipe', 'w'], 2 => ['pipe', 'w']], $pipes);
    if (!is_resource($proc)) {
        fail('cannot spawn ' . $argv[0]);
    }
    stream_get_contents($pipes[1]);
    $err = stream_get_contents($pipes[2]);
    fclose($pipes[1]);
    fclose($pipes[2]);
    $code = proc_close($proc);
    return [hrtime(true) - $start, $code, (string) $err, childrenCpu() - $cpu];
}

$admin = new Admin();
$stmts = [];
foreach ($impls as $key => $s) {
    $before = parseSnapshot($admin->snapshot());
    $mid = parseSnapshot($admin->snapshot());
    [, $code, $err] = spawnOnce($s['argv']);
    $after = parseSnapshot($admin->snapshot());
    if ($code !== 0) {
        fail("$key: exit $code: $err");
    }
    $d = static fn (string $v): int => ($after[$v] - $mid[$v]) - ($mid[$v] - $before[$v]);
    $stmts[$key] = $s['group'] === 'local' ? '0' : stmtText($d('Questions'), $d('Com_stmt_prepare'));
}
$keys = array_keys($impls);
$times = array_fill_keys($keys, []);
$cpuTimes = array_fill_keys($keys, []);
mt_srand(34);
for ($r = 0; $r < $runs; $r++) {
    $order = $keys;
    shuffle($order);
    foreach ($order as $key) {
        [$ns, $code, $err, $cpu] = spawnOnce($impls[$key]['argv']);
        if ($code !== 0) {
            fail("$key: exit $code: $err");
        }
        $times[$key][$r] = $ns;
        $cpuTimes[$key][$r] = $cpu;
    }
}
$ms = static fn (float $ns): string => sprintf('%.2f ms', $ns / 1e6);
$sorted = [];
foreach ($keys as $key) {
    $sorted[$key] = $times[$key];
    sort($sorted[$key]);
}
/** The paired median of (a - b) per round. */
$pairedDiff = static function (string $a, string $b, bool $cpu = false) use ($times, $cpuTimes): float {
    $of = $cpu ? $cpuTimes : $times;
    $d = [];
    foreach ($of[$a] as $r => $t) {
        $d[] = $t - $of[$b][$r];
    }
    return median($d);
};
foreach ($impls as $key => $s) {
    $median = quantile($sorted[$key], 0.5);
    $overEmpty = '';
    $base = ['php' => 'empty', 'bare' => 'bare'][$s['group']] ?? '';
    if ($base !== '' && $key !== $base) {
        $overEmpty = sprintf('%s (CPU %s)', $ms($pairedDiff($key, $base)), $ms($pairedDiff($key, $base, true)))
            . ($base === 'bare' ? ' (without the extension)' : '');
    }
    $vs = '';
    if (($s['floor'] ?? '') !== '') {
        $f = $s['floor'];
        if ($s['group'] === 'php') {
            // The scripts' own cost: each minus `php -r ''`, then the ratio.
            $ratio = $pairedDiff($key, 'empty') / max(1.0, $pairedDiff($f, 'empty'));
            $vs = sprintf('%.2f× %s, paired difference %s', $ratio, $f, $ms($pairedDiff($key, $f)));
        } else {
            $vs = sprintf('%.2f× %s, paired difference %s', $median / quantile($sorted[$f], 0.5), $f, $ms($pairedDiff($key, $f)));
        }
    }
    $cpuSorted = $cpuTimes[$key];
    sort($cpuSorted);
    row($s['label'], $ms($median), $ms(quantile($sorted[$key], 0.9)), $ms(quantile($cpuSorted, 0.5)), $overEmpty, $vs, $stmts[$key]);
}
echo "$runs runs of each, one of each per round, the order shuffled each round (after one untimed run of each)\n";
if (isset($impls['bare'], $impls['pdo-bare'], $impls['empty-dist'], $impls['shared-dist'])) {
    // Issue 34's cold figures, on the extension built with profile dist (LTO, one code
    // unit, stripped): what loading it costs a process, and the cold SharedLock script with that load included against a
    // PDO script of a PHP without it, each minus `php -r ''` without the extension (paired).
    $load = $pairedDiff('empty-dist', 'bare');
    $pdoCost = $pairedDiff('pdo-bare', 'bare');
    if ($pdoCost < 50_000) {
        // A PDO script within 0.05 ms of an empty one: the machine's noise, not a figure.
        printf("\ncold figures not judged: the PDO script's own cost (%s) is within the noise of this run\n", $ms($pdoCost));
        return;
    }
    $cold = $pairedDiff('shared-dist', 'bare') / $pdoCost;
    printf("\ntarget: loading the extension <= 0.3 ms: %s (`php -d extension=mysqllock.so -r ''` minus `php -r ''`, paired median %s, CPU %s; the release build with debug info: %s)\n",
        $load <= 0.3e6 ? 'met' : 'not met', $ms($load), $ms($pairedDiff('empty-dist', 'bare', true)), $ms($pairedDiff('empty', 'bare')));
    printf("target: cold script with the load <= 1.3x a PDO script: %s (%.2fx: SharedLock %s, PDO %s, each over `php -r ''` without the extension)\n",
        $cold <= 1.3 ? 'met' : 'not met', $cold, $ms($pairedDiff('shared-dist', 'bare')), $ms($pdoCost));
    if (isset($impls['protocol-bare'])) {
        // What no implementation of the protocol goes under: its statements by hand, no load.
        $byHand = $pairedDiff('protocol-bare', 'bare');
        printf("the protocol by hand (PDO, no extension): %s, %.2fx the PDO script; SharedLock with the load %.2fx the protocol by hand (paired difference %s)\n",
            $ms($byHand), $byHand / $pdoCost, $pairedDiff('shared-dist', 'bare') / max(1.0, $byHand), $ms($pairedDiff('shared-dist', 'protocol-bare')));
    }
}
