# lib.sh — helpers for the end-to-end CLI tests. Each `expect_*` prints one PASS/FAIL line.
#   run_trainer ARGS...        runs ./trainer, keeping stdout in $OUT, stderr in $ERR, status in $RC
#   expect_rc NAME CODE        the last run exited with CODE
#   expect_out NAME TEXT       stdout contains TEXT (fixed string)
#   expect_err NAME TEXT       stderr contains TEXT (fixed string)
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
TRAINER="$ROOT/trainer"
TMP=$(mktemp -d); trap 'rm -rf "$TMP"' EXIT
failures=0

run_trainer() {
  "$TRAINER" "$@" >"$TMP/out" 2>"$TMP/err" </dev/null
  RC=$?; OUT=$(cat "$TMP/out"); ERR=$(cat "$TMP/err")
}
run_trainer_stdin() { # input, args...
  local input=$1; shift
  printf '%s' "$input" | "$TRAINER" "$@" >"$TMP/out" 2>"$TMP/err"
  RC=$?; OUT=$(cat "$TMP/out"); ERR=$(cat "$TMP/err")
}
pass() { echo "PASS $1"; }
fail() { echo "FAIL $1: $2"; failures=$((failures + 1)); }
show() { printf '  rc=%s\n  stdout: %s\n  stderr: %s\n' "$RC" "$(echo "$OUT" | head -c 600)" "$(echo "$ERR" | head -c 600)"; }
expect_rc()  { if [ "$RC" = "$2" ]; then pass "$1"; else fail "$1" "exit $RC, expected $2"; show; fi; }
expect_out() { if grep -qF -- "$2" "$TMP/out"; then pass "$1"; else fail "$1" "stdout lacks '$2'"; show; fi; }
expect_err() { if grep -qF -- "$2" "$TMP/err"; then pass "$1"; else fail "$1" "stderr lacks '$2'"; show; fi; }
expect_no_out() { if grep -qF -- "$2" "$TMP/out"; then fail "$1" "stdout has '$2'"; show; else pass "$1"; fi; }
finish() { [ "$failures" -eq 0 ]; }
