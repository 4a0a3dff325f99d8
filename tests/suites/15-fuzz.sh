#!/usr/bin/env bash
# server: none (the wire targets talk to a fake server of their own)
# The fuzz targets (fuzz/, cargo-fuzz and libFuzzer, docs/fuzzing.md): built (incrementally,
# kept across clones, see below), then each run for MYSQLLOCK_FUZZ_SECONDS (30) from its committed
# corpus. A crash (a panic is one), an input running over 10 s, a single allocation
# over 8 MiB (a packet claims up to 16 MiB; the client reads none so large, and must not
# set memory aside for a claim) or a process over 1 GiB fails the target; the input is kept under
# target/fuzz/artifacts/TARGET/ and named in the output. New inputs the run finds go to
# a scratch directory: the committed corpus changes only by hand (docs/fuzzing.md).
set -uo pipefail
cd "$MYSQLLOCK_ROOT"
seconds=${MYSQLLOCK_FUZZ_SECONDS:-30}
cargo fuzz --version >/dev/null 2>&1 || {
  echo "fuzz: cargo-fuzz is missing (scripts/install-deps.sh installs it: cargo install cargo-fuzz --locked)"
  exit 1
}
# cargo-fuzz passes -Z flags (AddressSanitizer, the fuzzing cfg) that a stable compiler
# takes only so.
export RUSTC_BOOTSTRAP=1
# The build is kept across clones (CI builds a fresh clone each time, and a cold build of
# the instrumented dependencies costs minutes): under /var/cache/mysqllock where this user
# may write there, as the chroots of the server scripts are; else in target/fuzz.
builds=${MYSQLLOCK_FUZZ_TARGET_DIR:-}
if [ -z "$builds" ]; then
  if mkdir -p /var/cache/mysqllock 2>/dev/null && [ -w /var/cache/mysqllock ]; then
    builds=/var/cache/mysqllock/fuzz-target
  else
    builds=target/fuzz
  fi
fi
started=$SECONDS
cargo fuzz build --fuzz-dir fuzz --target-dir "$builds" -O || { echo "fuzz: the targets do not build"; exit 1; }
echo "fuzz: built in $((SECONDS - started)) s (in $builds)"
bin=$builds/x86_64-unknown-linux-gnu/release
scratch=$(mktemp -d /tmp/mysqllock-fuzz.XXXXXX)
trap 'rm -rf "$scratch"' EXIT
passed=0; failed=0; failures=()
for target in $(cargo fuzz list --fuzz-dir fuzz); do
  corpus=fuzz/corpus/$target
  [ -d "$corpus" ] && [ -n "$(ls -A "$corpus")" ] || { echo "fuzz: $target has no committed corpus in $corpus"; failed=$((failed + 1)); failures+=("$target"); continue; }
  artifacts=target/fuzz/artifacts/$target
  mkdir -p "$scratch/$target" "$artifacts"
  log=$scratch/$target.log
  # TMPDIR: the fake server's sockets and the option files go to the scratch directory.
  TMPDIR=$scratch "$bin/$target" "$scratch/$target" "$corpus" -max_total_time="$seconds" -timeout=10 \
    -malloc_limit_mb=8 -rss_limit_mb=1024 -max_len=65536 -print_final_stats=1 \
    -artifact_prefix="$artifacts/" >"$log" 2>&1
  rc=$?
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
  secs=$(sed -n 's/^Done [0-9]* runs in \([0-9]*\) second.*/\1/p' "$log")
  rate="stopped early"
  [ -n "$secs" ] && [ "$secs" -gt 0 ] && rate="$((runs / secs)) per second"
  echo "fuzz: $target: exit $rc, ${runs:-?} runs in ${secs:-?} s ($rate), corpus $(ls "$corpus" | wc -l) committed + $(ls "$scratch/$target" | wc -l) new"
  if [ $rc -eq 0 ]; then
    passed=$((passed + 1))
  else
    failed=$((failed + 1)); failures+=("$target")
    tail -n 40 "$log"
    ls -1 "$artifacts"/* 2>/dev/null | sed 's/^/fuzz: kept input /'
  fi
done
[ $failed -eq 0 ] || echo "fuzz: failed: ${failures[*]}"
echo "fuzz: $passed passed, $failed failed"
[ $failed -eq 0 ]
