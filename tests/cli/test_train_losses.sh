#!/usr/bin/env bash
# The distance losses train from their recipes (tests/recipes/losses/NAME.lua) on the shipped
# data (data/): 3 steps each of a tiny random encoder on the CPU, every step's loss a finite
# positive number in metrics.jsonl; an odd batch size with data.sampler = "group_by_label"
# stops with the reason. (tests/cudacpu/train_losses.sh runs the same recipes on emulated
# CUDA against the CPU.)
source "$(dirname "$0")/lib.sh"
cd "$ROOT"
"$TRAINER" run <(echo "require('trainer.models').tiny_folder('$TMP/tiny', { seed = 1 })") || fail tiny_model "could not make it"

for l in contrastive online_contrastive triplet batch_hard_triplet batch_semi_hard_triplet batch_all_triplet; do
  run_trainer "tests/recipes/losses/$l.lua" model.from="$TMP/tiny" out="$TMP/$l" --quiet
  expect_rc "${l}_trains_rc" 0
  said=$("$TRAINER" run <(cat <<LUA
local json = require("trainer.core.json")
local n, bad = 0, nil
for line in io.lines("$TMP/$l/metrics.jsonl") do
  local m = json.decode(line)
  n = n + 1
  if type(m.loss) ~= "number" or m.loss ~= m.loss or m.loss <= 0 or m.loss == math.huge then bad = tostring(m.loss) end
end
io.write(n == 3 and not bad and "ok" or ("steps " .. n .. ", loss " .. tostring(bad)))
LUA
) 2>&1)
  if [ "$said" = ok ]; then pass "${l}_three_finite_losses"; else fail "${l}_three_finite_losses" "$said"; fi
done

run_trainer tests/recipes/losses/batch_hard_triplet.lua model.from="$TMP/tiny" out="$TMP/odd" steps=1 \
  batch.size=7 --quiet
expect_rc group_by_label_odd_batch_rc 1
expect_err group_by_label_odd_batch_says_why "batch.size must be an even number >= 4"
finish
