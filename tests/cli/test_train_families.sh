#!/usr/bin/env bash
# Training runs of the families beside BERT on the CPU (`trainer RECIPE.lua`), on the tiny
# folders transformers made (tests/ref/make_tiny_families.py) and the training fixture's pairs
# (tests/cudacpu/train_fixture.lua): DistilBERT as an embedder (MNRL) full in fp32 and under
# LoRA (its default targets q_lin, v_lin) in bf16 with checkpointing; the DistilBERT and RoBERTa
# classifiers (their first-token heads) full in fp32 and under LoRA in bf16 with
# checkpointing, the head saved. Each run ends with a finite loss; a full run's checkpoint
# holds transformers' names and runs `trainer encode` / `trainer classify`; an adapter's config
# names the targets applied; a run resumed from its step-2 checkpoint (the DistilBERT
# classifier's full weights, the embedder's bf16 adapter) gives the unbroken run's losses.
source "$(dirname "$0")/lib.sh"
cd "$ROOT"
D=tests/data
pair_recipes "$D/tiny_distilbert" "$D/tiny_distilbert_cls"

train distil_full "$TMP/emb.lua"
keys "$TMP/distil_full/checkpoint-4/model.safetensors" >"$TMP/k1"
if grep -qx 'transformer.layer.1.ffn.lin2.weight' "$TMP/k1" && ! grep -q '^distilbert\.' "$TMP/k1"; then
  pass distil_full_checkpoint_names
else fail distil_full_checkpoint_names "$(head -3 "$TMP/k1")"; fi
encodes distil_full_checkpoint "$TMP/distil_full/checkpoint-4" $D/golden_tiny_bert_texts.txt
lora_default_targets distil_lora_default_targets distil_lora_bf16_ckpt q_lin

# resume NAME: the run NAME again from its checkpoint-2 (the folder as a run stopped there left
# it), its losses of steps 3-4 the unbroken run's, bit for bit
resume() { # NAME RECIPE overrides...
  local name=$1 recipe=$2 b="$TMP/$1_resumed"; shift 2
  rm -rf "$b"; cp -r "$TMP/$name" "$b"; rm -rf "$b/checkpoint-4"
  head -n 2 "$TMP/$name/metrics.jsonl" >"$b/metrics.jsonl"
  run_trainer "$recipe" out="$b" resume=latest "$@"
  expect_rc "${name}_resume_rc" 0
  steps() { sed -E 's/.*"loss": ?([-0-9.e+]+).*"step": ?([0-9]+).*/\2 \1/' "$1" | tr '\n' ';'; }
  if [ "$(steps "$TMP/$name/metrics.jsonl")" = "$(steps "$b/metrics.jsonl")" ] && [ -n "$(steps "$b/metrics.jsonl")" ]; then
    pass "${name}_resume_same_losses"
  else fail "${name}_resume_same_losses" "$(steps "$TMP/$name/metrics.jsonl") vs $(steps "$b/metrics.jsonl")"; fi
}
train distil_cls_saved "$TMP/cls.lua" save.every=2
resume distil_cls_saved "$TMP/cls.lua" save.every=2
train distil_lora_saved "$TMP/emb.lua" save.every=2 precision=bf16 'checkpoint={every=1}' 'lora={r=4,alpha=8,dropout=0.1}'
resume distil_lora_saved "$TMP/emb.lua" save.every=2 precision=bf16 'checkpoint={every=1}' 'lora={r=4,alpha=8,dropout=0.1}'

for f in distilbert roberta; do
  train ${f}_cls_full "$TMP/cls.lua" model.from="$D/tiny_${f}_cls"
  keys "$TMP/${f}_cls_full/checkpoint-4/model.safetensors" >"$TMP/k2"
  want=$([ $f = distilbert ] && echo pre_classifier.weight || echo classifier.out_proj.weight)
  if grep -qx "$want" "$TMP/k2" && grep -q "^$f\." "$TMP/k2"; then pass ${f}_cls_checkpoint_names
  else fail ${f}_cls_checkpoint_names "no $want"; fi
  classifies ${f}_cls_checkpoint "$TMP/${f}_cls_full/checkpoint-4"
  save=$([ $f = distilbert ] && echo '"pre_classifier","classifier"' || echo '"classifier"')
  train ${f}_cls_lora_bf16_ckpt "$TMP/cls.lua" model.from="$D/tiny_${f}_cls" precision=bf16 'checkpoint={every=1}' \
    "lora={r=4,alpha=8,dropout=0.1,modules_to_save={$save}}"
done
finish
