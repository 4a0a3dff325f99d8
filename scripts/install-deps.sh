#!/usr/bin/env bash
# Installs what building and testing mysqllock needs on Debian 12, and nothing when it
# is all there already (so a warm machine pays nothing). Safe to run repeatedly.
set -euo pipefail

# command-or-file that proves a package is present -> Debian package providing it
declare -A need=(
  [/usr/bin/php8.2]=php8.2-cli
  [/usr/bin/phpize8.2]=php8.2-dev
  [/usr/bin/phpunit]=phpunit
  [/usr/sbin/mariadbd]=mariadb-server
  [/usr/bin/mariadb]=mariadb-client
  [/usr/bin/valgrind]=valgrind
  [/usr/bin/gcc]=gcc
  [/usr/bin/python3]=python3
  [/usr/sbin/php-fpm8.2]=php8.2-fpm
  [/usr/bin/cgi-fcgi]=libfcgi-bin
  # The framework bridges (bridges/) are tested against Debian's framework packages.
  [/usr/share/php/Symfony/Component/Lock/autoload.php]=php-symfony-lock
  [/usr/share/php/Symfony/Component/Console/autoload.php]=php-symfony-console
  [/usr/share/php/Symfony/Bundle/FrameworkBundle/autoload.php]=php-symfony-framework-bundle
  [/usr/share/php/Illuminate/autoload.php]=php-laravel-framework
  # `composer validate` of the bridges' composer.json files.
  [/usr/bin/composer]=composer
  # Packets dropped below the sockets (tests/src/silence.rs's Blackhole; the group
  # replication suite's cuts).
  [/usr/sbin/iptables]=iptables
  # The release archives (scripts/package.sh, tests/suites/80-package.sh): packing and
  # unpacking them, the arm64 trees (mmdebstrap) and running what they hold (qemu-user
  # through binfmt_misc), C programs for arm64 (a cross gcc and arm64 glibc headers).
  [/usr/bin/zip]=zip
  [/usr/bin/unzip]=unzip
  [/usr/bin/readelf]=binutils
  [/usr/bin/mmdebstrap]=mmdebstrap
  [/usr/bin/qemu-aarch64-static]=qemu-user-static
  [/usr/sbin/update-binfmts]=binfmt-support
  [/usr/bin/aarch64-linux-gnu-gcc]=gcc-aarch64-linux-gnu
  [/usr/aarch64-linux-gnu/include/stdio.h]=libc6-dev-arm64-cross
  # C programs for musl, and musl's headers for the musl extension's bindings.
  [/usr/bin/musl-gcc]=musl-tools
)
missing=()
for probe in "${!need[@]}"; do
  [ -e "$probe" ] || missing+=("${need[$probe]}")
done
# PDO MySQL, PDO SQLite and libclang have no binary to probe.
php -m 2>/dev/null | grep -qx pdo_mysql || missing+=(php8.2-mysql)
# PDO SQLite: DistributedLock's testing workflow (new PDO('sqlite::memory:')).
php -m 2>/dev/null | grep -qx pdo_sqlite || missing+=(php8.2-sqlite3)
# bindgen loads libclang.so (the -dev symlink); libclang-cpp.so, which other packages
# bring along, is not it.
ls /usr/lib/llvm-*/lib/libclang.so >/dev/null 2>&1 || missing+=(libclang-dev)

if [ ${#missing[@]} -gt 0 ]; then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "install-deps: installing ${missing[*]}" >&2
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
fi

if ! command -v cargo >/dev/null 2>&1; then
  echo "install-deps: cargo is missing; install a Rust toolchain (rustup) first" >&2
  exit 1
fi

# The fuzz suite (tests/suites/15-fuzz.sh) builds its targets with cargo-fuzz (libFuzzer),
# from crates.io, pinned so a run is reproducible.
if ! cargo fuzz --version >/dev/null 2>&1; then
  echo "install-deps: installing cargo-fuzz" >&2
  cargo install cargo-fuzz --locked --version 0.13.2 --quiet
fi
