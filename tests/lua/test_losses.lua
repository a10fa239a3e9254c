-- trainer.losses against sentence-transformers' own loss classes (tests/data/loss_golden.json,
-- written by tests/ref/make_loss_golden.py, and loss_golden_pairs.json, by make_pair_loss_golden.py): loss values and the gradient with respect to every
-- embeddings input (and SoftmaxLoss's classifier) at rel 1e-5 in f32; the lifetime contract
-- (nothing left allocated); argument errors.
local T = require("trainer.core.tensor")
local json = require("trainer.core.json")
local losses = require("trainer.losses")
local errors = require("trainer.core.errors")
local memory = require("trainer.core.memory")
local native = require("trainer.native")

local golden = json.read(native.root() .. "/tests/data/loss_golden.json")
-- the distance losses (contrastive, triplet, batch_*_triplet): tests/ref/make_pair_loss_golden.py
for _, c in ipairs(json.read(native.root() .. "/tests/data/loss_golden_pairs.json").cases) do
  golden.cases[#golden.cases + 1] = c
end

local function case_named(name)
  for _, c in ipairs(golden.cases) do if c.name == name then return c end end
  error("no golden case " .. name)
end

-- |got - want| <= rel * max(|want|, floor); floor is 1 for losses (as trainer's other
-- tests) and the tensor's largest |value| for gradients, so tiny entries of a gradient are
-- held to the precision of the gradient as a whole.
local function close(got, want, rel, floor, what)
  local tol = rel * math.max(math.abs(want), floor)
  assert(math.abs(got - want) <= tol, ("%s: got %.9g, want %.9g (tol %.3g)"):format(what, got, want, tol))
end

local function flat(nested)
  local out = {}
  local function walk(t) if type(t) == "table" then for _, x in ipairs(t) do walk(x) end else out[#out + 1] = t end end
  walk(nested)
  return out
end

local function compare_tensor(t, want, rel, what)
  local got, w = t:values(), flat(want)
  assert(#got == #w, ("%s: %d values, want %d"):format(what, #got, #w))
  local big = 0
  for _, x in ipairs(w) do big = math.max(big, math.abs(x)) end
  for i = 1, #w do close(got[i], w[i], rel, big, ("%s[%d]"):format(what, i)) end
end

local function labels_of(c) if c.labels == json.null then return nil end return c.labels end

-- Runs one golden case in dtype; returns nothing, raises on a mismatch or a leak.
local function run_case(name, dtype, rel)
  local c = case_named(name)
  collectgarbage()
  local before = memory.stats().allocated
  local embs = {}
  for i, e in ipairs(c.inputs) do embs[i] = T.from_table(e, { dtype = dtype }) end
  local loss = losses.new(c.spec, { dim = #c.inputs[1][1] })
  if c.params then
    for pname, p in loss:parameters() do
      p.value:free()
      p.value = T.from_table(c.params[pname], { tag = "weights" })
    end
  end
  local value = loss:forward(embs, labels_of(c))
  close(value, c.loss, rel, 1, name .. " loss")
  local grads = loss:backward()
  assert(#grads == #embs, ("%s: %d gradients for %d inputs"):format(name, #grads, #embs))
  for i, g in ipairs(grads) do
    assert(table.concat(g:shape(), "x") == table.concat(embs[i]:shape(), "x"), name .. ": gradient shape")
    compare_tensor(g, c.grads[i], rel, ("%s grad %d"):format(name, i))
    g:free()
  end
  if c.param_grads then
    local n = 0
    for pname, p in loss:parameters() do
      compare_tensor(p.grad, c.param_grads[pname], rel, name .. " " .. pname .. ".grad")
      n = n + 1
    end
    assert(n == 2, "softmax owns classifier.weight and classifier.bias")
  end
  loss:free()
  for _, e in ipairs(embs) do e:free() end
  collectgarbage()
  assert(memory.stats().allocated == before,
    ("%s: %d bytes still allocated after freeing everything"):format(name, memory.stats().allocated - before))
end

local tests = {}
for _, c in ipairs(golden.cases) do
  tests[#tests + 1] = { c.name, function() run_case(c.name, "f32", 1e-5) end }
end

local function raises(fn, pattern)
  local ok, e = pcall(fn)
  assert(not ok, "expected an error matching " .. pattern)
  assert(errors.is_user_error(e), "not a user error: " .. tostring(e))
  assert(errors.message(e):find(pattern), ("message %q lacks %q"):format(errors.message(e), pattern))
end

local more = {
  { "mnrl_bf16_embeddings", function() run_case("mnrl_hard_negatives", "bf16", 3e-2) end },
  { "softmax_grads_accumulate", function()
    local c = case_named("softmax")
    local u, v = T.from_table(c.inputs[1]), T.from_table(c.inputs[2])
    local loss = losses.new(c.spec, { dim = #c.inputs[1][1] })
    local first = {}
    for _ = 1, 2 do
      loss:forward({ u, v }, c.labels)
      for _, g in ipairs(loss:backward()) do g:free() end
      if #first == 0 then first = loss:parameters()[2][2].grad:values() end
    end
    local twice = loss:parameters()[2][2].grad:values()
    for i = 1, #first do close(twice[i], 2 * first[i], 1e-6, 1e-3, "bias grad after two backwards") end
    loss:free() u:free() v:free()
  end },
  { "forward_twice_keeps_no_extra_memory", function()
    local c = case_named("mnrl_symmetric_negatives")
    local embs = {}
    for i, e in ipairs(c.inputs) do embs[i] = T.from_table(e) end
    local loss = losses.new(c.spec)
    loss:forward(embs)
    local after_one = memory.stats().allocated
    loss:forward(embs)   -- an eval-style forward without backward replaces the saved state
    assert(memory.stats().allocated == after_one, "a second forward kept the first one's state")
    loss:release()
    for _, e in ipairs(embs) do e:free() end
  end },
  { "errors_name_the_problem", function()
    local a, b = T.randn({ 4, 8 }, { seed = 1 }), T.randn({ 3, 8 }, { seed = 2 })
    raises(function() losses.new({ name = "triplett" }) end, "loss.name: expected one of")
    raises(function() losses.new({ name = "mnrl", scael = 20 }) end, "scael")
    raises(function() losses.new({ name = "softmax" }, { dim = 8 }) end, "num_labels")
    raises(function() losses.new({ name = "softmax", num_labels = 3 }) end, "width")
    raises(function() losses.new({ name = "matryoshka" }) end, "dims")
    raises(function() losses.new({ name = "cosine", score_scale = 0 }) end, "score_scale")
    local mnrl = losses.new({ name = "mnrl" })
    raises(function() mnrl:forward({ a }) end, "at least 2")
    raises(function() mnrl:forward({ a, b }) end, "rows")
    raises(function() mnrl:backward() end, "without a forward")
    local cosent = losses.new({ name = "cosent" })
    raises(function() cosent:forward({ a, a }, { 1, 2 }) end, "expects 4 labels")
    local mat = losses.new({ name = "matryoshka", dims = { 16, 4 } })
    raises(function() mat:forward({ a, a }) end, "larger than the embedding width")
    local ce = losses.new({ name = "cross_entropy" })
    raises(function() ce:forward({ a }, { 0, 1, 8, 2 }) end, "label 8 is not a class id 0..7")
    a:free() b:free()
  end },
  { "new_losses_errors_name_the_problem", function()
    local a = T.randn({ 4, 8 }, { seed = 1 })
    raises(function() losses.new({ name = "batch_hard_triplet", distance = "manhattan" }) end, "euclidean")
    raises(function() losses.new({ name = "contrastive", distance = "chebyshev" }) end, "loss.distance")
    raises(function() losses.new({ name = "triplet", teacher = "x" }) end, "only the distillation losses")
    raises(function() losses.new({ name = "triplet" }):forward({ a, a }) end, "3 embeddings")
    raises(function() losses.new({ name = "contrastive" }):forward({ a, a }, { 1, 0 }) end, "expects 4 labels")
    raises(function() losses.new({ name = "batch_all_triplet" }):forward({ a }) end, "expects 4 labels")
    local four = { { 1, 2 }, { 1, 2 }, { 1, 2 }, { 1, 2 } }
    raises(function() losses.new({ name = "mse" }):forward({ a }, four) end, "has 2 numbers, the student's has 8")
    local threes = { { 1, 2, 3 }, { 1, 2, 3 }, { 1, 2, 3 }, { 1, 2, 3 } }
    raises(function() losses.new({ name = "margin_mse" }):forward({ a, a, a }, threes) end, "label 1 must be")
    raises(function() losses.new({ name = "angle" }):forward({ a, a }) end, "expects 4 labels")
    -- no state is kept by a failed forward, and a host loss frees what it saved
    local before = memory.stats().allocated
    local l = losses.new({ name = "batch_hard_triplet" })
    l:forward({ a }, { 0, 0, 1, 1 })
    for _, g in ipairs(l:backward()) do g:free() end
    assert(memory.stats().allocated == before)
    a:free()
  end },
  { "parameters_iterate_and_index", function()
    local loss = losses.new({ name = "softmax", num_labels = 3 }, { dim = 4, seed = 3 })
    local names = {}
    for name, p in loss:parameters() do
      names[#names + 1] = name
      assert(p.trainable == true and p.grad:tag() == "grads" and p.value:tag() == "weights")
    end
    assert(table.concat(names, ",") == "classifier.weight,classifier.bias", table.concat(names, ","))
    local w = loss:parameters()[1][2].value
    assert(table.concat(w:shape(), "x") == "3x12")
    local bound = 1 / math.sqrt(12)
    for _, x in ipairs(w:values()) do assert(math.abs(x) <= bound, "init outside +-1/sqrt(fan_in)") end
    loss:free()
    local none = 0
    for _ in losses.new({ name = "mnrl" }):parameters() do none = none + 1 end
    assert(none == 0)
  end },
}
for _, t in ipairs(more) do tests[#tests + 1] = t end
return tests
