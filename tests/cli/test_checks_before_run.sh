#!/usr/bin/env bash
# End-to-end exit codes of the checks made before a run allocates:
# a mistyped config.json field exits 1 naming the file and the field; a run whose memory
# plan is above memory.limit exits 2 at once with the predicted ledger; a damaged
# trainer_state exits 1 naming itself and the previous checkpoint, leaving no .tmp file.
source "$(dirname "$0")/lib.sh"
cd "$ROOT"

cat >"$TMP/mk.lua" <<EOF
require("trainer.models").tiny_folder("$TMP/tiny", { seed = 1 })
local f = assert(io.open("$TMP/train.jsonl", "w"))
for i = 1, 32 do f:write(('{"sentence1": "the cat %d", "sentence2": "a dog sat", "score": %.1f}\n'):format(i, (i % 5) / 5)) end
f:close()
EOF
run_trainer run "$TMP/mk.lua"
expect_rc fixtures_rc 0
cat >"$TMP/r.lua" <<EOF
return {
  model = { from = "$TMP/tiny" },
  data = { train = "$TMP/train.jsonl", columns = { "sentence1", "sentence2", "score" } },
  loss = { name = "cosine" }, batch = { size = 4 }, steps = 4, save = { every = 2, keep = 5 },
  eval = { at_start = false }, log = { quiet = true }, device = "cpu", out = "$TMP/run",
}
EOF

# ---- config.json with a wrong value type
cp "$TMP/tiny/config.json" "$TMP/config.good"
sed -i 's/"layer_norm_eps": [^,]*/"layer_norm_eps": "tiny"/' "$TMP/tiny/config.json"
run_trainer "$TMP/r.lua"
expect_rc config_type_rc 1
expect_err config_type_names_field "tiny/config.json: layer_norm_eps is \"tiny\""
if grep -qiE "traceback|internal error" "$TMP/err"; then fail config_type_no_traceback "stderr has a traceback"; show
else pass config_type_no_traceback; fi
cp "$TMP/config.good" "$TMP/tiny/config.json"

# ---- model.max_length above max_position_embeddings: one warning naming it, texts cut there
run_trainer "$TMP/r.lua" model.max_length=1e7 log.quiet=false steps=1 out="$TMP/long"
expect_rc long_max_length_rc 0
expect_err long_max_length_warns "warning: model.max_length = 10000000 is above the model's max_position_embeddings (64, in $TMP/tiny/config.json); texts are cut at 64 tokens"
if [ "$(grep -c max_position_embeddings "$TMP/err")" = 1 ]; then pass long_max_length_warns_once; else fail long_max_length_warns_once "$(cat "$TMP/err")"; fi
# (a run without evaluation: its last line names no evaluation)
if grep -q '^trainer: done, 1 steps, final loss [0-9.]*$' "$TMP/err"; then pass done_line_without_eval; else fail done_line_without_eval "$(grep '^trainer: done' "$TMP/err")"; fi

# ---- data.skip_bad: the skipped lines are counted once at the start, with the first one
{ head -3 "$TMP/train.jsonl"; echo '{"sentence1": "cut off'; sed -n 4,10p "$TMP/train.jsonl"; echo 'not json'; } >"$TMP/bad.jsonl"
run_trainer "$TMP/r.lua" data.train="$TMP/bad.jsonl" data.skip_bad=true log.quiet=false steps=1 out="$TMP/skip"
expect_rc skip_bad_rc 0
expect_err skip_bad_counted "data.skip_bad: skipped 2 malformed lines of $TMP/bad.jsonl; the first: $TMP/bad.jsonl: line 4:"
if [ "$(grep -c 'data.skip_bad: skipped' "$TMP/err")" = 1 ] && [ "$(grep -n 'data.skip_bad: skipped' "$TMP/err" | cut -d: -f1)" -lt "$(grep -n '^step 1/1' "$TMP/err" | cut -d: -f1)" ]; then
  pass skip_bad_said_once_before_training
else
  fail skip_bad_said_once_before_training "$(cat "$TMP/err")"
fi

# ---- a plan above memory.limit stops at once, with the ledger, exit 2
sed -i 's/"vocab_size": [0-9]*/"vocab_size": 1048576/' "$TMP/tiny/config.json"
run_trainer "$TMP/r.lua" memory.limit=32MiB
expect_rc plan_limit_rc 2
expect_err plan_limit_says "this run cannot fit"
expect_err plan_limit_ledger "optimizer"
cp "$TMP/config.good" "$TMP/tiny/config.json"

# ---- a damaged trainer_state
run_trainer "$TMP/r.lua"
expect_rc train_rc 0
echo "not a state" >"$TMP/run/checkpoint-4/trainer_state"
run_trainer "$TMP/r.lua" resume="$TMP/run/checkpoint-4"
expect_rc damaged_state_rc 1
expect_err damaged_state_message "checkpoint-4/trainer_state is damaged (not a gzip stream"
expect_err damaged_state_previous "resume from checkpoint-2, the previous one"
if ls -a "$TMP/run" | grep -q '\.tmp$'; then fail damaged_state_no_tmp "a .tmp file was left in $TMP/run"; else pass damaged_state_no_tmp; fi
finish
