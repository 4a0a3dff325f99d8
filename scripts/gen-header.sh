#!/usr/bin/env bash
# Regenerates include/mysqllock.h from the C ABI crate ffi/ with cbindgen.
#
# The header is committed, and tests/suites/05-header.sh fails when it drifts from what
# this script produces. cbindgen is pinned to one version because another version may
# format the same sources differently; it is installed with cargo when missing. The CLI
# (rather than a build.rs) keeps `cargo build` from compiling cbindgen on every build.
set -euo pipefail
cd "$(dirname "$0")/.."

version=0.29.4
cargo_bin=${CARGO_HOME:-$HOME/.cargo}/bin

# The first cbindgen of the pinned version: the one on PATH, else cargo's bin dir.
cbindgen=
for candidate in "$(command -v cbindgen || true)" "$cargo_bin/cbindgen"; do
  if [ -n "$candidate" ] && [ -x "$candidate" ] \
    && [ "$("$candidate" --version 2>/dev/null)" = "cbindgen $version" ]; then
    cbindgen=$candidate
    break
  fi
done
if [ -z "$cbindgen" ]; then
  echo "gen-header.sh: installing cbindgen $version into $cargo_bin" >&2
  cargo install cbindgen --version "$version" --locked --quiet
  cbindgen=$cargo_bin/cbindgen
fi

# cbindgen reads ffi/ only (parse_deps = false); run from there so its config's
# relative paths and `cargo metadata` resolve against the crate.
out=$PWD/include/mysqllock.h
(cd ffi && "$cbindgen" --quiet --config cbindgen.toml --output "$out")
echo "gen-header.sh: wrote include/mysqllock.h" >&2
