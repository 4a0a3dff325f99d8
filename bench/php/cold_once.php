<?php
// One cold start for bench/cold.sh: connect, lock, release, exit, in a fresh `php`.
//   shared  SharedLock::configureConnection + SharedLock::lock(NAME)->release()
//   session new \MySqlLock\SessionLock(NAME) on the extension's connection (mysqllock.dsn):
//           acquire(0.0), release()
//   pdo     the floor: new PDO, SELECT GET_LOCK(?, 0) / SELECT RELEASE_LOCK(?) (real prepares)
//   protocol  SharedLock's protocol by hand: new PDO, then the claim INSERT and the DELETE
//           that releases, as text, word for word what the extension sends cold (the name as
//           a hex literal) to the table `mysqllock init` made: the floor of a cold
//           SharedLock script, which no implementation of the protocol can go under
// Self-contained (no shared bench code), so that the script costs about what `php -r ''`
// costs besides its work. Args: shared|session|pdo|protocol NAME; the server: MYSQLLOCK_BENCH_DSN,
// whose query (ssl-mode=..., from bench/lib.sh) only SharedLock takes; the PDO floor ignores it.
declare(strict_types=1);

[, $impl, $name] = $argv + [null, '', ''];
$u = parse_url((string) getenv('MYSQLLOCK_BENCH_DSN'));
if (!is_array($u) || !isset($u['host'], $u['user'], $u['path']) || $name === '') {
    fwrite(STDERR, "usage: MYSQLLOCK_BENCH_DSN=mysql://u:p@h:port/db php cold_once.php shared|session|pdo|protocol NAME\n");
    exit(2);
}
$db = ltrim($u['path'], '/');
$user = rawurldecode($u['user']);
$pass = rawurldecode($u['pass'] ?? '');
$port = (int) ($u['port'] ?? 3306);
/** PDO's connection, as a PHP script without the extension makes it. */
$connect = static fn (): PDO => new PDO(
    "mysql:host={$u['host']};port=$port;dbname=$db;charset=utf8mb4",
    $user,
    $pass,
    [PDO::ATTR_ERRMODE => PDO::ERRMODE_EXCEPTION, PDO::ATTR_EMULATE_PREPARES => false]
    // bench/tls.sh: encrypted, as ssl-mode=REQUIRED (see common.php's pdoTls()).
    + (getenv('MYSQLLOCK_BENCH_PDO_SSL_CA') ? [
        PDO::MYSQL_ATTR_SSL_CA => getenv('MYSQLLOCK_BENCH_PDO_SSL_CA'),
        PDO::MYSQL_ATTR_SSL_VERIFY_SERVER_CERT => false,
    ] : [])
);
switch ($impl) {
    case 'shared':
        // The query's keys as the $additionalDsn (`key=value;...`): bench/lib.sh puts only TLS keys there.
        $tls = isset($u['query']) ? str_replace('&', ';', rawurldecode($u['query'])) : null;
        \ItsMieger\MySqlSharedLocks\SharedLock::configureConnection($u['host'], $db, $user, $pass, 'utf8mb4', $port, $tls);
        \ItsMieger\MySqlSharedLocks\SharedLock::lock($name, 5, 60)->release();
        break;
    case 'session':
        $lock = new \MySqlLock\SessionLock($name);
        if ($lock->acquire(0.0) !== true) {
            fwrite(STDERR, "cold_once.php: SessionLock($name)->acquire(0.0) did not return true\n");
            exit(1);
        }
        $lock->release();
        break;
    case 'pdo':
        $pdo = $connect();
        $get = $pdo->prepare('SELECT GET_LOCK(?, 0)');
        $get->execute([$name]);
        $rel = $pdo->prepare('SELECT RELEASE_LOCK(?)');
        if ((int) $get->fetchColumn() !== 1 || !$rel->execute([$name]) || (int) $rel->fetchColumn() !== 1) {
            fwrite(STDERR, "cold_once.php: GET_LOCK/RELEASE_LOCK($name) through PDO did not return 1\n");
            exit(1);
        }
        break;
    case 'protocol':
        $pdo = $connect();
        $n = "_utf8mb4 X'" . bin2hex($name) . "'";
        $claimed = $pdo->exec('INSERT INTO `shared_locks` (name, connection_id, created, ttl, lock_acquired) '
            . "VALUES ($n, CONNECTION_ID(), UNIX_TIMESTAMP(), 60, IF(GET_LOCK($n, 0) = 1, 1, NULL))");
        $released = $pdo->exec("DELETE FROM `shared_locks` WHERE name = $n AND connection_id = CONNECTION_ID() "
            . 'AND RELEASE_LOCK(CAST(name AS CHAR)) = 1');
        if ($claimed !== 1 || $released !== 1) {
            fwrite(STDERR, "cold_once.php: the protocol by hand ($name): claim $claimed row(s), release $released\n");
            exit(1);
        }
        break;
    default:
        fwrite(STDERR, "cold_once.php: unknown implementation $impl (shared, session, pdo, protocol)\n");
        exit(2);
}
