#!/usr/bin/env bash
# tests/cudacpu/train_families.sh — training runs of the families beside BERT on device = "cuda"
# against the same recipe on the CPU, one binary (TRAINER; tests/cudacpu/train_lib.sh), as
# train_parity.sh holds BERT's: the tiny folders transformers made (tests/data/tiny_distilbert,
# tiny_distilbert_cls with its ReLU feed-forward and pre_classifier + ReLU head,
# tiny_roberta_cls with its dense + tanh + out_proj head; tests/ref/make_tiny_families.py) on
# the fixture's pairs, AdamW, dropout 0.1, grad_clip 1, 6 steps:
#   train_distil_fp32_full          DistilBERT embedder, MNRL, fp32: every step's loss and clip
#                                   norm within 1e-5 relative;
#   train_distil_bf16_ckpt_lora     the same in bf16, checkpointing every layer, LoRA on the
#                                   family's default targets (q_lin, v_lin): within 1e-2;
#   train_distil_cls_fp32_full      the DistilBERT classifier, cross-entropy, fp32: within 1e-5;
#   train_distil_cls_bf16_ckpt_lora its bf16 + checkpointing + LoRA run, the head saved
#                                   (modules_to_save pre_classifier, classifier): within 1e-2;
#   train_roberta_cls_fp32_full     the RoBERTa classifier, fp32: within 1e-5.
set -u
. "$(dirname "$0")/train_lib.sh"
names "train_distil_fp32_full train_distil_bf16_ckpt_lora train_distil_cls_fp32_full train_distil_cls_bf16_ckpt_lora train_roberta_cls_fp32_full"
need_cuda
fixture

D="$(pwd)/tests/data"
cat >"$FX/distil.lua" <<LUA
return {
  model = { from = "$D/tiny_distilbert" }, data = { train = "$FX/pairs.jsonl", columns = { "sentence1", "sentence2" } },
  loss = { name = "mnrl" }, optim = { name = "adamw", lr = 1e-3 }, batch = { size = 8 }, steps = 6,
  grad_clip = 1.0, log = { every = 4, quiet = true }, eval = { at_start = false }, save = { final = false },
  device = "cpu", seed = 3,
}
LUA
cat >"$FX/distil_cls.lua" <<LUA
return {
  model = { from = "$D/tiny_distilbert_cls", task = "classification" },
  data = { train = "$FX/pairs.jsonl", columns = { "sentence1", "sentence2", "label" } },
  loss = { name = "cross_entropy" }, optim = { name = "adamw", lr = 1e-3 }, batch = { size = 8 }, steps = 6,
  grad_clip = 1.0, log = { every = 4, quiet = true }, eval = { at_start = false }, save = { final = false },
  device = "cpu", seed = 3,
}
LUA
FP32="loss:1e-5,grad_norm:1e-5,lr:0,tokens:0"
BF16="loss:1e-2,grad_norm:1e-2,lr:0,tokens:0"

train distil_cpu "$FX/distil.lua" device=cpu; a=$?
train distil_cuda "$FX/distil.lua" device=cuda; b=$?
judge train_distil_fp32_full distil_cuda $b distil_cpu $a "$FP32"

LORA='lora={r=4,alpha=8,dropout=0.1}'
train distil_bf16_cpu "$FX/distil.lua" device=cpu precision=bf16 checkpoint='{every=1}' "$LORA"; a=$?
train distil_bf16_cuda "$FX/distil.lua" device=cuda precision=bf16 checkpoint='{every=1}' "$LORA"; b=$?
judge train_distil_bf16_ckpt_lora distil_bf16_cuda $b distil_bf16_cpu $a "$BF16"

train cls_cpu "$FX/distil_cls.lua" device=cpu; a=$?
train cls_cuda "$FX/distil_cls.lua" device=cuda; b=$?
judge train_distil_cls_fp32_full cls_cuda $b cls_cpu $a "$FP32"

LORA_HEAD='lora={r=4,alpha=8,dropout=0.1,modules_to_save={"pre_classifier","classifier"}}'
train cls_bf16_cpu "$FX/distil_cls.lua" device=cpu precision=bf16 checkpoint='{every=1}' "$LORA_HEAD"; a=$?
train cls_bf16_cuda "$FX/distil_cls.lua" device=cuda precision=bf16 checkpoint='{every=1}' "$LORA_HEAD"; b=$?
judge train_distil_cls_bf16_ckpt_lora cls_bf16_cuda $b cls_bf16_cpu $a "$BF16"

train roberta_cpu "$FX/distil_cls.lua" device=cpu model.from="$D/tiny_roberta_cls"; a=$?
train roberta_cuda "$FX/distil_cls.lua" device=cuda model.from="$D/tiny_roberta_cls"; b=$?
judge train_roberta_cls_fp32_full roberta_cuda $b roberta_cpu $a "$FP32"
finish
