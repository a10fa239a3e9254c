#!/usr/bin/env bash
# test_gpu_bundle.sh — `make gpu-bundle` on a machine with nvcc and no GPU: the tarball is
# made, is at most 60 MiB, unpacks anywhere, and its trainer runs from there with nothing
# of the build tree: ldd resolves every library inside the bundle but libc, libm,
# libstdc++ and the CUDA libraries; the prepared tests/gpu/run.sh runs in bundle mode and,
# without a GPU, counts its cases as skipped. Without nvcc it prints SKIP.
source "$(dirname "$0")/lib.sh"
cd "$ROOT"
if ! command -v nvcc >/dev/null 2>&1 && [ ! -x /usr/local/cuda/bin/nvcc ]; then
  echo "SKIP gpu_bundle: nvcc is not installed (the bundle needs the CUDA backend)"; exit 0
fi
if ! make -s gpu-bundle >"$TMP/make.log" 2>&1; then
  fail gpu_bundle_builds "make gpu-bundle failed: $(tail -5 "$TMP/make.log")"; finish; exit
fi
pass gpu_bundle_builds
tarball=build/gpu-bundle/trainer-gpu.tar.gz
bytes=$(stat -c %s "$tarball")
if [ "$bytes" -le $((60 * 1048576)) ]; then pass gpu_bundle_at_most_60_mib; else fail gpu_bundle_at_most_60_mib "$bytes bytes"; fi

mkdir -p "$TMP/elsewhere" && tar xzf "$tarball" -C "$TMP/elsewhere"
b="$TMP/elsewhere/trainer-gpu"
outside=$(ldd "$b/trainer" | awk '$2 == "=>" { print $1, $3 }' | while read -r name path; do
  case $(readlink -f "$path") in "$(cd "$b/lib" && pwd -P)"/*) continue ;; esac
  # (libcublasLt is not allowed: the runtime dlopens it on a GPU's first matrix product)
  case $name in libc.so*|libm.so*|libstdc++.so*|libpthread.so*|libdl.so*|librt.so*|libcudart.so*|libcuda.so*) continue ;; esac
  echo "$name=$path"
done)
if [ -z "$outside" ]; then pass gpu_bundle_ldd_resolves_inside; else fail gpu_bundle_ldd_resolves_inside "$outside"; fi
for prog in "$b"/bin/*; do
  if ldd "$prog" | grep -q "not found"; then fail gpu_bundle_programs_link "$(basename "$prog"): $(ldd "$prog" | grep 'not found')"; fi
done
[ -x "$b/bin/test_gpu_parity" ] && [ -x "$b/bin/test_gpu_nn" ] && [ -x "$b/bin/test_gpu_memory" ] &&
  [ -f "$b/tests/gpu/test_device_lua.lua" ] && pass gpu_bundle_has_gpu_tests ||
  fail gpu_bundle_has_gpu_tests "$(ls "$b/bin" "$b/tests/gpu")"
[ -f "$b/tests/gpu/train_parity.sh" ] && [ -f "$b/bench/gpu/run.sh" ] && [ -f "$b/bench/gpu/trainer_side.lua" ] &&
  [ -f "$b/bench/gpu/torch_side.py" ] && pass gpu_bundle_has_training_checks ||
  fail gpu_bundle_has_training_checks "train_parity.sh or bench/gpu/ missing"

TRAINER="$b/trainer"
run_trainer_stdin 'print(6*7); x = trainer.tensor.zeros({256}); print("bytes", trainer.memory.stats().allocated)' repl
expect_out gpu_bundle_trainer_runs_relocated 42
expect_out gpu_bundle_runtime_reached_through_ffi "bytes	"
(cd "$TMP" && OUT="$TMP/gpu_out" bash "$b/tests/gpu/run.sh" >"$TMP/run.log" 2>&1)
rc=$?
if [ "$rc" = 0 ] && grep -q "mode: bundle" "$TMP/run.log" && grep -q "^0 passed, 0 failed, [1-9][0-9]* skipped" "$TMP/run.log" &&
   grep -q "^SKIP test_gpu_memory: no CUDA device" "$TMP/run.log" && grep -q "^SKIP test_device_lua: no CUDA device" "$TMP/run.log"; then
  pass gpu_bundle_run_sh_skips_without_gpu
  if grep -q "^SKIP train_parity_tiny_fp32: no GPU" "$TMP/run.log"; then pass gpu_bundle_train_parity_skips
  else fail gpu_bundle_train_parity_skips "$(grep train_parity "$TMP/run.log" | head -3)"; fi
else
  fail gpu_bundle_run_sh_skips_without_gpu "rc $rc: $(tail -5 "$TMP/run.log")"
fi
finish
