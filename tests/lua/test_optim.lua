-- Optimizers, schedules and clipping against tests/data/optim_golden.json (torch.optim
-- AdamW / SGD, transformers' Adafactor and get_scheduler, clip_grad_norm_; written by
-- tests/ref/make_optim_golden.py); that gradients and optimizer state exist only for
-- trainable parameters and carry the tags "grads" and "optimizer"; that state() ->
-- load_state() continues bit for bit; that a found-inf flag tensor skips a step.
-- Tolerances: parameters after each of 10 steps within 2e-6 * max(1, |ref|) (f32 steps
-- whose rounding differs from torch's in order, not in formula; the largest error seen
-- is 1.2e-7, SGD with momentum); schedules within 1e-12 relative (the same double
-- formulas; seen: exact); the clip norm and clipped gradients within 1e-6 (seen: exact).
local T = require("trainer.core.tensor")
local ops = require("trainer.core.ops")
local json = require("trainer.core.json")
local memory = require("trainer.core.memory")
local errors = require("trainer.core.errors")
local optim = require("trainer.train.optim")
local schedule = require("trainer.train.schedule")
local clip = require("trainer.train.clip")
local native = require("trainer.native")

local golden = json.read(native.root() .. "/tests/data/optim_golden.json")

local function close(a, b, tol, what)
  assert(math.abs(a - b) <= tol * math.max(1, math.abs(b)), ("%s: %.9g vs reference %.9g"):format(what, a, b))
end

local function flat(x, out)
  out = out or {}
  if type(x) == "table" then for _, v in ipairs(x) do flat(v, out) end else out[#out + 1] = x end
  return out
end

local function close_all(t, ref, tol, what)
  local got, want = t:values(), flat(ref)
  assert(#got == #want, what .. ": size")
  for i = 1, #got do close(got[i], want[i], tol, ("%s[%d]"):format(what, i)) end
end

-- Records for the golden parameters plus a frozen embedding (no gradient, no state).
local function make_params(case)
  local list = {}
  for _, name in ipairs(golden.names) do
    list[#list + 1] = { name = name, value = T.from_table(case.params[name], { tag = "weights" }), trainable = true }
  end
  list[#list + 1] = { name = "embeddings.word_embeddings.weight", value = T.ones({ 500, 200 }, { tag = "weights" }),
                      trainable = false }
  return list
end

local function free_params(list)
  for _, e in ipairs(list) do
    e.value:free()
    if e.grad then e.grad:free() end
  end
end

-- Sets every trainable gradient to the golden gradient of step k times mul.
local function set_grads(opt, list, case, k, mul)
  opt:zero_grad()
  for _, e in ipairs(list) do
    if e.trainable then
      local g = T.from_table(case.grads[k][e.name])
      ops.axpy_(e.grad, g, mul or 1)
      g:free()
    end
  end
end

local function run_case(key, mul)
  local case = golden.optimizers[key]
  local list = make_params(case)
  local opt = optim.new(list, case.config)
  local sched = case.schedule and schedule.new({ name = case.schedule.name, warmup_steps = case.schedule.warmup_steps },
    case.config.lr, case.schedule.total_steps)
  for k = 1, #case.grads do
    set_grads(opt, list, case, k, mul)
    local lr = sched and sched:lr(k - 1) or nil
    if lr then close(lr, case.lr[k], 1e-12, ("%s lr of step %d"):format(key, k)) end
    opt:step({ lr = lr, grad_scale = mul })
    for _, e in ipairs(list) do
      if e.trainable then close_all(e.value, case.after[k][e.name], 2e-6, ("%s step %d %s"):format(key, k, e.name)) end
    end
  end
  assert(list[4].grad == nil, "the frozen parameter got a gradient")
  opt:free()
  free_params(list)
end

local cases = {}
for _, key in ipairs({ "adamw_wd", "adamw_nowd", "adamw_linear_warmup", "sgd_momentum", "sgd_nesterov", "sgd_plain",
                       "adafactor_default", "adafactor_lr", "adafactor_beta1_warmup_init" }) do
  cases[#cases + 1] = { "golden_" .. key, function() run_case(key) end }
end

-- Gradients carrying a loss scale of 1024 (a power of two: exact) give the same steps.
cases[#cases + 1] = { "grad_scale_unscales", function()
  run_case("adamw_wd", 1024)
  run_case("sgd_nesterov", 1024)
  run_case("adafactor_lr", 1024)
end }

-- The parameters of golden case `case` after `steps` steps over its gradients: opts.free
-- (zero_grad({ free = true }), the gradient made as a backward does), opts.skip(e, k) (no
-- gradient for e at step k), opts.before(opt, list) (called once before the first step).
local function train_steps(case, steps, opts)
  local list = make_params(case)
  local opt = optim.new(list, case.config)
  if opts.before then opts.before(opt, list) end
  for k = 1, steps do
    opt:zero_grad({ free = opts.free })
    for _, e in ipairs(list) do
      if opts.free then assert(e.grad == nil, e.name .. ": a gradient survived zero_grad({ free = true })") end
      if e.trainable ~= false and not (opts.skip and opts.skip(e, k)) then
        if not e.grad then e.grad = T.keep(T.zeros(e.value:shape(), { tag = "grads" })) end
        local g = T.from_table(case.grads[k][e.name])
        ops.axpy_(e.grad, g, 1)
        g:free()
      end
    end
    opt:step()
  end
  local out = {}
  for _, e in ipairs(list) do out[e.name] = e.value:values() end
  opt:free()
  free_params(list)
  return out
end

local function same_values(want, got, what)
  for name, v in pairs(want) do
    local w = got[name]
    for i = 1, #v do assert(v[i] == w[i], ("%s %s[%d]: %.9g, want %.9g"):format(what, name, i, w[i], v[i])) end
  end
end

-- zero_grad({ free = true }) frees every gradient (none held until a backward makes it, as
-- Module.grad_of does); steps over gradients made that way are the plain zero_grad's bits,
-- and a trainable parameter the step finds without one is updated with a zero gradient
-- (AdamW's decay and moments move) exactly as after a plain zero_grad.
cases[#cases + 1] = { "zero_grad_free_then_made_in_backward", function()
  local case = golden.optimizers.adamw_wd
  local last = golden.names[#golden.names]   -- left without a gradient on even steps
  local function skip(e, k) return e.name == last and k % 2 == 0 end
  same_values(train_steps(case, 4, { skip = skip }), train_steps(case, 4, { free = true, skip = skip }), "freed")
end }

-- make_state (what a run calls before its first forward) makes every trainable parameter's
-- state, zeros and step 0, and none for a frozen one; the steps after it are the bits of an
-- optimizer that made its state at the first step, for each optimizer kind.
cases[#cases + 1] = { "make_state_before_the_first_step", function()
  for key, case in pairs(golden.optimizers) do
    local function early(opt, list)
      opt:make_state()
      local st = opt:state()
      for _, e in ipairs(list) do
        local s = st.params[e.name]
        assert((s ~= nil) == (e.trainable ~= false), key .. ": " .. e.name .. ": state made for a frozen parameter or missing")
        if s then
          assert(s.step == 0, key .. ": step " .. s.step)
          for slot, t in pairs(s) do
            if slot ~= "step" then
              for _, x in ipairs(t:values()) do assert(x == 0, key .. ": " .. e.name .. "." .. slot .. " not zero") end
            end
          end
        end
      end
    end
    same_values(train_steps(case, #case.grads, {}), train_steps(case, #case.grads, { before = early }), key .. " early")
  end
end }

cases[#cases + 1] = { "schedules_match_get_scheduler", function()
  for key, case in pairs(golden.schedules) do
    local s = schedule.new(case.config, case.base_lr, case.total_steps)
    for k = 1, #case.lr do close(s:lr(k - 1), case.lr[k], 1e-12, ("%s lr at step %d"):format(key, k - 1)) end
  end
  assert(schedule.new({ name = "linear", warmup_ratio = 0.07 }, 1, 100).warmup_steps == 8, "ceil(0.07 * 100) in doubles")
  local ok, e = pcall(schedule.new, { name = "exponential" }, 1e-3, 10)
  assert(not ok and errors.is_user_error(e) and e.msg:find("cosine"), tostring(e))
  ok, e = pcall(schedule.new, { name = "polynomial", lr_end = 1 }, 1e-3, 10)
  assert(not ok and errors.is_user_error(e) and e.msg:find("lr_end"), tostring(e))
end }

cases[#cases + 1] = { "clip_grad_norm_matches_torch", function()
  for key, case in pairs(golden.clip) do
    local list = {}
    for i, name in ipairs(golden.names) do list[i] = { name = name, grad = T.from_table(case.grads[name]) } end
    list[#list + 1] = { grad = T.full({ 3 }, 100), trainable = false }   -- frozen: neither counted nor scaled
    local norm = clip.clip_grad_norm(list, case.max_norm)
    close(norm, case.total_norm, 1e-6, key .. " norm")
    for i, name in ipairs(golden.names) do close_all(list[i].grad, case.clipped[name], 1e-6, key .. " " .. name) end
    assert(list[4].grad:values()[1] == 100, "a frozen gradient was scaled")
    for _, e in ipairs(list) do e.grad:free() end
  end
  local ok, e = pcall(clip.clip_grad_norm, {}, 0)
  assert(not ok and errors.is_user_error(e), tostring(e))
end }

cases[#cases + 1] = { "decay_groups_follow_transformers", function()
  assert(optim.decays("encoder.layer.0.attention.self.query.weight"))
  assert(not optim.decays("encoder.layer.0.attention.self.query.bias"))
  assert(not optim.decays("encoder.layer.0.output.LayerNorm.weight"))
  assert(not optim.decays("embeddings.LayerNorm.bias"))
  assert(not optim.decays("encoder.layer.3.final_layer_norm.weight"))
  local list = make_params(golden.optimizers.adamw_wd)
  local groups = optim.new(list, { name = "adamw", weight_decay = 0.1 }):groups()
  assert(groups[1].weight_decay == 0.1 and #groups[1].names == 1 and groups[1].names[1]:match("query.weight$"))
  assert(groups[2].weight_decay == 0 and #groups[2].names == 2, "bias and LayerNorm weight undecayed")
  free_params(list)
end }

-- Only trainable parameters get gradients and state, tagged grads and optimizer; the
-- ledger's by_tag moves by those bytes and no more (the frozen 500 x 200 has none).
cases[#cases + 1] = { "state_only_for_trainable_with_tags", function()
  for _, name in ipairs({ "adamw", "sgd", "adafactor" }) do
    collectgarbage()
    local case = golden.optimizers.adamw_wd
    local list = make_params(case)
    local before = memory.stats().by_tag
    local opt = optim.new(list, { name = name, lr = 1e-3, momentum = 0.9, beta1 = 0.9 })
    assert(memory.stats().by_tag.optimizer == before.optimizer, name .. ": state before the first step")
    set_grads(opt, list, case, 1)
    opt:step()
    local after = memory.stats().by_tag
    local m = opt:memory()
    for _, e in ipairs(list) do
      if e.trainable then assert(e.grad:tag() == "grads", name .. ": grad tag " .. e.grad:tag())
      else assert(e.grad == nil, name .. ": frozen parameter has a gradient") end
    end
    local st = opt:state()
    assert(st.params["embeddings.word_embeddings.weight"] == nil, name .. ": frozen parameter has state")
    local n = 0
    for _, s in pairs(st.params) do
      for k, t in pairs(s) do
        if k ~= "step" then n = n + 1; assert(t:tag() == "optimizer", name .. ": state tag " .. t:tag()) end
      end
    end
    assert(n >= 3, name .. ": state tensors " .. n)
    assert(m.grads == (12 + 4 + 3) * 4, name .. ": grad bytes " .. m.grads)
    local dg, dopt = after.grads - before.grads, after.optimizer - before.optimizer
    assert(dg >= m.grads and dg < 500 * 200 * 4, name .. ": grads ledger moved by " .. dg)
    assert(dopt >= m.optimizer and m.optimizer > 0 and dopt < 500 * 200 * 4, name .. ": optimizer ledger " .. dopt)
    opt:free()
    free_params(list)
    local final = memory.stats().by_tag
    assert(final.optimizer == before.optimizer and final.grads == before.grads, name .. ": bytes left behind")
  end
end }

-- 3 steps, state() copied out, 3 more: a new optimizer on copies of the parameters,
-- loaded from the copy, takes the same 3 steps bit for bit.
cases[#cases + 1] = { "state_load_state_resumes_bit_identically", function()
  local configs = {
    { name = "adamw", lr = 1e-2, weight_decay = 0.1 },
    { name = "sgd", lr = 0.05, momentum = 0.9, nesterov = true, weight_decay = 0.01 },
    { name = "adafactor", beta1 = 0.9, weight_decay = 0.01 },
    { name = "adafactor", lr = 1e-2, weight_decay = 0.01 },
  }
  local case = golden.optimizers.adamw_wd
  for ci, cfg in ipairs(configs) do
    local a = make_params(case)
    local opt = optim.new(a, cfg)
    for k = 1, 3 do set_grads(opt, a, case, k); opt:step() end
    -- through the checkpoint form: flat tensors (cloned, as a file would hold) + JSON meta
    local tensors, meta = optim.flatten(opt:state())
    for key, t in pairs(tensors) do tensors[key] = t:clone() end
    local copy = optim.unflatten(tensors, json.decode(json.encode(meta)))
    local b = {}
    for i, e in ipairs(a) do b[i] = { name = e.name, value = e.value:clone(), trainable = e.trainable } end
    for k = 4, 6 do set_grads(opt, a, case, k); opt:step() end
    local opt2 = optim.new(b, cfg)
    opt2:load_state(copy)
    for k = 4, 6 do set_grads(opt2, b, case, k); opt2:step() end
    for i, e in ipairs(a) do
      local x, y = e.value:values(), b[i].value:values()
      for j = 1, #x do assert(x[j] == y[j], ("config %d %s[%d]: %.9g vs %.9g"):format(ci, e.name, j, x[j], y[j])) end
    end
    assert(opt2.steps == 6)
    for _, s in pairs(copy.params) do for _, v in pairs(s) do if T.is_tensor(v) then v:free() end end end
    opt:free(); opt2:free()
    free_params(a); free_params(b)
  end
end }

cases[#cases + 1] = { "skip_if_flag_skips_every_optimizer", function()
  -- a set found-inf flag leaves every parameter, its state and the step counts as
  -- they were, each optimizer's op reading the flag where it lives (AdamW through
  -- adamw_multi, SGD and Adafactor through their ops: on a device nothing is read back, so
  -- none reports the skip); a clear one steps as without it; undo_step puts the counts of a
  -- step skipped on the device back
  for _, name in ipairs({ "adamw", "sgd", "adafactor" }) do
    local list = make_params(golden.optimizers.adamw_wd)
    local opt = optim.new(list, { name = name, lr = 1e-2, momentum = name == "sgd" and 0.9 or nil })
    local case = golden.optimizers.adamw_wd
    set_grads(opt, list, case, 1)
    local clear = T.zeros({ 1 }, { dtype = "i32" })
    opt:step({ skip_if = clear })
    local before, state_before = {}, {}
    for i, e in ipairs(list) do before[i] = e.value:values() end
    for pname, st in pairs(opt:state().params) do
      state_before[pname] = {}
      for slot, t in pairs(st) do if T.is_tensor(t) then state_before[pname][slot] = t:values() end end
    end
    set_grads(opt, list, case, 2)
    local set = T.full({ 1 }, 1, { dtype = "i32" })
    local _, skipped = opt:step({ skip_if = set })
    assert(not skipped and opt.steps == 2, name .. " skips where the flag lives: the host counted the step")
    opt:undo_step()
    assert(opt.steps == 1, ("%s: %d steps after a skip"):format(name, opt.steps))
    for pname, st in pairs(opt:state().params) do
      assert(st.step == 1, name .. ": a parameter's step moved")
      for slot, t in pairs(st) do
        if T.is_tensor(t) then
          local x = t:values()
          for j = 1, #x do
            assert(x[j] == state_before[pname][slot][j], ("%s: %s.%s[%d] changed on a skipped step"):format(name,
              pname, slot, j))
          end
        end
      end
    end
    for i, e in ipairs(list) do
      local x = e.value:values()
      for j = 1, #x do assert(x[j] == before[i][j], ("%s: %s[%d] changed on a skipped step"):format(name, e.name, j)) end
    end
    clear:free(); set:free(); opt:free(); free_params(list)
  end
end }

cases[#cases + 1] = { "errors_name_the_fix", function()
  local list = make_params(golden.optimizers.adamw_wd)
  local ok, e = pcall(optim.new, list, { name = "lamb" })
  assert(not ok and errors.is_user_error(e) and e.msg:find("adafactor"), tostring(e))
  local opt = optim.new(list, { name = "adamw" })
  ok, e = pcall(opt.load_state, opt, { name = "sgd", params = {} })
  assert(not ok and errors.is_user_error(e) and e.msg:find("sgd"), tostring(e))
  ok, e = pcall(opt.load_state, opt, { name = "adamw", params = { nope = { step = 1 } } })
  assert(not ok and errors.is_user_error(e) and e.msg:find("nope"), tostring(e))
  local before = opt:memory().optimizer
  ok, e = pcall(opt.load_state, opt, { name = "adamw", params = { [golden.names[1]] = { step = 1 } } })
  assert(not ok and errors.is_user_error(e) and e.msg:find("missing"), tostring(e))
  assert(opt:memory().optimizer == before, "a refused state changed the optimizer")
  ok, e = pcall(optim.new, list, { name = "adafactor", relative_step = false })
  assert(not ok and errors.is_user_error(e) and e.msg:find("lr"), tostring(e))
  free_params(list)
end }

return cases
