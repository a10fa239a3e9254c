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
parity train_modernbert_fp32_full fp32 "$FP32" "$R"
parity train_modernbert_bf16_ckpt_lora bf16 "$BF16" "$R" precision=bf16 checkpoint='{every=1}' 'lora={r=4,alpha=8,dropout=0.1}'
parity train_modernbert_cls cls "$FP32" "$FX/modernbert_cls.lua"
finish
