#!/usr/bin/env bash
# make check-asan's Python step: runs the command (pytest -v) and, when it
# fails, repeats at the end of the output what says why: the test that was
# running, and the first lines of every fatal report (Python's fatal error
# header, std::terminate's message, a failed assertion, an ASan or UBSan
# report). A process that dies of a signal makes Python's faulthandler dump
# every thread's stack, and a CI log that keeps only its tail then shows
# pytest's frames and not the cause.
# $ASAN_PRELOAD: what the command runs with in LD_PRELOAD (the sanitizer
# runtime; not this script, tee or grep).
#   ASAN_PRELOAD="..." san_pytest.sh python3 -m pytest -v ...
set -uo pipefail
log=$(mktemp)
trap 'rm -f "$log"' EXIT
LD_PRELOAD="${ASAN_PRELOAD:-}" "$@" 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
[ "$rc" -eq 0 ] && exit 0
{
  echo
  echo "san_pytest: the command failed (exit $rc)$( [ "$rc" -gt 128 ] && echo ", killed by signal $((rc - 128))" )."
  # pytest -v prints "path::test " before the test runs and its outcome after.
  last=$(grep -aE '^tests/[^ ]+::[^ ]+' "$log" | tail -n 1)
  [ -n "$last" ] && echo "san_pytest: the last test pytest started: $last"
  echo "san_pytest: the fatal reports, first lines of each:"
  grep -anE -A 12 'Fatal Python error|terminate called|Assertion .* failed|ERROR: AddressSanitizer|runtime error:|^Thread 0x|^Current thread' "$log" \
    | grep -avE 'site-packages|dist-packages/(_pytest|pluggy)|<frozen' | head -n 80
} >&2
exit "$rc"
