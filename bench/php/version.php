<?php
// The PHP version and the extension's, for the header of the table.
declare(strict_types=1);

if (!extension_loaded('mysqllock')) {
    fwrite(STDERR, "the mysqllock extension is not loaded\n");
    exit(1);
}
echo 'PHP ', PHP_VERSION, (PHP_ZTS ? ' ZTS' : ' NTS'), ', mysqllock extension ', phpversion('mysqllock'), "\n";
