-- tests/cli/sts_fixture.lua — the tiny model and STS-like rows the CLI tests and the soak
-- train on, written into DIR:
--   ./trainer run tests/cli/sts_fixture.lua DIR TRAIN_ROWS MAX_EXTRA [NLI_ROWS]
-- DIR/tiny (a tiny random BERT folder: models.tiny_folder, seed 1), DIR/train.jsonl
-- (TRAIN_ROWS rows) and DIR/dev.jsonl (16 rows) of sentence1, sentence2 and a score in
-- 0.1..5.0, each sentence of 4 to 3 + MAX_EXTRA words; with NLI_ROWS, DIR/tiny_cls (a tiny
-- classifier, seed 2) and DIR/nli.jsonl (NLI_ROWS rows of premise, hypothesis and an NLI
-- label) too. One seeded stream (testlib.sentences, seed 7) writes the files in that order:
-- the same arguments give the same files on every machine.
local dir, train_rows, max_extra, nli_rows = arg[1], tonumber(arg[2]), tonumber(arg[3]), tonumber(arg[4])
if not (dir and train_rows and max_extra) then
  error("usage: trainer run tests/cli/sts_fixture.lua DIR TRAIN_ROWS MAX_EXTRA [NLI_ROWS]", 0)
end
local models = require("trainer.models")
local here = debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or "tests/cli"
local lib = dofile(here .. "/../lua/testlib.lua")

models.tiny_folder(dir .. "/tiny", { seed = 1 })
if nli_rows then models.tiny_folder(dir .. "/tiny_cls", { seed = 2, task = "classification" }) end
local rnd, sent = lib.sentences(7, lib.concat(lib.words, { "very" }), 3, max_extra)

local function write(name, n, row)
  local rows = {}
  for i = 1, n do rows[i] = row() end
  lib.write(dir .. "/" .. name, table.concat(rows))
end
local function sts() return ('{"sentence1": "%s", "sentence2": "%s", "score": %.1f}\n'):format(sent(), sent(), rnd(50) / 10) end
write("train.jsonl", train_rows, sts)
write("dev.jsonl", 16, sts)
if nli_rows then
  local labels = { "entailment", "neutral", "contradiction" }
  write("nli.jsonl", nli_rows, function()
    return ('{"premise": "%s", "hypothesis": "%s", "label": "%s"}\n'):format(sent(), sent(), labels[rnd(3)])
  end)
end
