#!/usr/bin/env bash
# Cross-encoders (rerankers) on the CPU: tests/cli/cross_encoder_stsb.lua (a new one-logit head
# on the tiny BERT, bce on data/'s STS-B pairs) trains to a finite loss; its checkpoint is a
# transformers BertForSequenceClassification folder with one label and the sigmoid activation
# sentence-transformers' CrossEncoder applies (none of the embedding model's
# sentence-transformers files), and `trainer classify` scores pairs with it (sigmoid scores);
# a LoRA run's adapter (the head in modules_to_save) scores with --adapter on the headless base,
# and merged it is a cross-encoder folder that scores the same;
# the listwise cross_entropy trains on (query, positive, negative, negative) rows; a
# cross-encoder with an embedding loss is refused with the two losses it takes; `trainer rerank`
# ranks documents as CrossEncoder.rank does, keeps --top-k, refuses a folder without a head; a
# run's evaluation groups labelled eval pairs by query into reranking metrics (MAP, MRR@10, NDCG@10);
# a run resumed from a checkpoint repeats the unbroken run's losses.
source "$(dirname "$0")/lib.sh"
cd "$ROOT"
D=tests/data

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

# LoRA with the head saved: classify and rerank take the adapter on the headless base folder
train lora tests/cli/cross_encoder_stsb.lua 'lora={r=4,alpha=8,modules_to_save={"classifier"}}'
run_trainer classify $D/tiny_bert "$TMP/pairs.tsv" --adapter "$TMP/lora/checkpoint-4"
if [ "$RC" = 0 ] && [ "$(grep -c '^{"score":0\.[0-9]*}$' "$TMP/out")" = 2 ]; then pass lora_adapter_classifies
else fail lora_adapter_classifies "rc $RC: $(head -c 300 "$TMP/out") $(head -c 300 "$TMP/err")"; fi

cp "$TMP/out" "$TMP/adapter_scores"
rm -rf "$TMP/merged"
run_trainer merge $D/tiny_bert "$TMP/lora/checkpoint-4" "$TMP/merged"
expect_rc lora_merges 0
if grep -q 'activation.Sigmoid' "$TMP/merged/config.json" && [ ! -e "$TMP/merged/modules.json" ] \
  && [ ! -e "$TMP/merged/1_Pooling" ]; then pass merged_is_a_cross_encoder_folder
else fail merged_is_a_cross_encoder_folder "$(ls "$TMP/merged")"; fi
run_trainer classify "$TMP/merged" "$TMP/pairs.tsv"
if why=$(paste -d' ' "$TMP/adapter_scores" "$TMP/out" | sed 's/{"score":\([^}]*\)}/\1/g' | awk '
    { d = $1 - $2; if (d < 0) d = -d; if (d > m) m = d; n++ }
    END { printf "%d scores, max |diff| %.3g", n, m; exit !(n == 2 && m <= 1e-5) }'); then pass merged_scores_as_adapter
else fail merged_scores_as_adapter "$why"; fi

# trainer rerank: CrossEncoder.rank's order and scores (golden_tiny_reranker.json's rank), --top-k
printf 'is the dog good?\nhej katt\n' >"$TMP/queries.txt"
printf 'The dog is very good.\nThe cat is not on the mat.\nJag har en hund.\nA good dog.\nHej!\n' >"$TMP/docs.txt"
run_trainer rerank $D/tiny_reranker "$TMP/queries.txt" "$TMP/docs.txt" --batch 2
expect_rc rerank_rc 0
if [ "$(wc -l <"$TMP/out")" = 2 ] && head -1 "$TMP/out" | grep -q '^{"query":"is the dog good?","ranking":\[{"corpus_id":0,"score":0.74851[0-9]*},{"corpus_id":4,"score":0.70965[0-9]*},{"corpus_id":2,.*{"corpus_id":3,.*{"corpus_id":1,'; then
  pass rerank_matches_crossencoder_rank
else fail rerank_matches_crossencoder_rank "$(head -c 400 "$TMP/out")"; fi
run_trainer rerank "$C" "$TMP/queries.txt" "$TMP/docs.txt" --top-k 2
if [ "$RC" = 0 ] && [ "$(grep -o corpus_id "$TMP/out" | wc -l)" = 4 ]; then pass rerank_top_k
else fail rerank_top_k "rc $RC: $(head -c 300 "$TMP/out")"; fi
run_trainer rerank $D/tiny_bert "$TMP/queries.txt" "$TMP/docs.txt"
expect_rc rerank_refuses_headless_folder 1
expect_err rerank_says_no_head 'no classification head'

# the listwise loss: a query, its positive and two negatives a row
{
  echo '{"query": "what is the cat doing?", "pos": "The cat sat on the mat.", "n1": "A bird.", "n2": "This was bad."}'
  echo '{"query": "is the dog good?", "pos": "The dog is very good.", "n1": "The cat is not on the mat.", "n2": "Hej!"}'
  echo '{"query": "hej katt", "pos": "Hej! Katten sitter.", "n1": "Det är inte en hund!", "n2": "A dog and a cat."}'
  echo '{"query": "a bird?", "pos": "A bird in the house.", "n1": "The mat.", "n2": "Jag har en hund."}'
} >"$TMP/listwise.jsonl"
train listwise tests/cli/cross_encoder_stsb.lua loss.name=cross_entropy data.train="$TMP/listwise.jsonl" \
  'data.columns={"query","pos","n1","n2"}' batch.size=2

# evaluation: labelled pairs grouped by query, the reranking metrics in summary.json
{
  echo '{"q": "what is the cat doing?", "d": "A bird.", "label": 0}'
  echo '{"q": "is the dog good?", "d": "The dog is very good.", "label": 1}'
  echo '{"q": "what is the cat doing?", "d": "The cat sat on the mat.", "label": 1}'
  echo '{"q": "what is the cat doing?", "d": "This was bad.", "label": 0}'
  echo '{"q": "is the dog good?", "d": "Hej!", "label": 0}'
} >"$TMP/rerank_eval.jsonl"
train eval tests/cli/cross_encoder_stsb.lua data.eval="$TMP/rerank_eval.jsonl" 'data.eval_columns={"q","d","label"}' \
  loss.name=cross_entropy data.train="$TMP/listwise.jsonl" 'data.columns={"query","pos","n1"}' \
  eval.at_start=true
if grep -q '"mrr@10"' "$TMP/eval/summary.json" && grep -q '"ndcg@10"' "$TMP/eval/summary.json" \
  && grep -q '"base_map"' "$TMP/eval/summary.json"; then pass eval_reranking_metrics
else fail eval_reranking_metrics "$(grep -A8 '"eval"' "$TMP/eval/summary.json" | head -c 400)"; fi

# resumed from its step-2 checkpoint (the new head among the saved weights), a run's losses of
# steps 3-4 are the unbroken run's, bit for bit
train saved tests/cli/cross_encoder_stsb.lua save.every=2
b="$TMP/saved_resumed"; cp -r "$TMP/saved" "$b"; rm -rf "$b/checkpoint-4"
head -n 2 "$TMP/saved/metrics.jsonl" >"$b/metrics.jsonl"
run_trainer tests/cli/cross_encoder_stsb.lua out="$b" save.every=2 resume=latest
expect_rc resume_rc 0
steps() { sed -E 's/.*"loss": ?([-0-9.e+]+).*"step": ?([0-9]+).*/\2 \1/' "$1" | tr '\n' ';'; }
if [ "$(steps "$TMP/saved/metrics.jsonl")" = "$(steps "$b/metrics.jsonl")" ] && [ -n "$(steps "$b/metrics.jsonl")" ]; then
  pass resume_same_losses
else fail resume_same_losses "$(steps "$TMP/saved/metrics.jsonl") vs $(steps "$b/metrics.jsonl")"; fi

run_trainer tests/cli/cross_encoder_stsb.lua out="$TMP/bad" loss.name=mnrl
expect_rc cross_encoder_refuses_mnrl 1
expect_err cross_encoder_names_its_losses 'a cross-encoder trains with "bce"'
finish
