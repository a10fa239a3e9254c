#!/usr/bin/env bash
# tests/cudacpu/train_modernbert.sh — ModernBERT training runs on device = "cuda" against the
# same recipe on the CPU (tests/cudacpu/train_lib.sh), on tests/data/tiny_modernbert (rotary
# queries and keys, GeGLU, pre-norm without biases; layer 1 local with a window of 4 keys, so
# the fixture's texts of up to ~10 tokens run the windowed attention kernels):
#   train_modernbert_fp32_full           MNRL, AdamW, every parameter: within 1e-5 relative;
#   train_modernbert_bf16_ckpt_lora      bf16 + checkpointing of every layer + LoRA on the
#                                        family's targets (Wqkv, Wi): within 1e-2;
#   train_modernbert_cls                 the classifier (head dense/act/norm, mean pooling),
#                                        cross-entropy, fp32: within 1e-5.
set -u
. "$(dirname "$0")/train_lib.sh"
names "train_modernbert_fp32_full train_modernbert_bf16_ckpt_lora train_modernbert_cls"
need_cuda
fixture

pair_recipes modernbert "$(pwd)/tests/data/tiny_modernbert" "$(pwd)/tests/data/tiny_modernbert_cls"

R="$FX/modernbert.lua"
train fp32_cpu "$R" device=cpu; a=$?
train fp32_cuda "$R" device=cuda; b=$?
judge train_modernbert_fp32_full fp32_cuda $b fp32_cpu $a "loss:1e-5,grad_norm:1e-5,lr:0,tokens:0"

LORA='lora={r=4,alpha=8,dropout=0.1}'
train bf16_cpu "$R" device=cpu precision=bf16 checkpoint='{every=1}' "$LORA"; a=$?
train bf16_cuda "$R" device=cuda precision=bf16 checkpoint='{every=1}' "$LORA"; b=$?
judge train_modernbert_bf16_ckpt_lora bf16_cuda $b bf16_cpu $a "loss:1e-2,grad_norm:1e-2,lr:0,tokens:0"

train cls_cpu "$FX/modernbert_cls.lua" device=cpu; a=$?
train cls_cuda "$FX/modernbert_cls.lua" device=cuda; b=$?
judge train_modernbert_cls cls_cuda $b cls_cpu $a "loss:1e-5,grad_norm:1e-5,lr:0,tokens:0"
finish
