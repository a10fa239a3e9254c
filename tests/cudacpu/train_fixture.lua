-- tests/cudacpu/train_fixture.lua — what the training comparisons (tests/cudacpu/train_*.sh)
-- train on, written once into DIR:
--   ./trainer run tests/cudacpu/train_fixture.lua DIR
-- DIR/emb (a tiny sentence encoder: models.tiny_folder, dropout 0.1), DIR/cls (a tiny
-- classifier with 3 labels), DIR/pairs.jsonl (48 rows: sentence1, sentence2, score in
-- [0, 1], label in 0..2), DIR/long.jsonl (32 pairs of 40 words), DIR/texts.txt (texts for `trainer encode`), DIR/pairs.tsv (TAB
-- pairs for `trainer classify`), and three recipes: DIR/mnrl.lua (the encoder, MNRL, AdamW,
-- grad_clip), DIR/nli.lua (the classifier, cross_entropy) and DIR/plan.lua (nli.lua on a
-- random classifier of tests/lua/test_plan.lua's shape, hidden 64, 4 layers, over long.jsonl
-- at max_length 32: the shape on which that test holds the plan within 15 %). The recipes say device = "cpu"
-- and no out: the scripts give device= and out= on the command line, so that both devices
-- run the same file. The texts come from a linear congruential generator with a fixed seed:
-- the fixture never changes between runs or machines.
local dir = arg and arg[1]
if not dir then error("usage: trainer run tests/cudacpu/train_fixture.lua DIR", 0) end
local sys = require("trainer.core.sys")
local models = require("trainer.models")
-- the tests' helpers, beside this file's folder (the GPU bundle carries them too)
local here = debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or "tests/cudacpu"
local lib = dofile(here .. "/../lua/testlib.lua")
assert(sys.mkdir_p(dir))
models.tiny_folder(dir .. "/emb", { seed = 1 })
models.tiny_folder(dir .. "/cls", { seed = 6, task = "classification" })

local words = lib.concat(lib.words, { "very" })
local rnd, sent = lib.sentences(7, words, 3, 6)

local function write(name, text) assert(sys.write_file(dir .. "/" .. name, text)) end

local rows, texts, tsv = {}, {}, {}
for i = 1, 48 do
  local a, b = sent(), sent()
  rows[i] = ('{"sentence1": "%s", "sentence2": "%s", "score": %.2f, "label": %d}\n'):format(a, b, rnd(100) / 100,
    rnd(3) - 1)
  if i <= 40 then texts[#texts + 1] = a .. "\n" tsv[#tsv + 1] = a .. "\t" .. b .. "\n" end
end
write("pairs.jsonl", table.concat(rows))
-- long.jsonl: 32 pairs of 40 words, longer than any max_length the scripts set, so every
-- batch pads to model.max_length: the shape `trainer plan` predicts (its worst case).
local long = {}
for i = 1, 32 do
  local a, b = {}, {}
  for k = 1, 40 do a[k] = words[rnd(#words)] b[k] = words[rnd(#words)] end
  long[i] = ('{"sentence1": "%s", "sentence2": "%s", "label": %d}\n'):format(table.concat(a, " "), table.concat(b, " "), rnd(3) - 1)
end
write("long.jsonl", table.concat(long))
write("texts.txt", table.concat(texts))
write("pairs.tsv", table.concat(tsv))

-- 6 steps of 8 rows: one epoch of 48 rows. log.every = 4: on a device the losses stay on it
-- between reads (steps 1, 4 and 6 read), as in a real run; metrics.jsonl still has every step.
write("mnrl.lua", ([[
return {
  model = { from = %q }, data = { train = %q, columns = { "sentence1", "sentence2" } },
  loss = { name = "mnrl" }, optim = { name = "adamw", lr = 1e-3 }, batch = { size = 8 }, steps = 6,
  grad_clip = 1.0, log = { every = 4, quiet = true }, eval = { at_start = false }, save = { final = false },
  device = "cpu", seed = 3,
}
]]):format(dir .. "/emb", dir .. "/pairs.jsonl"))
-- nli.lua: mnrl.lua's run on the classifier, cross-entropy over the pairs' labels
write("nli.lua", ([[
return {
  extends = "mnrl.lua", model = { from = %q, task = "classification" },
  data = { columns = { "sentence1", "sentence2", "label" } }, loss = { name = "cross_entropy" },
}
]]):format(dir .. "/cls"))
-- written whole, not extending nli.lua: a table key set to nil is absent, so an extending recipe
-- would keep nli.lua's model.from and plan the small classifier instead of this shape
write("plan.lua", ([[
return {
  steps = 2,
  loss = { name = "cross_entropy" }, optim = { name = "adamw", lr = 1e-3 }, batch = { size = 8 },
  grad_clip = 1.0, log = { every = 4, quiet = true }, eval = { at_start = false }, save = { final = false },
  device = "cpu", seed = 3,
  model = { arch = "bert", init = "random", tokenizer = %q, task = "classification", num_labels = 3,
    max_length = 32, config = { hidden_size = 64, num_hidden_layers = 4, num_attention_heads = 4,
    intermediate_size = 256, vocab_size = 500, max_position_embeddings = 512 } },
  data = { train = %q, columns = { "sentence1", "sentence2", "label" } },
}
]]):format(dir .. "/cls", dir .. "/long.jsonl"))
