#!/usr/bin/env bash
# Retrieval evaluation in a run: eval.sets (a BEIR folder and a triplet file) reported under
# name_metric in metrics.jsonl, summary.json and TensorBoard; eval.primary naming a metric the
# run does not have is refused with the names it has; a bad BEIR file ends the run before
# training with the file and line (exit 1); save.best keeps the best checkpoint through
# save.keep and copies it to out/best; early_stopping ends the run where the metric stalls;
# `trainer eval` gives a run's own numbers for the base model and for a checkpoint.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/tiny_fixtures.sh"
cd "$ROOT"
DATA="$ROOT/tests/data"

cat >"$TMP/ir.lua" <<EOF
return {
  extends = "$TMP/plain.lua", out = "$TMP/runs/ir", steps = 6, save = { every = 3, keep = 1 },
  eval = { every = 3, primary = "ir_cosine_ndcg@10",
           sets = { ir = { type = "ir", folder = "$DATA/ir_tiny", similarity_fn_names = { "cosine", "dot" } },
                    trip = { type = "triplet", file = "$DATA/triplets_tiny.jsonl" } } },
}
EOF
run_trainer "$TMP/ir.lua"
expect_rc eval_sets_run 0
expect_err eval_sets_progress "ir_cosine_ndcg@10"
cat >"$TMP/check.lua" <<EOF
local json = require("trainer.core.json")
local s = json.read("$TMP/runs/ir/summary.json")
for _, k in ipairs({ "ir_cosine_ndcg@10", "ir_cosine_mrr@10", "ir_cosine_map@100", "ir_dot_recall@10",
                     "ir_cosine_precision@1", "ir_cosine_accuracy@1", "trip_cosine_accuracy", "spearman" }) do
  assert(type(s.eval[k]) == "number", "summary.json eval lacks " .. k)
end
local found = false
for line in io.lines("$TMP/runs/ir/metrics.jsonl") do
  local r = json.decode(line)
  if r.eval and r.eval["ir_cosine_ndcg@10"] then found = true end
end
assert(found, "metrics.jsonl has no ir_cosine_ndcg@10")
EOF
run_trainer run "$TMP/check.lua"
expect_rc eval_sets_in_summary_and_metrics 0
if grep -qaF "eval/ir_cosine_ndcg@10" "$TMP"/runs/ir/tb/events.out.tfevents.*; then pass eval_sets_in_tensorboard
else fail eval_sets_in_tensorboard "no eval/ir_cosine_ndcg@10 tag in the event file"; fi

# trainer eval: the base model's metrics are the run's evaluation before training; a checkpoint's
# are the run's at that step; a LoRA adapter on the model is applied
run_trainer eval "$TMP/ir.lua" --out "$TMP/base_eval.json"
expect_rc eval_base 0
expect_out eval_prints_json '"ir_cosine_ndcg@10"'
run_trainer eval "$TMP/ir.lua" --checkpoint "$TMP/runs/ir/checkpoint-6" --out "$TMP/ck_eval.json" --quiet
expect_rc eval_checkpoint 0
cat >"$TMP/check_eval.lua" <<EOF
local json = require("trainer.core.json")
local s = json.read("$TMP/runs/ir/summary.json")
local base, ck = json.read("$TMP/base_eval.json"), json.read("$TMP/ck_eval.json")
for k, v in pairs(s.eval_start) do assert(base.eval[k] == v, "base " .. k) end
for k, v in pairs(s.eval) do assert(math.abs(ck.eval[k] - v) <= 1e-9, "checkpoint-6 " .. k) end
assert(ck.checkpoint == "$TMP/runs/ir/checkpoint-6")
EOF
run_trainer run "$TMP/check_eval.lua"
expect_rc eval_equals_the_run 0
cat >"$TMP/lora_eval.lua" <<EOF
return { model = { from = "$DATA/tiny_bert" }, data = { train = "$TMP/train.jsonl" }, device = "cpu",
         out = "$TMP/runs/lora_eval", eval = { sets = { ir = { type = "ir", folder = "$DATA/ir_tiny" } } } }
EOF
run_trainer eval "$TMP/lora_eval.lua" --adapter "$DATA/tiny_lora_adapter" --quiet
expect_rc eval_adapter 0
expect_out eval_adapter_named "tiny_lora_adapter"
run_trainer eval "$TMP/lora_eval.lua" eval.sets=nil
expect_rc eval_nothing 1
expect_err eval_nothing_said "nothing to evaluate"

run_trainer "$TMP/ir.lua" eval.primary="ir_cosine_ndgc@10" eval.at_start=false out="$TMP/runs/ir2"
expect_rc primary_unknown 1
expect_err primary_unknown_names_it "eval.primary = \"ir_cosine_ndgc@10\" is not a metric of this run's evaluation (did you mean 'ir_cosine_ndcg@10'?)"
if grep -qF "step 1/" "$TMP/err"; then fail primary_unknown_before_training "a step ran"; else pass primary_unknown_before_training; fi

# a qrel naming a document the corpus lacks: the file and the line, before any step
mkdir -p "$TMP/bad/qrels"
cp "$DATA/ir_tiny/corpus.jsonl" "$DATA/ir_tiny/queries.jsonl" "$TMP/bad/"
{ cat "$DATA/ir_tiny/qrels/test.tsv"; printf 'q1\tno-such-doc\t1\n'; } >"$TMP/bad/qrels/test.tsv"
line=$(wc -l <"$TMP/bad/qrels/test.tsv")
run_trainer "$TMP/ir.lua" eval.sets.ir.folder="$TMP/bad" out="$TMP/runs/bad"
expect_rc bad_qrels_exit_1 1
expect_err bad_qrels_names_file_line "$TMP/bad/qrels/test.tsv: line $line: document \"no-such-doc\" is not in the corpus file"
if grep -qF "step 1/" "$TMP/err"; then fail bad_qrels_before_training "a step ran"; else pass bad_qrels_before_training; fi
printf '{"title": "x", "text": "no id"}\n' >"$TMP/bad/corpus.jsonl"
run_trainer "$TMP/ir.lua" eval.sets.ir.folder="$TMP/bad" out="$TMP/runs/bad2"
expect_rc missing_id_exit_1 1
expect_err missing_id_names_file_line "$TMP/bad/corpus.jsonl: line 1: no _id"
: >"$TMP/bad/corpus.jsonl"
run_trainer "$TMP/ir.lua" eval.sets.ir.folder="$TMP/bad" out="$TMP/runs/bad3"
expect_rc empty_corpus_exit_1 1
expect_err empty_corpus_named "$TMP/bad/corpus.jsonl: the corpus is empty"

# a scripted metric: steps 2..10 give 0.1, 0.3, 0.5, 0.45, 0.55; step 8 does not improve and
# step 10 improves by 0.05 <= threshold 0.1, so with patience 2 the run stops at step 10, whose
# 0.55 is the best
cat >"$TMP/es.lua" <<EOF
local m = { [0] = 0, [2] = 0.1, [4] = 0.3, [6] = 0.5, [8] = 0.45, [10] = 0.55, [12] = 0.9 }
return {
  extends = "$TMP/plain.lua", out = "$TMP/runs/es", steps = 12, save = { every = 2, keep = 1, best = true },
  eval = { every = 2, primary = "m", fn = function(t) return { m = m[t.step] } end },
  early_stopping = { patience = 2, threshold = 0.1 },
}
EOF
run_trainer "$TMP/es.lua"
expect_rc early_stopping_run 0
expect_err early_stopping_said "early stopping: m has not improved by more than 0.1 for 2 evaluations (best 0.55 at step 10); stopping at step 10"
expect_err early_stopping_done_line "stopped early at step 10: no improvement by more than 0.1000 in 2 evaluations"
expect_err best_done_line "best m 0.5500 at step 10, copied to $TMP/runs/es/best"
cat >"$TMP/check_es.lua" <<EOF
local json = require("trainer.core.json")
local sys = require("trainer.core.sys")
local s = json.read("$TMP/runs/es/summary.json")
assert(s.steps == 10, "stopped at " .. tostring(s.steps))
assert(s.early_stopped and s.early_stopped.step == 10, "summary.json early_stopped")
assert(s.best.step == 10 and s.best.score == 0.55 and s.best.metric == "m", "summary.json best")
assert(sys.is_dir("$TMP/runs/es/best"), "out/best")
local function read(p) local f = assert(io.open(p, "rb")) local d = f:read("*a") f:close() return d end
assert(read("$TMP/runs/es/best/model.safetensors") == read("$TMP/runs/es/checkpoint-10/model.safetensors"))
EOF
run_trainer run "$TMP/check_es.lua"
expect_rc early_stopping_summary 0

# a run that stopped early is not resumed by accident; on purpose it continues, and its step 12
# (0.9) becomes the best
run_trainer resume "$TMP/runs/es"
expect_rc resume_early_stopped 0
expect_err resume_early_stopped_said "stopped early at step 10"
run_trainer resume "$TMP/runs/es" early_stopping=nil --quiet
expect_rc resume_early_stopped_on_purpose 0
cat >"$TMP/check_resumed.lua" <<EOF
local s = require("trainer.core.json").read("$TMP/runs/es/summary.json")
assert(s.steps == 12 and s.best.step == 12 and s.best.score == 0.9, "best after resume")
EOF
run_trainer run "$TMP/check_resumed.lua"
expect_rc resume_tracks_best 0
if cmp -s "$TMP/runs/es/best/model.safetensors" "$TMP/runs/es/checkpoint-12/model.safetensors"; then pass resume_best_copied
else fail resume_best_copied "out/best is not checkpoint-12"; fi

# the best checkpoint (step 6) survives save.keep = 1 while later ones come and go
sed -e 's/\[10\] = 0.55, \[12\] = 0.9/[10] = 0.4, [12] = 0.3/' -e 's/early_stopping = .*//' -e 's#runs/es#runs/keep#' \
  "$TMP/es.lua" >"$TMP/keep.lua"
run_trainer "$TMP/keep.lua"
expect_rc best_kept_run 0
if [ -d "$TMP/runs/keep/checkpoint-6" ] && [ -d "$TMP/runs/keep/checkpoint-12" ] && [ ! -d "$TMP/runs/keep/checkpoint-10" ] \
   && cmp -s "$TMP/runs/keep/best/model.safetensors" "$TMP/runs/keep/checkpoint-6/model.safetensors"; then
  pass best_checkpoint_survives_keep
else
  fail best_checkpoint_survives_keep "$(ls "$TMP/runs/keep")"
fi
# resumed from the best checkpoint (its trainer_state names it the best), the run keeps protecting it
rm -rf "$TMP/runs/keep/checkpoint-12" "$TMP/runs/keep/best"
run_trainer "$TMP/keep.lua" resume="$TMP/runs/keep/checkpoint-6" --quiet
expect_rc best_resumed_run 0
if [ -d "$TMP/runs/keep/checkpoint-6" ] && cmp -s "$TMP/runs/keep/best/model.safetensors" "$TMP/runs/keep/checkpoint-6/model.safetensors"; then
  pass best_kept_after_resume
else
  fail best_kept_after_resume "$(ls "$TMP/runs/keep")"
fi
sed -e 's/primary = "m", //' "$TMP/keep.lua" >"$TMP/noprimary.lua"
run_trainer "$TMP/noprimary.lua" out="$TMP/runs/noprimary"
expect_rc best_needs_primary 1
expect_err best_needs_primary_said "save.best needs eval.primary"
finish
