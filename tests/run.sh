#!/usr/bin/env bash
# Runs every test suite and ends with one line "N passed, N failed[, N skipped]".
#   tests/run.sh [C test binaries...]
# Each suite prints "PASS name", "FAIL name: why" or "SKIP name: why" lines; a suite that
# exits non-zero without printing a FAIL line (a crash, a sanitizer report) counts as one
# failure under its own name.
set -u
cd "$(dirname "$0")/.."
passed=0; failed=0; skipped=0
log=$(mktemp); trap 'rm -f "$log"' EXIT

run_suite() { # name, command...
  local name=$1; shift
  echo "== $name"
  "$@" >"$log" 2>&1
  local rc=$?
  cat "$log"
  local p f s
  p=$(grep -c '^PASS ' "$log"); f=$(grep -c '^FAIL ' "$log"); s=$(grep -c '^SKIP ' "$log")
  if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
    echo "FAIL $name: exited with status $rc without a FAIL line (crash or sanitizer report above)"
    f=1
  fi
  passed=$((passed + p)); failed=$((failed + f)); skipped=$((skipped + s))
}

for bin in "$@"; do
  run_suite "$(basename "$bin")" "$bin"
done
run_suite "vectorised" bash tests/vec/check_vectorised.sh
run_suite "lua" ./trainer run tests/lua/run.lua
for t in tests/cli/test_*.sh; do
  [ -e "$t" ] || continue
  run_suite "$(basename "$t" .sh)" bash "$t"
done

if [ "$skipped" -gt 0 ]; then
  echo "$passed passed, $failed failed, $skipped skipped"
else
  echo "$passed passed, $failed failed"
fi
[ "$failed" -eq 0 ]
