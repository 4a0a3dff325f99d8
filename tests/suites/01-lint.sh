#!/usr/bin/env bash
# Formatting, clippy with warnings as errors, and rustdoc with warnings as errors.
set -euo pipefail
cd "$MYSQLLOCK_ROOT"
cargo fmt --all -- --check
cargo clippy --release --locked --workspace --all-targets -- -D warnings
RUSTDOCFLAGS=-Dwarnings cargo doc --release --locked --workspace --no-deps --quiet
echo "lint: fmt, clippy and rustdoc clean"
