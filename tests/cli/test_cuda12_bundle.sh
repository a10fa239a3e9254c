#!/usr/bin/env bash
# test_cuda12_bundle.sh — the CUDA 12 bundle (`make gpu-bundle-cuda12`: the V100's sm_70 and
# drivers from 525 on), as it was last built: gpu_bundle_checks.sh's checks with the
# Makefile's CUDA12_ARCHS (sm_70 first) and the PTX of the newest, and, for CUDA 12 itself,
# that lib/libtrainer.so dlopens libcublasLt.so.12 (never CUDA 13's) and the bundle carries
# libcudart.so.12. `make test` never builds it (a ~1 GB toolchain and a long build): SKIP at
# once when the toolchain (scripts/cuda12_toolchain.sh) is not installed or the bundle is
# not built.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/cuda_targets.sh"
source "$(dirname "$0")/gpu_bundle_checks.sh"
cd "$ROOT"
tarball=build/gpu-bundle/trainer-gpu-cuda12.tar.gz
if [ ! -f build/cuda12/home/.installed ]; then
  echo "SKIP cuda12_bundle: the CUDA 12 toolchain is not installed (make gpu-bundle-cuda12 installs it, ~1 GB from PyPI, and builds)"; exit 0
fi
if [ ! -f "$tarball" ]; then echo "SKIP cuda12_bundle: $tarball is not built (make gpu-bundle-cuda12)"; exit 0; fi
targets=$(makefile_default_targets CUDA12_ARCHS)
check_bundle cuda12_bundle "$tarball" 12 525 "$targets" "compute_$(echo "$targets" | tr ' ' '\n' | tail -1 | sed 's/^sm_//')"
sonames=$(strings -a "$BUNDLE/lib/libtrainer.so" | grep -o '^libcublasLt\.so[.0-9]*$' | sort -u | tr '\n' ' ')
if [ "$sonames" = "libcublasLt.so libcublasLt.so.12 " ]; then pass cuda12_bundle_dlopens_cublaslt_12
else fail cuda12_bundle_dlopens_cublaslt_12 "libtrainer.so names: $sonames"; fi
if [ -f "$BUNDLE/lib/libcudart.so.12" ]; then pass cuda12_bundle_carries_cudart_12
else fail cuda12_bundle_carries_cudart_12 "lib/ has $(ls "$BUNDLE/lib" | tr '\n' ' ')"; fi
finish
