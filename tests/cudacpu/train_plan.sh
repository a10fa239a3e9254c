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

plan_check train_plan_fp32 fp32 "$FX/plan.lua" precision=fp32
plan_check train_plan_bf16_ckpt_lora bf16 "$FX/plan.lua" precision=bf16 checkpoint='{every=1}' 'lora={r=4,alpha=8,dropout=0.1,targets={"query","value"}}'
finish
