#!/usr/bin/env bash
# scripts/install_cuobjdump.sh — prints the path of a cuobjdump (the tool that lists the
# machine code, --list-elf, and the PTX, --list-ptx, a CUDA binary carries), installing PyPI's
# nvidia-cuda-cuobjdump under build/cuda-tools the first time: the pip-installed CUDA toolkit
# has none. A cuobjdump beside nvcc, when there is one, is used as it is. Exit status 1 with
# the reason on stderr when none can be had (offline: pip gives up within a minute).
# Used by tests/cli/test_cuda_targets.sh, tests/cli/test_gpu_bundle.sh and
# tests/cli/test_cuda12_bundle.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
version=${CUOBJDUMP_VERSION:-13.5.37}
site=build/cuda-tools/site

nvcc=$(command -v nvcc 2>/dev/null || echo /usr/local/cuda/bin/nvcc)
if [ -x "$(dirname "$nvcc")/cuobjdump" ]; then echo "$(dirname "$nvcc")/cuobjdump"; exit 0; fi
tool=$( (find "$site" -name cuobjdump -type f 2>/dev/null || true) | head -1)
if [ -z "$tool" ]; then
  # --target, not a system-wide install: the tool stays inside build/ (`make clean` removes it)
  if ! timeout 120 python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore --no-deps --timeout 15 --retries 1 \
      --target "$site" "nvidia-cuda-cuobjdump==$version" >build/cuda-tools.log 2>&1; then
    echo "install_cuobjdump: pip could not install nvidia-cuda-cuobjdump==$version (offline?): $(tail -1 build/cuda-tools.log)" >&2
    exit 1
  fi
  tool=$(find "$site" -name cuobjdump -type f | head -1)
  [ -n "$tool" ] || { echo "install_cuobjdump: the nvidia-cuda-cuobjdump wheel has no cuobjdump" >&2; exit 1; }
  chmod +x "$tool"
fi
echo "$(pwd)/$tool"
