dnl config.m4 for the mysqllock extension.
dnl
dnl The extension is the Rust crate php-ext/ (ext-php-rs), not C. This shim lets the
dnl usual phpize && ./configure && make && make install, and therefore PIE, build it:
dnl make runs `cargo build --release -p mysqllock-php` for the PHP that php-config
dnl describes and installs target/release/libmysqllock_php.so as modules/mysqllock.so
dnl (rules in Makefile.frag). A Rust toolchain (cargo, https://rustup.rs) and libclang
dnl (Debian: libclang-dev, for the bindings to the PHP headers) must be installed.

PHP_ARG_ENABLE([mysqllock],
  [whether to enable mysqllock (MySQL-backed named locks)],
  [AS_HELP_STRING([--enable-mysqllock],
    [Enable mysqllock; building it needs a Rust toolchain (cargo)])],
  [yes])

if test "$PHP_MYSQLLOCK" != "no"; then
  AC_PATH_PROG([CARGO], [cargo], [no], [$PATH$PATH_SEPARATOR$HOME/.cargo/bin])
  if test "$CARGO" = "no"; then
    AC_MSG_ERROR([cargo not found: mysqllock is written in Rust; install a toolchain (https://rustup.rs) and run configure again])
  fi

  dnl ext-php-rs reads PHP_CONFIG and PHP to generate bindings for this very PHP.
  MYSQLLOCK_PHP_CONFIG=`command -v "$PHP_CONFIG" 2>/dev/null || echo "$PHP_CONFIG"`
  PHP_SUBST([CARGO])
  PHP_SUBST([MYSQLLOCK_PHP_CONFIG])

  dnl No C sources: the module is cargo's cdylib, copied in place by Makefile.frag.
  PHP_MODULES="\$(phplibdir)/mysqllock.so"
  PHP_ADD_MAKEFILE_FRAGMENT([$abs_srcdir/Makefile.frag], [$abs_srcdir], [$abs_builddir])
fi
