#!/usr/bin/env bash
# tests/cudacpu/train_fp16_scale.sh — fp16 with the dynamic loss scale on the device
# (kernels/cuda/loss_scale.cu: the seed scaled there, the unscale's found-inf flag, x0.5 and a
# skipped step on a set flag, x2 after growth_interval clean steps) against the CPU's scaler,
# on the tiny classifier (cross_entropy, AdamW, grad_clip) for 10 steps. The initial scale
# 2^20 overflows the fp16 gradients (65504 at most) and growth_interval 2 grows it again
# (train_run.lua gives the scaler's test options), so the run skips and grows more than once:
#   train_fp16_loss_scale   the same skipped steps and the same scale at every step (exact:
#                           a power of two, the same decision on both), the losses and clip
#                           norms within 1e-2 relative (fp16 activations: 11 bits, rounded
#                           from different sums), and at least one skip, so the check is live.
#   train_fp16_loss_scale_sgd, train_fp16_loss_scale_adafactor
#                           the same with SGD (momentum 0.9) and Adafactor (its relative step):
#                           on cuda they skip on the device flag and take their step number
#                           (SGD's first step, Adafactor's beta2 and step size) from the device
#                           skip count, so the CPU's host-decided steps must come out the same.
set -u
. "$(dirname "$0")/train_lib.sh"
names "train_fp16_loss_scale train_fp16_loss_scale_sgd train_fp16_loss_scale_adafactor"
need_cuda
fixture

S="--init-scale 1048576 --growth-interval 2"
# check NAME RUN [key=value ...]: RUN on the CPU and on cuda, fp16 for 10 steps, compared
check() {
  local name=$1 run=$2 a b skips
  shift 2
  drive "${run}_cpu" $S "$FX/nli.lua" device=cpu precision=fp16 steps=10 "$@"; a=$?
  drive "${run}_cuda" $S "$FX/nli.lua" device=cuda precision=fp16 steps=10 "$@"; b=$?
  skips=$(grep -c '"skipped":true' "$W/runs/${run}_cpu/metrics.jsonl" 2>/dev/null)
  if [ $a = 0 ] && [ "${skips:-0}" = 0 ]; then
    fail "$name" "no step skipped on the CPU: the initial scale no longer overflows, the check is dead"
  else
    judge "$name" "${run}_cuda" $b "${run}_cpu" $a "skipped:0,loss_scale:0,loss:1e-2,grad_norm:1e-2,lr:0" \
      "${skips} skipped steps"
  fi
}
check train_fp16_loss_scale f16
check train_fp16_loss_scale_sgd f16_sgd optim.name=sgd optim.lr=1e-2 optim.momentum=0.9
check train_fp16_loss_scale_adafactor f16_adafactor optim.name=adafactor optim.relative_step=true
finish
