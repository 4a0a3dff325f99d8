#!/usr/bin/env bash
# server: none (no database)
# The release manifest agrees with what else says which PHP lives where, no import cycle
# between the modules of any crate, no broken relative link in the Markdown documentation,
# the walls (no SQL in bridges/, every core file named in docs/architecture.md),
# formatting, clippy with warnings as errors, and rustdoc with warnings as errors.
set -euo pipefail
cd "$MYSQLLOCK_ROOT"
command -v python3 >/dev/null || { echo "lint: python3 is missing (scripts/install-deps.sh installs it)" >&2; exit 1; }
# First proof that the checker can fail (a throwaway crate with a known cycle is flagged,
# an acyclic one is not), then the check itself.
python3 scripts/check-module-cycles.py --self-test
python3 scripts/check-module-cycles.py
python3 scripts/check-doc-links.py --self-test
python3 scripts/check-doc-links.py
python3 scripts/check-walls.py --self-test
python3 scripts/check-walls.py
# The release manifest agrees with tests/matrix, the chroots' package lists and docs/php.md.
python3 scripts/lib/package_manifest.py check . --self-test
python3 scripts/lib/package_manifest.py check .
cargo fmt --all -- --check
cargo clippy --release --locked --workspace --all-targets -- -D warnings
# core/tests/tls.rs is `test = false` (it needs a TLS-only server): --all-targets leaves it out;
cargo clippy --release --locked -p mysqllock-core --test tls -- -D warnings
# tests/tests/cluster.rs too (it needs a 3-node cluster).
cargo clippy --release --locked -p mysqllock-tests --test cluster -- -D warnings
RUSTDOCFLAGS=-Dwarnings cargo doc --release --locked --workspace --no-deps --quiet
echo "lint: manifest, module graph, doc links, walls, fmt, clippy and rustdoc clean"
