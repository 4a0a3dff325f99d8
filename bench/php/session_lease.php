<?php
// Part C of bench/session.sh: the SharedLock lease protocol (SharedLock::lock + release,
// the extension's native connection) against its own floor, the very statements it
// sends replayed through PDO, and against raw GET_LOCK / RELEASE_LOCK through PDO.
//
//   session_lease.php capture FILE                       (then)
//   session_lease.php time FILE ROUNDS BLOCK WARMUP COUNT
//
// capture: the floor is not a copy of the SQL; it is taken from the server. Root (over
// the server's socket, MYSQLLOCK_BENCH_SOCKET) turns the general log on (to a table) for
// three lock + release cycles of the extension on a fresh native connection: two on one
// name (the first connects and sends each statement as text, the second prepares them)
// and a warm one on PROBE. It reads that connection's
// commands back from mysql.general_log, turns the log off and writes to FILE (JSON) what
// the warm cycle sent, each Execute with the text its Prepare had. A fresh process does
// the timing: a statement prepared while the general log is on has its parameters
// expanded into text at every execution, for the log, even after the log is off.
//
// time: the floor replays FILE through PDO, on its own connection:
//   - an Execute becomes a PDO statement prepared once (real prepares) from the very text
//     the extension prepared, executed with the parameters the log shows: the quoted name
//     replaced by the floor's own name (a bound string parameter, as the extension binds
//     it), every other value bound as logged (the TTL as an integer);
//   - a Query (text protocol) stays a text statement, with the floor's name as a quoted
//     literal where the log shows the name.
// Any other command in the warm cycle (a Prepare per cycle, a Close), or the name in a
// form other than a quoted literal, fails the run: the replay would not be the protocol.
// The first floor cycle is checked from another connection: the floor's session holds
// the GET_LOCK in the middle of the cycle, and no GET_LOCK and no row is left after it;
// every later cycle must see the same row counts as that one. Then the extension, the
// floor and raw GET_LOCK take turns; prints the table rows of part C and a target line.
declare(strict_types=1);

namespace MySqlLockBench;

require __DIR__ . '/session_common.php';

const TIMEOUT = 5;
const COLD = 'sharedlock-bench-cold-name';
const PROBE = 'sharedlock-bench-probe-name';
const FLOOR_NAME = 'sharedlock-bench-floor';

/** Root over the server's socket (the bench started the server: root is unix_socket). */
function root(): \PDO
{
    $socket = getenv('MYSQLLOCK_BENCH_SOCKET');
    if (!is_string($socket) || $socket === '') {
        fail('MYSQLLOCK_BENCH_SOCKET (the server\'s socket, for root) is not set');
    }
    return new \PDO("mysql:unix_socket=$socket", 'root', '', [\PDO::ATTR_ERRMODE => \PDO::ERRMODE_EXCEPTION]);
}

/** A lock + release through the extension, as the timed cycles do it. */
function extCycle(Ext $ext, string $name): void
{
    $ext->lock($name, TIMEOUT);
    $ext->release($name);
}

/**
 * The parameters of $executed (an Execute line of the general log, values in place) if
 * it is $prepared (a Prepare line, `?` placeholders) with values in place of the `?`s:
 * per placeholder ['name'] (the quoted PROBE), ['str', s], ['int', n], ['num', x] or
 * ['null']; null when it is not.
 *
 * @return list<array{0: string, 1?: string}>|null
 */
function align(string $prepared, string $executed): ?array
{
    $parts = explode('?', $prepared);
    if (!str_starts_with($executed, $parts[0])) {
        return null;
    }
    $pos = strlen($parts[0]);
    $params = [];
    $value = "/\G(?:'([^'\\\\]*)'|(-?\d+)(?![.\deE])|(-?\d+(?:\.\d*)?(?:[eE][-+]?\d+)?)|(NULL))/";
    for ($i = 1, $n = count($parts); $i < $n; $i++) {
        if (!preg_match($value, $executed, $m, 0, $pos)) {
            return null;
        }
        $params[] = match (true) {
            ($m[1] ?? '') !== '' || str_starts_with($m[0], "'") => $m[1] === PROBE ? ['name'] : ['str', $m[1]],
            ($m[2] ?? '') !== '' => ['int', $m[2]],
            ($m[3] ?? '') !== '' => ['num', $m[3]],
            default => ['null'],
        };
        $pos += strlen($m[0]);
        if (substr($executed, $pos, strlen($parts[$i])) !== $parts[$i]) {
            return null;
        }
        $pos += strlen($parts[$i]);
    }
    return $pos === strlen($executed) ? $params : null;
}

/** capture FILE: see the top of this file. */
function capture(string $file): void
{
    $root = root();
    $me = (int) $root->query('SELECT CONNECTION_ID()')->fetchColumn();
    $root->exec("SET GLOBAL log_output = 'TABLE'");
    $root->exec('TRUNCATE TABLE mysql.general_log');
    $root->exec('SET GLOBAL general_log = 1');
    try {
        $ext = new Ext();
        extCycle($ext, COLD);
        extCycle($ext, COLD);
        extCycle($ext, PROBE);
    } finally {
        $root->exec('SET GLOBAL general_log = 0');
    }
    $rows = $root->query("SELECT thread_id, command_type, argument FROM mysql.general_log WHERE thread_id <> $me", \PDO::FETCH_NUM)->fetchAll();
    $root->exec('TRUNCATE TABLE mysql.general_log');
    $threads = array_values(array_unique(array_column($rows, 0)));
    if (count($threads) !== 1) {
        fail('expected one connection of the extension in the general log, got threads ' . implode(', ', $threads) . ': ' . json_encode($rows));
    }
    // A statement's first run carries the name as a hexadecimal literal, later ones
    // (prepared) show it quoted in the log.
    $mentions = static fn (array $r, string $name): bool => str_contains((string) $r[2], "'$name'")
        || str_contains(strtoupper((string) $r[2]), strtoupper(bin2hex($name)));
    $lastCold = max(array_keys(array_filter($rows, static fn (array $r): bool => $mentions($r, COLD))) ?: [-1]);
    $prepared = array_map(static fn (array $r): string => (string) $r[2], array_filter($rows, static fn (array $r): bool => $r[1] === 'Prepare'));
    $warm = array_slice($rows, $lastCold + 1);
    if ($lastCold < 0 || !array_filter($warm, static fn (array $r): bool => $mentions($r, PROBE))) {
        fail('the general log does not show the cycles on ' . COLD . ' and ' . PROBE . ': ' . json_encode($rows));
    }
    $out = [];
    foreach ($warm as [, $command, $argument]) {
        $argument = (string) $argument;
        if ($command === 'Query') {
            $rest = str_replace("'" . PROBE . "'", '', $argument);
            if (str_contains($rest, PROBE) || str_contains(strtolower($rest), bin2hex(PROBE))) {
                fail("the name is in a form other than a quoted literal in: $argument");
            }
            $out[] = ['command' => 'Query', 'sql' => $argument];
            continue;
        }
        if ($command !== 'Execute') {
            fail("the warm cycle sent a $command command ($argument): the replay reproduces Query and Execute only");
        }
        $found = null;
        foreach ($prepared as $text) {
            if (($params = align($text, $argument)) !== null) {
                $found = ['command' => 'Execute', 'sql' => $text, 'params' => $params];
                break;
            }
        }
        if ($found === null) {
            fail("no Prepare of this connection matches the Execute $argument");
        }
        foreach ($found['params'] as $p) {
            if ($p[0] === 'str' && str_contains($p[1], PROBE)) {
                fail("a parameter holds the name in another form ($p[1]) in: $argument");
            }
        }
        $out[] = $found;
    }
    if (file_put_contents($file, json_encode($out, JSON_PRETTY_PRINT | JSON_UNESCAPED_SLASHES)) === false) {
        fail("cannot write $file");
    }
    foreach ($out as $i => $c) {
        echo 'C: floor statement ' . ($i + 1) . ' (from the general log), ' . describe($c) . "\n";
    }
}

/** A captured statement, ready to replay on one PDO for one name. */
final class Replayed
{
    private ?\PDOStatement $stmt = null;
    private string $text = '';

    public function __construct(private \PDO $pdo, array $captured, string $name)
    {
        if ($captured['command'] === 'Query') {
            $this->text = str_replace("'" . PROBE . "'", $pdo->quote($name), $captured['sql']);
            return;
        }
        $this->stmt = $pdo->prepare($captured['sql']);
        foreach ($captured['params'] as $i => $p) {
            match ($p[0]) {
                'name' => $this->stmt->bindValue($i + 1, $name, \PDO::PARAM_STR),
                'int' => $this->stmt->bindValue($i + 1, (int) $p[1], \PDO::PARAM_INT),
                'str', 'num' => $this->stmt->bindValue($i + 1, $p[1], \PDO::PARAM_STR),
                'null' => $this->stmt->bindValue($i + 1, null, \PDO::PARAM_NULL),
            };
        }
    }

    /** Runs it, reads any result; returns the affected or returned rows. */
    public function run(): int
    {
        if ($this->stmt !== null) {
            $s = $this->stmt;
            $s->execute();
        } else {
            $s = $this->pdo->query($this->text);
        }
        if ($s->columnCount() > 0) {
            $n = count($s->fetchAll());
            $s->closeCursor();
            return $n;
        }
        return $s->rowCount();
    }
}

/** How a captured statement reads in the output: the text, and what is bound. */
function describe(array $c): string
{
    if ($c['command'] === 'Query') {
        return 'text query: ' . $c['sql'];
    }
    $params = array_map(static fn (array $p): string => match ($p[0]) {
        'name' => 'the name',
        'str' => "'$p[1]'",
        'null' => 'NULL',
        default => $p[1],
    }, $c['params']);
    return 'prepared: ' . $c['sql'] . ' — bound: ' . implode(', ', $params);
}

$mode = arg(1, 'capture|time');
$file = arg(2, 'the captured statements (JSON)');
if ($mode === 'capture') {
    capture($file);
    exit(0);
}
if ($mode !== 'time') {
    fail("unknown mode $mode (capture or time)");
}
$rounds = (int) arg(3, 'rounds');
$block = (int) arg(4, 'cycles per block');
$warm = (int) arg(5, 'warm-up cycles');
$count = (int) arg(6, 'cycles counted for the statements');
$captured = json_decode((string) file_get_contents($file), true);
if (!is_array($captured) || $captured === []) {
    fail("$file holds no captured statements");
}

$pdo = pdo();
$floorId = (int) $pdo->query('SELECT CONNECTION_ID()')->fetchColumn();
$replay = array_map(static fn (array $c): Replayed => new Replayed($pdo, $c, FLOOR_NAME), $captured);

// The first floor cycle, checked from another connection.
$check = pdo()->prepare('SELECT COALESCE(IS_USED_LOCK(?), 0), (SELECT COUNT(*) FROM shared_locks WHERE name = ?)');
$heldMidway = false;
$expected = [];
$holder = $rows = -1;
foreach ($replay as $r) {
    $expected[] = $r->run();
    $check->execute([FLOOR_NAME, FLOOR_NAME]);
    [$holder, $rows] = array_map('intval', $check->fetch(\PDO::FETCH_NUM));
    $check->closeCursor();
    $heldMidway = $heldMidway || $holder === $floorId;
}
if (!$heldMidway || $holder !== 0 || $rows !== 0) {
    fail('the replayed statements did not take and free the lock (held midway: ' . var_export($heldMidway, true) . ", after: holder $holder, $rows rows)");
}

$ext = new Ext();
$raw = new Raw();
$impls = [
    'ext' => new PhpCycles(static fn () => extCycle($ext, 'sharedlock-bench-ext')),
    'floor' => new PhpCycles(static function () use ($replay, $expected): void {
        foreach ($replay as $i => $r) {
            if (($got = $r->run()) !== $expected[$i]) {
                throw new \RuntimeException("replayed statement $i: $got rows, $expected[$i] in the checked cycle");
            }
        }
    }),
    'raw' => new PhpCycles(static function () use ($raw): void {
        $raw->lock('sharedlock-bench-raw', 0);
        $raw->release('sharedlock-bench-raw');
    }),
];
foreach ($impls as $cycles) {
    $cycles->run($warm);
}
$timed = array_map(static fn (array $r): Timed => new Timed($r), interleave($impls, $rounds, $block));
$admin = new Admin();
$counted = array_map(static fn (Cycles $c): array => countPerCycle($admin, $c, $count), $impls);

$n = count($captured);
[$r] = $timed['ext']->ratio($timed['floor']);
$met = $r <= 1.1;
row(
    '`SharedLock::lock($n, ' . TIMEOUT . ', ' . TTL . ')` + `->release()`, native connection',
    us($timed['ext']->median()),
    us($timed['ext']->p90()),
    ratioText($timed['ext'], $timed['floor'], 'its floor') . '; ' . ratioText($timed['ext'], $timed['raw'], 'raw'),
    stmtText(...$counted['ext']),
    '≤ 1.1× floor: ' . ($met ? 'met' : 'not met')
);
row(
    "its floor: the $n statements it sent, captured from the general log, replayed through PDO",
    us($timed['floor']->median()),
    us($timed['floor']->p90()),
    '1.00 (floor); ' . ratioText($timed['floor'], $timed['raw'], 'raw'),
    stmtText(...$counted['floor']),
    ''
);
row('raw `GET_LOCK(?, 0)` + `RELEASE_LOCK(?)`, PDO', us($timed['raw']->median()), us($timed['raw']->p90()), '1.00 (raw)', stmtText(...$counted['raw']), '');
printf(
    "target C: SharedLock ≤ 1.1× its own floor: %s (%.2f×, %+.1f µs per cycle; %.2f× raw GET_LOCK)\n",
    $met ? 'met' : 'not met',
    $r,
    ($timed['ext']->median() - $timed['floor']->median()) / 1000,
    $timed['ext']->ratio($timed['raw'])[0]
);
$vsRaw = $timed['ext']->ratio($timed['raw'])[0];
printf("target: uncontended lock + release <= 1.25x raw: %s (%.2fx raw; the protocol by hand %.2fx raw)\n",
    $vsRaw <= 1.25 ? 'met' : 'not met', $vsRaw, $timed['floor']->ratio($timed['raw'])[0]);
echo "C: $rounds rounds × $block cycles per implementation after $warm warm-up cycles (" . $rounds * $block . " timed cycles each); statements from $count more cycles each\n";
