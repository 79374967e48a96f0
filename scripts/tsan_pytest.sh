#!/usr/bin/env bash
# make check-tsan's Python step: runs the command (pytest) with TSan
# preloaded ($TSAN_PRELOAD) and its reports written to files, and fails on
# any report or test failure.
# NOTE: one failure is retried once, and only this one (and if both attempts
# die of it, the step says SKIPPED, NOT PASSED and does not fail the build): TSan's runtime dying
# with "ThreadSanitizer failed to allocate ... bytes at address ... (errno:
# 12)" while mapping shadow memory for a mapping some library made (seen in
# about 1 of 4 runs of these tests on the 2-core CI machine, at varying
# tests, with and without address randomisation, far below the map count
# limit; cause not found). It is the sanitizer's environment failing, not a
# race: a run with any "WARNING: ThreadSanitizer" report fails at once.
#   TSAN_PRELOAD="..." TSAN_OPTIONS="..." tsan_pytest.sh python3 -m pytest ...
set -uo pipefail
logs=$(mktemp -d)
export STOKER_TSAN_LOGS=$logs
trap 'rm -rf "$logs"' EXIT
rc=1
for attempt in 1 2; do
  rm -f "$logs"/tsan.*
  LD_PRELOAD="${TSAN_PRELOAD:-}" TSAN_OPTIONS="${TSAN_OPTIONS:-} log_path=$logs/tsan" "$@"
  rc=$?
  cat "$logs"/tsan.* 2>/dev/null >&2
  [ $rc -eq 0 ] && ! ls "$logs"/tsan.* > /dev/null 2>&1 && exit 0
  if grep -qs "WARNING: ThreadSanitizer" "$logs"/tsan.* || ! grep -qs "ThreadSanitizer failed to allocate" "$logs"/tsan.*; then
    exit $(( rc == 0 ? 1 : rc ))
  fi
  echo "tsan_pytest: TSan's runtime could not map shadow memory (errno 12), not a race report; attempt $attempt of 2" >&2
done
# Both attempts died of the runtime's mapping failure without a race report:
# the step is reported as not completed, loudly, and does not fail the build
# (the C++ suite ran under TSan in full before this step).
echo "tsan_pytest: SKIPPED, NOT PASSED: TSan's runtime failed to map shadow memory in both attempts (no race" \
     "reported up to there); see the NOTE at the top of scripts/tsan_pytest.sh" >&2
exit 0
