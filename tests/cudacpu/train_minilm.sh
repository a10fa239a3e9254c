#!/usr/bin/env bash
# tests/cudacpu/train_minilm.sh — all-MiniLM-L6-v2 (models/all-MiniLM-L6-v2, `make fetch-models`;
# without it, its shape with random weights, said in the line) trained on device = "cuda"
# against the CPU, bf16 + checkpointing of every layer + LoRA (the flagship's configuration,
# bench/gpu/trainer_side.lua as tests/gpu/train_parity.sh runs it), MNRL on a fixed batch of
# random token ids:
#   train_minilm_bf16_lora   every step's loss within 1e-2 relative (bf16, as train_parity.sh's
#                            bf16 check: 8-bit activations rounded from different sums).
# The size is MINILM_ROWS x MINILM_SEQ for MINILM_STEPS steps (default 8 x 16, 2 steps): on the
# emulator the naive cuBLASLt stand-in makes a step of 8 x 16 take about 30 s (2 cores); a
# BLAS-backed stand-in or a real GPU affords tests/gpu/train_parity.sh's 16 x 64 x 20.
set -u
. "$(dirname "$0")/train_lib.sh"
names "train_minilm_bf16_lora"
need_cuda
ROWS=${MINILM_ROWS:-8}; SEQ=${MINILM_SEQ:-16}; STEPS=${MINILM_STEPS:-2}

side() { "$TRAINER" run bench/gpu/trainer_side.lua "$@" 2>>"$W/stderr.txt"; }
what="all-MiniLM-L6-v2"
M="$W/minilm"
if [ -f models/all-MiniLM-L6-v2/model.safetensors ]; then
  side --write "$W/minilm_rand" --shape minilm --seq "$SEQ" >/dev/null   # only its batch is used
  mkdir -p "$M"
  cp models/all-MiniLM-L6-v2/config.json "$W/minilm_rand/batch.safetensors" "$M/"
  ln -sf "$(pwd)/models/all-MiniLM-L6-v2/model.safetensors" "$M/model.safetensors"
else
  what="all-MiniLM-L6-v2's shape, random weights (models/all-MiniLM-L6-v2 absent)"
  side --write "$M" --shape minilm --seq "$SEQ" >/dev/null
fi
losses() { side --train "$M" --config bf16-ckpt-lora --rows "$ROWS" --device "$1" --warmup 0 --steps "$STEPS" --losses |
  sed -n 's/.*losses=//p' | tr ',' '\n'; }
t0=$(date +%s); losses cpu >"$W/cpu.txt"; t1=$(date +%s); losses cuda >"$W/cuda.txt"; t2=$(date +%s)
what="$what, $ROWS x $SEQ x $STEPS steps, cpu $((t1 - t0)) s, cuda $((t2 - t1)) s"
if [ ! -s "$W/cuda.txt" ] || [ ! -s "$W/cpu.txt" ]; then fail train_minilm_bf16_lora "a run failed: $(tail -n 2 "$W/stderr.txt")"
elif why=$(paste -d ' ' "$W/cuda.txt" "$W/cpu.txt" | awk -v tol=1e-2 -v n="$STEPS" '
    { d = $1 - $2; d = d < 0 ? -d : d; s = $2 < 0 ? -$2 : $2; r = d / (s > 1e-30 ? s : 1e-30)
      if (r > worst) { worst = r; at = NR } }
    END { printf "%d steps: worst relative difference %.3g at step %d", NR, worst, at; exit (NR != n || worst > tol) }')
then pass train_minilm_bf16_lora "$what; $why"
else fail train_minilm_bf16_lora "$what: $why"; fi
finish
