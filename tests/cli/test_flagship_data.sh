#!/usr/bin/env bash
# The flagship's data ships with the project: data/swenli_dev.jsonl.gz is
# the shared collection's SweNLI dev file unchanged, with its licence sheet and attribution;
# `trainer check recipes/scandi_lora.lua` then warns only about the model and says how to
# download it; a run without the model exits 1 with that command; and the recipe as written
# (its data, triplet building, bf16, LoRA, checkpoint = "auto") trains on a tiny model.
source "$(dirname "$0")/lib.sh"
cd "$ROOT"
R=recipes/scandi_lora.lua
F=data/swenli_dev.jsonl.gz

if [ -f ../shared/data/swenli_dev.jsonl.gz ]; then
  if cmp -s "$F" ../shared/data/swenli_dev.jsonl.gz; then pass swenli_unchanged; else fail swenli_unchanged "$F differs from ../shared/data"; fi
else
  echo "SKIP swenli_unchanged: no ../shared/data here"
fi
rows=$(gzip -dc "$F" | wc -l)
if [ "$rows" = 9815 ]; then pass swenli_rows; else fail swenli_rows "$rows rows, expected 9815"; fi
if [ -f data/licenses/swenli_documentation_sheet.tsv ] && grep -q "CC BY 4.0" data/licenses/swenli_documentation_sheet.tsv; then
  pass swenli_licence_sheet; else fail swenli_licence_sheet "data/licenses/swenli_documentation_sheet.tsv missing"; fi
if grep -q "swenli_dev.jsonl.gz" data/README.md && grep -q "Felix Morger" data/README.md; then
  pass swenli_attribution; else fail swenli_attribution "data/README.md lacks SweNLI's attribution"; fi

run_trainer check $R
expect_rc check_rc 0
if [ -e models/scandi-nli-large/config.json ]; then
  echo "SKIP check_download_hint: models/scandi-nli-large is downloaded here"
else
  expect_err check_download_hint "huggingface-cli download alexandrainst/scandi-nli-large --local-dir models/scandi-nli-large"
  if grep -q "data.train" "$TMP/err"; then fail check_no_data_warning "$(cat "$TMP/err")"; else pass check_no_data_warning; fi
  # (run in a scratch folder: a run that stops before writing anything leaves no out folder)
  mkdir -p "$TMP/cwd" && ln -s "$ROOT/recipes" "$ROOT/data" "$TMP/cwd/"
  (cd "$TMP/cwd" && run_trainer $R; echo "$RC" >"$TMP/rc")
  RC=$(cat "$TMP/rc")
  expect_rc run_without_model_rc 1
  expect_err run_without_model_says "huggingface-cli download alexandrainst/scandi-nli-large --local-dir models/scandi-nli-large"
  if [ -e "$TMP/cwd/runs" ]; then fail run_without_model_leaves_no_folder "$(find "$TMP/cwd/runs")"; else pass run_without_model_leaves_no_folder; fi
fi

# the recipe as written on a tiny random model: 2 steps of 4 triplets, 32 tokens
"$TRAINER" run <(echo "require('trainer.models').tiny_folder('$TMP/tiny', { seed = 1 })") || fail tiny_model "could not make it"
run_trainer $R model.from="$TMP/tiny" model.hub=nil steps=2 batch.size=4 model.max_length=32 log.every=1 \
  device=cpu memory=nil out="$TMP/runs/flag"
expect_rc tiny_run_rc 0
lines=$(wc -l <"$TMP/runs/flag/metrics.jsonl" 2>/dev/null || echo 0)
if [ "$lines" = 2 ]; then pass tiny_run_metrics; else fail tiny_run_metrics "$lines lines in metrics.jsonl"; show; fi
expect_no_out tiny_run_no_data_error "no such file"
finish
