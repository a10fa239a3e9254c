#!/usr/bin/env bash
# `trainer mine`: the rows of tests/data/mine_golden.json's first case (sentence-transformers'
# mine_hard_negatives with tiny_bert) as JSONL under the file's own column names, with a
# progress bar and the counts on stderr; --format n-tuple, --out, --corpus; a file without
# two text columns and bad options are refused.
source "$(dirname "$0")/lib.sh"
cd "$ROOT"
DATA="$ROOT/tests/data"

cat >"$TMP/setup.lua" <<EOF
local json = require("trainer.core.json")
local g = json.read("$DATA/mine_golden.json")
local f = assert(io.open("$TMP/pairs.jsonl", "w"))
-- query before answer, as the golden's dataset has them: the first two fields are anchor and positive
for _, r in ipairs(g.rows) do f:write(('{"query": %s, "answer": %s}\n'):format(json.encode(r.query), json.encode(r.answer))) end
f:close()
f = assert(io.open("$TMP/corpus.txt", "w"))
f:write(table.concat(g.corpus, "\n"), "\n")
f:close()
EOF
run_trainer run "$TMP/setup.lua"
expect_rc setup 0
# compare.lua FILE CASE: FILE's rows against the golden's case
cat >"$TMP/compare.lua" <<EOF
local json = require("trainer.core.json")
local g = json.read("$DATA/mine_golden.json")
local case = g.cases[tonumber(arg[2])]
local i = 0
for line in io.lines(arg[1]) do
  i = i + 1
  local r, t = json.decode(line), case.rows[i]
  assert(t, "more rows than sentence-transformers")
  for k, v in pairs(t) do
    if k == "scores" then
      for j, s in ipairs(v) do assert(math.abs(r.scores[j] - s) <= 1e-5, ("row %d score %d"):format(i, j)) end
    else
      assert(r[k] == v, ("row %d: %s %q vs %q"):format(i, k, tostring(r[k]), v))
    end
  end
end
assert(i == #case.rows, ("%d rows vs sentence-transformers %d"):format(i, #case.rows))
EOF
run_trainer mine "$DATA/tiny_bert" "$TMP/pairs.jsonl" --batch 8
expect_rc mine 0
cp "$TMP/out" "$TMP/mined.jsonl"
expect_err mine_progress "mine: embedding [##############################] 86/86"
expect_err mine_counts "mine: 138 rows from 40 anchors over a corpus of 46 (range_max 5)"
run_trainer run "$TMP/compare.lua" "$TMP/mined.jsonl" 1
expect_rc mine_equals_st 0
run_trainer mine "$DATA/tiny_bert" "$TMP/pairs.jsonl" --format n-tuple --out "$TMP/tuples.jsonl" --quiet
expect_rc mine_ntuple 0
if [ ! -s "$TMP/err" ]; then pass mine_quiet; else fail mine_quiet "stderr not empty"; show; fi
run_trainer run "$TMP/compare.lua" "$TMP/tuples.jsonl" 6
expect_rc mine_ntuple_equals_st 0
run_trainer mine "$DATA/tiny_bert" "$TMP/pairs.jsonl" --corpus "$TMP/corpus.txt" --relative-margin 0.02 --out "$TMP/c.jsonl"
expect_rc mine_corpus 0
expect_err mine_skipped "candidates skipped:"
run_trainer run "$TMP/compare.lua" "$TMP/c.jsonl" 7
expect_rc mine_corpus_equals_st 0
run_trainer mine "$DATA/tiny_bert" "$TMP/pairs.jsonl" --num-negatives 5 --range-max 4
expect_rc mine_bad_range 1
expect_err mine_bad_range_said "cannot mine 5 negatives per anchor"
printf '{"text": "a"}\n' >"$TMP/one.jsonl"
run_trainer mine "$DATA/tiny_bert" "$TMP/one.jsonl" --columns text
expect_rc mine_one_column 1
expect_err mine_one_column_said "--columns takes the anchor and the positive column"
finish
