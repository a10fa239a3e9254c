-- The training run (trainer.train.run, trainer.loop, trainer.outputs, trainer.progress) on a tiny
-- random BERT: resolved_recipe.lua stays loadable with functions as comments; atomic
-- writes and checkpoint pruning; progress lines every log.every steps and nothing when
-- quiet; hooks and a recipe's own loop; gradient accumulation's step count; LoRA and
-- accumulation runs resumed mid-way giving the unbroken run's losses exactly.
local lib = dofile(require("trainer.native").root() .. "/tests/lua/testlib.lua")
local json = require("trainer.core.json")
local outputs = require("trainer.train.outputs")
local fs = require("trainer.core.fs")
local progress = require("trainer.train.progress")
local recipe = require("trainer.recipe")
local loop = require("trainer.train.loop")

local tests = {}
local setup, cleanup = lib.tiny_pairs_once({ model_seed = 3, text_seed = 11, max_extra = 4, rows = 40,
  score_format = "%.1f", score = function(rnd) return rnd(50) / 10 end })

-- Writes a recipe file whose body is `extra` merged over the tiny defaults; returns its path.
local function recipe_file(name, extra)
  return lib.tiny_recipe(setup().dir, name, [[
return {
  model = { from = MODEL },
  data = { train = TRAIN, eval = TRAIN, columns = { "sentence1", "sentence2", "score" } },
  loss = { name = "cosent" }, optim = { lr = 1e-3 }, batch = { size = 8 }, steps = 6,
  log = { quiet = true }, device = "cpu", out = OUT,
]] .. "  " .. (extra or "") .. "\n}\n")
end

local function train(path, overrides)
  local r = recipe.load(path, overrides)
  return loop.train(r, { quiet = true })
end

local function losses(out)
  local t = {}
  for _, m in ipairs(outputs.read_metrics(out)) do t[m.step] = m.loss end
  return t
end

tests[#tests + 1] = { "resolved_recipe_is_loadable_lua", function()
  local text = outputs.recipe_text({ steps = 3, hooks = { on_step = function() end }, data = { columns = { "a", "b" } } },
    "x.lua")
  assert(text:find("function defined at", 1, true), text)
  local chunk = assert(load(text))
  local r = chunk()
  assert(r.steps == 3 and r.data.columns[2] == "b" and r.hooks.on_step == nil)
end }

tests[#tests + 1] = { "atomic_write_and_prune", function()
  local d = setup().dir .. "/files"
  outputs.mkdir(d)
  outputs.write_atomic(d .. "/a.json", "{}")
  assert(outputs.read(d .. "/a.json") == "{}")
  assert(not fs.exists(d .. "/a.json.tmp"))
  for _, s in ipairs({ 2, 10, 4, 6 }) do outputs.mkdir(("%s/checkpoint-%d"):format(d, s)) end
  outputs.prune(d, 2)
  local left = outputs.checkpoints(d)
  assert(#left == 2 and left[1].step == 6 and left[2].step == 10, json.encode(left))
end }

tests[#tests + 1] = { "progress_lines_every_n_and_quiet", function()
  local buf = {}
  local sink = { write = function(_, ...) for _, s in ipairs({ ... }) do buf[#buf + 1] = s end end, flush = function() end }
  local t = { step = 0, total_steps = 6, train_time = 1 }
  local p = progress.new({ every = 3, tty = false, out = sink })
  for s = 1, 6 do
    t.step = s
    p:update(t, { step = s, loss = 1.5, lr = 1e-4, tokens_per_s = 100, mem_allocated = 1024, mem_peak = 2048 })
  end
  local text = table.concat(buf)
  local n = select(2, text:gsub("\n", ""))
  assert(n == 3, text)   -- steps 1, 3, 6
  assert(text:find("step 3/6", 1, true) and text:find("loss 1.5000", 1, true) and text:find("peak 2.0 KiB", 1, true))
  buf = {}
  local q = progress.new({ every = 1, tty = false, quiet = true, out = sink })
  q:update(t, { step = 6, loss = 1, lr = 1, tokens_per_s = 1, mem_allocated = 1, mem_peak = 1 })
  q:message("x")
  assert(#buf == 0)
end }

tests[#tests + 1] = { "hooks_and_custom_loop", function()
  local path = recipe_file("custom", [[
  eval = { every = 2 },
  save = { every = 3, keep = 1 },
  loop = function(t)
    t.calls = { steps = 0 }
    while not t:done() do
      local m = t:train_step()
      if not m then break end
      t.calls.steps = t.calls.steps + 1
      if t.step == 2 then t:save() end
    end
    t.last_eval = { custom = t.calls.steps }
  end,
]])
  local status, summary = train(path)
  assert(status == 0)
  assert(summary.steps == 6 and summary.eval.custom == 6, json.encode(summary))
  local cks = outputs.checkpoints(setup().dir .. "/custom")
  assert(#cks == 1 and cks[1].step == 2, json.encode(cks))   -- only what the custom loop saved

  local seen = { step = 0, eval = 0, save = 0 }
  local hp = recipe_file("hooks", [[
  eval = { every = 2, at_start = false },
  save = { every = 3, keep = 1 },
  hooks = {
    on_step = function(t, m) assert(m.step == t.step) end,
    on_eval = function(t, s) assert(type(s.spearman) == "number") end,
    on_save = function(t, dir) assert(dir:match("checkpoint%-%d+$")) end,
  },
]])
  local r = recipe.load(hp)
  r.recipe.hooks.on_step = function() seen.step = seen.step + 1 end
  r.recipe.hooks.on_eval = function() seen.eval = seen.eval + 1 end
  r.recipe.hooks.on_save = function() seen.save = seen.save + 1 end
  assert(loop.train(r, { quiet = true }) == 0)
  assert(seen.step == 6 and seen.eval == 3 and seen.save == 2, json.encode(seen))
  assert(#outputs.checkpoints(setup().dir .. "/hooks") == 1)   -- keep = 1
end }

tests[#tests + 1] = { "custom_evaluator_in_summary", function()
  local path = recipe_file("evalfn", [[steps = 2, eval = { fn = function(t) return { halfsteps = t.step / 2 } end },]])
  local status, summary = train(path, { "steps=2" })
  assert(status == 0 and summary.eval.halfsteps == 1 and summary.eval_start.halfsteps == 0, json.encode(summary.eval))
  local s = json.read(setup().dir .. "/evalfn/summary.json")
  assert(s.eval.halfsteps == 1)
end }

tests[#tests + 1] = { "accumulation_steps_and_epochs", function()
  -- 40 rows, batch 8 -> 5 batches an epoch; accumulate 2 -> 3 steps an epoch; 2 epochs -> 6
  local path = recipe_file("acc", "steps = nil, epochs = 2, batch = { size = 8, accumulate = 2 }, eval = { at_start = false },")
  local status, summary = train(path, { "steps=nil" })
  assert(status == 0 and summary.steps == 6, json.encode(summary))
  local m = outputs.read_metrics(setup().dir .. "/acc")
  -- "epoch" is completed epochs, as the Hugging Face Trainer logs it: 2 of 5 batches -> 0.4
  local want = { 0.4, 0.8, 1, 1.4, 1.8, 2 }
  for i = 1, 6 do assert(math.abs(m[i].epoch - want[i]) < 1e-12, ("step %d: epoch %s"):format(i, json.encode(m[i]))) end
  assert(summary.epoch == 2, json.encode(summary))
end }

local function resume_case(name, extra)
  local full = recipe_file(name .. "_full", extra)
  assert(train(full) == 0)
  local part = recipe_file(name .. "_part", extra .. [[
  save = { every = 2 },
  hooks = { on_save = function(t) if t.step == 2 then t.stop_signal = 15 end end },
]])
  assert(train(part) == 130)
  assert(train(part, { "resume=latest" }) == 0)
  local a, b = losses(setup().dir .. "/" .. name .. "_full"), losses(setup().dir .. "/" .. name .. "_part")
  for s = 1, 6 do assert(a[s] ~= nil and a[s] == b[s], ("%s step %d: %s vs %s"):format(name, s, tostring(a[s]), tostring(b[s]))) end
end

tests[#tests + 1] = { "lora_resume_exact", function()
  resume_case("lora", [[lora = { r = 4, alpha = 8, dropout = 0.1, targets = { "query", "value" } },]])
  assert(fs.exists(setup().dir .. "/lora_part/checkpoint-2/adapter_model.safetensors"))
end }

tests[#tests + 1] = { "accumulated_resume_exact", function()
  resume_case("accres", [[batch = { size = 4, accumulate = 2 }, optim = { name = "sgd", lr = 0.05, momentum = 0.9 },]])
end }

-- The line a finished run ends with names only the evaluations that exist, and whole-number
-- scores (a custom loop's counts) as integers.
tests[#tests + 1] = { "done_line_prints_what_exists", function()
  local function first(s) return (loop.done_line(s, "runs/x"):match("^[^\n]*")) end
  local none = first({ steps = 20, final_loss = 0.123456, eval = {} })
  assert(none == "trainer: done, 20 steps, final loss 0.1235", none)
  local custom = first({ steps = 20, final_loss = 1, eval = { custom_evaluations = 3, custom_steps = 20, spearman = 0.86771 } })
  assert(custom == "trainer: done, 20 steps, final loss 1.0000; eval: custom_evaluations 3, custom_steps 20, spearman 0.8677",
    custom)
  local both = first({ steps = 4, final_loss = 2, eval_start = { pearson = 0.5 }, eval = { pearson = 0.61 } })
  assert(both == "trainer: done, 4 steps, final loss 2.0000; eval before: pearson 0.5000; after: pearson 0.6100", both)
  local no_loss = first({ steps = 0, eval = {} })
  assert(no_loss == "trainer: done, 0 steps, final loss -", no_loss)
  assert(loop.done_line({ steps = 1, final_loss = 1 }, "runs/x"):find("\n  outputs in runs/x (`trainer report runs/x` draws them)", 1, true))
end }

return lib.with_cleanup(tests, cleanup)
