<?php
/*
 * The C API through PHP's FFI, declared by FFI::cdef from include/mysqllock.h itself:
 * a real lock, contention with a second client, and a release; then fencing tokens on
 * an upgraded table of the script's own (dropped at the end), with the options struct,
 * the flag enum, uint64_t out-parameters and the holder struct.
 *
 * Environment: MYSQLLOCK_TEST_DSN, MYSQLLOCK_LIB (libmysqllock.so), MYSQLLOCK_HEADER.
 * Run with: php -d ffi.enable=1 tests/c/ffi_php.php
 * Prints "ok - ..." / "not ok - ..." lines; exits 1 if any check failed.
 */
declare(strict_types=1);

$failures = 0;
function check(bool $passed, string $name): void
{
    global $failures;
    echo ($passed ? 'ok' : 'not ok'), ' - php-ffi: ', $name, "\n";
    $failures += $passed ? 0 : 1;
}

// FFI::cdef ignores preprocessor lines; the header is parsed as cbindgen wrote it.
$ffi = FFI::cdef(file_get_contents(getenv('MYSQLLOCK_HEADER')), getenv('MYSQLLOCK_LIB'));

function lastError(FFI $ffi): string
{
    $size = $ffi->mysqllock_last_error(null, 0, null) + 1;
    $buf = $ffi->new("char[$size]");
    $ffi->mysqllock_last_error($buf, $size, null);
    return FFI::string($buf);
}

function openClient(FFI $ffi, string $query = ''): FFI\CData
{
    $client = $ffi->new('mysqllock_client*');
    $url = getenv('MYSQLLOCK_TEST_DSN') . $query;
    if ($ffi->mysqllock_client_open_url($url, FFI::addr($client)) !== $ffi->MYSQLLOCK_OK) {
        fwrite(STDERR, 'cannot open a client: ' . lastError($ffi) . "\n");
        exit(2);
    }
    return $client;
}

check($ffi->MYSQLLOCK_OK === 0 && $ffi->MYSQLLOCK_INTERNAL === 9, 'enum constants come from the header');
$a = openClient($ffi);
$b = openClient($ffi);
$name = 'php-' . getmypid() . '-ffi';
$acquired = $ffi->new('bool');
$remaining = $ffi->new('double');

check($ffi->mysqllock_acquire($a, $name, 0.0, 30.0) === $ffi->MYSQLLOCK_OK, 'acquire');
check($ffi->mysqllock_remaining_ttl($a, $name, FFI::addr($remaining)) === $ffi->MYSQLLOCK_OK
    && $remaining->cdata > 25 && $remaining->cdata <= 31, sprintf('remaining TTL (%.3f)', $remaining->cdata));
$acquired->cdata = true;
check($ffi->mysqllock_try_acquire($b, $name, 30.0, FFI::addr($acquired)) === $ffi->MYSQLLOCK_OK
    && $acquired->cdata === false, "a second client's try_acquire reports not acquired");
check($ffi->mysqllock_acquire($b, $name, 0.2, 30.0) === $ffi->MYSQLLOCK_TIMEOUT
    && str_contains(lastError($ffi), $name), "a second client's acquire times out, naming the lock");
check($ffi->mysqllock_release($a, $name) === $ffi->MYSQLLOCK_OK, 'release');
check($ffi->mysqllock_release($a, $name) === $ffi->MYSQLLOCK_NOT_HELD, 'a second release is NOT_HELD');
check($ffi->mysqllock_try_acquire($b, $name, 30.0, FFI::addr($acquired)) === $ffi->MYSQLLOCK_OK
    && $acquired->cdata === true, 'the second client gets the released lock');
check($ffi->mysqllock_release($b, $name) === $ffi->MYSQLLOCK_OK, 'the second client releases it');
check($ffi->mysqllock_status_name($ffi->MYSQLLOCK_TIMEOUT) === 'MYSQLLOCK_TIMEOUT', 'status_name (const char * comes back as a string)');

$ffi->mysqllock_client_free($a);
$ffi->mysqllock_client_free($b);

// Fencing tokens. The table is this script's own, upgraded through the C API.
$table = 'php_' . getmypid() . '_fenced';
$f = openClient($ffi, "?table=$table");
$g = openClient($ffi, "?table=$table");
$changed = $ffi->new('bool');
check($ffi->mysqllock_upgrade_table($f, FFI::addr($changed)) === $ffi->MYSQLLOCK_OK && $changed->cdata === true,
    'upgrade_table creates an upgraded table');
$options = $ffi->new('mysqllock_options'); // zeroed: a plain lease ...
$options->flags = $ffi->MYSQLLOCK_KEEP_ALIVE; // ... kept alive
$first = $ffi->new('uint64_t');
check($ffi->mysqllock_acquire_ex($f, $name, 0.0, 30.0, FFI::addr($options), FFI::addr($first)) === $ffi->MYSQLLOCK_OK
    && $first->cdata > 0, sprintf('acquire_ex with MYSQLLOCK_KEEP_ALIVE hands out a token (%d)', $first->cdata));
$held = $ffi->new('uint64_t');
check($ffi->mysqllock_token($f, $name, FFI::addr($held)) === $ffi->MYSQLLOCK_OK && $held->cdata === $first->cdata,
    'mysqllock_token returns the same token');
check($ffi->mysqllock_release($f, $name) === $ffi->MYSQLLOCK_OK, 'release the kept-alive lock');
$second = $ffi->new('uint64_t');
check($ffi->mysqllock_acquire_ex($g, $name, 0.0, 30.0, null, FFI::addr($second)) === $ffi->MYSQLLOCK_OK
    && $second->cdata > $first->cdata, sprintf('the next acquisition gets a greater token (%d)', $second->cdata));
$info = $ffi->new('mysqllock_holder_info');
$found = $ffi->new('bool');
check($ffi->mysqllock_holder($f, $name, FFI::addr($info), FFI::addr($found)) === $ffi->MYSQLLOCK_OK
    && $found->cdata && $info->has_token && $info->token === $second->cdata && $info->pid === getmypid()
    && FFI::string($info->hostname) === gethostname(),
    'holder reads the struct: token, pid and host name of the holder');
$ffi->mysqllock_release($g, $name);
$ffi->mysqllock_client_free($f);
$ffi->mysqllock_client_free($g);

$url = parse_url(getenv('MYSQLLOCK_TEST_DSN'));
$pdo = new PDO(sprintf('mysql:host=%s;port=%d;dbname=%s', $url['host'], $url['port'], ltrim($url['path'], '/')),
    urldecode($url['user']), urldecode($url['pass']));
check($pdo->exec("DROP TABLE $table") !== false, 'drop the upgraded table');
exit($failures === 0 ? 0 : 1);
