#!/usr/bin/env bash
# MPNet training runs on the CPU (`trainer RECIPE.lua`), on the tiny folders transformers made
# (tests/ref/make_tiny_mpnet.py) and the training fixture's pairs (tests/cudacpu/train_fixture.lua):
# the embedder (MNRL) full in fp32 and under LoRA (the family's default targets q, v) in bf16 with
# checkpointing; the classifier (its dense + tanh + out_proj head) full in fp32 and under LoRA in
# bf16 with checkpointing, the head saved. Each run ends with a finite loss; a full run's
# checkpoint holds transformers' names (the bias table among them) and runs `trainer encode` /
# `trainer classify`; an adapter's config names the targets applied; `trainer encode` runs on
# the folder itself.
source "$(dirname "$0")/lib.sh"
cd "$ROOT"
D=tests/data
pair_recipes "$D/tiny_mpnet" "$D/tiny_mpnet_cls"

# the folder itself: trainer tokenize and encode (--batch 3: two batches of other lengths) give
# transformers' ids and embeddings (the packed inference path keeps the padded layout for the
# biased attention op)
run_trainer tokenize $D/tiny_mpnet $D/golden_tiny_mpnet_texts.txt
check_out mpnet_folder_tokenizes mpnet_tokenize_equals_golden ids $D/golden_tiny_mpnet.safetensors
run_trainer encode $D/tiny_mpnet $D/golden_tiny_mpnet_texts.txt --batch 3
check_out mpnet_folder_encodes mpnet_encode_equals_golden embeddings $D/golden_tiny_mpnet.safetensors embedding

train mpnet_full "$TMP/emb.lua"
keys "$TMP/mpnet_full/checkpoint-4/model.safetensors" >"$TMP/k1"
if grep -qx 'encoder.layer.1.attention.attn.q.weight' "$TMP/k1" && grep -qx 'encoder.relative_attention_bias.weight' "$TMP/k1" \
    && ! grep -q '^mpnet\.' "$TMP/k1"; then
  pass mpnet_full_checkpoint_names
else fail mpnet_full_checkpoint_names "$(head -3 "$TMP/k1")"; fi
encodes mpnet_full_checkpoint "$TMP/mpnet_full/checkpoint-4" $D/golden_tiny_mpnet_texts.txt
lora_default_targets mpnet_lora_default_targets mpnet_lora_bf16_ckpt q

train mpnet_cls_full "$TMP/cls.lua"
keys "$TMP/mpnet_cls_full/checkpoint-4/model.safetensors" >"$TMP/k2"
if grep -qx classifier.out_proj.weight "$TMP/k2" && grep -qx mpnet.encoder.relative_attention_bias.weight "$TMP/k2"; then
  pass mpnet_cls_checkpoint_names
else fail mpnet_cls_checkpoint_names "no classifier.out_proj.weight"; fi
classifies mpnet_cls_checkpoint "$TMP/mpnet_cls_full/checkpoint-4"
train mpnet_cls_lora_bf16_ckpt "$TMP/cls.lua" precision=bf16 'checkpoint={every=1}' \
  'lora={r=4,alpha=8,dropout=0.1,modules_to_save={"classifier"}}'
finish
