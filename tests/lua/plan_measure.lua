-- tests/lua/plan_measure.lua — what the suites of trainer.plan against measurement share (not
-- a test: run.lua loads only test_*.lua): a small classifier of one family, built from a
-- config table, trained as run.lua trains (batch.accumulate micro-batches of batch.size rows,
-- then one update), the allocator's peaks by tag of a steady-state step (after a warm-up
-- step), and the plan's bytes per tag for the same recipe within 15 % of them (or 64 KiB), and
-- its total within 15 % of the step's peak allocation.
--   local pm = dofile(require("trainer.native").root() .. "/tests/lua/plan_measure.lua")
--   pm.compare("bert", shape, { precision = "bf16", checkpoint = "auto" })
-- spec: size (rows per micro-batch, default pm.B), accumulate, precision, checkpoint, lora.
local memory = require("trainer.core.memory")
local registry = require("trainer.models.registry")
local optim = require("trainer.train.optim")
local losses = require("trainer.losses")
local amp = require("trainer.train.amp")
local ops = require("trainer.core.ops")
local lora = require("trainer.train.lora")
local checkpoint = require("trainer.train.grad_checkpoint")
local plan = require("trainer.plan")
local lib = dofile(require("trainer.native").root() .. "/tests/lua/testlib.lua")

local M = { B = 8, S = 32 }

-- The recipe of a two-label classifier of family arch with config shape, trained by spec.
function M.recipe(arch, shape, spec)
  return {
    model = { arch = arch, config = shape, task = "classification", num_labels = 2, max_length = M.S },
    batch = { size = spec.size or M.B, accumulate = spec.accumulate or 1 }, precision = spec.precision or "fp32",
    checkpoint = spec.checkpoint or false, lora = spec.lora or false, optim = { name = "adamw" },
    loss = { name = "cross_entropy" }, device = "cpu",
  }
end

-- The peaks by tag of one steady-state training step of that classifier.
function M.measure(arch, shape, spec)
  collectgarbage()
  collectgarbage()
  local before = memory.stats().allocated
  local cfg, fam = registry.config(shape, "test", arch)
  local model = fam.build("classification", { config = cfg, seed = 1, num_labels = 2 })
  model:train()
  if spec.lora then lora.apply(model, spec.lora) end
  amp.prepare(model, spec.precision or "fp32")
  -- "auto" as a run applies it: the segmentation the plan chose for this shape
  if spec.checkpoint then
    checkpoint.apply(model, spec.checkpoint, plan.estimate(M.recipe(arch, shape, spec)).checkpoint_sizes)
  end
  local opt = optim.new(model, { name = "adamw", lr = 1e-5 })
  local loss = losses.new({ name = "cross_entropy" })
  local k, per, S = spec.accumulate or 1, spec.size or M.B, M.S
  opt:transient_packs(k)                      -- as a run does (trainer.train.build)
  opt:make_state()                            -- as a run does
  local rows = per * k
  local ids, mask, labels = {}, {}, {}
  for i = 1, rows * S do ids[i] = 3 + (i * 7919) % 490; mask[i] = 1 end
  for i = 1, rows do labels[i] = i % 2 end
  local input, attn = lib.int_matrix(ids, rows, S), lib.int_matrix(mask, rows, S)
  local function step(n)
    model.rng.step = n
    opt:zero_grad({ free = true })   -- as a run does (trainer.train.train_step)
    for i = 0, k - 1 do
      local mb = { input_ids = input:narrow(i * per, per), attention_mask = attn:narrow(i * per, per) }
      local lab = {}
      for j = 1, per do lab[j] = labels[i * per + j] end
      local logits = model:forward(mb)
      loss:forward({ logits }, lab)
      local g = loss:backward()[1]
      if k > 1 then ops.scale_(g, 1 / k) end
      model:backward(g)
      g:free(); logits:free(); mb.input_ids:free(); mb.attention_mask:free()
    end
    opt:step()
  end
  step(0)
  memory.reset_peak()
  step(1)
  local st = memory.stats()
  local peaks = st.peak_by_tag
  opt:free(); loss:free(); model:free(); input:free(); attn:free()
  memory.empty_cache()
  return peaks, st.peak_allocated - before
end

-- The plan's weights, grads, optimizer and activations (and workspace where oneDNN packs
-- the weights: then it is mostly the packs; otherwise it is transient staging the plan
-- bounds from above) against the measured peaks.
function M.compare(arch, shape, spec)
  local got, peak = M.measure(arch, shape, spec)
  local est = plan.estimate(M.recipe(arch, shape, spec))
  local tags = { "weights", "grads", "optimizer", "activations" }
  if plan.cpu_gemm_library() == "onednn" and est.packed_weight_bytes then tags[#tags + 1] = "workspace" end
  for _, tag in ipairs(tags) do
    local m, p = got[tag], est.by_tag[tag]
    local tol = 0.15 * math.max(m, 64 * 1024)      -- tiny tags: a 64 KiB floor
    print(("# %s %-12s predicted %10d measured %10d (%+.1f%%)"):format(arch, tag, p, m, 100 * (p - m) / math.max(m, 1)))
    assert(math.abs(p - m) <= tol, ("%s %s: predicted %d bytes, measured %d (%.1f%%)"):format(arch, tag, p, m,
      100 * (p - m) / math.max(m, 1)))
  end
  -- the total, the step's peak (the grads made by the backward beside what it still holds),
  -- within 15 % of the step's peak allocation, beyond the workspace's own difference (staging
  -- the plan bounds from above where it is not compared as a tag)
  local slack = math.abs(est.by_tag.workspace - (got.workspace or 0))
  print(("# %s %-12s predicted %10d measured %10d (%+.1f%%; the tags' sum %d)"):format(arch, "total",
    est.total_bytes, peak, 100 * (est.total_bytes - peak) / peak, est.tags_sum_bytes))
  assert(math.abs(est.total_bytes - peak) <= 0.15 * peak + slack, ("%s total: predicted %d bytes, measured %d "
    .. "(%.1f%%)"):format(arch, est.total_bytes, peak, 100 * (est.total_bytes - peak) / peak))
end

return M
