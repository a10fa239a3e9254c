#!/usr/bin/env bash
# End-to-end tests of `trainer RECIPE.lua` on a tiny random BERT folder (fast on a CPU):
# the outputs a run writes (README.md, "Training"), a run stopped by SIGTERM after its step-3 checkpoint and
# resumed giving the unbroken run's losses for steps 4-6, a malformed JSONL line 3, a
# missing model folder, an evaluation file outside the repository, a NaN loss, the
# report, a recipe's own loop, and the flagship recipe without its model.
source "$(dirname "$0")/lib.sh"
cd "$ROOT"

# ---- fixtures: tiny model folders, train/dev/NLI files (in $TMP: not in the repository;
# tests/cli/sts_fixture.lua)
run_trainer run tests/cli/sts_fixture.lua "$TMP" 48 4 24
expect_rc fixtures_rc 0
{ head -2 "$TMP/train.jsonl"; echo '{"sentence1": "a cat", "sentence2": '; tail -3 "$TMP/train.jsonl"; } >"$TMP/bad.jsonl"

cat >"$TMP/r.lua" <<EOF
return {
  model = { from = "$TMP/tiny" },
  data = { train = "$TMP/train.jsonl", eval = "$TMP/dev.jsonl", columns = { "sentence1", "sentence2", "score" } },
  loss = { name = "cosent" }, optim = { lr = 1e-3 }, batch = { size = 8 }, steps = 6,
  save = { every = 3, keep = 5 }, log = { every = 1 }, device = "cpu", out = "$TMP/run1",
}
EOF
cat >"$TMP/stop.lua" <<EOF
return {
  extends = "$TMP/r.lua", out = "$TMP/run2",
  hooks = { on_save = function(t, dir) if t.step == 3 then os.execute("kill -TERM \$PPID") end end },
}
EOF

# ---- an unbroken run and its outputs
run_trainer "$TMP/r.lua"
expect_rc train_rc 0
expect_err train_progress_lines "step 6/6"
expect_err train_eval_line "eval at step 6: pearson"
for f in metrics.jsonl summary.json resolved_recipe.lua checkpoint-3/trainer_state checkpoint-6/trainer_state \
         checkpoint-6/model.safetensors checkpoint-6/config.json checkpoint-6/tokenizer.json; do
  if [ -s "$TMP/run1/$f" ]; then pass "output_$f"; else fail "output_$f" "missing $TMP/run1/$f"; fi
done
if ls "$TMP/run1" | grep -q '\.tmp$'; then fail no_tmp_files "$(ls "$TMP/run1")"; else pass no_tmp_files; fi
if [ "$(wc -l <"$TMP/run1/metrics.jsonl")" = 6 ]; then pass metrics_one_line_per_step; else fail metrics_one_line_per_step "$(wc -l <"$TMP/run1/metrics.jsonl")"; fi
if gzip -t "$TMP/run1/checkpoint-3/trainer_state" 2>/dev/null; then pass trainer_state_is_zlib_gzip; else fail trainer_state_is_zlib_gzip "gzip -t failed"; fi

cat >"$TMP/check_summary.lua" <<EOF
local json = require("trainer.core.json")
local s = json.read("$TMP/run1/summary.json")
assert(s.steps == 6, "steps")
assert(type(s.final_loss) == "number", "final_loss")
assert(s.tokens_per_s > 0, "tokens_per_s")
assert(s.peak_allocated > 0 and s.peak_reserved >= s.peak_allocated, "peaks")
for _, t in ipairs({ "weights", "grads", "optimizer", "activations", "workspace" }) do
  assert(type(s.peak_by_tag[t]) == "number", "peak_by_tag." .. t)
end
assert(s.peak_by_tag.optimizer > 0 and s.peak_by_tag.grads > 0, "optimizer and grads measured")
assert(type(s.eval.spearman) == "number" and type(s.eval.pearson) == "number", "eval spearman/pearson")
for line in io.lines("$TMP/run1/metrics.jsonl") do
  local m = json.decode(line)
  for _, k in ipairs({ "step", "loss", "lr", "tokens_per_s", "mem_allocated", "mem_reserved", "mem_peak" }) do
    assert(type(m[k]) == "number", "metrics." .. k)
  end
end
-- resolved_recipe.lua is loadable Lua giving the same training keys
local r = dofile("$TMP/run1/resolved_recipe.lua")
assert(r.steps == 6 and r.batch.size == 8 and r.loss.name == "cosent", "resolved recipe")
print("summary ok")
EOF
run_trainer run "$TMP/check_summary.lua"
expect_rc summary_fields_rc 0
expect_out summary_fields "summary ok"

# ---- stop after the step-3 checkpoint (SIGTERM), resume, same losses as the unbroken run
run_trainer "$TMP/stop.lua"
expect_rc sigterm_exit_130 130
expect_err sigterm_says_resume "Resume with: trainer resume $TMP/run2"
if [ -d "$TMP/run2/checkpoint-3" ] && [ ! -d "$TMP/run2/checkpoint-6" ]; then pass sigterm_saved_step_3; else fail sigterm_saved_step_3 "$(ls "$TMP/run2")"; fi
run_trainer "$TMP/stop.lua" resume=latest
expect_rc resume_rc 0
expect_err resume_says_from "resumed from $TMP/run2/checkpoint-3 at step 3"
cat >"$TMP/compare.lua" <<EOF
local json = require("trainer.core.json")
local function losses(p)
  local out = {}
  for line in io.lines(p) do local m = json.decode(line) out[m.step] = m.loss end
  return out
end
local a, b = losses("$TMP/run1/metrics.jsonl"), losses("$TMP/run2/metrics.jsonl")
for s = 1, 6 do
  if a[s] == nil or a[s] ~= b[s] then print(("step %d: %s vs %s"):format(s, tostring(a[s]), tostring(b[s]))) return 1 end
end
print("identical losses")
EOF
run_trainer run "$TMP/compare.lua"
expect_rc resume_identical_losses_rc 0
expect_out resume_identical_losses "identical losses"

# ---- failures: exit 1 with a message naming the file/line or the fix
run_trainer "$TMP/r.lua" data.train="$TMP/bad.jsonl" out="$TMP/run3"
expect_rc malformed_line_rc 1
expect_err malformed_line_3 "$TMP/bad.jsonl: line 3"

run_trainer "$TMP/r.lua" model.from="$TMP/no_such_model" out="$TMP/run4"
expect_rc missing_model_rc 1
expect_err missing_model_names_folder "$TMP/no_such_model: no such model folder"
expect_err missing_model_download "huggingface-cli download"

run_trainer "$TMP/r.lua" optim.lr=1e6 grad_clip=false out="$TMP/run5" --quiet
expect_rc nan_loss_rc 1
expect_err nan_loss_names_step "the loss is nan"
expect_err nan_loss_names_checkpoint "$TMP/run5/checkpoint-3"

run_trainer recipes/scandi_lora.lua
expect_rc flagship_without_model_rc 1
expect_err flagship_without_model_folder "models/scandi-nli-large: no such model folder"
expect_err flagship_without_model_download "huggingface-cli download alexandrainst/scandi-nli-large --local-dir models/scandi-nli-large"

# ---- quiet, report, a recipe's own loop, a classifier
run_trainer "$TMP/r.lua" out="$TMP/run6" steps=2 --quiet
expect_rc quiet_rc 0
if [ -s "$TMP/err" ]; then fail quiet_prints_nothing "$ERR"; else pass quiet_prints_nothing; fi

run_trainer report "$TMP/run1"
expect_rc report_rc 0
if grep -q "<svg" "$TMP/run1/report.svg" && grep -q "training loss" "$TMP/run1/report.svg" \
   && grep -q "memory per tag" "$TMP/run1/report.svg" && grep -q "<svg" "$TMP/run1/report.html"; then
  pass report_svg_and_html
else
  fail report_svg_and_html "report.svg/html incomplete"
fi

run_trainer recipes/custom_loop.lua model.from="$TMP/tiny" data.train="$TMP/train.jsonl" data.eval="$TMP/dev.jsonl" \
  steps=4 out="$TMP/run7" --quiet
expect_rc custom_loop_rc 0
if grep -q '"custom_steps": 4' "$TMP/run7/summary.json" 2>/dev/null || grep -q '"steps": 4' "$TMP/run7/summary.json"; then
  pass custom_loop_summary
else
  fail custom_loop_summary "$(cat "$TMP/run7/summary.json" 2>/dev/null | head -5)"
fi

run_trainer recipes/nli_classifier.lua model.from="$TMP/tiny_cls" data.train="$TMP/nli.jsonl" data.eval="$TMP/nli.jsonl" \
  steps=3 out="$TMP/run8" --quiet
expect_rc nli_classifier_rc 0
if grep -q '"accuracy"' "$TMP/run8/summary.json" 2>/dev/null; then pass nli_classifier_accuracy; else fail nli_classifier_accuracy "no accuracy in summary"; fi

finish
