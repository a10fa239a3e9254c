#!/usr/bin/env bash
# test_cuda_targets.sh — the fat binary carries code for every card it claims: on make test's
# ./trainer, cuobjdump lists machine code for exactly the targets of the build (the Makefile's
# default CUDA_ARCHS, sm_75 to sm_120, unless the build chose others) with every .cu file
# built for each, and the PTX of the newest (compute_120), which drivers compile for cards
# after it. cuobjdump comes from PyPI once (scripts/install_cuobjdump.sh). SKIP without nvcc,
# without the CUDA backend in ./trainer, or offline.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/cuda_targets.sh"
cd "$ROOT"
if ! command -v nvcc >/dev/null 2>&1 && [ ! -x /usr/local/cuda/bin/nvcc ]; then
  echo "SKIP cuda_targets: nvcc is not installed (a CPU-only build)"; exit 0
fi
printf 'print("cuda_built", require("trainer.core.ops").cuda_built())\n' >"$TMP/q.lua"
run_trainer run "$TMP/q.lua"
if ! grep -qF "cuda_built	true" "$TMP/out"; then
  echo "SKIP cuda_targets: ./trainer has no CUDA backend (make CUDA=0, or no cuBLASLt)"; exit 0
fi
# the -gencode flags the objects were built with (the Makefile's stamp)
stamp=$(cat build/cuda-targets 2>/dev/null)
want=$(echo "$stamp" | grep -o 'code=sm_[0-9]*' | sed 's/^code=//' | sort -uV | tr '\n' ' ' | sed 's/ $//')
ptx=$(echo "$stamp" | grep -o 'code=compute_[0-9]*' | sed 's/^code=//' | sort -u | tr '\n' ' ' | sed 's/ $//')
if [ -z "$want" ]; then echo "SKIP cuda_targets: build/cuda-targets names no target (built by another make?)"; exit 0; fi
default=$(makefile_default_targets CUDA_ARCHS)
if [ "$want" = "$default" ]; then pass cuda_targets_build_uses_default_list
else echo "SKIP cuda_targets_build_uses_default_list: ./trainer was built with other targets ($want); checking those"; fi
find_cuobjdump cuda_targets_trainer || { finish; exit; }
expect_targets cuda_targets_trainer ./trainer "$want" "$ptx"
finish
