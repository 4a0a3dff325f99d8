<?php
// The driver of bench/server_cost.sh: what each way of taking and releasing a lock costs
// the server, in instructions counted by callgrind (one number per cycle, the same from
// run to run and whatever else the machine does), so that the statements a protocol needs
// can be compared with raw GET_LOCK / RELEASE_LOCK without timing noise.
//
//   server_cost.php PORT VALGRIND_PID DUMP_PREFIX CYCLES
//
// Per variant: its statements are prepared (or written as text, where the variant says
// so) on a fresh connection, run for a few warm-up cycles, then callgrind's counters are
// zeroed (callgrind_control -z), CYCLES cycles run, and the counters dumped
// (callgrind_control -d): the new dump's total divided by CYCLES is the figure. Every cycle
// checks its outcome (the lock was taken and let go), so a variant cannot look cheap by
// failing. Prints one table row per variant.
declare(strict_types=1);

[, $port, $pid, $prefix, $cycles] = $argv + [null, '', '', '', '200'];
$cycles = (int) $cycles;
if ($port === '' || $pid === '' || $prefix === '' || $cycles < 1) {
    fwrite(STDERR, "usage: server_cost.php PORT VALGRIND_PID DUMP_PREFIX CYCLES\n");
    exit(2);
}

function fail(string $message): never
{
    fwrite(STDERR, "bench/php/server_cost.php: $message\n");
    exit(1);
}

function connect(string $port): PDO
{
    return new PDO("mysql:host=127.0.0.1;port=$port;dbname=mysqllock_test;charset=utf8mb4", 'locker', 'l0ck-s3cret',
        [PDO::ATTR_ERRMODE => PDO::ERRMODE_EXCEPTION, PDO::ATTR_EMULATE_PREPARES => false]);
}

/** Runs callgrind_control with $args on the server. */
function control(string $pid, string ...$args): void
{
    $cmd = array_merge(['callgrind_control'], $args, [$pid]);
    $p = proc_open($cmd, [1 => ['file', '/dev/null', 'w'], 2 => ['pipe', 'w']], $pipes);
    $err = stream_get_contents($pipes[2]);
    if (!is_resource($p) || proc_close($p) !== 0) {
        fail('callgrind_control ' . implode(' ', $args) . " failed: $err");
    }
}

/** The dump files callgrind wrote so far. */
function dumps(string $prefix): array
{
    clearstatcache();
    return glob("$prefix.*") ?: [];
}

/** The instructions in the one dump that appeared since $before was listed. */
function dumped(string $prefix, array $before): int
{
    $new = array_values(array_diff(dumps($prefix), $before));
    if (count($new) !== 1) {
        fail('expected one new callgrind dump under ' . $prefix . '.*, found ' . count($new));
    }
    foreach (file($new[0]) as $line) {
        if (preg_match('/^(?:summary|totals): (\d+)/', $line, $m)) {
            return (int) $m[1];
        }
    }
    fail("$new[0] has no total");
}

$table = 'INSERT INTO shared_locks (name, connection_id, created, ttl, lock_acquired) ';
$claim = $table . 'VALUES (?, CONNECTION_ID(), UNIX_TIMESTAMP(), 60, IF(GET_LOCK(?, 0) = 1, 1, NULL))';
$delete = 'DELETE FROM shared_locks WHERE name = ? AND connection_id = CONNECTION_ID() AND RELEASE_LOCK(CAST(name AS CHAR)) = 1';
// Not kept (branch left-rows-experiment): a release that writes nothing, reading the row
// it checks, and a claim that takes such a left row over in place.
$readRelease = 'SELECT RELEASE_LOCK(CAST(name AS CHAR)) FROM shared_locks WHERE name = ? AND connection_id = CONNECTION_ID() AND lock_acquired = 1';
$free = 'lock_acquired = 1 AND (BINARY CAST(name AS CHAR) = BINARY ? OR NOT (IS_USED_LOCK(CAST(name AS CHAR)) <=> connection_id))';
$takeOver = $claim . " ON DUPLICATE KEY UPDATE created = IF($free AND LAST_INSERT_ID(lock_acquired), UNIX_TIMESTAMP(), created), "
    . "ttl = IF($free, 60, ttl), name = IF($free, ?, name), connection_id = IF($free, CONNECTION_ID(), connection_id)";
$updateInPlace = 'UPDATE shared_locks SET created = UNIX_TIMESTAMP(), ttl = 60 WHERE name = ? AND connection_id = CONNECTION_ID() '
    . 'AND lock_acquired = 1 AND GET_LOCK(?, 0) = 1 AND LAST_INSERT_ID(lock_acquired)';

/**
 * The variants: label, then the statements of one cycle: [sql, parameters (a function of
 * the name), what the outcome must be]. `text` statements are sent as text with the name
 * as a hexadecimal literal (as the extension writes a first run and its waiter's batch).
 */
$variants = [
    ['raw `GET_LOCK(?, 0)` + `RELEASE_LOCK(?)`', 'original', [
        ['SELECT GET_LOCK(?, 0)', fn ($n) => [$n], 'one'],
        ['SELECT RELEASE_LOCK(?)', fn ($n) => [$n], 'one']]],
    ['shipped: claim `INSERT ... IF(GET_LOCK(?, 0) = 1, 1, NULL)` + `DELETE ... AND RELEASE_LOCK(...) = 1`, prepared', 'original', [
        [$claim, fn ($n) => [$n, $n], 'affected'],
        [$delete, fn ($n) => [$n], 'affected']]],
    ['shipped, a cold process\'s first cycle: the same two statements as text', 'original', [
        ['text', fn ($x) => "INSERT INTO shared_locks (name, connection_id, created, ttl, lock_acquired) VALUES ($x, CONNECTION_ID(), UNIX_TIMESTAMP(), 60, IF(GET_LOCK($x, 0) = 1, 1, NULL))", 'affected'],
        ['text', fn ($x) => "DELETE FROM shared_locks WHERE name = $x AND connection_id = CONNECTION_ID() AND RELEASE_LOCK(CAST(name AS CHAR)) = 1", 'affected']]],
    ['shipped waiter: the sleep-and-claim batch (text, 2 statements) + the prepared DELETE', 'original', [
        ['batch', fn ($x) => "SELECT IS_FREE_LOCK($x), GET_LOCK($x, 0); INSERT INTO shared_locks (name, connection_id, created, ttl, lock_acquired) VALUES ($x, CONNECTION_ID(), UNIX_TIMESTAMP(), 60, IF(IS_USED_LOCK($x) <=> CONNECTION_ID(), 1, NULL))", 'batch'],
        [$delete, fn ($n) => [$n], 'affected']]],
    ['the waiter\'s two statements prepared instead (`SELECT IS_FREE_LOCK(?), GET_LOCK(?, ?)`, the claim) + the DELETE', 'original', [
        ['SELECT IS_FREE_LOCK(?), GET_LOCK(?, 0)', fn ($n) => [$n, $n], 'second'],
        [$table . 'VALUES (?, CONNECTION_ID(), UNIX_TIMESTAMP(), 60, IF(IS_USED_LOCK(?) <=> CONNECTION_ID(), 1, NULL))', fn ($n) => [$n, $n], 'affected'],
        [$delete, fn ($n) => [$n], 'affected']]],
    ['not kept: a left row taken over in place (`INSERT ... ON DUPLICATE KEY UPDATE`) + a release that reads the row and writes nothing', 'left', [
        [$takeOver, fn ($n) => [$n, $n, $n, $n, $n, $n, $n], 'took'],
        [$readRelease, fn ($n) => [$n], 'one']]],
    ['not kept: the leanest takeover, `UPDATE ... SET created, ttl WHERE` own row `AND GET_LOCK(?, 0) = 1`, + that release', 'left', [
        [$updateInPlace, fn ($n) => [$n, $n], 'took'],
        [$readRelease, fn ($n) => [$n], 'one']]],
];

/** Runs one statement of a cycle and checks its outcome. */
function step(PDO $pdo, array $statement, string $name): void
{
    [$sql, $params, $expect] = $statement;
    if ($sql === 'text' || $sql === 'batch') {
        $text = $params("_utf8mb4 X'" . bin2hex($name) . "'");
        $pdo->setAttribute(PDO::ATTR_EMULATE_PREPARES, true);
        try {
            if ($sql === 'text') {
                $affected = $pdo->exec($text);
                if ($affected !== 1) {
                    fail("$text: $affected rows, not 1");
                }
                return;
            }
            $st = $pdo->query($text);
            $got = $st->fetch(PDO::FETCH_NUM);
            $st->nextRowset();
            if ((int) $got[1] !== 1 || $st->rowCount() !== 1) {
                fail("the batch did not take the lock: " . json_encode($got) . ', ' . $st->rowCount() . ' rows');
            }
            $st->closeCursor();
            return;
        } finally {
            $pdo->setAttribute(PDO::ATTR_EMULATE_PREPARES, false);
        }
    }
    static $prepared = [];
    $key = spl_object_id($pdo) . $sql;
    $st = $prepared[$key] ??= $pdo->prepare($sql);
    $st->execute($params($name));
    $ok = match ($expect) {
        'one' => (int) $st->fetchColumn() === 1,
        'second' => (int) ($st->fetch(PDO::FETCH_NUM)[1] ?? 0) === 1,
        'affected' => $st->rowCount() === 1,
        // the takeover reports itself through LAST_INSERT_ID(lock_acquired) = 1
        'took' => $st->rowCount() === 1 || (int) $pdo->lastInsertId() === 1,
    };
    $st->closeCursor();
    if (!$ok) {
        fail("$sql did not do its part for $name");
    }
}

// The original package's table, as its README creates it.
connect($port)->exec('CREATE TABLE IF NOT EXISTS `shared_locks` (`name` varchar(64) NOT NULL, `connection_id` bigint(20) NOT NULL, '
    . '`created` bigint(20) NOT NULL, `ttl` bigint(20) NOT NULL, `lock_acquired` tinyint(1) NOT NULL, '
    . 'UNIQUE KEY `shared_locks_ix1` (`name`)) ENGINE=MyISAM DEFAULT CHARSET=latin1');
$raw = null;
foreach ($variants as $i => [$label, $start, $statements]) {
    $pdo = connect($port);
    $name = "server-cost-$i";
    $pdo->prepare('DELETE FROM shared_locks WHERE name = ?')->execute([$name]);
    if ($start === 'left') {
        // The row a release that writes nothing leaves: ours, marked acquired.
        $pdo->prepare('INSERT INTO shared_locks (name, connection_id, created, ttl, lock_acquired) VALUES (?, CONNECTION_ID(), UNIX_TIMESTAMP(), 60, 1)')
            ->execute([$name]);
    }
    for ($w = 0; $w < 5; $w++) {
        foreach ($statements as $s) {
            step($pdo, $s, $name);
        }
    }
    control($pid, '-z');
    for ($c = 0; $c < $cycles; $c++) {
        foreach ($statements as $s) {
            step($pdo, $s, $name);
        }
    }
    $before = dumps($prefix);
    control($pid, '-d');
    $perCycle = dumped($prefix, $before) / $cycles;
    $raw ??= $perCycle;
    printf("| %s | %d | %s | %.2f× |\n", $label, count($statements), number_format($perCycle / 1000, 1) . 'k', $perCycle / $raw);
    $pdo = null;
}
