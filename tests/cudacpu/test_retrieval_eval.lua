-- tests/cudacpu/test_retrieval_eval.lua — the retrieval evaluators on a CUDA device: the corpus
-- chunks embedded into device tensors (row views filled by device copies), the score tiles by the
-- device's matrix product and read back; tiny_bert on the device against sentence-transformers'
-- metrics (tests/data/retrieval_golden.json) within 1e-6, ST's own embeddings uploaded giving the
-- CPU's metrics, the chunked search equal to one chunk, and every device byte given back.
-- Run: build/cudacpu/trainer run tests/cudacpu/test_retrieval_eval.lua
local T = require("trainer.core.tensor")
local json = require("trainer.core.json")
local memory = require("trainer.core.memory")
local evaluate = require("trainer.train.evaluate")
local beir = require("trainer.train.beir")

local here = debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or "tests/cudacpu"
local h = dofile(here .. "/harness.lua")
local data = here .. "/../data"   -- (native.root() is build/cudacpu for this binary)
local golden = json.read(data .. "/retrieval_golden.json")
local BOTH = { similarity_fn_names = { "cosine", "dot" }, batch_size = 8 }

local function worst(ours, theirs, prefix)
  local w = 0
  for k, v in pairs(theirs) do
    local mine = ours[k:gsub("^" .. prefix, "")]
    if mine == nil then return math.huge end
    local tol = k:find("threshold", 1, true) and math.max(1, math.abs(v)) or 1
    w = math.max(w, math.abs(mine - v) / tol)
  end
  return w
end

local function golden_embedder(device)
  return function(texts)
    local rows = {}
    for i, t in ipairs(texts) do rows[i] = golden.embeddings[t] end
    return T.from_table(rows, { device = device })
  end
end

local q, c, rel = beir.load({ folder = data .. "/ir_tiny" })
collectgarbage()
local before = memory.stats("cuda").allocated

local cpu = evaluate.ir(golden_embedder("cpu"), q, c, rel, BOTH)
local dev = evaluate.ir(golden_embedder("cuda"), q, c, rel, BOTH)
local chunked = evaluate.ir(golden_embedder("cuda"), q, c, rel,
  { similarity_fn_names = { "cosine", "dot" }, batch_size = 3, corpus_chunk_size = 7, tile = 5 })
local same, same_chunked = true, true
for k, v in pairs(cpu) do
  if math.abs(dev[k] - v) > 1e-12 then same = false end
  if chunked[k] ~= dev[k] then same_chunked = false end
end
h.check("ir on the device equals the CPU on ST's embeddings", same)
h.check("ir chunked on the device equals one chunk", same_chunked)

local m = trainer.load_model(data .. "/tiny_bert", { device = "cuda", on_warning = function() end })
m:eval()
local tk = require("trainer.core.tokenizer")
local tok = tk.load(data .. "/tiny_bert")
local function embed(texts)
  local b = tok:batch(texts, { max_length = 64, device = "cuda" })
  local out = m:forward(b)
  tk.free_batch(b)
  return out
end
local w = worst(evaluate.ir(embed, q, c, rel, BOTH), golden.ir, "tiny_")
h.check("ir of tiny_bert on the device within 1e-6 of sentence-transformers", w <= 1e-6, w)
local trip = {}
for line in io.lines(data .. "/triplets_tiny.jsonl") do
  local r = json.decode(line)
  trip[#trip + 1] = { r.anchor, r.positive, r.negative }
end
local pairs_, labels = {}, {}
for line in io.lines(data .. "/pairs_binary_tiny.jsonl") do
  local r = json.decode(line)
  pairs_[#pairs_ + 1], labels[#labels + 1] = { r.sentence1, r.sentence2 }, r.label
end
w = math.max(worst(evaluate.triplet(embed, trip, BOTH), golden.triplet, "tiny_"),
  worst(evaluate.binary(embed, pairs_, labels, BOTH), golden.binary, "tiny_"))
h.check("triplet and binary of tiny_bert on the device within 1e-6 of sentence-transformers", w <= 1e-6, w)
m:free()
tok:free()
collectgarbage()
h.check("the evaluators give every device byte back", memory.stats("cuda").allocated == before,
  ("%d bytes before, %d after"):format(before, memory.stats("cuda").allocated))
h.finish()
