<?php
// A model of the observable lock protocol of the PHP package its-mieger/mysql-shared-locks
// 1.x (SharedLock::lock, unlock and assertTTL), for interoperability tests only: processes
// that behave on the wire as that package's do, locking the same names on the same table
// as mysqllock's callers (tests/chaos/worker-original.php in the chaos suites, and
// tests/php/fixtures/original.php in OriginalInteropTest). It is written for this project
// from the facts of that protocol — which statements it sends, in which order, and what
// it concludes from their answers — and is not that package's code (the package is
// proprietary). It runs in a PHP without the mysqllock extension, on a PDO of its own.
//
// The protocol, as modelled (t = the lock table, every statement prepared anew on a PDO
// with ERRMODE_EXCEPTION and real prepares, as the package does):
//
// lock(name, timeout, ttl) loops until acquired or timed out:
//   register   INSERT INTO t (name, created, ttl, connection_id, lock_acquired)
//              VALUES (:name, unix_timestamp(), :ttl, connection_id(), false)
//              SQLSTATE 23000 (a row exists) = not registered.
//   registered: SELECT GET_LOCK(:name, 0), retried while it fails; between tries
//              SELECT IS_USED_LOCK(:name), whose answer the package compares with 1 (its
//              bug: it means "is there a holder", but reads "is the holder session 1"),
//              so it runs KILL :session with the bound value true (a PDOException there
//              is ignored) only when the holder is session 1, and otherwise pauses
//              200 ms; once more than 20 retries failed it gives up (below). Once the
//              GET_LOCK is granted: UPDATE t SET lock_acquired = true WHERE name = :name
//              AND connection_id = connection_id(), which must change 1 row. Giving up, or
//              any error in this phase, deletes its row (DELETE ... WHERE name = :name AND
//              connection_id = connection_id()) and fails the call (not a timeout); a
//              GET_LOCK already granted is not let go then.
//   not registered: the cleanup DELETE FROM t WHERE name = :name AND (created + ttl <
//              unix_timestamp() OR (lock_acquired AND IFNULL(IS_USED_LOCK(:name2), 0) !=
//              connection_id)); a deleted row means "try again at once"; otherwise, when
//              the timeout has passed, the call times out; otherwise it sleeps in
//              SELECT GET_LOCK(:name, W), W = the lesser of ceil(timeout left) and the
//              existing row's remaining TTL (SELECT created + ttl - unix_timestamp() FROM
//              t WHERE name = :name; no row, or 0, counts 0 — a negative one is passed on,
//              and GET_LOCK waits without end for a negative timeout), lets a granted
//              GET_LOCK go at once (SELECT RELEASE_LOCK(:name)) and tries again.
// unlock(name): DELETE FROM t WHERE name = :name AND connection_id = connection_id()
//   (1 row = it was ours), then SELECT RELEASE_LOCK(:name) as long as it answers 1; no
//   row deleted = a release failure.
// assertTTL(name, min): SELECT 1 FROM t WHERE name = :name AND connection_id =
//   connection_id() AND created + ttl > unix_timestamp() + :min, else a failure.
// A statement failing with error 1032, or a message "Incorrect key file for table", gets
// REPAIR TABLE t (its status must be OK) and runs once more.
//
// Every step is recorded in trace() ("register duplicate", "clean 1", "get_lock 0",
// "holder 57", "pause", "kill 1", "mark 1", "wait 2 -> 1", ...), so a test can tell what
// the process did, not only what it ended with.
declare(strict_types=1);

namespace MySqlLockTest\Original;

/** lock() did not acquire within its timeout. */
final class Timeout extends \RuntimeException
{
}

/** lock() failed otherwise (getPrevious(): the cause, if any). */
final class AcquireFailed extends \RuntimeException
{
}

/** unlock() found nothing of ours to delete (no previous), or failed (previous). */
final class ReleaseFailed extends \RuntimeException
{
}

/** assertTTL(): not held, or not for that long (previous: an error, if any). */
final class TtlShort extends \RuntimeException
{
}

final class SharedLockModel
{
    /** @var string[] */
    private array $trace = [];

    public function __construct(private \PDO $pdo, private string $table = 'shared_locks')
    {
    }

    /**
     * A PDO as the package opens one: mysql:host;dbname;charset=utf8mb4;port, exceptions
     * on, then real prepares. $url is mysql://user:password@host:port/db.
     */
    public static function connect(string $url): \PDO
    {
        $u = parse_url($url);
        if (!is_array($u) || ($u['scheme'] ?? '') !== 'mysql' || !isset($u['host'], $u['user'], $u['path'])) {
            throw new \InvalidArgumentException('not a mysql://user:password@host:port/db URL');
        }
        $dsn = 'mysql:host=' . $u['host'] . ';dbname=' . ltrim($u['path'], '/') . ';charset=utf8mb4'
            . (isset($u['port']) ? ';port=' . $u['port'] : '');
        $pdo = new \PDO($dsn, rawurldecode($u['user']), rawurldecode($u['pass'] ?? ''), [\PDO::ATTR_ERRMODE => \PDO::ERRMODE_EXCEPTION]);
        $pdo->setAttribute(\PDO::ATTR_EMULATE_PREPARES, false);
        return $pdo;
    }

    /** The steps taken so far; forgets them. */
    public function trace(): array
    {
        [$trace, $this->trace] = [$this->trace, []];
        return $trace;
    }

    public function connectionId(): int
    {
        return (int) $this->pdo->query('SELECT CONNECTION_ID()')->fetchColumn();
    }

    /** @throws Timeout|AcquireFailed */
    public function lock(string $name, float $timeout, int $ttl): void
    {
        try {
            $began = microtime(true);
            while (!$this->tryOnce($name, $ttl)) {
                if ($this->clean($name)) {
                    continue;
                }
                if (microtime(true) >= $began + $timeout) {
                    throw new Timeout("lock $name: timed out after $timeout s");
                }
                $left = ceil($timeout - (microtime(true) - $began));
                $this->sleepInGetLock($name, min($left, $this->existingTtl($name)));
            }
        } catch (Timeout $e) {
            throw $e;
        } catch (\Exception $e) {
            throw new AcquireFailed("lock $name failed", 0, $e);
        }
    }

    /** @throws ReleaseFailed */
    public function unlock(string $name): void
    {
        try {
            $ours = $this->rowsChanged("DELETE FROM `{$this->table}` WHERE `name` = :name AND `connection_id` = connection_id()", [':name' => $name]) === 1;
            $this->step('unregister ' . (int) $ours);
            do {
                $let = $this->value('SELECT RELEASE_LOCK(:name)', [':name' => $name]) == 1;
                $this->step('release_lock ' . (int) $let);
            } while ($let);
        } catch (\Exception $e) {
            throw new ReleaseFailed("unlock $name failed", 0, $e);
        }
        if (!$ours) {
            throw new ReleaseFailed("unlock $name: not held");
        }
    }

    /** @throws TtlShort */
    public function assertTTL(string $name, int $min = 1): void
    {
        try {
            $held = $this->value(
                "SELECT 1 FROM `{$this->table}` WHERE `name` = :name AND `connection_id` = connection_id() AND `created` + `ttl` > unix_timestamp() + :assertTTL",
                [':name' => $name, ':assertTTL' => $min],
            ) == 1;
        } catch (\Exception $e) {
            throw new TtlShort("assertTTL $name failed", 0, $e);
        }
        if (!$held) {
            throw new TtlShort("assertTTL $name: not held for $min s more");
        }
    }

    /** Registers and, if registered, takes the GET_LOCK; false when a row was there. */
    private function tryOnce(string $name, int $ttl): bool
    {
        try {
            $this->rowsChanged(
                "INSERT INTO `{$this->table}` (`name`, `created`, `ttl`, `connection_id`, `lock_acquired`) VALUES (:name, unix_timestamp(), :ttl, connection_id(), false)",
                [':name' => $name, ':ttl' => $ttl],
            );
        } catch (\PDOException $e) {
            if ($e->getCode() == 23000) {
                $this->step('register duplicate');
                return false;
            }
            throw $e;
        }
        $this->step('register ok');
        try {
            $retries = 0;
            while (!$this->getLockNow($name)) {
                // The package's bug, kept: "holder == 1" instead of "there is a holder".
                if ($this->value('SELECT IS_USED_LOCK(:name)', [':name' => $name]) == 1) {
                    try {
                        $this->rowsChanged('KILL :session', [':session' => true]);
                        $this->step('kill 1');
                    } catch (\PDOException $ignored) {
                        $this->step('kill 1 failed');
                    }
                } else {
                    $this->step('pause');
                    usleep(200000); // the package's fixed 200 ms between tries (modelled)
                }
                if (++$retries > 20) {
                    throw new AcquireFailed("lock $name: the GET_LOCK holder does not go away");
                }
            }
            $marked = $this->rowsChanged("UPDATE `{$this->table}` SET `lock_acquired` = true WHERE `name` = :name AND `connection_id` = connection_id()", [':name' => $name]);
            $this->step("mark $marked");
            if ($marked !== 1) {
                throw new AcquireFailed("lock $name: could not mark the row acquired");
            }
        } catch (\Exception $e) {
            try {
                $gone = $this->rowsChanged("DELETE FROM `{$this->table}` WHERE `name` = :name AND `connection_id` = connection_id()", [':name' => $name]);
                $this->step("unregister $gone");
            } catch (\Exception $ignored) {
                $this->step('unregister failed');
            }
            throw $e;
        }
        return true;
    }

    private function getLockNow(string $name): bool
    {
        $got = $this->value('SELECT GET_LOCK(:name, :timeout)', [':name' => $name, ':timeout' => 0]) == 1;
        $this->step('get_lock ' . (int) $got);
        return $got;
    }

    /** The cleanup: whether it deleted a row (expired, or marked acquired by a session that no longer holds the GET_LOCK). */
    private function clean(string $name): bool
    {
        $deleted = $this->rowsChanged(
            "DELETE FROM `{$this->table}` WHERE name = :name AND (`created` + `ttl` < unix_timestamp() OR (`lock_acquired` AND IFNULL(IS_USED_LOCK(:name2),0) != `connection_id`))",
            [':name' => $name, ':name2' => $name],
        );
        $this->step("clean $deleted");
        return $deleted === 1;
    }

    /** The existing row's remaining seconds (no row: 0; may be negative). */
    private function existingTtl(string $name): mixed
    {
        $ttl = $this->value("SELECT `created` + `ttl` - unix_timestamp() FROM `{$this->table}` WHERE `name` = :name", [':name' => $name]) ?: 0;
        $this->step("ttl $ttl");
        return $ttl;
    }

    private function sleepInGetLock(string $name, mixed $timeout): void
    {
        $got = $this->value('SELECT GET_LOCK(:name, :timeout)', [':name' => $name, ':timeout' => $timeout]) == 1;
        $this->step("wait $timeout -> " . (int) $got);
        if ($got) {
            $this->value('SELECT RELEASE_LOCK(:name)', [':name' => $name]);
        }
    }

    private function value(string $sql, array $params): mixed
    {
        return $this->execute($sql, $params)->fetchColumn();
    }

    private function rowsChanged(string $sql, array $params): int
    {
        return $this->execute($sql, $params)->rowCount();
    }

    /** Prepares and runs one statement; a corrupted table is repaired once and the statement run again. */
    private function execute(string $sql, array $params): \PDOStatement
    {
        $statement = $this->pdo->prepare($sql);
        for ($repaired = false; ; $repaired = true) {
            try {
                $statement->execute($params);
                return $statement;
            } catch (\PDOException $e) {
                $corrupt = ($e->errorInfo[1] ?? null) == 1032 || str_contains((string) ($e->errorInfo[2] ?? ''), 'Incorrect key file for table');
                if ($repaired || !$corrupt) {
                    throw $e;
                }
                $this->repair();
            }
        }
    }

    private function repair(): void
    {
        $status = null;
        foreach ($this->pdo->query("REPAIR TABLE `{$this->table}`")->fetchAll(\PDO::FETCH_ASSOC) as $row) {
            if ($row['Msg_type'] === 'status') {
                $status = $row['Msg_text'];
            }
        }
        $this->step("repair $status");
        if ($status === null || strtoupper($status) !== 'OK') {
            throw new \RuntimeException("REPAIR TABLE {$this->table}: status " . var_export($status, true));
        }
    }

    private function step(string $what): void
    {
        $this->trace[] = $what;
        if (count($this->trace) > 1000) {
            array_shift($this->trace); // a long-lived caller that never reads it
        }
    }
}
