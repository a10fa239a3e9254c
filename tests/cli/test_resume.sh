#!/usr/bin/env bash
# Resume: a run started with overrides, stopped by SIGINT, continues from
# the printed "Resume with:" line run verbatim — in its own folder, to its own planned steps,
# with the unbroken run's losses — and touches no other folder; the long form printed
# beside it does the same; `trainer resume RUN_DIR` works from the folder alone (with or
# without the recipe's functions, with deliberate overrides); resuming into a folder that
# holds another run's outputs is refused with a message and changes nothing.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/tiny_fixtures.sh"
cd "$ROOT"

# A fingerprint of every file under a folder (names and contents), to prove it untouched; the
# run lock a refused command took on the folder (out/.trainer.lock, no output) is left out.
fingerprint() { (cd "$1" && find . -type f ! -name .trainer.lock | sort | xargs md5sum) 2>/dev/null | md5sum; }
# The step -> loss table of a metrics.jsonl, one "step loss" line each, in file order.
steps_losses() {
  cat >"$TMP/sl.lua" <<EOF
for line in io.lines("$1") do local m = require("trainer.core.json").decode(line) print(m.step, m.loss) end
EOF
  "$TRAINER" run "$TMP/sl.lua"
}

# ---- an earlier run in the recipe's default out folder (the one the old line resumed into)
run_trainer "$TMP/sts.lua" --quiet
expect_rc default_run_rc 0
default_before=$(fingerprint "$TMP/runs/sts")

# ---- the unbroken run the resumed one must equal
run_trainer "$TMP/sts.lua" steps=8 out="$TMP/runs/unbroken" --quiet
expect_rc unbroken_rc 0

# ---- started with overrides, SIGINT after step 3
STOP_AT=3 run_trainer "$TMP/sts.lua" steps=8 out="$TMP/runs/try8"
expect_rc sigint_exit_130 130
expect_err sigint_stopped "stopped by SIGINT after step 3; saved $TMP/runs/try8/checkpoint-3"
expect_err resume_line "Resume with: trainer resume $TMP/runs/try8"
expect_err long_form_keeps_overrides "(the same as: trainer $TMP/sts.lua steps=8 out=$TMP/runs/try8 resume=$TMP/runs/try8/checkpoint-3)"
line=$(sed -n 's/^Resume with: //p' "$TMP/err")
long=$(sed -n 's/^  (the same as: \(.*\))$/\1/p' "$TMP/err")
cp -r "$TMP/runs/try8" "$TMP/try8_copy"     # for the long form below
cp "$TMP/runs/try8/summary.json" "$TMP/stopped_summary.json"

# ---- the printed line, verbatim
ls "$TMP/runs" >"$TMP/folders_before"
case "$line" in trainer\ *) ;; *) fail resume_line_parsed "no 'Resume with:' line"; line="false";; esac
"$TRAINER" ${line#trainer } >"$TMP/out" 2>"$TMP/err" </dev/null; RC=$?; OUT=$(cat "$TMP/out"); ERR=$(cat "$TMP/err")
expect_rc verbatim_resume_rc 0
expect_err verbatim_resumed_from "resumed from $TMP/runs/try8/checkpoint-3 at step 3"
expect_err verbatim_reaches_step_8 "step 8/8"
if grep -q '"steps": 8' "$TMP/runs/try8/summary.json" && grep -q '"total_steps": 8' "$TMP/runs/try8/summary.json"; then
  pass verbatim_summary_8_of_8
else
  fail verbatim_summary_8_of_8 "$(grep steps "$TMP/runs/try8/summary.json")"
fi
if [ "$(steps_losses "$TMP/runs/try8/metrics.jsonl")" = "$(steps_losses "$TMP/runs/unbroken/metrics.jsonl")" ]; then
  pass verbatim_same_losses_as_unbroken
else
  fail verbatim_same_losses_as_unbroken "$(steps_losses "$TMP/runs/try8/metrics.jsonl" | tr '\n' ' ')"
fi
# the resumed run's summary covers the whole run: its peaks are at least the stopped part's
# (which alone evaluated before training), its tokens and times add both parts'
cat >"$TMP/whole.lua" <<EOF
local json = require("trainer.core.json")
local a, b = json.read("$TMP/stopped_summary.json"), json.read("$TMP/runs/try8/summary.json")
local u = json.read("$TMP/runs/unbroken/summary.json")
local bad = {}
for _, tag in ipairs({ "weights", "grads", "optimizer", "activations", "workspace" }) do
  if b.peak_by_tag[tag] < a.peak_by_tag[tag] then bad[#bad + 1] = ("%s %d < %d"):format(tag, b.peak_by_tag[tag], a.peak_by_tag[tag]) end
end
if b.peak_allocated < a.peak_allocated then bad[#bad + 1] = "peak_allocated" end
if b.peak_reserved < a.peak_reserved then bad[#bad + 1] = "peak_reserved" end
if b.tokens ~= u.tokens then bad[#bad + 1] = ("tokens %d, unbroken %d"):format(b.tokens, u.tokens) end
if not (type(b.wall_time_s) == "number" and b.wall_time_s > a.wall_time_s) then bad[#bad + 1] = "wall_time_s" end
if not (type(b.train_time_s) == "number" and b.train_time_s > a.train_time_s) then bad[#bad + 1] = "train_time_s" end
io.write(#bad == 0 and "ok" or table.concat(bad, "; "))
EOF
whole=$("$TRAINER" run "$TMP/whole.lua" 2>&1)
if [ "$whole" = ok ]; then pass resumed_summary_covers_whole_run; else fail resumed_summary_covers_whole_run "$whole"; fi
if [ "$(fingerprint "$TMP/runs/sts")" = "$default_before" ]; then pass default_folder_untouched; else fail default_folder_untouched "runs/sts changed"; fi
ls "$TMP/runs" >"$TMP/folders_after"
if cmp -s "$TMP/folders_before" "$TMP/folders_after"; then pass no_other_folder_created; else fail no_other_folder_created "$(cat "$TMP/folders_after")"; fi

# ---- the long form, verbatim, on a copy of the stopped folder moved to where it was
rm -rf "$TMP/runs/try8" && mv "$TMP/try8_copy" "$TMP/runs/try8"
eval "\"\$TRAINER\" ${long#trainer } --quiet" >"$TMP/out" 2>"$TMP/err" </dev/null; RC=$?; OUT=$(cat "$TMP/out"); ERR=$(cat "$TMP/err")
expect_rc long_form_rc 0
if [ "$(steps_losses "$TMP/runs/try8/metrics.jsonl")" = "$(steps_losses "$TMP/runs/unbroken/metrics.jsonl")" ]; then
  pass long_form_same_losses
else
  fail long_form_same_losses "$(steps_losses "$TMP/runs/try8/metrics.jsonl" | tr '\n' ' ')"
fi

# ---- refused: another run's folder (the old resume line: recipe without its overrides)
try8_before=$(fingerprint "$TMP/runs/try8")
run_trainer "$TMP/sts.lua" resume="$TMP/runs/try8/checkpoint-3"
expect_rc other_folder_refused_rc 1
expect_err other_folder_refused_says "out = $TMP/runs/sts holds another run's outputs"
expect_err other_folder_refused_hint "trainer resume $TMP/runs/try8"
run_trainer "$TMP/sts.lua" out="$TMP/runs/try8" resume=latest
expect_rc other_settings_refused_rc 1
expect_err other_settings_refused_names_key "steps: 8 -> 12"
if [ "$(fingerprint "$TMP/runs/sts")" = "$default_before" ] && [ "$(fingerprint "$TMP/runs/try8")" = "$try8_before" ]; then
  pass refusals_change_nothing
else
  fail refusals_change_nothing "a refused resume changed a folder"
fi
if grep -q "internal error" "$TMP/err"; then fail refusal_not_internal "$ERR"; else pass refusal_not_internal; fi

# ---- a new run from another run's checkpoint, in a new folder, is fine
run_trainer "$TMP/sts.lua" steps=8 out="$TMP/runs/fork" resume="$TMP/runs/try8/checkpoint-3" --quiet
expect_rc fork_into_new_folder_rc 0

# ---- trainer resume on a complete run, a missing folder, a folder that is not a run
run_trainer resume "$TMP/runs/try8"
expect_rc complete_rc 0
expect_err complete_says "is complete (step 8 of 8); nothing to resume"
if [ "$(fingerprint "$TMP/runs/try8")" = "$try8_before" ]; then pass complete_untouched; else fail complete_untouched "changed"; fi
run_trainer resume "$TMP/runs/nope"
expect_rc missing_folder_rc 1
expect_err missing_folder_says "$TMP/runs/nope: no such run folder"
run_trainer resume "$TMP"
expect_rc not_a_run_rc 1
expect_err not_a_run_says "has no resolved_recipe.lua"

# ---- a recipe without functions: resolved_recipe.lua alone; an override changes it on purpose
run_trainer "$TMP/plain.lua" steps=3 out="$TMP/runs/plain" --quiet
expect_rc plain_rc 0
mv "$TMP/plain.lua" "$TMP/plain_moved_away.lua"    # the folder alone must do
run_trainer resume "$TMP/runs/plain" steps=6 --quiet
expect_rc plain_resume_extended_rc 0
if grep -q '"steps": 6' "$TMP/runs/plain/summary.json"; then pass plain_resume_to_6; else fail plain_resume_to_6 "$(grep steps "$TMP/runs/plain/summary.json")"; fi
if grep -q '^  steps = 6,' "$TMP/runs/plain/resolved_recipe.lua" && grep -q '^-- command: .*"steps=3",.*"steps=6"' "$TMP/runs/plain/resolved_recipe.lua"; then
  pass plain_resume_recorded
else
  fail plain_resume_recorded "$(grep -E '^  steps|^-- command' "$TMP/runs/plain/resolved_recipe.lua")"
fi
if [ "$(steps_losses "$TMP/runs/plain/metrics.jsonl" | cut -f1 | tr '\n' ' ')" = "1 2 3 4 5 6 " ]; then
  pass plain_metrics_each_step_once
else
  fail plain_metrics_each_step_once "$(steps_losses "$TMP/runs/plain/metrics.jsonl" | cut -f1 | tr '\n' ' ')"
fi

finish
