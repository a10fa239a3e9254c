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
set -u
. "$(dirname "$0")/train_lib.sh"
names "train_fp16_loss_scale"
need_cuda
fixture

S="--init-scale 1048576 --growth-interval 2"
drive f16_cpu $S "$FX/nli.lua" device=cpu precision=fp16 steps=10; a=$?
drive f16_cuda $S "$FX/nli.lua" device=cuda precision=fp16 steps=10; b=$?
skips=$(grep -c '"skipped":true' "$W/runs/f16_cpu/metrics.jsonl" 2>/dev/null)
if [ $a = 0 ] && [ "${skips:-0}" = 0 ]; then
  fail train_fp16_loss_scale "no step skipped on the CPU: the initial scale no longer overflows, the check is dead"
else
  judge train_fp16_loss_scale f16_cuda $b f16_cpu $a "skipped:0,loss_scale:0,loss:1e-2,grad_norm:1e-2,lr:0" \
    "${skips} skipped steps"
fi
finish
