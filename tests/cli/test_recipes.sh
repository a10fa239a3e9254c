#!/usr/bin/env bash
# Every recipe in recipes/ trains as written on data that ships (or that a script in
# scripts/ makes from what ships): each runs 2 steps of 4 rows on a tiny random model in a
# scratch folder that holds only the shipped data, the files scripts/prepare_nli_data.sh
# makes, and recipes/. The only overrides are the model (tiny, 32 tokens, on the CPU, no
# memory limit) and the length of the run; data paths and out are the recipes' own, so
# every run writes under the scratch folder.
source "$(dirname "$0")/lib.sh"
work="$TMP/work"
mkdir -p "$work/data"
for f in "$ROOT"/data/*.jsonl.gz; do ln -s "$f" "$work/data/"; done
ln -s "$ROOT/recipes" "$work/recipes"
bash "$ROOT/scripts/prepare_nli_data.sh" "$work/data" >/dev/null || fail prepare_nli_data "the script failed"
"$TRAINER" run <(echo "require('trainer.models').tiny_folder('$TMP/tiny', { seed = 1 })") || fail tiny_model "could not make it"
cd "$work"

n=0
for r in recipes/*.lua; do
  name=$(basename "$r" .lua)
  n=$((n + 1))
  run_trainer "$r" model.from="$TMP/tiny" model.hub=nil model.max_length=32 device=cpu memory=nil \
    steps=2 batch.size=4 log.every=1 --quiet
  expect_rc "${name}_trains_rc" 0
  # out is the recipe's own runs/NAME, under the scratch folder
  summary=$(ls runs/*/summary.json 2>/dev/null | head -1)
  steps=$([ -n "$summary" ] && sed -n 's/^ *"steps": \([0-9]*\),*$/\1/p' "$summary")
  if [ "$steps" = 2 ]; then pass "${name}_ran_2_steps"; else fail "${name}_ran_2_steps" "summary: ${summary:-none}, steps: $steps"; fi
  if [ "$name" = nli_classifier ]; then
    if grep -q '"accuracy"' "$summary"; then pass nli_classifier_evaluates_accuracy; else fail nli_classifier_evaluates_accuracy "$(cat "$summary")"; fi
  fi
  if grep -q "internal error" "$TMP/err"; then fail "${name}_no_internal_error" "$ERR"; else pass "${name}_no_internal_error"; fi
  rm -rf runs
done
if [ "$n" -ge 5 ]; then pass every_recipe_listed; else fail every_recipe_listed "only $n recipes"; fi
finish
