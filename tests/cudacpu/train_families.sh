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
#   train_distil_cls_ckpt_lora      checkpointing every layer + LoRA with the head saved
#                                   (modules_to_save pre_classifier, classifier), fp32: within 1e-5;
#   train_distil_cls_bf16_ckpt_lora the same in bf16: loss within 1e-2, clip norm within 2e-2 (the
#                                   ReLUs of the feed-forward and the head pass a gradient or none
#                                   by the sign of a bf16 value, which the devices' different sums
#                                   round apart near 0: measured 1.2e-2 where the GELU runs stay
#                                   under 4e-3; the fp32 run above holds the same path to 1e-5);
#   train_roberta_cls_fp32_full     the RoBERTa classifier, fp32: within 1e-5;
#   train_plan_distil_fp32, train_plan_distil_bf16_ckpt_lora
#                                   `trainer plan device=cuda --json` of a random DistilBERT
#                                   classifier of tests/lua/test_plan_families.lua's shape (dim 64,
#                                   4 layers) on the fixture's long pairs at max_length 32, against
#                                   the ledger of its cuda run, per tag within 15 % or 64 KiB
#                                   (plan_compare.lua, as train_plan.sh holds BERT's).
set -u
. "$(dirname "$0")/train_lib.sh"
names "train_distil_fp32_full train_distil_bf16_ckpt_lora train_distil_cls_fp32_full train_distil_cls_ckpt_lora
  train_distil_cls_bf16_ckpt_lora train_roberta_cls_fp32_full train_plan_distil_fp32 train_plan_distil_bf16_ckpt_lora"
need_cuda
fixture

D="$(pwd)/tests/data"
pair_recipes distil "$D/tiny_distilbert" "$D/tiny_distilbert_cls"
LORA='lora={r=4,alpha=8,dropout=0.1}'
LORA_HEAD='lora={r=4,alpha=8,dropout=0.1,modules_to_save={"pre_classifier","classifier"}}'
E="$FX/distil.lua" C="$FX/distil_cls.lua"

parity train_distil_fp32_full distil "$FP32" "$E"
parity train_distil_bf16_ckpt_lora distil_bf16 "$BF16" "$E" precision=bf16 checkpoint='{every=1}' "$LORA"
parity train_distil_cls_fp32_full cls "$FP32" "$C"
parity train_distil_cls_ckpt_lora cls_lora "$FP32" "$C" checkpoint='{every=1}' "$LORA_HEAD"
parity train_distil_cls_bf16_ckpt_lora cls_bf16 "loss:1e-2,grad_norm:2e-2,lr:0,tokens:0" "$C" \
  precision=bf16 checkpoint='{every=1}' "$LORA_HEAD"
parity train_roberta_cls_fp32_full roberta "$FP32" "$C" model.from="$D/tiny_roberta_cls"

cat >"$FX/distil_plan.lua" <<LUA
return {
  steps = 2,
  loss = { name = "cross_entropy" }, optim = { name = "adamw", lr = 1e-3 }, batch = { size = 8 },
  grad_clip = 1.0, log = { every = 4, quiet = true }, eval = { at_start = false }, save = { final = false },
  device = "cpu", seed = 3,
  model = { arch = "distilbert", init = "random", tokenizer = "$FX/cls", task = "classification", num_labels = 3,
    max_length = 32, config = { dim = 64, n_layers = 4, n_heads = 4, hidden_dim = 256, vocab_size = 500,
    max_position_embeddings = 512 } },
  data = { train = "$FX/long.jsonl", columns = { "sentence1", "sentence2", "label" } },
}
LUA
plan_check train_plan_distil_fp32 plan_fp32 "$FX/distil_plan.lua" precision=fp32
plan_check train_plan_distil_bf16_ckpt_lora plan_bf16 "$FX/distil_plan.lua" precision=bf16 checkpoint='{every=1}' "$LORA"
finish
