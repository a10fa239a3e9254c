#!/usr/bin/env bash
# The CPU matrix library (core/cpu_device/cpu_gemm.h, TRAINER_CPU_GEMM=openblas|onednn). The rest of
# the suite runs on the default (oneDNN where this build and machine have it, the tiny test
# models' Linears included); here the OpenBLAS path keeps its own checks: the step's golden
# metrics with their memory figures, PyTorch parity of all-MiniLM-L6-v2, bitwise
# checkpointing. Then: two oneDNN runs of one recipe give the same bits, oneDNN's losses are
# OpenBLAS's to 1e-5, and a library name the build does not know is a user error.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/tiny_fixtures.sh"
cd "$ROOT"

# ---- the OpenBLAS path
for suite in test_step_reads test_bert_minilm test_checkpoint; do
  TRAINER_CPU_GEMM=openblas run_trainer run tests/lua/run.lua $suite
  expect_rc "openblas_${suite}_rc" 0
  if grep -q "^FAIL" "$TMP/out"; then fail "openblas_${suite}_all_pass" "$(grep '^FAIL' "$TMP/out" | head -3)"
  else pass "openblas_${suite}_all_pass"; fi
done

# The step -> loss lines of a run's metrics.jsonl, as %.17g.
losses() {
  cat >"$TMP/losses.lua" <<LUA
for line in io.lines("$1") do local m = require("trainer.core.json").decode(line) print(("%d %.17g"):format(m.step, m.loss)) end
LUA
  "$TRAINER" run "$TMP/losses.lua"
}

# ---- oneDNN: repeatable bits, OpenBLAS's values
onednn=1
TRAINER_CPU_GEMM=onednn run_trainer plan "$TMP/sts.lua"
if grep -q "TRAINER_CPU_GEMM=onednn:" "$TMP/err"; then onednn=0; echo "SKIP onednn_runs: no oneDNN in this build or on this machine"; fi
if [ $onednn = 1 ]; then
  TRAINER_CPU_GEMM=onednn run_trainer "$TMP/sts.lua" steps=6 out="$TMP/runs/d1" --quiet
  expect_rc onednn_run1_rc 0
  TRAINER_CPU_GEMM=onednn run_trainer "$TMP/sts.lua" steps=6 out="$TMP/runs/d2" --quiet
  expect_rc onednn_run2_rc 0
  TRAINER_CPU_GEMM=openblas run_trainer "$TMP/sts.lua" steps=6 out="$TMP/runs/b1" --quiet
  expect_rc openblas_run_rc 0
  d1=$(losses "$TMP/runs/d1/metrics.jsonl"); d2=$(losses "$TMP/runs/d2/metrics.jsonl")
  b1=$(losses "$TMP/runs/b1/metrics.jsonl")
  if [ -n "$d1" ] && [ "$d1" = "$d2" ]; then pass onednn_same_bits; else fail onednn_same_bits "$d1 | $d2"; fi
  if paste -d' ' <(echo "$d1") <(echo "$b1") | awk 'NF != 4 || $1 != $3 { bad = 1 }
      { d = $2 - $4; if (d < 0) d = -d; m = $4 < 0 ? -$4 : $4; if (m < 1) m = 1; if (d > 1e-5 * m) bad = 1 }
      END { exit bad }'; then pass onednn_matches_openblas
  else fail onednn_matches_openblas "oneDNN: $d1 | OpenBLAS: $b1"; fi
fi

# ---- a library this build does not know: a user error, nothing half-written
TRAINER_CPU_GEMM=mkl run_trainer "$TMP/sts.lua" steps=2 out="$TMP/runs/bad" --quiet
expect_rc unknown_library_rc 1
expect_err unknown_library_says 'TRAINER_CPU_GEMM="mkl" is not a CPU matrix library: set it to openblas or onednn'
if grep -qi "internal error\|traceback" "$TMP/err"; then fail unknown_library_plain "$(head -c 400 "$TMP/err")"
else pass unknown_library_plain; fi

finish
