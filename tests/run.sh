#!/usr/bin/env bash
# Runs every test suite and ends with one line "N passed, N failed[, N skipped]".
#   tests/run.sh [C test binaries...]
# Each suite prints "PASS name", "FAIL name: why" or "SKIP name: why" lines; a suite that
# exits non-zero without printing a FAIL line (a crash, a sanitizer report) counts as one
# failure under its own name.
set -u
cd "$(dirname "$0")/.."
passed=0; failed=0; skipped=0
log=$(mktemp); fails=$(mktemp); trap 'rm -f "$log" "$fails"' EXIT

count_log() { # name, log file, exit status: prints the log and adds its lines to the totals
  local name=$1 file=$2 rc=$3 p f s
  echo "== $name"
  cat "$file"
  p=$(grep -c '^PASS ' "$file"); f=$(grep -c '^FAIL ' "$file"); s=$(grep -c '^SKIP ' "$file")
  if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
    echo "FAIL $name: exited with status $rc without a FAIL line (crash or sanitizer report above)"
    echo "FAIL $name: exited with status $rc without a FAIL line; its last lines:" >>"$fails"
    tail -n 5 "$file" | sed 's/^/    /' >>"$fails"
    f=1
  fi
  grep '^FAIL ' "$file" | sed "s/^FAIL /FAIL [$name] /" >>"$fails"
  if [ "$rc" -gt 128 ] && [ "$f" -gt 0 ]; then   # failed, then died of a signal: the cases after it never ran
    echo "FAIL [$name]: then ended by signal $((rc - 128)); its last lines:" >>"$fails"
    tail -n 5 "$file" | sed 's/^/    /' >>"$fails"
  fi
  passed=$((passed + p)); failed=$((failed + f)); skipped=$((skipped + s))
}

run_suite() { # name, command...
  local name=$1; shift
  "$@" >"$log" 2>&1
  count_log "$name" "$log" $?
}

# The CUDA-on-CPU suites (tests/cudacpu/suites.sh) are single-threaded emulation: they run
# two at a time, each into its own log, and are printed and counted in their listed order.
run_cudacpu_suites() {
  local dir list n=0 i name cmd
  dir=$(mktemp -d); list="$dir/list"
  bash tests/cudacpu/suites.sh >"$list" || { echo "FAIL cudacpu: tests/cudacpu/suites.sh failed"; failed=$((failed + 1)); return; }
  while IFS=$'\t' read -r name cmd; do
    n=$((n + 1))
    ( bash -c "$cmd" >"$dir/$n.log" 2>&1; echo $? >"$dir/$n.rc" ) &
    while [ "$(jobs -rp | wc -l)" -ge 2 ]; do wait -n; done
  done <"$list"
  wait
  i=0
  while IFS=$'\t' read -r name cmd; do
    i=$((i + 1))
    count_log "$name" "$dir/$i.log" "$(cat "$dir/$i.rc")"
  done <"$list"
  rm -rf "$dir"
}

for bin in "$@"; do
  run_suite "$(basename "$bin")" "$bin"
done
run_suite "vectorised" bash tests/vec/check_vectorised.sh
run_suite "include_layers" bash tests/layers/check_include_cycles.sh
run_suite "lua_c_api" bash tests/layers/check_lua_c_api.sh
run_suite "lua" ./trainer run tests/lua/run.lua
for t in tests/cli/test_*.sh; do
  [ -e "$t" ] || continue
  run_suite "$(basename "$t" .sh)" bash "$t"
done
# the libFuzzer targets (make fuzz-build), a few seconds each on their seed corpora
if [ -x build/fuzz/fuzz_safetensors ]; then
  run_suite "fuzz" bash tests/fuzz/run.sh "${FUZZ_TEST_S:-2}"
else
  echo "SKIP fuzz: the libFuzzer targets are not built (make fuzz-build needs clang with -fsanitize=fuzzer)"
  skipped=$((skipped + 1))
fi
if [ "${CUDACPU:-}" != 0 ] && [ -x build/cudacpu/trainer ]; then
  run_cudacpu_suites
else
  echo "SKIP cudacpu: the CUDA-on-CPU stage is left out (make test CUDACPU=0, or build/cudacpu/trainer not built: make cudacpu)"
  skipped=$((skipped + 1))
fi

# The failures again, just above the totals: a log read from its end (CI shows its tail) names them.
if [ "$failed" -gt 0 ]; then
  echo "== failures"
  head -n 40 "$fails" | cut -c1-300
fi
if [ "$skipped" -gt 0 ]; then
  echo "$passed passed, $failed failed, $skipped skipped"
else
  echo "$passed passed, $failed failed"
fi
[ "$failed" -eq 0 ]
