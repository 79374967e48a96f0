#!/usr/bin/env bash
# make check-tsan's Python step: runs the command (pytest) with TSan
# preloaded ($TSAN_PRELOAD) and its reports written to files, and fails on
# any report or test failure.
# NOTE: one failure, and only this one, is retried (up to 3 attempts in all):
# TSan's runtime dying with "ThreadSanitizer failed to allocate ... bytes at
# address ... (errno: 12)" mapping the shadow of (by its address and size) a
# range that starts near address 0 and spans most of the address space. Seen
# in 3 of 7 runs of test_loader.py and test_resume.py in one process on the
# 2-core CI machine, always in test_resume.py after test_loader.py; in none of
# 6 runs with one process per file, which make check-tsan therefore does, nor
# in 11 runs under gdb; the caller was not caught. It is the sanitizer's
# environment failing, not a race: a run with any "WARNING: ThreadSanitizer"
# report, or a test failure, fails at once, and so do 3 such deaths in a row.
#   TSAN_PRELOAD="..." TSAN_OPTIONS="..." tsan_pytest.sh python3 -m pytest ...
set -uo pipefail
logs=$(mktemp -d)
export STOKER_TSAN_LOGS=$logs
trap 'rm -rf "$logs"' EXIT
rc=1
for attempt in 1 2 3; do
  rm -f "$logs"/tsan.*
  LD_PRELOAD="${TSAN_PRELOAD:-}" TSAN_OPTIONS="${TSAN_OPTIONS:-} log_path=$logs/tsan" "$@"
  rc=$?
  cat "$logs"/tsan.* 2>/dev/null >&2
  [ $rc -eq 0 ] && ! ls "$logs"/tsan.* > /dev/null 2>&1 && exit 0
  if grep -qs "WARNING: ThreadSanitizer" "$logs"/tsan.* || ! grep -qs "ThreadSanitizer failed to allocate" "$logs"/tsan.*; then
    exit $(( rc == 0 ? 1 : rc ))
  fi
  echo "tsan_pytest: TSan's runtime could not map shadow memory (errno 12), not a race report; attempt $attempt of 3" >&2
done
echo "tsan_pytest: FAILED: TSan's runtime died of its shadow-mapping failure in 3 attempts in a row (see the NOTE" \
     "at the top of scripts/tsan_pytest.sh)" >&2
exit 1
