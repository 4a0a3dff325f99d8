# The preamble the PHP suites (30-php, 35-symfony, 36-laravel) share, sourced after
# `set -euo pipefail`: the environment every suite reads, the matrix row it runs in, the
# extension built for that row's PHP, PHPUnit, and helpers that fail loudly (a missing tool
# is a failure with a message, never a skip).
#
# The row (tests/matrix, set by scripts/test.sh; Debian 12's PHP when run by hand):
# MYSQLLOCK_PHP (X.Y), MYSQLLOCK_PHP_HOME (host; sid or trixie: the chroot of
# scripts/sid.sh or scripts/trixie.sh, where the suite then re-runs itself with the
# extension built there for that PHP; or zts: the thread-safe PHP scripts/php-src.sh
# builds from Debian's source, on the host, with the extension built for it in a cargo
# target dir of its own), MYSQLLOCK_SYMFONY,
# MYSQLLOCK_LARAVEL, MYSQLLOCK_PHPUNIT (the versions the row expects; each suite checks the
# ones it uses with need_version).
: "${MYSQLLOCK_ROOT:?MYSQLLOCK_ROOT is not set (the repository root)}"
: "${MYSQLLOCK_BIN:?MYSQLLOCK_BIN is not set (the target/release directory)}"
: "${MYSQLLOCK_TEST_DSN:?MYSQLLOCK_TEST_DSN is not set (start a server with scripts/mariadb.sh)}"
cd "$MYSQLLOCK_ROOT"
export MYSQLLOCK_BIN

suite=$(basename "$0" .sh)
php_version=${MYSQLLOCK_PHP:-8.2}
php_home=${MYSQLLOCK_PHP_HOME:-host}

fail() {
  echo "$suite: $*" >&2
  exit 1
}

php=/usr/bin/php$php_version
zts=0
case $php_home in
  host) ;;
  sid | trixie)
    if [ "${MYSQLLOCK_IN_CHROOT:-}" != "$php_home" ]; then
      MYSQLLOCK_PHP_EXT=$(bash "scripts/$php_home.sh" ext "$php_version") || fail "no extension for PHP $php_version in $php_home"
      export MYSQLLOCK_PHP_EXT
      exec bash "scripts/$php_home.sh" run bash "$0" "$@"
    fi
    ;;
  zts)
    [ "$php_version" = 8.2 ] || fail "a ZTS PHP is built for 8.2 only (scripts/php-src.sh), not $php_version"
    if [ -z "${MYSQLLOCK_PHP_EXT:-}" ]; then
      MYSQLLOCK_PHP_EXT=$(bash scripts/php-src.sh ext zts) || fail "no extension for the ZTS PHP"
      export MYSQLLOCK_PHP_EXT
    fi
    zts_prefix=$(bash scripts/php-src.sh prefix zts)
    php=$zts_prefix/bin/php
    # WebServerTest's php-fpm: this PHP's, not Debian's.
    export MYSQLLOCK_PHP_FPM=$zts_prefix/sbin/php-fpm
    zts=1
    ;;
  *) fail "MYSQLLOCK_PHP_HOME=$php_home: host, sid, trixie or zts" ;;
esac

# The extension for this PHP (tests/php/support/ChildProcess.php reads the same variable).
so=${MYSQLLOCK_PHP_EXT:-$MYSQLLOCK_BIN/libmysqllock_php.so}
phpunit=/usr/bin/phpunit

# need_version WHAT WANT HAVE: the row's WANT is HAVE or a prefix of it (13 matches 13.31.0).
need_version() {
  [ -z "$2" ] || [ "$3" = "$2" ] || [[ $3 == "$2".* ]] \
    || fail "the matrix row wants $1 $2, but $1 here is ${3:-missing}"
}

# The Debian package's upstream version (7.4.22+dfsg-1 -> 7.4.22), or nothing.
package_version() {
  dpkg-query -W -f='${Version}' "$1" 2>/dev/null | sed -e 's/^[0-9]*://' -e 's/[+~-].*//'
}

# PHP modules, from `php -m` read once (`php -m | grep -q` can die of SIGPIPE under pipefail).
need_php_modules() {
  local modules ext
  modules=$("$php" -m)
  for ext in "$@"; do
    grep -qx "$ext" <<<"$modules" || fail "the PHP extension $ext is missing from PHP $php_version"
  done
}

# `composer validate --strict` of DIR's composer.json: it reads only the file (no network),
# and a warning is a failure too.
validate_composer() {
  local home rc=0
  command -v composer >/dev/null 2>&1 || fail "composer is missing (apt-get install composer)"
  home=$(mktemp -d "/tmp/mysqllock-$suite-composer.XXXXXX")
  (cd "$1" && COMPOSER_HOME=$home composer validate --strict --no-check-publish --no-check-lock --no-interaction) || rc=$?
  rm -rf "$home"
  [ $rc = 0 ] || fail "$1/composer.json does not validate"
}

# need_attributes DIR: every PHPUnit annotation of DIR's tests has its attribute and the
# reverse (9.6 reads only annotations; 10 and later only attributes, so a test with one and
# not the other silently does not run, or runs without its data, under the other). The
# checker proves itself first.
need_attributes() {
  "$php" tests/suites/lib/phpunit-attributes.php --self-test || fail "the annotation/attribute checker failed its self-test"
  "$php" tests/suites/lib/phpunit-attributes.php "$1" || fail "$1: annotations and attributes disagree"
}

# phpunit_options DIR: sets phpunit_opts to DIR's configuration for the PHPUnit here
# (PHPUnit 10 changed the format: phpunit10.xml beside the 9.6 one) and what that file
# cannot say to every PHPUnit from 10 on: each one's schema refuses the attributes of a
# later one, and a configuration that does not validate is a warning (CI runs 11.5 and
# 13.4). 12 and later also fail on PHPUnit's own notices and warnings; the record of the
# run is not kept (13 calls it the test run history, 10 to 12 the result cache).
phpunit_options() {
  if [ "${phpunit_major:?}" -lt 10 ]; then
    phpunit_opts=(-c "$1/phpunit.xml")
    return
  fi
  phpunit_opts=(-c "$1/phpunit10.xml")
  [ "$phpunit_major" -lt 12 ] || phpunit_opts+=(--fail-on-phpunit-notice --fail-on-phpunit-warning)
  if [ "$phpunit_major" -ge 13 ]; then
    phpunit_opts+=(--do-not-record-test-run-history)
  else
    phpunit_opts+=(--do-not-cache-result)
  fi
}

[ -x "$php" ] || fail "$php is missing (PHP $php_version; scripts/install-deps.sh, sid.sh or trixie.sh installs it)"
[ -f "$so" ] || fail "the extension $so does not exist (cargo build --release -p mysqllock-php)"
[ -x "$phpunit" ] || fail "$phpunit is missing (apt-get install phpunit)"
"$php" -d "extension=$so" -r 'exit(extension_loaded("mysqllock") ? 0 : 1);' || fail "PHP $php_version cannot load $so as the mysqllock extension"
have_php=$("$php" -r 'echo PHP_VERSION;')
need_version PHP "$php_version" "$have_php"
[ "$("$php" -r 'echo PHP_ZTS;')" = "$zts" ] || fail "$php: PHP_ZTS is not $zts, as MYSQLLOCK_PHP_HOME=$php_home says"
have_phpunit=$("$php" "$phpunit" --version | sed -n 's/^PHPUnit \([0-9][0-9.]*\).*/\1/p')
need_version PHPUnit "${MYSQLLOCK_PHPUNIT:-}" "$have_phpunit"
phpunit_major=${have_phpunit%%.*}
echo "$suite: PHP $have_php ($php_home), PHPUnit $have_phpunit, server ${MYSQLLOCK_TEST_SERVER:-?} ${MYSQLLOCK_TEST_SERVER_VERSION:-}"
