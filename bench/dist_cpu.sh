#!/usr/bin/env bash
# Data-parallel training on the CPU: examples/s of one process and of 2 ranks
# under mpirun, and the gradient all-reduce's time per step. A benchmark: it prints a
# table and asserts nothing.
#
#   bench/dist_cpu.sh [STEPS]     (default 12 steps; needs mpirun and a build with MPI)
#
# The model is the all-MiniLM-L6-v2 shape (6 x 384, 22.7 M parameters) with random weights
# and the tiny test tokenizer, on STS-B training pairs from ../shared/data, CoSENT, AdamW,
# fp32, max_length 64, batch 16 per rank. Rows:
#   1 process, batch 16, all cores        the single-process speed
#   1 process, batch 32, all cores        the same global batch as 2 ranks x 16
#   2 ranks, batch 16 each, 1 core each   mpirun -np 2 (effective batch 32), buckets started
#                                         while backward runs (DDP's overlap, the default)
#   the same, distributed.overlap = false every bucket after backward
# examples/s = steps x global batch / training time (summary.json; the first step, which
# warms the allocator, is included); all-reduce ms/step = the time a step spends inside the
# all-reduce (issuing, testing, waiting: what the overlap does not hide), and the buckets
# issued before backward ended out of all, from summary.json's distributed.
set -euo pipefail
cd "$(dirname "$0")/.."
steps=${1:-12}
command -v mpirun >/dev/null 2>&1 || { echo "dist_cpu: mpirun is not installed (apt-get install openmpi-bin libopenmpi-dev)"; exit 1; }
[ -x ./trainer ] || make -s trainer
work=build/bench-dist
rm -rf "$work" && mkdir -p "$work"
cores=$(nproc)
./trainer run /dev/stdin <<EOF
require("trainer.models").tiny_folder("$work/tok", { seed = 1 })
EOF
cat >"$work/recipe.lua" <<EOF
return {
  model = { arch = "bert", config = "minilm-l6", init = "random", tokenizer = "$work/tok", max_length = 64 },
  data = { train = "../shared/data/stsb_train.jsonl.gz", columns = { "sentence1", "sentence2", "score" } },
  loss = { name = "cosent" }, optim = { lr = 2e-5 }, batch = { size = 16 }, steps = $steps, device = "cpu",
  eval = { at_start = false }, save = { final = false }, log = { quiet = true },
  distributed = { bucket = "25MiB" },
}
EOF
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

figures() { # summary.json, global batch -> "examples/s  allreduce_ms/step  steps"
  ./trainer run /dev/stdin "$1" "$2" <<'EOF'
local s = require("trainer.core.json").read(arg[1])
local batch = tonumber(arg[2])
local secs = s.tokens / s.tokens_per_s
local d = s.distributed
local ar = d and d.world_size > 1 and ("%.1f"):format(1000 * d.allreduce_s / s.steps) or "-"
local buf = d and d.world_size > 1 and ("%.1f MiB"):format(d.collective_buffer_bytes / 2 ^ 20) or "-"
local early = d and d.world_size > 1 and ("%d/%d"):format(d.buckets_overlapped or 0, d.buckets) or "-"
print(("%.1f|%s|%s|%s|%d"):format(s.steps * batch / secs, ar, buf, early, s.steps))
EOF
}
row() { # label, global batch, summary
  IFS='|' read -r eps ar buf early n <<<"$(figures "$3" "$2")"
  printf '%-44s %8s %12s %14s %14s %6s\n' "$1" "$eps" "$ar" "$buf" "$early" "$n"
}

OMP_NUM_THREADS=$cores ./trainer "$work/recipe.lua" out="$work/one16" >/dev/null 2>&1
OMP_NUM_THREADS=$cores ./trainer "$work/recipe.lua" batch.size=32 out="$work/one32" >/dev/null 2>&1
OMP_NUM_THREADS=1 mpirun -np 2 --oversubscribe ./trainer "$work/recipe.lua" out="$work/two16" >/dev/null 2>&1
OMP_NUM_THREADS=1 mpirun -np 2 --oversubscribe ./trainer "$work/recipe.lua" distributed.overlap=false \
  out="$work/two16_after" >/dev/null 2>&1

echo "dist_cpu: MiniLM-L6 shape, fp32, max_length 64, $steps steps, $cores cores"
printf '%-44s %8s %12s %14s %14s %6s\n' "run" "ex/s" "allreduce ms" "bucket buffers" "early buckets" "steps"
row "1 process, batch 16 ($cores threads)" 16 "$work/one16/summary.json"
row "1 process, batch 32 ($cores threads)" 32 "$work/one32/summary.json"
row "mpirun -np 2, batch 16 each (1 thread)" 32 "$work/two16/summary.json"
row "  the same, distributed.overlap = false" 32 "$work/two16_after/summary.json"
