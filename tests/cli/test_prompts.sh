#!/usr/bin/env bash
# Prompts on the command line: `trainer encode --prompt NAME` takes the folder's prompt (and
# leaves it out of the pooling where its Pooling config says include_prompt false) as
# sentence-transformers' encode(prompt_name=) (tests/data/prompts_golden.json); the default
# prompt applies without --prompt; --prompt-text gives the text itself; an unknown name is
# refused with the folder's prompts. Training with data.prompts: the prompt is put before its
# column's texts (the same losses as a file that holds the prompted texts; other ones where the
# model leaves the prompt out of the pooling; the cached loss as the plain one), saved in the
# checkpoint's config_sentence_transformers.json, whose prompt `encode --prompt` then takes; a
# prompt for a column the data does not have is refused before the model loads.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/tiny_fixtures.sh"
cd "$ROOT"
DATA="$ROOT/tests/data"

M="$TMP/prompted"
cp -r "$DATA/tiny_bert" "$M"
cat >"$TMP/setup.lua" <<EOF
local json = require("trainer.core.json")
local g = json.read("$DATA/prompts_golden.json")
local sys = require("trainer.core.sys")
sys.write_file("$M/config_sentence_transformers.json", json.encode({ prompts = g.prompts, default_prompt_name = g.default_prompt_name }))
sys.write_file("$M/1_Pooling/config.json", json.encode(g.pooling.exclude))
sys.write_file("$TMP/texts.txt", table.concat(g.texts, "\n") .. "\n")
EOF
run_trainer run "$TMP/setup.lua"
expect_rc setup 0

# compare.lua FILE PROMPT_NAME PROMPT ("-": none): the embeddings in FILE against the golden's case
cat >"$TMP/compare.lua" <<EOF
local json = require("trainer.core.json")
local g = json.read("$DATA/prompts_golden.json")
local file, name, text = arg[1], arg[2] ~= "-" and arg[2] or nil, arg[3] ~= "-" and arg[3] or nil
local case
for _, c in ipairs(g.cases) do
  if not c.include_prompt and c.prompt_name == name and c.prompt == text then case = c end
end
assert(case, "no golden case")
local i = 0
for line in io.lines(file) do
  i = i + 1
  local row = json.decode(line)
  for j, v in ipairs(case.embeddings[i]) do assert(math.abs(row[j] - v) <= 2e-5, ("row %d col %d"):format(i, j)) end
end
assert(i == #case.embeddings)
EOF
run_trainer encode "$M" "$TMP/texts.txt" --prompt doc --batch 4
expect_rc encode_prompt 0
cp "$TMP/out" "$TMP/doc.jsonl"
run_trainer run "$TMP/compare.lua" "$TMP/doc.jsonl" doc -
expect_rc encode_prompt_equals_st 0
run_trainer encode "$M" "$TMP/texts.txt"
cp "$TMP/out" "$TMP/default.jsonl"
run_trainer run "$TMP/compare.lua" "$TMP/default.jsonl" - -
expect_rc encode_default_prompt_equals_st 0
run_trainer encode "$M" "$TMP/texts.txt" --prompt-text "hej: "
cp "$TMP/out" "$TMP/text.jsonl"
run_trainer run "$TMP/compare.lua" "$TMP/text.jsonl" - "hej: "
expect_rc encode_prompt_text_equals_st 0
run_trainer encode "$M" "$TMP/texts.txt" --prompt passage
expect_rc unknown_prompt 1
expect_err unknown_prompt_said 'prompt "passage": the model has no prompt of that name (its prompts: doc, query)'

# ---- training with data.prompts
cat >"$TMP/mk_prompted.lua" <<EOF
local json = require("trainer.core.json")
local out = assert(io.open("$TMP/train_prompted.jsonl", "w"))
for line in io.lines("$TMP/train.jsonl") do
  local r = json.decode(line)
  out:write(json.encode({ sentence1 = "is " .. r.sentence1, sentence2 = r.sentence2, score = r.score }), "\n")
end
out:close()
EOF
run_trainer run "$TMP/mk_prompted.lua"
expect_rc prompted_file 0
run_trainer "$TMP/plain.lua" steps=4 'data.prompts={sentence1="is "}' save.every=4 out="$TMP/runs/p1"
expect_rc train_with_prompts 0
run_trainer "$TMP/plain.lua" steps=4 data.train="$TMP/train_prompted.jsonl" save.every=4 out="$TMP/runs/p2"
expect_rc train_with_prompted_file 0
cat >"$TMP/losses.lua" <<EOF
local json = require("trainer.core.json")
local function losses(dir)
  local t = {}
  for line in io.lines(dir .. "/metrics.jsonl") do
    local r = json.decode(line)
    if r.loss then t[#t + 1] = r.loss end
  end
  return t
end
local a, b = losses(arg[1]), losses(arg[2])
assert(#a == 4 and #b == 4, "4 steps each")
local same = true
-- "close": equal to 1e-5 (the cached loss sums its chunks in another order)
local tol = arg[3] == "close" and 1e-5 or 0
for i = 1, 4 do if math.abs(a[i] - b[i]) > tol * math.abs(a[i]) then same = false end end
if arg[3] ~= "differ" then assert(same, "the losses differ") else assert(not same, "the losses are the same") end
EOF
run_trainer run "$TMP/losses.lua" "$TMP/runs/p1" "$TMP/runs/p2" same
expect_rc prompts_equal_prompted_texts 0
cat >"$TMP/ck.lua" <<EOF
local json = require("trainer.core.json")
local c = json.read(arg[1] .. "/config_sentence_transformers.json")
assert(c.prompts.sentence1 == "is ", "prompts.sentence1")
EOF
run_trainer run "$TMP/ck.lua" "$TMP/runs/p1/checkpoint-4"
expect_rc checkpoint_saves_prompts 0
printf 'the cat\nbird\n' >"$TMP/two.txt"
run_trainer encode "$TMP/runs/p1/checkpoint-4" "$TMP/two.txt" --prompt sentence1
expect_rc encode_checkpoint_prompt 0
cp "$TMP/out" "$TMP/ck_prompt.jsonl"
printf 'is the cat\nis bird\n' >"$TMP/two_prompted.txt"
run_trainer encode "$TMP/runs/p1/checkpoint-4" "$TMP/two_prompted.txt"
if cmp -s "$TMP/out" "$TMP/ck_prompt.jsonl"; then pass encode_checkpoint_prompt_is_the_text
else fail encode_checkpoint_prompt_is_the_text "differs"; fi

# include_prompt false: the prompt's tokens leave the pooling, so the losses differ from the file's
cp -r "$TMP/tiny" "$TMP/tiny_ex"
sed -i 's/"pooling_mode_cls_token"/"include_prompt": false, "pooling_mode_cls_token"/' "$TMP/tiny_ex/1_Pooling/config.json"
run_trainer "$TMP/plain.lua" model.from="$TMP/tiny_ex" steps=4 'data.prompts={sentence1="is "}' save.every=4 out="$TMP/runs/p3"
expect_rc train_prompts_excluded 0
run_trainer "$TMP/plain.lua" model.from="$TMP/tiny_ex" steps=4 data.train="$TMP/train_prompted.jsonl" save.every=4 out="$TMP/runs/p4"
run_trainer run "$TMP/losses.lua" "$TMP/runs/p3" "$TMP/runs/p4" differ
expect_rc prompts_excluded_from_pooling 0
MNRL=(loss.name=mnrl model.dropout=0 'data.columns={"sentence1","sentence2"}' eval.every=4)
run_trainer "$TMP/plain.lua" model.from="$TMP/tiny_ex" steps=4 'data.prompts={sentence1="is "}' "${MNRL[@]}" save.every=4 out="$TMP/runs/p5"
expect_rc mnrl_with_prompts 0
run_trainer "$TMP/plain.lua" model.from="$TMP/tiny_ex" steps=4 'data.prompts={sentence1="is "}' "${MNRL[@]}" loss.cached=true loss.mini_batch=3 save.every=4 out="$TMP/runs/p6"
expect_rc cached_with_prompts 0
run_trainer run "$TMP/losses.lua" "$TMP/runs/p5" "$TMP/runs/p6" close
expect_rc cached_equals_plain_with_prompts 0

run_trainer "$TMP/plain.lua" 'data.prompts={question="q: "}' out="$TMP/runs/p7"
expect_rc prompt_unknown_column 1
expect_err prompt_unknown_column_said "data.prompts.question: not a text column of the training data (its text columns: sentence1, sentence2)"
finish
