<?php
// Part A of bench/session.sh: uncontended session lock + release (GET_LOCK only) through
// \MySqlLock\SessionLock on three connections and through the C ABI, against raw
// GET_LOCK / RELEASE_LOCK through PDO and mysqli, in interleaved rounds.
//
//   session_cycles.php ROUNDS BLOCK WARMUP COUNT C_PROGRAM
//
// Every implementation has its own connection and its own name (one more SessionLock
// takes a new name every cycle); a cycle takes the free name with one try (timeout 0)
// and releases it. ROUNDS rounds of BLOCK cycles each (the
// order rotating), after WARMUP untimed cycles each; then COUNT cycles of one
// implementation at a time between status snapshots for the statements per cycle.
// C_PROGRAM is bench/c/session_cycles.c compiled (it times its own cycles).
// Prints the table rows of part A, then one "target ..." line per implementation.
// Exit 1 when something failed, 3 when an implementation was missing (the others ran).
declare(strict_types=1);

namespace MySqlLockBench;

require __DIR__ . '/session_common.php';

$rounds = (int) arg(1, 'rounds');
$block = (int) arg(2, 'cycles per block');
$warm = (int) arg(3, 'warm-up cycles');
$count = (int) arg(4, 'cycles counted for the statements');
$cProgram = arg(5, 'the compiled bench/c/session_cycles.c');

/** Raw GET_LOCK / RELEASE_LOCK through mysqli, each prepared once (what a mysqli user writes). */
final class MysqliRaw
{
    private \mysqli_stmt $get;
    private \mysqli_stmt $rel;
    private string $bound = '';
    private ?int $result = null;

    // Kept: a mysqli_stmt does not keep its connection open.
    public function __construct(private \mysqli $db, string $name)
    {
        $this->bound = $name;
        $this->get = $db->prepare('SELECT GET_LOCK(?, 0)');
        $this->get->bind_param('s', $this->bound);
        $this->get->bind_result($this->result);
        $this->rel = $db->prepare('SELECT RELEASE_LOCK(?)');
        $this->rel->bind_param('s', $this->bound);
        $this->rel->bind_result($this->result);
    }

    public function cycle(): void
    {
        foreach ([$this->get, $this->rel] as $stmt) {
            $stmt->execute();
            $stmt->fetch();
            $stmt->free_result();
            if ($this->result !== 1) {
                throw new \RuntimeException("$this->bound: raw mysqli cycle returned " . var_export($this->result, true));
            }
        }
    }
}

/** The C program as a child: "N" in, N cycle times out. */
final class CCycles implements Cycles
{
    /** @var resource */
    private $proc;
    /** @var array<int, resource> */
    private array $pipes = [];

    public function __construct(string $program, string $url, string $name, int $warm)
    {
        $this->proc = proc_open([$program, $url, $name, (string) $warm], [0 => ['pipe', 'r'], 1 => ['pipe', 'w']], $this->pipes);
        if (!is_resource($this->proc) || trim((string) fgets($this->pipes[1])) !== 'ready') {
            fail("$program did not start (its message is above)");
        }
    }

    public function run(int $n): array
    {
        fwrite($this->pipes[0], "$n\n");
        $line = fgets($this->pipes[1]);
        $t = $line === false ? [] : array_map('intval', explode(' ', trim($line)));
        if (count($t) !== $n) {
            fail('the C program failed (its message is above)');
        }
        return $t;
    }

    public function __destruct()
    {
        fclose($this->pipes[0]);
        fclose($this->pipes[1]);
        if (proc_close($this->proc) !== 0) {
            fail('the C program failed at exit');
        }
    }
}

function mysqli(): \mysqli
{
    $s = server();
    $db = new \mysqli($s['host'], $s['user'], $s['pass'], $s['db'], $s['port']);
    $db->set_charset('utf8mb4');
    return $db;
}

const A_LABELS = [
    'pdo' => 'floor: raw `GET_LOCK(?, 0)` + `RELEASE_LOCK(?)`, PDO (real prepares, prepared once)',
    'mysqli' => 'floor: the same through mysqli (prepared once)',
    'native' => '`SessionLock`, the extension\'s native connection',
    'on-mysqli' => '`SessionLock` on the script\'s mysqli',
    'on-pdo' => '`SessionLock` on the script\'s PDO',
    'fresh' => '`SessionLock`, native connection, a new name (and object) every cycle',
    'c' => 'C: `mysqllock_session_lock(c, n, 0)` + `mysqllock_session_unlock`',
];

$impls = [];
$raw = new Raw();
$impls['pdo'] = new PhpCycles(static function () use ($raw): void {
    $raw->lock('sess-bench-pdo', 0);
    $raw->release('sess-bench-pdo');
});
$rawMysqli = new MysqliRaw(mysqli(), 'sess-bench-mysqli');
$impls['mysqli'] = new PhpCycles(\Closure::fromCallable([$rawMysqli, 'cycle']));
$missing = [];
if (class_exists(\MySqlLock\SessionLock::class)) {
    foreach (['native' => null, 'on-mysqli' => mysqli(), 'on-pdo' => pdo()] as $impl => $conn) {
        $lock = new \MySqlLock\SessionLock("sess-bench-$impl", $conn);
        $impls[$impl] = new PhpCycles(static function () use ($lock, $impl): void {
            if ($lock->acquire(0.0) !== true) {
                throw new \RuntimeException("SessionLock $impl: acquire(0.0) of a free name did not return true");
            }
            $lock->release();
        });
    }
    // A name the connection has not locked before, as a process that locks one job's name
    // per run (or many names) does: the floors bind the name, so for them nothing changes.
    $fresh = 0;
    $impls['fresh'] = new PhpCycles(static function () use (&$fresh): void {
        $lock = new \MySqlLock\SessionLock('sess-bench-fresh-' . $fresh++);
        if ($lock->acquire(0.0) !== true) {
            throw new \RuntimeException('SessionLock fresh: acquire(0.0) of a free name did not return true');
        }
        $lock->release();
    });
} else {
    $missing = ['native', 'on-mysqli', 'on-pdo', 'fresh'];
}
$impls['c'] = new CCycles($cProgram, (string) getenv('MYSQLLOCK_BENCH_DSN'), 'sess-bench-c', $warm);

foreach ($impls as $impl => $cycles) {
    if ($impl !== 'c') {
        $cycles->run($warm);
    }
}
$timed = array_map(static fn (array $r): Timed => new Timed($r), interleave($impls, $rounds, $block));
$admin = new Admin();
$counted = [];
foreach ($impls as $impl => $cycles) {
    $counted[$impl] = countPerCycle($admin, $cycles, $count);
}

// The floor of each: its own connector's raw statements; native and C (no PHP connector
// of their own) against the faster of the two PHP floors.
$fastest = $timed['pdo']->median() <= $timed['mysqli']->median() ? 'pdo' : 'mysqli';
$floorOf = ['pdo' => 'pdo', 'mysqli' => 'mysqli', 'on-pdo' => 'pdo', 'on-mysqli' => 'mysqli', 'native' => $fastest, 'fresh' => $fastest, 'c' => $fastest];
$floorName = ['pdo' => 'raw PDO', 'mysqli' => 'raw mysqli'];
$targets = [];
foreach (A_LABELS as $impl => $label) {
    if (in_array($impl, $missing, true)) {
        row($label, 'not run: no class MySqlLock\SessionLock in this build', '', '', '', '');
        continue;
    }
    $t = $timed[$impl];
    [$stmts, $prepares] = $counted[$impl];
    $base = $floorOf[$impl];
    if ($base === $impl) {
        $other = $impl === 'pdo' ? 'mysqli' : 'pdo';
        row($label, us($t->median()), us($t->p90()), '1.00 (floor); ' . ratioText($t, $timed[$other], $floorName[$other]), stmtText($stmts, $prepares), '');
        continue;
    }
    [$r] = $t->ratio($timed[$base]);
    $met = $r <= 1.1 && abs($stmts - 2) < 0.005 && $prepares < 0.005;
    row(
        $label,
        us($t->median()),
        us($t->p90()),
        ratioText($t, $timed[$base], $floorName[$base]),
        stmtText($stmts, $prepares),
        '≤ 1.1×, 2: ' . ($met ? 'met' : 'not met')
    );
    $targets[] = sprintf(
        'target A %s: ≤ 1.1× %s and 2 statements per cycle: %s (%.2f×, %+.1f µs per cycle; %s statements)',
        $impl,
        $floorName[$base],
        $met ? 'met' : 'not met',
        $r,
        ($t->median() - $timed[$base]->median()) / 1000,
        stmtText($stmts, $prepares)
    );
}
foreach ($targets as $line) {
    echo "$line\n";
}
echo "A: $rounds rounds × $block cycles per implementation after $warm warm-up cycles (" . $rounds * $block . " timed cycles each); statements from $count more cycles each\n";
if ($missing !== []) {
    echo "A: not run: " . implode(', ', $missing) . " (no class MySqlLock\\SessionLock in this build of the extension)\n";
    exit(3);
}
