<?php
// A PHP caller of the chaos test: SharedLock::lock() in a loop (the mysqllock
// extension), journaling each section it holds (format: tests/src/bin/chaos/journal.rs).
//
//   php -d extension=libmysqllock_php.so tests/chaos/worker.php JOURNAL NAME DSN
//
// Started by `chaos drive`, which also sets CHAOS_* (see driver.rs, spawn). Each round:
// read the clocks, lock NAME (TTL CHAOS_TTL, keepAlive if CHAOS_KEEP_ALIVE=1), journal
// `acquired`, write to the guard (the protected resource) under getToken(), hold
// 50-400 ms (a keep-alive holder asks for its remaining TTL halfway: `renewed` or
// `lost`), journal the instant, release, journal what release() reported (`release`:
// ok, lost = SharedLockReleaseException for a lock no longer held, error). Errors
// (server restarting, session killed) are logged and the loop goes on.
//
// With CHAOS_TOKENS=0 (the original table, which has no tokens: `chaos drive --table
// original`) TOKEN is the section's identity, the MONO_NS of its `acquired` line (see
// journal.rs), and nothing is written to the guard, which needs tokens.
//
// With CHAOS_LEASE=1 (the cluster chaos, tests/suites/70-galera.sh) it uses the lease
// mode instead: Nene\Kit\DistributedLock::acquire(NAME, OWNER, TTL, wait) on the node
// DSN names, OWNER = "LABEL:PID:N" (unique per acquisition, so a section never
// continues an older one's token), DEADLINE_NS = the library's local deadline:
// hrtime() read right after getRemaining() returned, plus getRemaining() (the clock
// read after can only overstate it by microseconds, far below the library's 0.5 s
// margin, so the checker holds the library to its own promise), token = getToken(),
// release() true = ok, false = lost, an exception = error. Errors (node down, 1047 not
// ready, refused connection) are logged; the worker opens a new connection after a short
// pause and tries again.
//
// MYSQLLOCK_BREAK breaks this worker on purpose, to show that the checker catches it
// (in both modes):
//   exclusion    never calls lock(): "acquires" at once under a made-up token
//   ignore-loss  journals every release as ok and never journals `lost`
declare(strict_types=1);

use ItsMieger\MySqlSharedLocks\Exception\SharedLockReleaseException;
use ItsMieger\MySqlSharedLocks\Exception\SharedLockRemainingTTLException;
use ItsMieger\MySqlSharedLocks\Exception\SharedLockTimeoutException;
use ItsMieger\MySqlSharedLocks\SharedLock;

function setting(string $name): string
{
    $value = getenv($name);
    if ($value === false || $value === '') {
        fwrite(STDERR, "worker.php: $name is not set (run me through chaos drive)\n");
        exit(2);
    }
    return $value;
}

function say(string $text): void
{
    fwrite(STDERR, sprintf("worker.php %s: %s\n", setting('CHAOS_WORKER'), $text));
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

/**
 * DEADLINE_NS of a TTL lease whose acquire (or renew) is called next: the monotonic
 * clock now, plus the wall clock's way to floor(now) + ceil(ttl) + 1 (see
 * ttl_deadline_ns in journal.rs), less a 5 ms margin. The wall clock is read after the
 * monotonic one, so its floor is never past the acquisition's.
 */
function ttl_deadline(float $ttl): int
{
    $mono = hrtime(true);
    [$fraction] = explode(' ', microtime());
    $intoSecond = (int) round((float) $fraction * 1e6) * 1000;
    return $mono + (int) ceil($ttl) * 1000000000 + (1000000000 - $intoSecond) - 5000000;
}

/**
 * MYSQLLOCK_BREAK=exclusion's token: 1e18 plus the monotonic clock in microseconds, so it
 * increases and lies above every real token (GET_LOCK-mode tokens count up from 1, lease
 * tokens from the microseconds since 1970, about 1.8e15).
 */
function made_up_token(): string
{
    return (string) (1000000000000000000 + intdiv(hrtime(true), 1000));
}

/** Runs `chaos guard begin|end NAME TOKEN PID`: true = accepted. */
function guard(string ...$args): bool
{
    $process = proc_open([setting('CHAOS_BIN'), 'guard', ...$args], [], $pipes);
    $code = $process === false ? -1 : proc_close($process);
    if ($code !== 0 && $code !== 1) {
        say('the guard failed (' . implode(' ', $args) . "): exit $code");
    }
    return $code === 0;
}

if ($argc !== 4) {
    fwrite(STDERR, "usage: worker.php JOURNAL NAME DSN\n");
    exit(2);
}
[, $journal, $name, $dsn] = $argv;
if (!extension_loaded('mysqllock')) {
    fwrite(STDERR, "worker.php: the mysqllock extension is not loaded\n");
    exit(2);
}
$broken = (string) getenv('MYSQLLOCK_BREAK');
if (!in_array($broken, ['', 'exclusion', 'ignore-loss'], true)) {
    fwrite(STDERR, "worker.php: MYSQLLOCK_BREAK=$broken: expected exclusion or ignore-loss\n");
    exit(2);
}
ini_set('mysqllock.dsn', $dsn);
mt_srand((int) setting('CHAOS_SEED'));
$ttl = (float) setting('CHAOS_TTL');
$timeout = (float) setting('CHAOS_TIMEOUT');
$stop = setting('CHAOS_STOP');
$keepAlive = setting('CHAOS_KEEP_ALIVE') === '1';
$tokens = setting('CHAOS_TOKENS') === '1';
$options = $keepAlive ? ['keepAlive' => true] : [];
$pid = (string) getmypid();

if (getenv('CHAOS_LEASE') === '1') {
    $label = setting('CHAOS_WORKER');
    $lease = null;
    $round = 0;
    while (!file_exists($stop)) {
        $round++;
        $owner = "$label:$pid:$round";
        if ($broken === 'exclusion') {
            $token = made_up_token(); // never called acquire
            $deadline = hrtime(true) + (int) ($ttl * 1e9);
        } else {
            try {
                $lease ??= new \Nene\Kit\DistributedLock();
                if (!$lease->acquire($name, $owner, (int) $ttl, $timeout)) {
                    continue;
                }
                $remaining = $lease->getRemaining();
                $deadline = hrtime(true) + (int) ($remaining * 1e9);
                $token = (string) $lease->getToken();
            } catch (\Throwable $e) {
                say('acquire: ' . get_class($e) . ': ' . $e->getMessage());
                $lease = null; // a new connection next time
                usleep(300000); // a pause before trying again, not a wait for anybody
                continue;
            }
            if ($token === '') {
                say('no token: is the lease table upgraded (mysqllock init --lease --upgrade)?');
                exit(2);
            }
        }
        journal("acquired " . hrtime(true) . " $name $token $deadline $pid");
        guard('begin', $name, $token, $pid);
        usleep(mt_rand(50, 400) * 1000); // the work done under the lock (the behaviour under test)
        guard('end', $name, $token, $pid);
        $releasing = hrtime(true);
        $result = 'ok';
        if ($broken !== 'exclusion') {
            try {
                $result = $lease->release($name, $owner) ? 'ok' : 'lost';
            } catch (\Throwable $e) {
                $result = 'error';
                $lease = null;
                say("release of token $token: " . get_class($e) . ': ' . $e->getMessage());
            }
        }
        journal("release $releasing $name $token " . ($broken === 'ignore-loss' ? 'ok' : $result) . " $pid");
    }
    exit(0);
}

while (!file_exists($stop)) {
    $deadline = ttl_deadline($ttl);
    if ($broken === 'exclusion') {
        $lock = null;
        $token = made_up_token();
    } else {
        try {
            $lock = SharedLock::lock($name, $timeout, $ttl, $options);
        } catch (SharedLockTimeoutException $e) {
            continue;
        } catch (\Throwable $e) {
            say('lock: ' . get_class($e) . ': ' . $e->getMessage());
            usleep(200000); // a pause before trying again, not a wait for anybody
            continue;
        }
        try {
            $token = $tokens ? (string) $lock->getToken() : '';
        } catch (\Throwable $e) {
            // Lost before we could learn the token: no section to journal.
            say('getToken: ' . get_class($e) . ': ' . $e->getMessage());
            try {
                $lock->release();
            } catch (\Throwable $ignored) {
            }
            continue;
        }
    }
    $acquired = hrtime(true);
    if (!$tokens) {
        $token = (string) $acquired; // the section's identity
    }
    journal("acquired $acquired $name $token $deadline $pid");
    if ($tokens) {
        guard('begin', $name, $token, $pid);
    }
    $hold = mt_rand(50, 400) * 1000;
    usleep(intdiv($hold, 2)); // the work done under the lock (the behaviour under test)
    if ($keepAlive && $lock !== null) {
        $before = hrtime(true);
        try {
            $remaining = $lock->getRemainingTTL();
            $until = $before + (int) (($remaining + 1.0) * 1e9) - 5000000;
            if ($remaining > 0) {
                journal("renewed " . hrtime(true) . " $name $token $until $pid");
            }
        } catch (SharedLockRemainingTTLException $e) {
            if ($broken !== 'ignore-loss') {
                journal("lost " . hrtime(true) . " $name $token $pid");
            }
        } catch (\Throwable $e) {
            say("remaining TTL of token $token: " . get_class($e) . ': ' . $e->getMessage());
        }
    }
    usleep($hold - intdiv($hold, 2));
    if ($tokens) {
        guard('end', $name, $token, $pid);
    }
    $releasing = hrtime(true);
    $result = 'ok';
    if ($lock !== null) {
        try {
            $lock->release();
        } catch (SharedLockReleaseException $e) {
            // getPrevious() carries the core's error: "lock ... is not held: <why>" when lost.
            $cause = $e->getPrevious() !== null ? $e->getPrevious()->getMessage() : $e->getMessage();
            $result = str_contains($cause, 'is not held') ? 'lost' : 'error';
            say("release of token $token: $result: $cause");
        } catch (\Throwable $e) {
            $result = 'error';
            say("release of token $token: " . get_class($e) . ': ' . $e->getMessage());
        }
    }
    journal("release $releasing $name $token " . ($broken === 'ignore-loss' ? 'ok' : $result) . " $pid");
    if ($result === 'error') {
        exit(3); // the lock may still be registered as held: the driver starts a new worker
    }
}
