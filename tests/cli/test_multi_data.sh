#!/usr/bin/env bash
# Several training datasets: data.train = { name = { file, columns, prompts } } trains with
# batches of one dataset each (data.sampler proportional and round_robin); a run stopped by
# SIGINT and resumed gives the unbroken run's losses; the datasets' prompts reach the
# checkpoint; a prompt for a column one dataset lacks is refused naming the dataset; a dataset
# with its own loss (data.train.NAME.loss) trains and resumes the same way.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/tiny_fixtures.sh"
cd "$ROOT"

cat >"$TMP/split.lua" <<EOF
local json = require("trainer.core.json")
local a, b = assert(io.open("$TMP/a.jsonl", "w")), assert(io.open("$TMP/b.jsonl", "w"))
local i = 0
for line in io.lines("$TMP/train.jsonl") do
  i = i + 1
  local r = json.decode(line)
  if i % 3 == 0 then b:write(json.encode({ anchor = r.sentence1, positive = r.sentence2 }), "\n")
  else a:write(json.encode({ sentence1 = r.sentence1, sentence2 = r.sentence2 }), "\n") end
end
a:close() b:close()
EOF
run_trainer run "$TMP/split.lua"
expect_rc split 0
sed '/^  data = /d; s/loss = { name = "cosent" }/loss = { name = "mnrl" }/' "$TMP/sts.lua" >"$TMP/multi.lua"
sed -i "s|^return {|return {\n  data = { train = { pairs = { file = \"$TMP/a.jsonl\", columns = { \"sentence1\", \"sentence2\" } }, qa = { file = \"$TMP/b.jsonl\", prompts = { anchor = \"is \" } } } },|" "$TMP/multi.lua"
steps_losses() { sed -n 's/.*"loss":\([^,]*\),.*"step":\([0-9]*\).*/\2 \1/p' "$1"; }

run_trainer "$TMP/multi.lua" steps=8 save.every=3 out="$TMP/runs/unbroken" --quiet
expect_rc multi_trains 0
STOP_AT=4 run_trainer "$TMP/multi.lua" steps=8 save.every=3 out="$TMP/runs/stopped"
expect_rc multi_sigint 130
run_trainer resume "$TMP/runs/stopped"
expect_rc multi_resume 0
expect_err multi_resumed "resumed from $TMP/runs/stopped/checkpoint-4 at step 4"
a=$(steps_losses "$TMP/runs/unbroken/metrics.jsonl"); b=$(steps_losses "$TMP/runs/stopped/metrics.jsonl")
if [ -n "$a" ] && [ "$a" = "$b" ]; then pass multi_resume_same_losses; else fail multi_resume_same_losses "$a vs $b"; fi
run_trainer run <(echo 'local c = require("trainer.core.json").read(arg[1] .. "/config_sentence_transformers.json") assert(c.prompts.anchor == "is ")') "$TMP/runs/unbroken/checkpoint-8"
expect_rc multi_prompts_saved 0
run_trainer "$TMP/multi.lua" steps=8 data.sampler=round_robin out="$TMP/runs/rr" --quiet
expect_rc multi_round_robin 0
run_trainer "$TMP/multi.lua" 'data.train.pairs.prompts={anchor="x"}' out="$TMP/runs/bad" --quiet
expect_rc multi_bad_prompt 1
expect_err multi_bad_prompt_said "data.train.pairs.prompts.anchor: not a text column of the training data (its text columns: sentence1, sentence2)"

# data.prompts keyed by dataset: the same losses as the datasets' own prompts
sed 's|, prompts = { anchor = "is " } }|, prompts = nil }|' "$TMP/multi.lua" >"$TMP/multi_top.lua"
run_trainer "$TMP/multi_top.lua" steps=8 'data.prompts={qa={anchor="is "}}' out="$TMP/runs/top" --quiet
expect_rc prompts_by_dataset 0
a=$(steps_losses "$TMP/runs/unbroken/metrics.jsonl"); b=$(steps_losses "$TMP/runs/top/metrics.jsonl")
if [ -n "$a" ] && [ "$a" = "$b" ]; then pass prompts_by_dataset_same_losses; else fail prompts_by_dataset_same_losses "$a vs $b"; fi

# a dataset with its own loss: STS pairs under CoSENT beside the MNRL pairs; resumed exactly
sed "s|qa = {|sts = { file = \"$TMP/train.jsonl\", columns = { \"sentence1\", \"sentence2\", \"score\" }, loss = { name = \"cosent\" } }, qa = {|" "$TMP/multi.lua" >"$TMP/multi3.lua"
run_trainer "$TMP/multi3.lua" steps=8 save.every=3 out="$TMP/runs/u3" --quiet
expect_rc own_loss_trains 0
STOP_AT=5 run_trainer "$TMP/multi3.lua" steps=8 save.every=3 out="$TMP/runs/s3"
run_trainer resume "$TMP/runs/s3"
expect_rc own_loss_resume 0
a=$(steps_losses "$TMP/runs/u3/metrics.jsonl"); b=$(steps_losses "$TMP/runs/s3/metrics.jsonl")
if [ -n "$a" ] && [ "$a" = "$b" ]; then pass own_loss_resume_same_losses; else fail own_loss_resume_same_losses "$a vs $b"; fi
run_trainer check "$TMP/multi3.lua" 'data.train.sts.loss.name="hinge"'
expect_rc own_loss_checked 1
expect_err own_loss_checked_said "data.train.sts.loss.name"
finish
