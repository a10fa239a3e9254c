#!/usr/bin/env bash
# tests/cudacpu/train_cross_encoder.sh — a cross-encoder (reranker) trained on device = "cuda"
# against the same recipe on the CPU, one binary (TRAINER; tests/cudacpu/train_lib.sh):
# tests/cli/cross_encoder_stsb.lua (a new one-logit head on tests/data/tiny_bert, data/'s STS-B
# pairs, AdamW, dropout 0.1, grad_clip 1, 4 steps), fp32:
#   train_cross_encoder_bce        bce on the scores / 5: every step's loss and clip norm within
#                                  1e-5 relative;
#   train_cross_encoder_listwise   the listwise cross_entropy on (premise, entailment,
#                                  contradiction) triplets built from data/'s SweNLI: within 1e-5;
#   train_cross_encoder_checkpoint the cuda run's checkpoint scores pairs (`trainer classify`)
#                                  as the CPU run's within 1e-5;
#   train_plan_cross_encoder_bce, train_plan_cross_encoder_listwise
#                                  `trainer plan device=cuda --json` of both against the ledger of
#                                  their cuda run, per tag within 15 % or 64 KiB (plan_compare.lua).
set -u
. "$(dirname "$0")/train_lib.sh"
names "train_cross_encoder_bce train_cross_encoder_listwise train_cross_encoder_checkpoint train_plan_cross_encoder_bce
  train_plan_cross_encoder_listwise"
need_cuda

R=tests/cli/cross_encoder_stsb.lua
parity train_cross_encoder_bce bce "$FP32" $R log.every=1

LW=(loss.name=cross_entropy data.train=data/swenli_dev.jsonl.gz data.build=nli_triplets data.max_rows=nil
  'data.columns={"premise","hypothesis","label"}' batch.size=4 save.final=false log.every=1)
parity train_cross_encoder_listwise lw "$FP32" $R "${LW[@]}"

printf 'A man is playing a flute.\tA man plays the flute.\nA cat.\tThe stock market fell.\n' >"$W/pairs.tsv"
if "$TRAINER" classify "$W/runs/bce_cpu/checkpoint-4" "$W/pairs.tsv" >"$W/cpu.out" 2>&1 \
  && "$TRAINER" classify "$W/runs/bce_cuda/checkpoint-4" "$W/pairs.tsv" --device cuda >"$W/cuda.out" 2>&1; then
  if why=$(paste -d' ' "$W/cpu.out" "$W/cuda.out" | sed 's/{"score":\([^}]*\)}/\1/g' | awk '
      { d = $1 - $2; if (d < 0) d = -d; if (d > m) m = d; n++ }
      END { printf "%d scores, max |diff| %.3g", n, m; exit !(n == 2 && m <= 1e-5) }'); then
    pass train_cross_encoder_checkpoint "$why"
  else fail train_cross_encoder_checkpoint "$why"; fi
else fail train_cross_encoder_checkpoint "classify failed: $(tail -n 2 "$W/cpu.out" "$W/cuda.out" | tr '\n' ' ')"; fi
# `trainer plan device=cuda --json` against the ledger of the cuda run (plan_compare.lua: per tag
# within 15 % or 64 KiB), bce and the listwise loss (three pairs a row)
plan_check() { # NAME RUN overrides...
  local name=$1 run=$2 why rc; shift 2
  "$TRAINER" plan $R device=cuda "$@" --json >"$W/$run.plan.json" 2>"$W/$run.plan.err" || {
    fail "$name" "trainer plan failed: $(tail -n 2 "$W/$run.plan.err" | tr '\n' ' ')"; return; }
  train "$run" $R device=cuda steps=2 save.final=false "$@"; rc=$?
  if [ $rc != 0 ]; then fail "$name" "the cuda run failed (rc $rc): $(tail -n 2 "$W/runs/$run.log" | tr '\n' ' ')"
  elif why=$("$TRAINER" run tests/cudacpu/plan_compare.lua "$W/$run.plan.json" "$W/runs/$run" 2>&1); then pass "$name" "$why"
  else fail "$name" "$why"; fi
}
plan_check train_plan_cross_encoder_bce plan_bce
plan_check train_plan_cross_encoder_listwise plan_lw "${LW[@]}" batch.size=8
finish
