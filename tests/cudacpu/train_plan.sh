#!/usr/bin/env bash
# tests/cudacpu/train_plan.sh — `trainer plan RECIPE device=cuda --json` against the ledger
# the cuda run of the same recipe reports (each step's peak by tag in metrics.jsonl; the run's
# peak of summary.json printed beside), per tag within 15 % (the bound of tests/lua/test_plan.lua on
# the CPU) or 64 KiB, the allocator's rounding of small tensors (plan_compare.lua says why). The recipe is the fixture's
# plan.lua: that test's shape (hidden 64, 4 layers), data longer than model.max_length = 32, so
# every batch is the 8 rows x 32 tokens the plan assumes (it plans the worst case: real batches
# pad only to their longest). Two steps: the optimizer's moments exist from the first.
#   train_plan_fp32            fp32, full fine-tune;
#   train_plan_bf16_ckpt_lora  bf16 + checkpointing of every layer + LoRA (frozen half
#                              weights, the LoRA masters' gradients and moments only).
set -u
. "$(dirname "$0")/train_lib.sh"
names "train_plan_fp32 train_plan_bf16_ckpt_lora"
need_cuda
fixture

plan_check() { # NAME RUN overrides...
  local name=$1 run=$2 why rc; shift 2
  "$TRAINER" plan "$FX/plan.lua" device=cuda "$@" --json >"$W/$run.plan.json" 2>"$W/$run.plan.err" || {
    fail "$name" "trainer plan failed: $(tail -n 2 "$W/$run.plan.err" | tr '\n' ' ')"; return; }
  train "$run" "$FX/plan.lua" device=cuda "$@"; rc=$?
  if [ $rc != 0 ]; then fail "$name" "the cuda run failed (rc $rc): $(tail -n 2 "$W/runs/$run.log" | tr '\n' ' ')"
  elif why=$("$TRAINER" run tests/cudacpu/plan_compare.lua "$W/$run.plan.json" "$W/runs/$run" 2>&1); then pass "$name" "$why"
  else fail "$name" "$why"; fi
}
plan_check train_plan_fp32 fp32 precision=fp32
plan_check train_plan_bf16_ckpt_lora bf16 precision=bf16 checkpoint='{every=1}' 'lora={r=4,alpha=8,dropout=0.1,targets={"query","value"}}'
finish
