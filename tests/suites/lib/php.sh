# The preamble the PHP suites (30-php, 35-symfony, 36-laravel) share, sourced after
# `set -euo pipefail`: the environment every suite reads, the built extension, PHPUnit,
# and helpers that fail loudly (a missing tool is a failure with a message, never a skip).
: "${MYSQLLOCK_ROOT:?MYSQLLOCK_ROOT is not set (the repository root)}"
: "${MYSQLLOCK_BIN:?MYSQLLOCK_BIN is not set (the target/release directory)}"
: "${MYSQLLOCK_TEST_DSN:?MYSQLLOCK_TEST_DSN is not set (start a server with scripts/mariadb.sh)}"
cd "$MYSQLLOCK_ROOT"
export MYSQLLOCK_BIN

suite=$(basename "$0" .sh)
so=$MYSQLLOCK_BIN/libmysqllock_php.so
phpunit=/usr/bin/phpunit

fail() {
  echo "$suite: $*" >&2
  exit 1
}

# PHP modules, from `php -m` read once (`php -m | grep -q` can die of SIGPIPE under pipefail).
need_php_modules() {
  local modules ext
  modules=$(php -m)
  for ext in "$@"; do
    grep -qx "$ext" <<<"$modules" || fail "the PHP extension $ext is missing"
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

# phpunit_config DIR: the configuration for the installed PHPUnit. PHPUnit 9.6 (Debian 12)
# reads DIR/phpunit.xml; 10 and later refuse its convert*ToExceptions settings and have
# their own names for the same strictness, in DIR/phpunit10.xml.
phpunit_config() {
  if [ "$phpunit_major" -ge 10 ]; then
    echo "$1/phpunit10.xml"
  else
    echo "$1/phpunit.xml"
  fi
}

# need_attributes DIR: every PHPUnit annotation of DIR's tests has its attribute and the
# reverse (9.6 reads only annotations, 10+ only attributes); the checker proves itself first.
need_attributes() {
  php tests/suites/lib/phpunit-attributes.php --self-test || fail "the annotation/attribute checker failed its self-test"
  php tests/suites/lib/phpunit-attributes.php "$1" || fail "$1: annotations and attributes disagree"
}

[ -f "$so" ] || fail "the extension $so does not exist (cargo build --release -p mysqllock-php)"
[ -x "$phpunit" ] || fail "$phpunit is missing (apt-get install phpunit)"
php -d "extension=$so" -r 'exit(extension_loaded("mysqllock") ? 0 : 1);' || fail "PHP cannot load $so as the mysqllock extension"
phpunit_version=$(php "$phpunit" --version) || fail "$phpunit --version failed"
phpunit_major=$(sed -nE 's/^PHPUnit ([0-9]+)\.[0-9].*/\1/p' <<<"$phpunit_version")
[ -n "$phpunit_major" ] && [ "$phpunit_major" -ge 9 ] || fail "unsupported PHPUnit: $phpunit_version"
