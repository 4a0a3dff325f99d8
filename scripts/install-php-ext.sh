#!/usr/bin/env bash
# Builds the PHP extension and installs it as mysqllock.so into PHP's extension
# directory (the alternative to PIE, see docs/php.md, "Installing").
#
#   scripts/install-php-ext.sh [--enable] [--php-config PATH]
#
#   --enable            also write <conf dir>/mods-available/mysqllock.ini
#                       (extension=mysqllock.so plus the documented settings, commented)
#                       and enable it for every SAPI with phpenmod (Debian/Ubuntu)
#   --php-config PATH   build for another PHP (default: php-config from PATH)
#
# Needs a Rust toolchain (cargo), the PHP headers (php8.2-dev) and libclang-dev;
# scripts/install-deps.sh installs the Debian packages. Writing into the extension
# directory needs root: the script uses sudo when it is not run as root.
set -euo pipefail
cd "$(dirname "$0")/.."

usage() { sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; }

enable=no
php_config=php-config
while [ $# -gt 0 ]; do
  case "$1" in
    --enable) enable=yes ;;
    --php-config) php_config=${2:?--php-config needs a path}; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "install-php-ext: unknown option $1" >&2; usage >&2; exit 2 ;;
  esac
  shift
done

php_config=$(command -v "$php_config") || { echo "install-php-ext: $php_config not found (install php8.2-dev)" >&2; exit 1; }
command -v cargo >/dev/null || { echo "install-php-ext: cargo not found: install a Rust toolchain (https://rustup.rs)" >&2; exit 1; }
php_bin=$("$php_config" --php-binary)
ext_dir=$("$php_config" --extension-dir)
php_version=$("$php_config" --version | cut -d. -f1,2)

sudo=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "install-php-ext: run as root (writes $ext_dir)" >&2; exit 1; }
  sudo=sudo
fi

# ext-php-rs generates its bindings from the PHP that PHP_CONFIG/PHP describe.
CARGO_TARGET_DIR=$PWD/target PHP_CONFIG=$php_config PHP=$php_bin \
  cargo build --release --locked -p mysqllock-php
$sudo install -D -m 0644 target/release/libmysqllock_php.so "$ext_dir/mysqllock.so"
echo "installed $ext_dir/mysqllock.so"

if [ "$enable" = yes ]; then
  conf_dir=/etc/php/$php_version/mods-available
  command -v phpenmod >/dev/null || { echo "install-php-ext: phpenmod not found; add extension=mysqllock.so to php.ini yourself" >&2; exit 1; }
  $sudo mkdir -p "$conf_dir"
  $sudo tee "$conf_dir/mysqllock.ini" >/dev/null <<'INI'
; configuration for php mysqllock module
; priority=30
extension=mysqllock.so

; Connection used until SharedLock::configureConnection()/setConnection() is called
; (the password is shown masked by php --ri mysqllock and phpinfo()):
;mysqllock.dsn = "mysql://user:password@127.0.0.1:3306/app"
; The locks table ("name" or "schema.name"):
;mysqllock.table = shared_locks
; Seconds to wait for the server when connecting:
;mysqllock.connect_timeout = 10
INI
  $sudo phpenmod -v "$php_version" mysqllock
  echo "enabled $conf_dir/mysqllock.ini for PHP $php_version"
fi

if "$php_bin" -d "extension=$ext_dir/mysqllock.so" -r 'exit(extension_loaded("mysqllock") ? 0 : 1);' 2>/dev/null; then
  echo "check: $php_bin loads mysqllock"
else
  echo "install-php-ext: $php_bin cannot load $ext_dir/mysqllock.so" >&2
  exit 1
fi
