#!/usr/bin/env bash
# LoRA adapters without merging: `trainer encode|classify MODEL FILE
# --adapter DIR` gives the outputs of the model `trainer merge` writes (within 1e-5), for
# PEFT's own adapter (tests/data/tiny_lora_adapter, which also matches PEFT's golden
# embeddings) and for one trainer saved (a classifier with modules_to_save); an adapter given
# as the model says so and shows the --adapter command; adapter_config.json writes
# lora_dropout 0.1, not 0.10000000000000001; merge says what it wrote and writes a model card
# naming base, adapter, r, alpha and targets above the base's card, leaving the base as it was.
source "$(dirname "$0")/lib.sh"
cd "$ROOT"
D=tests/data
TEXTS=$D/golden_tiny_bert_texts.txt

# ---- PEFT's adapter on tiny_bert: encode --adapter == encode of the merged folder == PEFT
run_trainer encode $D/tiny_bert $TEXTS --adapter $D/tiny_lora_adapter
expect_rc encode_adapter_rc 0
echo "$OUT" >"$TMP/adapter.jsonl"
run_trainer merge $D/tiny_bert $D/tiny_lora_adapter "$TMP/merged"
expect_rc merge_rc 0
expect_err merge_message "wrote merged model $TMP/merged (base $D/tiny_bert + adapter $D/tiny_lora_adapter)"
run_trainer encode "$TMP/merged" $TEXTS
echo "$OUT" >"$TMP/merged.jsonl"
if "$TRAINER" run tests/cli/check_outputs.lua same "$TMP/adapter.jsonl" "$TMP/merged.jsonl" 1e-5 >"$TMP/check" 2>&1
then pass encode_adapter_equals_merged; else fail encode_adapter_equals_merged "$(tail -3 "$TMP/check")"; fi
if "$TRAINER" run tests/cli/check_outputs.lua embeddings "$TMP/adapter.jsonl" $D/lora_golden.safetensors a.embedding >"$TMP/check" 2>&1
then pass encode_adapter_equals_peft; else fail encode_adapter_equals_peft "$(tail -3 "$TMP/check")"; fi
run_trainer encode $D/tiny_bert $TEXTS
if [ "$OUT" != "$(cat "$TMP/adapter.jsonl")" ]; then pass adapter_changes_outputs; else fail adapter_changes_outputs "same as the base"; fi

# ---- the model card of the merged folder
CARD="$TMP/merged/README.md"
for want in "base_model: $D/tiny_bert" "| base model | \`$D/tiny_bert\` |" "| adapter | \`$D/tiny_lora_adapter\` |" \
            "| r | 4 |" "| lora_alpha | 8 (scale 2) |" "| target modules | \`query\`, \`value\` (4 Linear layers) |"; do
  if grep -qF -- "$want" "$CARD"; then pass "card_has: $want"; else fail "card_has: $want" "$(cat "$CARD")"; fi
done

# ---- an adapter in the model's place, a model in the adapter's
run_trainer encode $D/tiny_lora_adapter $TEXTS
expect_rc adapter_as_model_rc 1
expect_err adapter_as_model_msg "$D/tiny_lora_adapter is a LoRA adapter (it holds adapter_config.json), not a model folder"
expect_err adapter_as_model_cmd "trainer encode $D/tiny_bert $TEXTS --adapter $D/tiny_lora_adapter"
# a '%' in the adapter's path is printed as it is (it was a gsub replacement pattern)
cp -R $D/tiny_lora_adapter "$TMP/100%_adapter"
run_trainer encode "$TMP/100%_adapter" $TEXTS
expect_rc percent_adapter_as_model_rc 1
expect_err percent_adapter_as_model_cmd "trainer encode $D/tiny_bert $TEXTS --adapter $TMP/100%_adapter"
run_trainer classify $D/tiny_lora_adapter $TEXTS
expect_err classify_adapter_as_model_cmd "trainer classify $D/tiny_bert $TEXTS --adapter $D/tiny_lora_adapter"
run_trainer merge $D/tiny_lora_adapter $D/tiny_bert "$TMP/m2"
expect_rc merge_swapped_rc 1
expect_err merge_swapped_cmd "trainer merge $D/tiny_bert $D/tiny_lora_adapter $TMP/m2"
run_trainer encode $D/tiny_bert $TEXTS --adapter $D/tiny_bert
expect_rc model_as_adapter_rc 1
expect_err model_as_adapter_msg "--adapter takes a PEFT LoRA adapter folder"

# ---- an adapter trainer saved, on a classifier (modules_to_save = classifier)
"$TRAINER" run tests/cli/make_cls_adapter.lua "$TMP/cls" "$TMP/cls_adapter" >/dev/null 2>"$TMP/mk" || fail make_cls_adapter "$(cat "$TMP/mk")"
if grep -qF '"lora_dropout": 0.1,' "$TMP/cls_adapter/adapter_config.json"; then pass adapter_config_short_dropout
else fail adapter_config_short_dropout "$(grep dropout "$TMP/cls_adapter/adapter_config.json")"; fi
printf -- '---\nlicense: mit\nlanguage: en\n---\n# tiny classifier\nThe base card body.\n' >"$TMP/cls/README.md"
cp "$TMP/cls/README.md" "$TMP/base_card"
printf 'the cat\tthe dog\na mat\nthe bird sat\ton the house\n' >"$TMP/pairs.tsv"
run_trainer classify "$TMP/cls" "$TMP/pairs.tsv" --adapter "$TMP/cls_adapter"
expect_rc classify_adapter_rc 0
echo "$OUT" >"$TMP/cls_adapter.jsonl"
run_trainer merge "$TMP/cls" "$TMP/cls_adapter" "$TMP/cls_merged"
expect_rc merge_cls_rc 0
run_trainer classify "$TMP/cls_merged" "$TMP/pairs.tsv"
echo "$OUT" >"$TMP/cls_merged.jsonl"
if "$TRAINER" run tests/cli/check_outputs.lua same "$TMP/cls_adapter.jsonl" "$TMP/cls_merged.jsonl" 1e-5 >"$TMP/check" 2>&1
then pass classify_adapter_equals_merged; else fail classify_adapter_equals_merged "$(tail -3 "$TMP/check")"; fi
run_trainer classify "$TMP/cls" "$TMP/pairs.tsv"
if [ "$OUT" != "$(cat "$TMP/cls_adapter.jsonl")" ]; then pass cls_adapter_changes_outputs; else fail cls_adapter_changes_outputs "same"; fi
run_trainer encode "$TMP/cls" "$TMP/pairs.tsv" --adapter "$TMP/cls_adapter"
expect_rc encode_cls_adapter_rc 1
expect_err encode_cls_adapter_msg "use it with \`trainer classify\`"
CARD="$TMP/cls_merged/README.md"
for want in "license: mit" "language: en" "| modules_to_save | \`classifier\` |" "## The base model's card" "The base card body."; do
  if grep -qF -- "$want" "$CARD"; then pass "cls_card_has: $want"; else fail "cls_card_has: $want" "$(cat "$CARD")"; fi
done
if cmp -s "$TMP/cls/README.md" "$TMP/base_card"; then pass merge_leaves_base_card; else fail merge_leaves_base_card "changed"; fi
finish
