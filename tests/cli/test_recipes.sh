#!/usr/bin/env bash
# Every recipe in recipes/ trains as written on data that ships (or that a script in
# scripts/ makes from what ships): each runs 2 steps of 4 rows on a tiny random model in a
# scratch folder that holds only the shipped data, the files scripts/prepare_nli_data.sh
# and scripts/make_swenli_ir.lua (with `trainer mine`) make, and recipes/. The only overrides
# are the model (tiny, 32 tokens, on the CPU, no memory limit), a distillation recipe's teacher
# (loss.teacher: the same tiny folder) and the length of the run; data paths and out are the
# recipes' own, so every run writes under the scratch folder.
source "$(dirname "$0")/lib.sh"
work="$TMP/work"
mkdir -p "$work/data"
for f in "$ROOT"/data/*.jsonl.gz; do ln -s "$f" "$work/data/"; done
ln -s "$ROOT/recipes" "$work/recipes"
bash "$ROOT/scripts/prepare_nli_data.sh" "$work/data" >/dev/null || fail prepare_nli_data "the script failed"
"$TRAINER" run <(echo "require('trainer.models').tiny_folder('$TMP/tiny', { seed = 1 })") || fail tiny_model "could not make it"
# recipes/minilm_retrieval.lua's files: the SweNLI retrieval task and its mined triplets (by the tiny model)
IR="$work/build/swenli_ir"
"$TRAINER" run "$ROOT/scripts/make_swenli_ir.lua" "$IR" >/dev/null &&
  "$TRAINER" mine "$TMP/tiny" "$IR/train_pairs.jsonl" --corpus "$IR/train_corpus.txt" --num-negatives 1 --quiet \
    --out "$IR/train_triplets.jsonl" || fail swenli_ir "make_swenli_ir.lua or trainer mine failed"
cd "$work"

n=0
for r in recipes/*.lua; do
  name=$(basename "$r" .lua)
  n=$((n + 1))
  teacher=()
  if grep -q '^ *loss = {.*teacher *=' "$r"; then teacher=(loss.teacher="$TMP/tiny"); fi
  run_trainer "$r" model.from="$TMP/tiny" model.hub=nil model.max_length=32 device=cpu memory=nil \
    steps=2 batch.size=4 log.every=1 "${teacher[@]}" --quiet
  expect_rc "${name}_trains_rc" 0
  # out is the recipe's own runs/NAME, under the scratch folder
  summary=$(ls runs/*/summary.json 2>/dev/null | head -1)
  steps=$([ -n "$summary" ] && sed -n 's/^ *"steps": \([0-9]*\),*$/\1/p' "$summary")
  if [ "$steps" = 2 ]; then pass "${name}_ran_2_steps"; else fail "${name}_ran_2_steps" "summary: ${summary:-none}, steps: $steps"; fi
  if [ "$name" = reranker_swenli ]; then
    if grep -q '"ndcg@10"' "$summary"; then pass reranker_evaluates_ndcg; else fail reranker_evaluates_ndcg "$(cat "$summary")"; fi
  fi
  if [ "$name" = minilm_distill ]; then
    if [ ${#teacher[@]} = 1 ] && grep -q '"spearman"' "$summary"; then pass minilm_distill_with_teacher_evaluates; else fail minilm_distill_with_teacher_evaluates "$(cat "$summary")"; fi
  fi
  if [ "$name" = nli_classifier ]; then
    if grep -q '"accuracy"' "$summary"; then pass nli_classifier_evaluates_accuracy; else fail nli_classifier_evaluates_accuracy "$(cat "$summary")"; fi
  fi
  if grep -q "internal error" "$TMP/err"; then fail "${name}_no_internal_error" "$ERR"; else pass "${name}_no_internal_error"; fi
  rm -rf runs
done
if [ "$n" -ge 5 ]; then pass every_recipe_listed; else fail every_recipe_listed "only $n recipes"; fi

# README's "The recipes here": a recipe's entry names its loss as the recipe sets it, and no other
cd "$ROOT"
cat >"$TMP/losses.lua" <<'LUA'
local words = { cosent = "CoSENT", cosine = "cosine", mnrl = "MNRL", cross_entropy = "cross_entropy", softmax = "softmax" }
local f = assert(io.open("README.md"))
local section = f:read("*a"):match("\n### The recipes here\n(.-)\n#") or ""
f:close()
-- the entries: a line "- `recipes/NAME.lua`: ..." and the indented lines after it
local entries = {}
for line in (section .. "\n"):gmatch("([^\n]*)\n") do
  local name = line:match("^%- `recipes/([%w_]+)%.lua`")
  if name then entries[#entries + 1] = { name = name, text = line }
  elseif entries[#entries] then entries[#entries].text = entries[#entries].text .. " " .. line end
end
local bad = {}
for _, e in ipairs(entries) do
  local loss = require("trainer.recipe").load("recipes/" .. e.name .. ".lua").recipe.loss.name
  for l, w in pairs(words) do
    if l ~= loss and e.text:find(w, 1, true) then
      bad[#bad + 1] = ("%s: README says %s, the recipe's loss is %s"):format(e.name, w, loss)
    end
  end
end
io.write(#entries >= 5 and (#bad == 0 and "ok" or table.concat(bad, "; ")) or ("only " .. #entries .. " entries"))
LUA
said=$("$TRAINER" run "$TMP/losses.lua" 2>&1)
if [ "$said" = ok ]; then pass readme_recipes_name_their_losses; else fail readme_recipes_name_their_losses "$said"; fi
finish
