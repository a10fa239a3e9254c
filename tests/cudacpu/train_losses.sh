#!/usr/bin/env bash
# tests/cudacpu/train_losses.sh — the host-computed losses (contrastive, online_contrastive,
# triplet, batch_hard/semi_hard/all_triplet, matryoshka over batch_hard_triplet, angle,
# adaptive_layer over mnrl, mse,
# margin_mse, gist, cached gist) training on device = "cuda" against the same
# recipe on the CPU, with one binary (TRAINER, default build/cudacpu/trainer;
# tests/cudacpu/train_lib.sh): tests/recipes/losses/NAME.lua on the shipped data (data/), the
# tiny encoder of train_fixture.lua, 3 steps in fp32. The loss reads the embeddings back and
# computes in double on the host (trainer.losses.host) on both devices, and uploads its
# gradients to the embeddings' device; the runs differ only by the order of float sums in
# the encoder:
#   train_loss_NAME   every step's loss and clip norm within 1e-5 relative;
#   train_loss_mse, train_loss_margin_mse, train_loss_gist, train_loss_cached_gist  from a
#                     teacher (gist: guide)
#                     folder, a second tiny encoder (loss.teacher): on cuda the teacher runs in
#                     bf16, on the CPU in fp32, so its labels differ by bf16's rounding: within 3e-2.
set -u
. "$(dirname "$0")/train_lib.sh"
LOSSES="contrastive online_contrastive triplet batch_hard_triplet batch_semi_hard_triplet batch_all_triplet
  matryoshka_batch_hard_triplet angle adaptive_layer"
n=""; for l in $LOSSES; do n="$n train_loss_$l"; done
names "$n train_loss_mse train_loss_margin_mse train_loss_gist train_loss_cached_gist"
need_cuda
fixture

for l in $LOSSES; do
  R="tests/recipes/losses/$l.lua"
  parity "train_loss_$l" "$l" "$FP32" "$R" model.from="$FX/emb"
done

"$TRAINER" run <(echo "require('trainer.models').tiny_folder('$FX/teacher', { seed = 9 })") >/dev/null 2>&1
for l in mse margin_mse gist cached_gist; do
  R="tests/recipes/losses/$l.lua"
  WHAT="teacher bf16 on cuda" parity "train_loss_$l" "$l" "loss:3e-2,grad_norm:3e-2,lr:0,tokens:0" "$R" \
    model.from="$FX/emb" loss.teacher="$FX/teacher"
done
finish
