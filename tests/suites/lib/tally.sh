# shellcheck shell=bash disable=SC2034
# The tally of the shell suites that count their own checks (40-c, 45-tls, 80-package):
# `ok - WHAT` or `not ok - WHAT` per check, and the closing line `LABEL: N passed, N failed`
# that CI reads. The suite sets $tally_label (and $tally_started, to have the time
# printed too) before sourcing this.
passed=0
failed=0
pass() { echo "ok - $1"; passed=$((passed + 1)); }
fail() { echo "not ok - $1"; failed=$((failed + 1)); }
# finish: the closing line, and exit 0 only if nothing failed.
finish() {
  echo "${tally_label:?}: $passed passed, $failed failed${tally_started:+ ($((SECONDS - tally_started)) s)}"
  [ "$failed" = 0 ]
  exit
}
