<?php
// Part B of bench/session.sh: the wall time of one process that takes a session lock
// and lets it go, from spawn to exit, for a shell user's choices:
//   cli     mysqllock run NAME --session -- true      (MYSQLLOCK_DSN in the environment)
//   mariadb mariadb --no-defaults --skip-ssl -h.. -P.. -u.. -p.. -e "SELECT GET_LOCK(..); SELECT RELEASE_LOCK(..)"
//           (--skip-ssl: the client's default is TLS whenever the server offers it, as
//           MySQL 9.7 does; the floors connect in the clear, see bench/lib.sh)
//   flock   flock FILE true                           (a local lock, no server)
//   php     php -r '<PDO connect, GET_LOCK, RELEASE_LOCK>' (php as installed, no mysqllock)
//
//   session_startup.php RUNS MYSQLLOCK_BINARY FLOCK_FILE
//
// RUNS rounds, one run of each per round, the order shuffled each round. Each run is spawned with
// proc_open (no shell), its output read, and timed from spawn to exit with hrtime().
// Statements: counted by the server around the first, untimed run of each (`Questions`
// counts the disconnect, COM_QUIT, too).
// A run must succeed (exit 0; the mariadb client must print 1 for both calls); a failed
// run stops the bench (exit 1), except that a `mysqllock` without `run --session` is
// reported as not run (exit 3, the others still measured).
// Prints the table rows of part B.
declare(strict_types=1);

namespace MySqlLockBench;

require __DIR__ . '/session_common.php';

$runs = (int) arg(1, 'runs');
$cli = arg(2, 'the mysqllock binary');
$flockFile = arg(3, 'a file for flock');
$s = server();
$url = (string) getenv('MYSQLLOCK_BENCH_DSN');

$phpCode = sprintf(
    '$p = new PDO(%s, %s, %s, [PDO::ATTR_ERRMODE => PDO::ERRMODE_EXCEPTION]);'
    . ' exit((int) $p->query("SELECT GET_LOCK(\'startup-php\', 0)")->fetchColumn() === 1'
    . ' && (int) $p->query("SELECT RELEASE_LOCK(\'startup-php\')")->fetchColumn() === 1 ? 0 : 1);',
    var_export("mysql:host={$s['host']};port={$s['port']};dbname={$s['db']}", true),
    var_export($s['user'], true),
    var_export($s['pass'], true)
);
$commands = [
    'cli' => [[$cli, 'run', 'startup-cli', '--session', '--', 'true'], ['MYSQLLOCK_DSN' => $url]],
    'mariadb' => [[
        'mariadb', '--no-defaults', '--skip-ssl', "-h{$s['host']}", "-P{$s['port']}", "-u{$s['user']}", "-p{$s['pass']}",
        '-e', "SELECT GET_LOCK('startup-mariadb',0); SELECT RELEASE_LOCK('startup-mariadb')",
    ], []],
    'flock' => [['flock', $flockFile, 'true'], []],
    'php' => [['php', '-r', $phpCode], []],
];
const B_LABELS = [
    'cli' => '`mysqllock run NAME --session -- true`',
    'mariadb' => 'floor: `mariadb --no-defaults --skip-ssl -h… -e "SELECT GET_LOCK(…,0); SELECT RELEASE_LOCK(…)"`',
    'flock' => '`flock FILE true` (local, no server)',
    'php' => '`php -r` PDO connect + `GET_LOCK` + `RELEASE_LOCK`',
];

/** Runs one command; returns [nanoseconds, exit code, stdout, stderr]. */
function spawn(array $argv, array $env): array
{
    $start = hrtime(true);
    $proc = proc_open($argv, [0 => ['file', '/dev/null', 'r'], 1 => ['pipe', 'w'], 2 => ['pipe', 'w']], $pipes, null, $env + getenv());
    if (!is_resource($proc)) {
        fail('cannot spawn ' . $argv[0]);
    }
    $out = stream_get_contents($pipes[1]);
    $err = stream_get_contents($pipes[2]);
    fclose($pipes[1]);
    fclose($pipes[2]);
    $code = proc_close($proc);
    return [hrtime(true) - $start, $code, (string) $out, (string) $err];
}

$times = array_fill_keys(array_keys($commands), []);
$notRun = [];
$keys = array_keys($commands);
// One untimed run of each first: page cache, whether the CLI has --session, and the
// statements of one run as the server counts them (see countPerCycle()).
$admin = new Admin();
$stmts = [];
foreach ($commands as $impl => [$argv, $env]) {
    $before = parseSnapshot($admin->snapshot());
    $mid = parseSnapshot($admin->snapshot());
    [, $code, $out, $err] = spawn($argv, $env);
    $after = parseSnapshot($admin->snapshot());
    $stmts[$impl] = stmtText(
        ($after['Questions'] - $mid['Questions']) - ($mid['Questions'] - $before['Questions']),
        ($after['Com_stmt_prepare'] - $mid['Com_stmt_prepare']) - ($mid['Com_stmt_prepare'] - $before['Com_stmt_prepare'])
    );
    if ($code !== 0 && $impl === 'cli') {
        $notRun['cli'] = "not run: exit $code, " . trim(strtok($err, "\n") ?: '');
        continue;
    }
    if ($code !== 0) {
        fail("$impl: exit $code: $err");
    }
}
$active = array_values(array_diff($keys, array_keys($notRun)));
mt_srand(34);
for ($r = 0; $r < $runs; $r++) {
    // Shuffled, not rotated: a rotation puts every process behind the same neighbour in
    // every round (see cold_startup.php).
    $order = $active;
    shuffle($order);
    foreach ($order as $impl) {
        [$ns, $code, $out, $err] = spawn(...$commands[$impl]);
        if ($code !== 0) {
            fail("$impl: exit $code: $err");
        }
        if ($impl === 'mariadb' && !preg_match('/\A[^\n]*\n1\n[^\n]*\n1\n\z/', $out)) {
            fail("mariadb: expected 1 from GET_LOCK and RELEASE_LOCK, got: $out");
        }
        // Round r's time of $impl; rounds of one run each.
        $times[$impl][] = [$ns];
    }
}
$timed = [];
foreach ($active as $impl) {
    $timed[$impl] = new Timed($times[$impl]);
}
$ms = static fn (float $ns): string => sprintf('%.2f ms', $ns / 1e6);
foreach (B_LABELS as $impl => $label) {
    if (isset($notRun[$impl])) {
        row($label, $notRun[$impl], '', '', '', '');
        continue;
    }
    $t = $timed[$impl];
    $ratio = $impl === 'mariadb' ? '1.00 (floor)' : ratioText($t, $timed['mariadb'], 'mariadb -e');
    row($label, $ms($t->median()), $ms($t->p90()), $ratio, $impl === 'flock' ? '0' : $stmts[$impl] . ' per run, with the disconnect', '');
}
echo "B: $runs runs of each, one of each per round, the order shuffled each round (after one untimed run of each)\n";
if ($notRun !== []) {
    echo 'B: not run: ' . $notRun['cli'] . "\n";
    exit(3);
}
