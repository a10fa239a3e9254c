#!/usr/bin/env bash
# Cross-encoders (rerankers) on the CPU: tests/cli/cross_encoder_stsb.lua (a new one-logit head
# on the tiny BERT, bce on data/'s STS-B pairs) trains to a finite loss; its checkpoint is a
# transformers BertForSequenceClassification folder with one label and the sigmoid activation
# sentence-transformers' CrossEncoder applies (none of the embedding model's
# sentence-transformers files), and `trainer classify` scores pairs with it (sigmoid scores);
# the listwise cross_entropy trains on (query, positive, negative, negative) rows; a
# cross-encoder with an embedding loss is refused with the two losses it takes.
source "$(dirname "$0")/lib.sh"
cd "$ROOT"
D=tests/data

train() { # NAME RECIPE overrides...
  local name=$1 recipe=$2 last; shift 2
  run_trainer "$recipe" out="$TMP/$name" "$@"
  expect_rc "${name}_rc" 0
  last=$(tail -n 1 "$TMP/$name/metrics.jsonl" 2>/dev/null | sed -E 's/.*"loss": ?([-0-9.e+]+).*/\1/')
  if awk -v l="$last" 'BEGIN { exit !(l + 0 == l && l > 0 && l < 100) }'; then pass "${name}_loss_finite"
  else fail "${name}_loss_finite" "last loss '$last'"; fi
}

train bce tests/cli/cross_encoder_stsb.lua
C="$TMP/bce/checkpoint-4"
if grep -q '"BertForSequenceClassification"' "$C/config.json" && grep -q '"LABEL_0"' "$C/config.json" \
  && ! grep -q '"LABEL_1"' "$C/config.json" && grep -q 'activation.Sigmoid' "$C/config.json"; then
  pass bce_checkpoint_config
else fail bce_checkpoint_config "$(head -c 400 "$C/config.json")"; fi
if [ ! -e "$C/modules.json" ] && [ ! -e "$C/1_Pooling" ] && [ -e "$C/tokenizer.json" ]; then pass bce_checkpoint_files
else fail bce_checkpoint_files "$(ls "$C")"; fi
printf 'A man is playing a flute.\tA man plays the flute.\nA cat.\tThe stock market fell.\n' >"$TMP/pairs.tsv"
run_trainer classify "$C" "$TMP/pairs.tsv"
expect_rc bce_checkpoint_classifies 0
if [ "$(grep -c '^{"score":0\.[0-9]*}$' "$TMP/out")" = 2 ]; then pass classify_sigmoid_scores
else fail classify_sigmoid_scores "$(head -c 300 "$TMP/out")"; fi

# the listwise loss: a query, its positive and two negatives a row
{
  echo '{"query": "what is the cat doing?", "pos": "The cat sat on the mat.", "n1": "A bird.", "n2": "This was bad."}'
  echo '{"query": "is the dog good?", "pos": "The dog is very good.", "n1": "The cat is not on the mat.", "n2": "Hej!"}'
  echo '{"query": "hej katt", "pos": "Hej! Katten sitter.", "n1": "Det är inte en hund!", "n2": "A dog and a cat."}'
  echo '{"query": "a bird?", "pos": "A bird in the house.", "n1": "The mat.", "n2": "Jag har en hund."}'
} >"$TMP/listwise.jsonl"
train listwise tests/cli/cross_encoder_stsb.lua loss.name=cross_entropy data.train="$TMP/listwise.jsonl" \
  'data.columns={"query","pos","n1","n2"}' batch.size=2

run_trainer tests/cli/cross_encoder_stsb.lua out="$TMP/bad" loss.name=mnrl
expect_rc cross_encoder_refuses_mnrl 1
expect_err cross_encoder_names_its_losses 'a cross-encoder trains with "bce"'
finish
