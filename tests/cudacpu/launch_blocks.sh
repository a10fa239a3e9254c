#!/usr/bin/env bash
# tests/cudacpu/launch_blocks.sh — the block sizes kernels really run with, against the largest
# block tests/cli/test_ptxas_resources.sh checks their registers for (read from the sources by
# tests/cli/cuda_launch_sites.lua): the op table's CUDA cases (every op's CUDA slot) run on the
# emulator with CUDACPU_LAUNCH_LOG, which writes each kernel's largest block at exit, and
# check_launch_blocks.lua compares. A launch above the sources' bound, or of a kernel they do
# not know, means the register check looked at the wrong block. The kernels the op table
# never launches are listed: their bound rests on the sources alone.
set -u
cd "$(dirname "$0")/../.."
TRAINER=${TRAINER:-build/cudacpu/trainer}
ops=build/cudacpu/rel/gpu-tests/test_ops_table
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
if [ ! -x "$ops" ] || [ ! -x "$TRAINER" ]; then
  echo "FAIL launch_blocks: $ops or $TRAINER is not built (make cudacpu)"; exit 1
fi
if ! CUDACPU_LAUNCH_LOG="$tmp/blocks.txt" "$ops" --cuda >"$tmp/ops.log" 2>&1; then
  echo "FAIL launch_blocks_op_table: the op table failed: $(grep -m3 '^FAIL' "$tmp/ops.log" | tr '\n' ' ')"; exit 1
fi
"$TRAINER" run tests/cudacpu/check_launch_blocks.lua "$tmp/blocks.txt" kernels/cuda/*.cu
