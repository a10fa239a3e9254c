#!/usr/bin/env bash
# test_cuda_libs.sh — the binary does not link cuBLASLt (core/device/cuda_device.c dlopens
# it on a device's first matrix product; linked, it cost ~150 MiB of resident memory at
# start, GPU or not), and a build with the CUDA backend still starts and runs a script on
# a machine without a GPU. The RSS figure itself is measured, not asserted (README).
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
finish
