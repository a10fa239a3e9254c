#!/usr/bin/env bash
# tests/cudacpu/train_mpnet.sh — MPNet training runs on device = "cuda" against the same recipe on
# the CPU, one binary (TRAINER; tests/cudacpu/train_lib.sh), as train_parity.sh holds BERT's: the
# tiny folders transformers made (tests/data/tiny_mpnet, an embedder, and tiny_mpnet_cls, its
# dense + tanh + out_proj head; tests/ref/make_tiny_mpnet.py), whose every attention adds the
# relative-position bias (on cuda the fp32-register kernels, the tensor-core ones take no bias),
# on the fixture's pairs, AdamW, dropout 0.1, grad_clip 1, 6 steps:
#   train_mpnet_fp32_full           the embedder, MNRL, fp32: every step's loss and clip norm
#                                   within 1e-5 relative (the bias table trains);
#   train_mpnet_bf16_ckpt_lora      the same in bf16, checkpointing every layer, LoRA on the
#                                   family's default targets (q, v; the table frozen, in bf16):
#                                   within 1e-2;
#   train_mpnet_cls_fp32_full       the classifier, cross-entropy, fp32: within 1e-5;
#   train_mpnet_cls_bf16_ckpt_lora  its bf16 + checkpointing + LoRA run, the head saved
#                                   (modules_to_save classifier): within 1e-2.
set -u
. "$(dirname "$0")/train_lib.sh"
names "train_mpnet_fp32_full train_mpnet_bf16_ckpt_lora train_mpnet_cls_fp32_full train_mpnet_cls_bf16_ckpt_lora"
need_cuda
fixture

D="$(pwd)/tests/data"
pair_recipes mpnet "$D/tiny_mpnet" "$D/tiny_mpnet_cls"
LORA='lora={r=4,alpha=8,dropout=0.1}'
LORA_HEAD='lora={r=4,alpha=8,dropout=0.1,modules_to_save={"classifier"}}'

parity train_mpnet_fp32_full mpnet "$FP32" "$FX/mpnet.lua"
parity train_mpnet_bf16_ckpt_lora mpnet_bf16 "$BF16" "$FX/mpnet.lua" precision=bf16 checkpoint='{every=1}' "$LORA"
parity train_mpnet_cls_fp32_full cls "$FP32" "$FX/mpnet_cls.lua"
parity train_mpnet_cls_bf16_ckpt_lora cls_bf16 "$BF16" "$FX/mpnet_cls.lua" precision=bf16 checkpoint='{every=1}' "$LORA_HEAD"
finish
