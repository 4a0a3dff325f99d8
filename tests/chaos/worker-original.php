<?php
// A caller of the chaos test that runs the original package's protocol (its-mieger/
// mysql-shared-locks 1.x, as modelled in original-model.php for interoperability tests)
// in a loop, journaling each section it holds (format: tests/src/bin/chaos/journal.rs).
// Run in a PHP without the mysqllock extension: it is the process still running the
// original package beside mysqllock's callers, on the same table and names.
//
//   php tests/chaos/worker-original.php JOURNAL NAME DSN
//
// Started by `chaos drive --table original` (the package knows no tokens), which also
// sets CHAOS_* (see driver.rs, spawn); worker kind `original`, mode `plain` (the package
// has no keep-alive). Each round: read the clocks, lock(NAME, CHAOS_TIMEOUT, CHAOS_TTL
// rounded up: the package takes whole seconds), journal `acquired` with TOKEN = the
// section's identity (its own MONO_NS, see journal.rs), hold 50-400 ms, asking
// assertTTL(NAME, 0) halfway (a failure that is no error: `lost`), journal the instant,
// unlock, journal what unlock reported: ok, lost (nothing of ours to delete: the lock
// was taken over) or error. The lease's DEADLINE_NS is counted from clocks read before
// lock() (see ttl_deadline_ns in journal.rs): the package's row gets its `created` at
// its INSERT, after that instant, and keeps it while the process waits for the
// GET_LOCK, so the deadline is a lower bound of the real one.
//
// After any error (a killed session, a restarted server, a KILL QUERY) the worker drops
// its PDO, closing that session, and opens a new one after a short pause, as a user of
// the package would with configureConnection(): the package itself keeps a dead
// connection forever. A row the old session left stays until someone's cleanup takes it.
//
// MYSQLLOCK_BREAK breaks this worker on purpose, to show that the checker catches it:
//   exclusion    never calls lock(): "acquires" at once
//   ignore-loss  journals every release as ok and never journals `lost`
declare(strict_types=1);

use MySqlLockTest\Original\ReleaseFailed;
use MySqlLockTest\Original\SharedLockModel;
use MySqlLockTest\Original\Timeout;
use MySqlLockTest\Original\TtlShort;

require __DIR__ . '/original-model.php';

function setting(string $name): string
{
    $value = getenv($name);
    if ($value === false || $value === '') {
        fwrite(STDERR, "worker-original.php: $name is not set (run me through chaos drive)\n");
        exit(2);
    }
    return $value;
}

function say(string $text): void
{
    fwrite(STDERR, sprintf("worker-original.php %s: %s\n", setting('CHAOS_WORKER'), $text));
}

/** Appends one journal line: a single write(2) on a file opened with O_APPEND. */
function journal(string $line): void
{
    global $journal;
    if (file_put_contents($journal, "$line\n", FILE_APPEND) !== strlen($line) + 1) {
        say("cannot write to $journal");
        exit(2);
    }
}

/** As worker.php's: DEADLINE_NS of a TTL lease whose acquisition begins now. */
function ttl_deadline(float $ttl): int
{
    $mono = hrtime(true);
    [$fraction] = explode(' ', microtime());
    $intoSecond = (int) round((float) $fraction * 1e6) * 1000;
    return $mono + (int) ceil($ttl) * 1000000000 + (1000000000 - $intoSecond) - 5000000;
}

/** What went wrong, with its causes. */
function cause(\Throwable $e): string
{
    $text = get_class($e) . ': ' . $e->getMessage();
    for ($p = $e->getPrevious(); $p !== null; $p = $p->getPrevious()) {
        $text .= ': ' . get_class($p) . ': ' . $p->getMessage();
    }
    return $text;
}

if ($argc !== 4) {
    fwrite(STDERR, "usage: worker-original.php JOURNAL NAME DSN\n");
    exit(2);
}
[, $journal, $name, $dsn] = $argv;
if (extension_loaded('mysqllock')) {
    fwrite(STDERR, "worker-original.php: run me without the mysqllock extension (I am the original package's caller)\n");
    exit(2);
}
$broken = (string) getenv('MYSQLLOCK_BREAK');
if (!in_array($broken, ['', 'exclusion', 'ignore-loss'], true)) {
    fwrite(STDERR, "worker-original.php: MYSQLLOCK_BREAK=$broken: expected exclusion or ignore-loss\n");
    exit(2);
}
if (setting('CHAOS_TOKENS') !== '0' || setting('CHAOS_KEEP_ALIVE') !== '0' || getenv('CHAOS_LEASE') === '1') {
    fwrite(STDERR, "worker-original.php: the original package has no tokens, keep-alive or lease mode (chaos drive --table original, mode plain)\n");
    exit(2);
}
mt_srand((int) setting('CHAOS_SEED'));
$ttl = (float) setting('CHAOS_TTL');
$timeout = (float) setting('CHAOS_TIMEOUT');
$stop = setting('CHAOS_STOP');
$pid = (string) getmypid();
$lock = null;

while (!file_exists($stop)) {
    try {
        $lock ??= new SharedLockModel(SharedLockModel::connect($dsn));
    } catch (\Throwable $e) {
        say('connect: ' . cause($e));
        usleep(200000); // a pause before trying again, not a wait for anybody
        continue;
    }
    $deadline = ttl_deadline($ttl);
    if ($broken !== 'exclusion') {
        try {
            $lock->lock($name, $timeout, (int) ceil($ttl));
        } catch (Timeout $e) {
            continue;
        } catch (\Throwable $e) {
            say('lock: ' . cause($e));
            $lock = null; // closes the session: a GET_LOCK it kept goes with it
            usleep(200000); // a pause before trying again, not a wait for anybody
            continue;
        }
    }
    $acquired = hrtime(true);
    $token = (string) $acquired; // the section's identity
    journal("acquired $acquired $name $token $deadline $pid");
    $hold = mt_rand(50, 400) * 1000;
    usleep(intdiv($hold, 2)); // the work done under the lock (the behaviour under test)
    if ($broken !== 'exclusion') {
        try {
            $lock->assertTTL($name, 0);
        } catch (TtlShort $e) {
            if ($e->getPrevious() !== null) {
                say("assertTTL of $token: " . cause($e));
            } elseif ($broken !== 'ignore-loss') {
                journal('lost ' . hrtime(true) . " $name $token $pid");
            }
        }
    }
    usleep($hold - intdiv($hold, 2));
    $releasing = hrtime(true);
    $result = 'ok';
    if ($broken !== 'exclusion') {
        try {
            $lock->unlock($name);
        } catch (ReleaseFailed $e) {
            $result = $e->getPrevious() === null ? 'lost' : 'error';
            say("unlock of $token: $result: " . cause($e));
        }
    }
    journal("release $releasing $name $token " . ($broken === 'ignore-loss' ? 'ok' : $result) . " $pid");
    if ($result === 'error') {
        $lock = null;
        usleep(200000); // a pause before trying again, not a wait for anybody
    }
}
