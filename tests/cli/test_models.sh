#!/usr/bin/env bash
# End-to-end tests of the model commands (tokenize, encode, classify) on the tiny golden
# folders, on generated tiny folders, and on all-MiniLM-L6-v2 when `make fetch-models`
# has put it in models/ (else a SKIP line); outputs are compared with the PyTorch goldens
# by tests/cli/check_outputs.lua. Broken folders and files: exit 1 naming the file.
source "$(dirname "$0")/lib.sh"
cd "$ROOT"
D=tests/data

# ---------------------------------------------------------------- tiny goldens
run_trainer tokenize $D/tiny_bert $D/golden_tiny_bert_texts.txt
check_out tokenize_tiny_rc tokenize_tiny_ids_equal_golden ids $D/golden_tiny_bert.safetensors

run_trainer encode $D/tiny_bert $D/golden_tiny_bert_texts.txt --batch 3
check_out encode_tiny_rc encode_tiny_equals_golden embeddings $D/golden_tiny_bert.safetensors embedding

run_trainer classify $D/tiny_bert_cls $D/golden_tiny_bert_cls_pairs.tsv
check_out classify_tiny_rc classify_tiny_labels_equal_golden labels $D/golden_tiny_bert_cls.safetensors entailment neutral contradiction

# the other families' tiny folders (tests/ref/make_tiny_families.py): the same texts and pairs
run_trainer encode $D/tiny_distilbert $D/golden_tiny_bert_texts.txt --batch 3
check_out encode_distilbert_rc encode_distilbert_equals_golden embeddings $D/golden_tiny_distilbert.safetensors embedding
for f in tiny_distilbert_cls tiny_roberta_cls; do
  run_trainer classify $D/$f $D/golden_tiny_bert_cls_pairs.tsv
  check_out classify_${f}_rc classify_${f}_labels_equal_golden labels $D/golden_$f.safetensors entailment neutral contradiction
done

run_trainer tokenize $D/tiny_bert $D/golden_tiny_bert_texts.txt --max-length 5
expect_out tokenize_max_length_truncates "[2,"
if echo "$OUT" | awk -F, '{ if (NF > 5) exit 1 }'; then pass tokenize_max_length_at_most_5; else fail tokenize_max_length_at_most_5 "$OUT"; fi

# ModernBERT (byte-level BPE, rotary, GeGLU, a local layer's window of 4 keys) against transformers
run_trainer tokenize $D/tiny_modernbert $D/golden_tiny_modernbert_texts.txt
check_out tokenize_modernbert_rc tokenize_modernbert_ids_equal_golden ids $D/golden_tiny_modernbert.safetensors
run_trainer encode $D/tiny_modernbert $D/golden_tiny_modernbert_texts.txt --batch 3
check_out encode_modernbert_rc encode_modernbert_equals_golden embeddings $D/golden_tiny_modernbert.safetensors w8.embedding

# ---------------------------------------------------------------- generated tiny folders
"$TRAINER" run /dev/stdin >/dev/null 2>"$TMP/gen_err" <<LUA
trainer.models.tiny_folder("$TMP/tiny", { seed = 3, normalize = true })
trainer.models.tiny_folder("$TMP/tiny_cls", { seed = 4, task = "classification" })
LUA
RC=$?; expect_rc tiny_folder_generated 0
printf 'the cat sat on the mat.\nhej katt\n\n' >"$TMP/in.txt"
run_trainer encode "$TMP/tiny" "$TMP/in.txt"
expect_rc encode_generated_rc 0
if [ "$(echo "$OUT" | wc -l)" = 3 ]; then pass encode_one_line_per_input; else fail encode_one_line_per_input "$OUT"; fi
printf 'the cat\ta dog\nthe bird is good\n' >"$TMP/pairs.tsv"
run_trainer classify "$TMP/tiny_cls" "$TMP/pairs.tsv"
expect_rc classify_generated_rc 0
expect_out classify_prints_label '"label":'
# a folder without a trained head: refused, never random labels
run_trainer classify "$TMP/tiny" "$TMP/pairs.tsv"
expect_rc classify_no_head_rc 1
expect_err classify_no_head_says "$TMP/tiny: this folder has no classification head; train one with recipes/nli_classifier.lua"
if [ -z "$OUT" ]; then pass classify_no_head_prints_nothing; else fail classify_no_head_prints_nothing "$OUT"; fi

# ---------------------------------------------------------------- errors
run_trainer encode "$TMP/nowhere" "$TMP/in.txt"
expect_rc encode_missing_folder_rc 1
expect_err encode_missing_folder_named "$TMP/nowhere"
expect_err encode_missing_folder_says_what_is_valid "config.json"
run_trainer encode "$TMP/tiny" "$TMP/no_such_input.txt"
expect_rc encode_missing_input_rc 1
expect_err encode_missing_input_named "$TMP/no_such_input.txt"
mkdir -p "$TMP/broken" && cp -r "$TMP/tiny/." "$TMP/broken/"
head -c 2000 "$TMP/tiny/model.safetensors" >"$TMP/broken/model.safetensors"
run_trainer encode "$TMP/broken" "$TMP/in.txt"
expect_rc encode_truncated_weights_rc 1
expect_err encode_truncated_weights_named "$TMP/broken/model.safetensors"
rm "$TMP/broken/config.json"
run_trainer classify "$TMP/broken" "$TMP/pairs.tsv"
expect_rc classify_missing_config_rc 1
expect_err classify_missing_config_named "$TMP/broken/config.json"
run_trainer tokenize "$TMP/nowhere" "$TMP/in.txt"
expect_rc tokenize_missing_folder_rc 1
expect_err tokenize_missing_folder_named "$TMP/nowhere"
run_trainer encode "$TMP/tiny"
expect_rc encode_usage_rc 1
expect_err encode_usage "usage: trainer encode"

# ---------------------------------------------------------------- all-MiniLM-L6-v2
M=models/all-MiniLM-L6-v2
if [ -f $M/model.safetensors ]; then
  run_trainer tokenize $M $D/golden_minilm_texts.txt --max-length 128
  check_out tokenize_minilm_rc tokenize_minilm_ids_equal_golden ids $D/golden_minilm.safetensors
  run_trainer encode $M $D/golden_minilm_texts.txt --max-length 128 --batch 4
  check_out encode_minilm_rc encode_minilm_equals_golden embeddings $D/golden_minilm.safetensors embedding
else
  echo "SKIP test_models minilm: $M is absent (run \`make fetch-models\`)"
fi

finish
