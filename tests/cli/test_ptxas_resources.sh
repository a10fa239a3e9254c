#!/usr/bin/env bash
# test_ptxas_resources.sh — every CUDA kernel's launch resources for every target the build
# made code for, without a GPU: registers for the largest block it can be launched with,
# static shared memory, no dynamic shared memory, spills against tests/cli/ptxas_spills.txt
# (check_ptxas_resources.lua says how; check_ptxas_readers.lua first tries its readers on
# fixtures). It compiles nothing: the Makefile's nvcc rule keeps ptxas's report beside each
# object (build/rel/kernels/cuda/NAME.res), and `make test` builds them.
# The targets are the build's (build/cuda-targets, the -gencode flags the objects were made
# with); a target of the Makefile's default list that this build left out prints SKIP.
# Without nvcc, or with a build without the CUDA backend (make CUDA=0), it prints SKIP.
#   PTXAS_SPILLS_UPDATE=1 bash tests/cli/test_ptxas_resources.sh   rewrites the allowance
source "$(dirname "$0")/lib.sh"
cd "$ROOT"
if ! command -v nvcc >/dev/null 2>&1 && [ ! -x /usr/local/cuda/bin/nvcc ]; then
  echo "SKIP ptxas_resources: nvcc is not installed (no ptxas reports to read)"; exit 0
fi
stamp=build/cuda-targets
if [ ! -s "$stamp" ] || ! ls build/rel/kernels/cuda/*.o >/dev/null 2>&1; then
  echo "SKIP ptxas_resources: this build has no CUDA backend (build/rel/kernels/cuda is empty; make CUDA=0, or no cuBLASLt)"
  exit 0
fi
if [ ! -x "$TRAINER" ]; then
  fail ptxas_resources "./trainer is not built (make), and the check runs in it"; finish; exit
fi
built=$(grep -o 'code=sm_[0-9]*' "$stamp" | sed 's/code=//' | tr '\n' ' ')
default=$(sed -n 's/^CUDA_ARCHS *?= *//p' Makefile)
for a in $default; do
  case " $built " in *" sm_$a "*) ;; *) echo "SKIP ptxas_resources_sm_$a: this build made no sm_$a code (its targets: $built)" ;; esac
done
"$TRAINER" run tests/cli/check_ptxas_readers.lua "$TMP" || failures=$((failures + 1))
"$TRAINER" run tests/cli/check_ptxas_resources.lua build/rel/kernels/cuda tests/cli/ptxas_spills.txt "$TMP" "$built" \
  kernels/cuda/*.cu || failures=$((failures + 1))
finish
