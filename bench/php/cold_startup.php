<?php
// The driver of bench/cold.sh: cold starts, one fresh process each, timed from spawn to
// exit with hrtime() (proc_open, no shell, output read), rounds of one run of every
// implementation, the order rotating. Statements per run as the server counts them
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

/** Runs one command; returns [nanoseconds, exit code, stderr]. */
function spawnOnce(array $argv): array
{
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
    return [hrtime(true) - $start, $code, (string) $err];
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
$k = count($keys);
$times = array_fill_keys($keys, []);
for ($r = 0; $r < $runs; $r++) {
    for ($j = 0; $j < $k; $j++) {
        $key = $keys[($r + $j) % $k];
        [$ns, $code, $err] = spawnOnce($impls[$key]['argv']);
        if ($code !== 0) {
            fail("$key: exit $code: $err");
        }
        $times[$key][$r] = $ns;
    }
}
$ms = static fn (float $ns): string => sprintf('%.2f ms', $ns / 1e6);
$sorted = [];
foreach ($keys as $key) {
    $sorted[$key] = $times[$key];
    sort($sorted[$key]);
}
/** The paired median of (a - b) per round. */
$pairedDiff = static function (string $a, string $b) use ($times): float {
    $d = [];
    foreach ($times[$a] as $r => $t) {
        $d[] = $t - $times[$b][$r];
    }
    return median($d);
};
foreach ($impls as $key => $s) {
    $median = quantile($sorted[$key], 0.5);
    $overEmpty = '';
    if ($s['group'] === 'php' && $key !== 'empty') {
        $overEmpty = $ms($pairedDiff($key, 'empty'));
    } elseif ($s['group'] === 'bare' && $key !== 'bare') {
        $overEmpty = $ms($pairedDiff($key, 'bare')) . ' (without the extension)';
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
    row($s['label'], $ms($median), $ms(quantile($sorted[$key], 0.9)), $overEmpty, $vs, $stmts[$key]);
}
echo "$runs runs of each, one of each per round, the order rotating (after one untimed run of each)\n";
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
    printf("\ntarget: loading the extension <= 0.3 ms: %s (`php -d extension=mysqllock.so -r ''` minus `php -r ''`, paired median %s; the release build with debug info: %s)\n",
        $load <= 0.3e6 ? 'met' : 'not met', $ms($load), $ms($pairedDiff('empty', 'bare')));
    printf("target: cold script with the load <= 1.3x a PDO script: %s (%.2fx: SharedLock %s, PDO %s, each over `php -r ''` without the extension)\n",
        $cold <= 1.3 ? 'met' : 'not met', $cold, $ms($pairedDiff('shared-dist', 'bare')), $ms($pdoCost));
}
