#!/usr/bin/env bash
# Prompts on the command line: `trainer encode --prompt NAME` takes the folder's prompt (and
# leaves it out of the pooling where its Pooling config says include_prompt false) as
# sentence-transformers' encode(prompt_name=) (tests/data/prompts_golden.json); the default
# prompt applies without --prompt; --prompt-text gives the text itself; an unknown name is
# refused with the folder's prompts.
source "$(dirname "$0")/lib.sh"
cd "$ROOT"
DATA="$ROOT/tests/data"

M="$TMP/prompted"
cp -r "$DATA/tiny_bert" "$M"
cat >"$TMP/setup.lua" <<EOF
local json = require("trainer.core.json")
local g = json.read("$DATA/prompts_golden.json")
local native = require("trainer.native")
native.write_file("$M/config_sentence_transformers.json", json.encode({ prompts = g.prompts, default_prompt_name = g.default_prompt_name }))
native.write_file("$M/1_Pooling/config.json", json.encode(g.pooling.exclude))
native.write_file("$TMP/texts.txt", table.concat(g.texts, "\n") .. "\n")
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
finish
