#!/usr/bin/env bash
# PHP 8.2 built from Debian 12's own php8.2 source package, for what Debian ships no binary
# of: a thread-safe (ZTS) PHP with the embed SAPI, and a PHP linked against musl (Debian's
# musl-tools). Each is built once into a prefix under /var/cache/mysqllock/php-src
# (MYSQLLOCK_PHP_SRC_CACHE overrides) and kept, like the chroots; it is built again only
# when its recipe (the configure_KIND function below, or the source version) changes.
#
#   scripts/php-src.sh build zts|musl   # builds it (once) and prints its prefix: PREFIX/bin/php,
#                                       # PREFIX/bin/php-config (and for zts PREFIX/sbin/php-fpm,
#                                       # PREFIX/lib/libphp.so, the embed SAPI)
#   scripts/php-src.sh prefix zts|musl  # prints where that prefix is, building nothing
#   scripts/php-src.sh ext zts          # the extension built against the ZTS PHP (its own
#                                       # cargo target dir, kept under the cache), loaded
#                                       # once to prove it; prints the .so's path
#
# The source: `apt-get source --download-only php8.2` through a private APT configuration
# (its own sources list, with a deb-src line for bookworm, and its own lists and cache under
# the cache directory: the host's APT setup is neither read for sources nor changed), which
# checks the files against Debian's signed index; then `dpkg-source -x --skip-patches`,
# which checks them against the .dsc: the upstream tree, configured here (Debian's patches
# rework configure.ac for Debian's own layout and would need autoconf). The newest php8.2
# of bookworm when the cache was first filled is kept; delete PREFIX's cache to move on.
# bookworm-security's newer versions are listed but their files are not served here.
#
# A cold build takes minutes (measured on 2 cores: see docs/php.md); the build log is
# CACHE/build-KIND.log.
set -euo pipefail
me="php-src.sh"
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)

die() {
  echo "$me: $*" >&2
  exit 1
}

cache=${MYSQLLOCK_PHP_SRC_CACHE:-/var/cache/mysqllock/php-src}
mirror=${MYSQLLOCK_DEBIAN_MIRROR:-http://deb.debian.org/debian}
php_minor=8.2

# The ZTS PHP: what the PHP suites (PHPUnit 9.6, Symfony 5.4, Laravel 8.83) and the
# threaded test need. On by default in 8.2 and kept: ctype, dom, fileinfo, filter, iconv,
# libxml, pdo, pdo_sqlite, phar, posix, session, simplexml, sqlite3, tokenizer, xml,
# xmlreader, xmlwriter. php-fpm, because the web-request tests run under it.
configure_zts() {
  ./configure --prefix="$1" --with-config-file-path="$1/etc" \
    --with-config-file-scan-dir="$1/etc/conf.d" \
    --enable-zts --enable-embed=shared --enable-fpm --disable-cgi --disable-phpdbg \
    --without-pear --disable-opcache \
    --enable-mysqlnd --with-pdo-mysql=mysqlnd --with-mysqli=mysqlnd \
    --enable-pcntl --enable-sockets --enable-mbstring --with-ffi --with-openssl --with-zlib \
    CFLAGS=-O2
}

# The musl PHP: Debian's libraries are built against glibc and cannot be linked into a
# musl program, so only what needs nothing but libc: PDO MySQL over mysqlnd (what a lock
# needs; without its zlib compression), pcntl and posix. Dynamically linked (musl's loader, /lib/ld-musl-x86_64.so.1), so
# it loads shared extensions: ctype is built as one, which `build musl` loads to prove it.
configure_musl() {
  ./configure --prefix="$1" --with-config-file-path="$1/etc" \
    --with-config-file-scan-dir="$1/etc/conf.d" \
    --disable-all --enable-cli --disable-cgi --disable-phpdbg --without-pear \
    --enable-pdo --enable-mysqlnd --disable-mysqlnd-compression-support --with-pdo-mysql=mysqlnd \
    --enable-pcntl --enable-posix --enable-ctype=shared --without-valgrind \
    CC=musl-gcc CFLAGS=-O2
}

# php.ini of the ZTS build (in PREFIX/etc, where it reads it), which runs the PHP suites:
# the source's production settings, as Debian's, with what Debian's CLI php.ini changes,
# and Debian's PHP library path, where PHPUnit, Symfony and Laravel are (/usr/share/php).
# The musl build runs with PHP's defaults.
write_ini() {
  cp php.ini-production "$1/php.ini"
  printf '\n; %s\n%s\n%s\n' "scripts/php-src.sh: as Debian's CLI php.ini" \
    'include_path = ".:/usr/share/php"' 'memory_limit = -1' >>"$1/php.ini"
}

# Debian packages each build needs: probe file -> package.
declare -A needs_common=(
  [/usr/bin/gcc]=gcc [/usr/bin/make]=make [/usr/bin/dpkg-source]=dpkg-dev
  [/usr/bin/xz]=xz-utils
)
# shellcheck disable=SC2034 # read through the nameref of install_needs
declare -A needs_zts=(
  [/usr/bin/pkg-config]=pkg-config [/usr/include/libxml2/libxml/parser.h]=libxml2-dev
  [/usr/include/sqlite3.h]=libsqlite3-dev [/usr/include/openssl/ssl.h]=libssl-dev
  [/usr/include/oniguruma.h]=libonig-dev [/usr/include/zlib.h]=zlib1g-dev
  [/usr/include/x86_64-linux-gnu/ffi.h]=libffi-dev
)
# shellcheck disable=SC2034 # read through the nameref of install_needs
declare -A needs_musl=([/usr/bin/musl-gcc]=musl-tools)

# install_needs KIND: installs the packages KIND's build lacks (nothing when all are there).
install_needs() {
  local -n extra=needs_$1
  local probe missing=()
  for probe in "${!needs_common[@]}"; do [ -e "$probe" ] || missing+=("${needs_common[$probe]}"); done
  for probe in "${!extra[@]}"; do [ -e "$probe" ] || missing+=("${extra[$probe]}"); done
  [ ${#missing[@]} -eq 0 ] && return 0
  [ "$(id -u)" -eq 0 ] || die "building PHP needs ${missing[*]}: install them (as root: apt-get install ${missing[*]})"
  echo "$me: installing ${missing[*]}" >&2
  if ! { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null; }; then
    die "apt-get install ${missing[*]} failed"
  fi
}

# fetch_source: the source package's files in $cache/source (downloaded once); prints the
# .dsc's path.
fetch_source() {
  local dsc apt=$cache/apt
  dsc=$(find "$cache/source" -maxdepth 1 -name "php${php_minor}_*.dsc" 2>/dev/null | sort | tail -n 1)
  if [ -n "$dsc" ]; then
    echo "$dsc"
    return 0
  fi
  mkdir -p "$apt/lists/partial" "$apt/cache/archives/partial" "$cache/source.tmp"
  echo "deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $mirror bookworm main" \
    >"$apt/sources.list"
  local opts=(-o "Dir::Etc::SourceList=$apt/sources.list" -o Dir::Etc::SourceParts=/dev/null
              -o "Dir::State::Lists=$apt/lists" -o "Dir::Cache=$apt/cache"
              -o APT::Sandbox::User=root -o Acquire::Check-Valid-Until=false)
  echo "$me: downloading the php$php_minor source package (bookworm)" >&2
  apt-get "${opts[@]}" -qq update >&2 || die "apt-get update of the private deb-src list ($apt/sources.list) failed"
  (cd "$cache/source.tmp" && apt-get "${opts[@]}" -qq source --download-only "php$php_minor/bookworm") >&2 \
    || die "apt-get source --download-only php$php_minor/bookworm failed"
  dsc=$(find "$cache/source.tmp" -maxdepth 1 -name "php${php_minor}_*.dsc" | head -n 1)
  [ -n "$dsc" ] || die "apt-get source left no .dsc in $cache/source.tmp"
  rm -rf "$cache/source"
  mv "$cache/source.tmp" "$cache/source"
  echo "$cache/source/$(basename "$dsc")"
}

# recipe KIND DSC: what decides the build; the prefix keeps it in .mysqllock-recipe.
recipe() {
  declare -f "configure_$1"
  [ "$1" != zts ] || declare -f write_ini
  basename "$2"
}

prefix_of() {
  echo "$cache/php$php_minor-$1"
}

check_kind() {
  case ${1:-} in
    zts|musl) ;;
    *) die "a build is zts or musl, not '${1:-}'" ;;
  esac
}

# build KIND: the prefix holds the build of the current recipe; built (under a lock, in a
# scratch directory, installed beside and moved into place) when it does not.
build() {
  local kind=$1 prefix dsc want work started
  prefix=$(prefix_of "$kind")
  mkdir -p "$cache"
  exec 9>"$cache/$kind.lock"
  flock 9
  install_needs "$kind"
  dsc=$(fetch_source)
  want=$(recipe "$kind" "$dsc" | md5sum | cut -c1-32)
  if [ "$(cat "$prefix/.mysqllock-recipe" 2>/dev/null)" != "$want" ]; then
    work=$cache/build-$kind
    rm -rf "$work" "$prefix.stage"
    mkdir -p "$work"
    echo "$me: building PHP $php_minor ($kind) from $(basename "$dsc") into $prefix (minutes, once; log: $cache/build-$kind.log)" >&2
    started=$SECONDS
    if ! (
      set -e
      # The compiler's temporary files stay beside the build: /tmp is shared with whatever
      # else runs (and cleans it) meanwhile.
      mkdir "$work/tmp"
      export TMPDIR=$work/tmp
      cd "$work"
      dpkg-source -x --skip-patches "$dsc" src
      cd src
      "configure_$kind" "$prefix"
      make -j"$(nproc)"
      make install INSTALL_ROOT="$prefix.stage"
      mkdir -p "$prefix.stage$prefix/etc/conf.d"
      [ "$kind" != zts ] || write_ini "$prefix.stage$prefix/etc"
    ) >"$cache/build-$kind.log" 2>&1; then
      tail -n 8 "$cache/build-$kind.log" | cut -c1-400 >&2
      die "building PHP $php_minor ($kind) failed (log: $cache/build-$kind.log)"
    fi
    echo "$want" >"$prefix.stage$prefix/.mysqllock-recipe"
    basename "$dsc" >"$prefix.stage$prefix/.mysqllock-source"
    rm -rf "$prefix"
    mv "$prefix.stage$prefix" "$prefix"
    rm -rf "$prefix.stage" "$work"
    echo "$me: PHP $php_minor ($kind) built in $((SECONDS - started)) s" >&2
  fi
  verify "$kind" "$prefix"
  flock -u 9
  exec 9>&-
  echo "$prefix"
}

# verify KIND PREFIX: the build is what it claims (thread safety, libc, modules), so a
# suite never runs on something else by mistake.
verify() {
  local kind=$1 prefix=$2 php=$2/bin/php info
  if [ ! -x "$php" ] || [ ! -x "$prefix/bin/php-config" ]; then
    die "$prefix has no bin/php or bin/php-config"
  fi
  info=$("$php" -n -i) || die "$php -i failed"
  case $kind in
    zts)
      grep -qx 'Thread Safety => enabled' <<<"$info" || die "$php is not thread-safe"
      [ -f "$prefix/lib/libphp.so" ] || die "$prefix has no lib/libphp.so (the embed SAPI)"
      [ -x "$prefix/sbin/php-fpm" ] || die "$prefix has no sbin/php-fpm"
      ;;
    musl)
      grep -qx 'Thread Safety => disabled' <<<"$info" || die "$php is not NTS"
      readelf -l "$php" | grep -q 'interpreter: /lib/ld-musl' || die "$php is not linked against musl"
      "$php" -n -d extension=ctype -r 'exit(function_exists("ctype_digit") ? 0 : 1);' \
        || die "$php cannot load a shared extension (ctype.so)"
      ;;
  esac
  "$php" -n -r 'exit(extension_loaded("pdo_mysql") ? 0 : 1);' || die "$php has no pdo_mysql"
}

# ext: the extension for the ZTS PHP, in a cargo target dir of its own per checkout (so
# two checkouts do not rebuild each other's), under the cache.
ext() {
  local prefix target so
  prefix=$(build zts)
  target=$cache/target/$(printf '%s' "$repo" | md5sum | cut -c1-8)-zts
  mkdir -p "$target"
  (cd "$repo" && PHP="$prefix/bin/php" PHP_CONFIG="$prefix/bin/php-config" \
    cargo build --release --locked -p mysqllock-php --target-dir "$target") >&2 \
    || die "building the extension for the ZTS PHP failed"
  so=$target/release/libmysqllock_php.so
  "$prefix/bin/php" -n -d "extension=$so" -r 'exit(extension_loaded("mysqllock") ? 0 : 1);' \
    || die "the ZTS PHP cannot load $so"
  echo "$so"
}

cmd=${1:-}
case $cmd in
  build) check_kind "${2:-}"; build "$2" ;;
  prefix) check_kind "${2:-}"; prefix_of "$2" ;;
  ext)
    [ "${2:-}" = zts ] || die "ext builds for zts only (the musl extension is scripts/package.sh's)"
    ext
    ;;
  *) die "usage: php-src.sh build zts|musl | prefix zts|musl | ext zts" ;;
esac
