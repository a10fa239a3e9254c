#!/usr/bin/env bash
# test_gpu_bundle.sh — `make gpu-bundle` on a machine with nvcc and no GPU builds the CUDA 13
# bundle and prints its size; gpu_bundle_checks.sh then checks the tarball (at most 60 MiB,
# relocatable, the kernels once in lib/libtrainer.so, the Makefile's default targets, the
# binary's FFI, CPU training and encoding, tests/gpu/run.sh skipping without a GPU). Without
# nvcc it prints SKIP.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/cuda_targets.sh"
source "$(dirname "$0")/gpu_bundle_checks.sh"
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
if grep -q "^gpu-bundle: $tarball, $(( (bytes + 1048575) / 1048576 )) MiB (limit 60)" "$TMP/make.log"; then pass gpu_bundle_prints_size
else fail gpu_bundle_prints_size "make's output lacks the size: $(grep '^gpu-bundle:' "$TMP/make.log" | head -2)"; fi

check_bundle gpu_bundle "$tarball" 13 580 "$(makefile_default_targets CUDA_ARCHS)" \
  "compute_$(makefile_default_targets CUDA_ARCHS | tr ' ' '\n' | tail -1 | sed 's/^sm_//')"
finish
