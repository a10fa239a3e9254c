#!/usr/bin/env bash
# test_cuda_libs.sh — the binary does not link cuBLASLt (core/cuda_device/cuda_device.c dlopens
# it on a device's first matrix product; linked, it cost ~150 MiB of resident memory at
# start, GPU or not), and a build with the CUDA backend still starts and runs a script on
# a machine without a GPU.
source "$(dirname "$0")/lib.sh"
cd "$ROOT"
printf 'local ops = require("trainer.core.ops")\nprint("cuda_built", ops.cuda_built())\n' >"$TMP/q.lua"
run_trainer run "$TMP/q.lua"
expect_rc cuda_libs_trainer_runs 0
if ! grep -qF "cuda_built	true" "$TMP/out"; then
  echo "SKIP cuda_libs_not_linked: this build has no CUDA backend (no nvcc)"
  finish; exit
fi
if ldd "$TRAINER" | grep -q 'libcublasLt'; then
  fail cuda_libs_cublaslt_not_linked "ldd shows $(ldd "$TRAINER" | grep libcublasLt)"
else
  pass cuda_libs_cublaslt_not_linked
fi
# make test's sanitizer op-table program skips the CUDA cases of a build that has the CUDA
# backend for the reason that holds there (no GPU visible), never "no nvcc"
T=build/asan/tests/test_ops_table
if [ -x "$T" ] && [ "$(printf 'print(require("trainer.core.ffi").tr_cuda_device_count())\n' | "$TRAINER" repl 2>/dev/null)" = 0 ]; then
  "$T" >"$TMP/ops" 2>&1
  if grep -q '^SKIP .*no nvcc' "$TMP/ops"; then fail ops_table_skip_reason "$(grep -m1 '^SKIP .*no nvcc' "$TMP/ops")"
  elif grep -q '^SKIP .*\.cuda: no GPU visible' "$TMP/ops"; then pass ops_table_skip_reason
  else fail ops_table_skip_reason "no SKIP line for the CUDA cases: $(tail -2 "$TMP/ops")"; fi
else
  echo "SKIP ops_table_skip_reason: $T is not built (make test builds it), or a GPU is visible"
fi
finish
