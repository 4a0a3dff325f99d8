#!/usr/bin/env bash
# Rust unit tests, core integration tests and cross-process scenarios.
set -euo pipefail
cd "$MYSQLLOCK_ROOT"
cargo test --release --locked --workspace
