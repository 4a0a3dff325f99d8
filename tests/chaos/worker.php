<?php
// A PHP caller of the chaos test: SharedLock::lock() in a loop (the mysqllock
// extension), writing to the guard (the protected resource) under getToken().
//
//   php -d extension=libmysqllock_php.so tests/chaos/worker.php
//
// Started by `chaos drive`, which sets CHAOS_* and MYSQLLOCK_DSN. Each round: lock
// (TTL CHAOS_TTL, keepAlive if CHAOS_KEEP_ALIVE=1), begin, hold 50-400 ms, end, release,
// then record what release() reported: ok, lost (SharedLockReleaseException), error.
// Errors (server restarting, session killed) are logged and the loop goes on.
declare(strict_types=1);

use ItsMieger\MySqlSharedLocks\Exception\SharedLockReleaseException;
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

/**
 * Runs `chaos guard ARGS...`: 0 = accepted or recorded, 1 = rejected. A guard that
 * cannot run ends this worker (the driver starts a new one).
 */
function guard(string ...$args): int
{
    $process = proc_open([setting('CHAOS_GUARD'), 'guard', ...$args], [], $pipes);
    $code = $process === false ? -1 : proc_close($process);
    if ($code !== 0 && $code !== 1) {
        say('the guard failed (' . implode(' ', $args) . "): exit $code");
        exit(2);
    }
    return $code;
}

if (!extension_loaded('mysqllock')) {
    fwrite(STDERR, "worker.php: the mysqllock extension is not loaded\n");
    exit(2);
}
ini_set('mysqllock.dsn', setting('MYSQLLOCK_DSN'));
mt_srand((int) setting('CHAOS_SEED'));
$name = setting('CHAOS_NAME');
$ttl = (float) setting('CHAOS_TTL');
$timeout = (float) setting('CHAOS_TIMEOUT');
$stop = setting('CHAOS_STOP');
$options = setting('CHAOS_KEEP_ALIVE') === '1' ? ['keepAlive' => true] : [];
$pid = (string) getmypid();

while (!file_exists($stop)) {
    try {
        $lock = SharedLock::lock($name, $timeout, $ttl, $options);
    } catch (SharedLockTimeoutException $e) {
        continue;
    } catch (\Throwable $e) {
        say('lock: ' . get_class($e) . ': ' . $e->getMessage());
        usleep(200000);
        continue;
    }
    try {
        $token = (string) $lock->getToken();
    } catch (\Throwable $e) {
        say('getToken: ' . get_class($e) . ': ' . $e->getMessage());
        try {
            $lock->release();
        } catch (\Throwable $ignored) {
        }
        usleep(200000);
        continue;
    }
    if (guard('begin', $name, $token, $pid) === 0) {
        usleep(mt_rand(50, 400) * 1000);
        guard('end', $name, $token, $pid);
    }
    try {
        $lock->release();
        $result = 'ok';
    } catch (SharedLockReleaseException $e) {
        // getPrevious() carries the core's error: "lock ... is not held: <why>" when lost.
        $cause = $e->getPrevious() !== null ? $e->getPrevious()->getMessage() : $e->getMessage();
        $result = str_contains($cause, 'is not held') ? 'lost' : 'error';
        say("release of token $token: $result: $cause");
    } catch (\Throwable $e) {
        $result = 'error';
        say("release of token $token: " . get_class($e) . ': ' . $e->getMessage());
    }
    guard('release', $name, $token, $pid, $result);
    if ($result === 'error') {
        exit(3); // the lock may still be registered as held: the driver starts a new worker
    }
}
