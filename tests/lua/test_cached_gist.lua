-- Cached GISTEmbed (loss.cached with name = "gist") against sentence-transformers' own
-- CachedGISTEmbedLoss (tests/data/cached_gist_golden.json, written by
-- tests/ref/make_cached_gist_golden.py): the committed tiny BERT, dropout off, guided by the
-- same folder (loss.teacher), six anchor/positive pairs embedded two texts at a time; the loss
-- value and the gradients of a few parameters after one step.micro, for an absolute and a
-- relative margin. ST's own cached and plain losses agree within 1e-5 relative (the script
-- checks it); ours within 1e-5 of ST's cached loss, value and gradients,
-- and our plain path equals our cached one within 1e-5.
local json = require("trainer.core.json")
local native = require("trainer.native")

local lib = dofile(native.root() .. "/tests/lua/testlib.lua")
local golden = json.read(native.root() .. "/tests/data/cached_gist_golden.json")
local dir = native.root() .. "/tests/data/tiny_bert"

local function run(c, cached)
  local rows = {}
  for i = 1, #golden.anchors do rows[i] = { golden.anchors[i], golden.positives[i] } end
  return lib.tiny_bert_step({ name = "gist", teacher = dir, margin_strategy = c.margin_strategy, margin = c.margin,
    temperature = c.temperature }, rows, { cached = cached, mini_batch = 2 })
end

local tests = {}
for _, c in ipairs(golden.cases) do
  tests[#tests + 1] = { "cached_gist_matches_st_" .. c.margin_strategy, function()
    local v, grads = run(c, true)
    assert(math.abs(v - c.loss_cached) <= 1e-5 * math.abs(c.loss_cached),
      ("loss %.9g vs ST's CachedGISTEmbedLoss %.9g"):format(v, c.loss_cached))
    for name, ref in pairs(c.grads) do
      local got = assert(grads[name], name .. " has no gradient")
      local rel = lib.rel_err(got, ref)
      assert(rel <= 1e-5, ("%s: relative error %.3g vs ST"):format(name, rel))
    end
    local v0, plain = run(c, false)
    assert(math.abs(v - v0) <= 1e-5 * math.abs(v0), ("cached %.9g vs plain %.9g"):format(v, v0))
    for name, ref in pairs(plain) do
      if not name:match("attention%.self%.key%.bias$") then
        local rel = lib.rel_err(grads[name], ref)
        assert(rel <= 1e-5, ("%s: cached vs plain relative error %.3g"):format(name, rel))
      end
    end
  end }
end
return tests
