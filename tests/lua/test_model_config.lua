-- config.json is validated field by field, and a run is checked against its memory plan
-- before it allocates: each case of a table of damaged configs (wrong
-- value types, absurd sizes, nulls where a number belongs) makes run.build raise a user
-- error naming config.json and the field, with nothing allocated; valid nulls (HF's
-- "classifier_dropout": null) and the presets still load; a model whose plan is above
-- memory.limit (or the machine) stops with an out-of-memory error (exit 2) that carries
-- the predicted ledger, and allocated nothing.
local lib = dofile(require("trainer.native").root() .. "/tests/lua/testlib.lua")
local json = require("trainer.core.json")
local outputs = require("trainer.train.outputs")
local recipe = require("trainer.recipe")
local run = require("trainer.train.run")
local errors = require("trainer.core.errors")
local memory = require("trainer.core.memory")
local bert = require("trainer.models.bert")

local tests = {}
local fx

local function setup()
  if fx then return fx end
  local dir = os.tmpname()
  os.remove(dir)
  outputs.mkdir(dir)
  require("trainer.models").tiny_folder(dir .. "/tiny", { seed = 2 })
  local f = assert(io.open(dir .. "/train.jsonl", "w"))
  for i = 1, 8 do f:write(('{"sentence1": "the cat %d", "sentence2": "a dog", "score": 0.5}\n'):format(i)) end
  f:close()
  fx = { dir = dir, config = json.read(dir .. "/tiny/config.json") }
  return fx
end

-- Writes the tiny folder's config.json changed by fn(cfg), and a recipe on it; returns
-- the resolved recipe.
local function recipe_with(fn, extra)
  local d = setup()
  local cfg = json.decode(json.encode(d.config))
  fn(cfg)
  outputs.write_atomic(d.dir .. "/tiny/config.json", json.encode(cfg, 2))
  local path = d.dir .. "/r.lua"
  local f = assert(io.open(path, "w"))
  f:write(([[
return {
  model = { from = %q },
  data = { train = %q, columns = { "sentence1", "sentence2", "score" } },
  loss = { name = "cosine" }, batch = { size = 4 }, steps = 1, log = { quiet = true }, device = "cpu",
  out = %q, %s
}
]]):format(d.dir .. "/tiny", d.dir .. "/train.jsonl", d.dir .. "/run", extra or ""))
  f:close()
  return recipe.load(path)
end

local function restore() outputs.write_atomic(setup().dir .. "/tiny/config.json", json.encode(setup().config, 2)) end

-- run.build on a config changed by fn: ok, error, bytes allocated during the attempt
local function build(fn, extra)
  local r = recipe_with(fn, extra)
  collectgarbage()
  memory.reset_peak()
  local before = memory.stats().allocated
  local ok, t = pcall(run.build, r, { quiet = true })
  local peak = memory.stats().peak_allocated - before
  restore()
  if ok then t:free() return true, nil, peak end
  return false, t, peak
end

local null = json.null
-- { name, change, field the message must name, text it must contain }
local cases = {
  { "layer_norm_eps_string", function(c) c.layer_norm_eps = "tiny" end, "layer_norm_eps", '"tiny"' },
  { "type_vocab_size_string", function(c) c.type_vocab_size = "x" end, "type_vocab_size", '"x"' },
  { "layers_1e9", function(c) c.num_hidden_layers = 1e9 end, "num_hidden_layers", "<= 1024" },
  { "hidden_size_fraction", function(c) c.hidden_size = 32.5 end, "hidden_size", "whole number" },
  { "hidden_size_missing", function(c) c.hidden_size = nil end, "hidden_size", "missing" },
  { "heads_null", function(c) c.num_attention_heads = null end, "num_attention_heads", "null" },
  { "vocab_negative", function(c) c.vocab_size = -5 end, "vocab_size", ">= 1" },
  { "eps_zero", function(c) c.layer_norm_eps = 0 end, "layer_norm_eps", "> 0" },
  { "dropout_one", function(c) c.hidden_dropout_prob = 1 end, "hidden_dropout_prob", "< 1" },
  { "attention_dropout_list", function(c) c.attention_probs_dropout_prob = { 0.1 } end, "attention_probs_dropout_prob",
    "list" },
  { "hidden_act_number", function(c) c.hidden_act = 3 end, "hidden_act", "a string" },
  { "hidden_act_unknown", function(c) c.hidden_act = "swish" end, "hidden_act", "not supported" },
  { "model_type_unknown", function(c) c.model_type = "gpt2" end, "model_type", "not supported" },
  { "pad_token_id_string", function(c) c.pad_token_id = "0" end, "pad_token_id", '"0"' },
  { "pad_beyond_vocab", function(c) c.pad_token_id = 10 ^ 6 end, "pad_token_id", "vocab_size" },
  { "intermediate_huge", function(c) c.intermediate_size = 2 ^ 40 end, "intermediate_size", "<=" },
}

tests[#tests + 1] = { "damaged_configs", function()
  local failures = {}
  for _, case in ipairs(cases) do
    local name, change, field, text = case[1], case[2], case[3], case[4]
    local ok, err, peak = build(change)
    local msg = errors.message(err)
    if ok then failures[#failures + 1] = name .. ": accepted"
    elseif not errors.is_user_error(err) or err.kind ~= "user" then
      failures[#failures + 1] = name .. ": not a user error: " .. msg
    elseif not msg:find("tiny/config.json", 1, true) or not msg:find(field, 1, true) or not msg:find(text, 1, true) then
      failures[#failures + 1] = ("%s: the message does not name config.json, %s and %q: %s"):format(name, field, text, msg)
    elseif peak > 1024 * 1024 then
      failures[#failures + 1] = ("%s: %d bytes were allocated before the error"):format(name, peak)
    end
  end
  assert(#failures == 0, #failures .. " of " .. #cases .. " cases failed:\n" .. table.concat(failures, "\n"))
end }

tests[#tests + 1] = { "valid_nulls_and_presets_load", function()
  local ok, err = build(function(c) c.classifier_dropout = null; c.position_embedding_type = null; c.pad_token_id = null end)
  assert(ok, errors.message(err))
  for name, preset in pairs(require("trainer.models.presets")) do bert.config(preset, name) end
end }

tests[#tests + 1] = { "plan_above_limit_stops_before_allocating", function()
  -- vocab 2^20 x hidden 64: 256 MiB of weights alone, against a 64 MiB limit
  local ok, err, peak = build(function(c) c.vocab_size = 2 ^ 20; c.hidden_size = 64 end,
    [[memory = { limit = "64MiB" },]])
  memory.set_limit(nil)
  assert(not ok, "the run was built")
  assert(errors.is_user_error(err) and err.kind == "oom", "expected an out-of-memory error (exit 2): " .. errors.message(err))
  local msg = errors.message(err)
  for _, want in ipairs({ "cannot fit", "memory.limit = 64MiB", "weights", "optimizer", "activations", "total" }) do
    assert(msg:find(want, 1, true), ("the message lacks %q: %s"):format(want, msg))
  end
  assert(peak < 1024 * 1024, ("%d bytes were allocated before the plan stopped the run"):format(peak))
end }

tests[#tests + 1] = { "plan_above_the_machine_stops", function()
  -- 1024 layers of hidden 8192: terabytes, more than any machine this runs on
  local ok, err = build(function(c) c.num_hidden_layers = 1024; c.hidden_size = 8192; c.intermediate_size = 32768 end)
  assert(not ok and errors.is_user_error(err) and err.kind == "oom", "expected an out-of-memory error: "
    .. errors.message(err))
  assert(errors.message(err):find("RAM", 1, true), errors.message(err))
end }

return lib.with_cleanup(tests, function()
  if fx then outputs.remove_tree(fx.dir) end
  fx = nil
end)
