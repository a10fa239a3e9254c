#!/usr/bin/env bash
# The distance and distillation losses train from their recipes (tests/recipes/losses/NAME.lua) on the shipped
# data (data/): 3 steps each of a tiny random encoder on the CPU, every step's loss a finite
# positive number in metrics.jsonl (adaptive_layer over mnrl; mse, margin_mse and gist, cached too, from a second tiny folder as
# loss.teacher, whose weights the ledger and the plan count); an odd batch size with data.sampler = "group_by_label"
# stops with the reason. (tests/cudacpu/train_losses.sh runs the same recipes on emulated
# CUDA against the CPU.)
source "$(dirname "$0")/lib.sh"
cd "$ROOT"
"$TRAINER" run <(echo "require('trainer.models').tiny_folder('$TMP/tiny', { seed = 1 })") || fail tiny_model "could not make it"
"$TRAINER" run <(echo "require('trainer.models').tiny_folder('$TMP/teacher', { seed = 9 })") || fail teacher "could not make it"

for l in contrastive online_contrastive triplet batch_hard_triplet batch_semi_hard_triplet batch_all_triplet \
         matryoshka_batch_hard_triplet angle mse margin_mse gist cached_gist adaptive_layer; do
  teacher=""; case $l in mse | margin_mse | gist | cached_gist) teacher="loss.teacher=$TMP/teacher" ;; esac
  run_trainer "tests/recipes/losses/$l.lua" model.from="$TMP/tiny" $teacher out="$TMP/$l" --quiet
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

# the teacher's weights: in the ledger under weights (the same tiny shape as the student: twice
# the student-only run's), and in the plan's weights
weights() { sed -n 's/.*"weights":\([0-9]*\).*/\1/p' "$1" | head -1; }
w_student=$(weights "$TMP/contrastive/metrics.jsonl"); w_both=$(weights "$TMP/mse/metrics.jsonl")
if [ -n "$w_student" ] && [ "$w_both" = $((2 * w_student)) ]; then pass teacher_weights_in_ledger
else fail teacher_weights_in_ledger "student alone $w_student, with the teacher $w_both"; fi
plan_w() { "$TRAINER" plan tests/recipes/losses/mse.lua model.from="$TMP/tiny" "$@" 2>&1 | awk '$1 == "weights" { print $2 }'; }
p_both=$(plan_w loss.teacher="$TMP/teacher"); p_student=$(plan_w loss.name=mnrl loss.teacher=nil)
if [ -n "$p_student" ] && awk -v a="$p_both" -v b="$p_student" 'BEGIN { exit !(a > 1.9 * b && a < 2.1 * b) }'; then
  pass teacher_weights_in_plan
else fail teacher_weights_in_plan "plan weights with the teacher $p_both KiB, without $p_student KiB"; fi

run_trainer tests/recipes/losses/mse.lua model.from="$TMP/tiny" loss.teacher="$TMP/nothere" out="$TMP/noteacher" --quiet
expect_rc missing_teacher_rc 1
expect_err missing_teacher_says_why "loss.teacher: $TMP/nothere: no config.json there"

run_trainer tests/recipes/losses/batch_hard_triplet.lua model.from="$TMP/tiny" out="$TMP/odd" steps=1 \
  batch.size=7 --quiet
expect_rc group_by_label_odd_batch_rc 1
expect_err group_by_label_odd_batch_says_why "batch.size must be an even number >= 4"
finish
