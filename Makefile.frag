# Appended to the Makefile that phpize/configure generate (see config.m4): builds the
# Rust crate mysqllock-php with cargo and installs its cdylib as modules/mysqllock.so.
# `make install` then copies modules/* into PHP's extension directory as usual.

MYSQLLOCK_CARGO_TARGET = $(srcdir)/target

$(phplibdir)/mysqllock.so: mysqllock-cargo-build
	@mkdir -p $(phplibdir)
	cp $(MYSQLLOCK_CARGO_TARGET)/release/libmysqllock_php.so $@

mysqllock-cargo-build:
	cd $(srcdir) && CARGO_TARGET_DIR=$(MYSQLLOCK_CARGO_TARGET) PHP_CONFIG=$(MYSQLLOCK_PHP_CONFIG) PHP=$(PHP_EXECUTABLE) \
		$(CARGO) build --release --locked -p mysqllock-php

.PHONY: mysqllock-cargo-build
