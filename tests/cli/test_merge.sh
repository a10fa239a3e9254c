#!/usr/bin/env bash
# End-to-end test of `trainer merge MODEL_DIR ADAPTER_DIR OUT_DIR`: the PEFT-saved tiny adapter
# (tests/data/tiny_lora_adapter) merged into tiny_bert gives a plain Hugging Face folder whose
# `trainer encode` output is PEFT's (lora_golden.safetensors a.embedding); wrong arguments, a
# missing adapter and an existing OUT_DIR exit 1 naming the problem, leaving nothing behind.
source "$(dirname "$0")/lib.sh"
cd "$ROOT"
D=tests/data

run_trainer merge $D/tiny_bert $D/tiny_lora_adapter "$TMP/merged"
expect_rc merge_rc 0
expect_err merge_says_where "$TMP/merged"
if [ -f "$TMP/merged/model.safetensors" ] && [ -f "$TMP/merged/tokenizer.json" ] && [ -f "$TMP/merged/1_Pooling/config.json" ] \
   && [ ! -e "$TMP/merged.tmp-merge" ]; then pass merge_folder_complete; else fail merge_folder_complete "$(ls -R "$TMP")"; fi

run_trainer encode "$TMP/merged" $D/golden_tiny_bert_texts.txt
expect_rc merged_encode_rc 0
echo "$OUT" >"$TMP/emb"
if "$TRAINER" run tests/cli/check_outputs.lua embeddings "$TMP/emb" $D/lora_golden.safetensors a.embedding >"$TMP/check" 2>&1
then pass merged_encode_equals_peft; else fail merged_encode_equals_peft "$(tail -3 "$TMP/check")"; fi

run_trainer merge $D/tiny_bert $D/tiny_lora_adapter "$TMP/merged"
expect_rc merge_existing_out_rc 1
expect_err merge_existing_out_msg "already exists"

run_trainer merge $D/tiny_bert $D/tiny_bert "$TMP/m2"
expect_rc merge_not_an_adapter_rc 1
expect_err merge_not_an_adapter_msg "adapter_config.json: missing"
if [ ! -e "$TMP/m2" ]; then pass merge_failure_leaves_nothing; else fail merge_failure_leaves_nothing "$TMP/m2 exists"; fi

# every file merge writes is one checked write: a failed write of the model card (README.md)
# exits 1 naming it and leaves neither OUT_DIR nor its temporary folder
TRAINER_FAIL_WRITE=README.md run_trainer merge $D/tiny_bert $D/tiny_lora_adapter "$TMP/m3"
expect_rc merge_write_failure_rc 1
expect_err merge_write_failure_msg "README.md: cannot write"
if [ ! -e "$TMP/m3" ] && [ ! -e "$TMP/m3.tmp-merge" ]; then pass merge_write_failure_leaves_nothing
else fail merge_write_failure_leaves_nothing "$(ls -a "$TMP")"; fi

run_trainer merge $D/tiny_bert
expect_rc merge_usage_rc 1
expect_err merge_usage_msg "usage: trainer merge MODEL_DIR ADAPTER_DIR OUT_DIR"

run_trainer --help
expect_out help_lists_merge "trainer merge MODEL_DIR ADAPTER_DIR OUT_DIR"
finish
