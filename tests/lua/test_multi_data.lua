-- Several training datasets (trainer.train.multi_data): a batch never mixes datasets; the
-- proportional sampler gives every batch of every dataset once per epoch, in a seeded order;
-- round_robin takes one of each in turn until one runs out; restore replays to the same batch.
local native = require("trainer.native")
local data = require("trainer.train.data")
local keys = require("trainer.recipe.keys")
local lib = dofile(native.root() .. "/tests/lua/testlib.lua")

local dir = lib.tmpdir()
local function write(name, n, a, b)
  local t = {}
  for i = 1, n do t[i] = ('{"%s": "%s %d", "%s": "%s %d"}'):format(a, name, i, b, name, i) end
  lib.write(dir .. "/" .. name .. ".jsonl", table.concat(t, "\n") .. "\n")
end
write("big", 37, "anchor", "positive")
write("small", 13, "sentence1", "sentence2")

local function recipe(sampler)
  return keys.with_defaults({
    model = { config = "tiny" }, seed = 7, batch = { size = 4 }, loss = { name = "mnrl" },
    data = { sampler = sampler, train = { big = { file = dir .. "/big.jsonl" },
      small = { file = dir .. "/small.jsonl", columns = { "sentence1", "sentence2" } } } },
  })
end

local function epoch(ld)
  local out = {}
  for b in ld:batches() do
    for _, r in ipairs(b) do
      assert(r[1]:match("^(%a+)") == b.dataset, ("a %s row in a %s batch"):format(r[1], b.dataset))
    end
    out[#out + 1] = b.dataset .. ":" .. b[1][1]
  end
  return out
end

return {
  { "proportional: every batch of every dataset once, never mixed, seeded", function()
    local _, ld = data.train(recipe("proportional"))
    local e0 = epoch(ld)
    local n = { big = 0, small = 0 }
    for _, k in ipairs(e0) do local name = k:match("^(%a+)") n[name] = n[name] + 1 end
    assert(n.big == 10 and n.small == 4, ("%d big, %d small batches"):format(n.big, n.small))
    assert(ld:batches_per_epoch() == 14)
    local e1 = epoch(ld)
    assert(#e1 == 14 and table.concat(e1, ",") ~= table.concat(e0, ","), "each epoch its own order")
    local _, again = data.train(recipe("proportional"))
    assert(table.concat(epoch(again), ",") == table.concat(e0, ","), "the same order for the same seed")
  end },
  { "round_robin: one batch of each in turn until one runs out", function()
    local _, ld = data.train(recipe("round_robin"))
    local e0 = epoch(ld)
    assert(#e0 == 9, #e0 .. " batches")   -- big small x4, then big, and small has none left
    for i, k in ipairs(e0) do assert(k:match("^(%a+)") == (i % 2 == 1 and "big" or "small")) end
    assert(ld:batches_per_epoch() == 8)
  end },
  { "restore replays to the same batch, mid-epoch and in a later epoch", function()
    for _, sampler in ipairs({ "proportional", "round_robin" }) do
      for _, cut in ipairs({ 0, 5, 17 }) do
        local _, a = data.train(recipe(sampler))
        local taken = 0
        while taken < cut do
          if a:next() then taken = taken + 1 end
        end
        local st = a:state()
        local _, b = data.train(recipe(sampler))
        b:restore(st)
        for _ = 1, 6 do
          local x, y = a:next(), b:next()
          assert((x and x.dataset .. x[1][1]) == (y and y.dataset .. y[1][1]), sampler .. " after " .. cut)
        end
      end
    end
  end },
}
