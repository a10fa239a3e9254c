-- Mixed precision, the fp16 loss scaler and gradient accumulation
-- on the tiny classifier (tests/data/tiny_bert_cls, 2 layers, hidden 32) with fixed token
-- ids: bf16 / fp16 losses follow fp32 over 20 AdamW steps; the scaler halves and skips on
-- an injected inf and doubles after N clean steps; bf16 cuts peak activations; frozen
-- weights in half occupy half; 4 x 4 accumulation gives the gradients of one batch of 16
-- and 2 x 4 the losses of one batch of 8 (dropout off, per-example-mean loss).
local T = require("trainer.core.tensor")
local ops = require("trainer.core.ops")
local memory = require("trainer.core.memory")
local errors = require("trainer.core.errors")
local optim = require("trainer.train.optim")
local losses = require("trainer.losses")
local amp = require("trainer.train.amp")
local native = require("trainer.native")
local lib = dofile(native.root() .. "/tests/lua/testlib.lua")

local data = native.root() .. "/tests/data"

-- ---------------------------------------------------------------- fixtures

-- A tiny classifier with dropout off and gradients on (model.eval() + autograd).
local function new_model()
  local m = trainer.load_model(data .. "/tiny_bert_cls", { task = "classification" })
  m:eval():set_grad_enabled(true)
  return m
end

-- n fixed examples of seq tokens (a deterministic LCG; some rows padded).
local function fixed_batch(n, seq)
  local ids, mask, labels, s = {}, {}, {}, 12345
  local function rnd(k) s = (s * 1103515245 + 12345) % 2147483648 return s % k end
  for b = 0, n - 1 do
    local len = seq - (b % 3)
    for t = 1, seq do
      local i = b * seq + t
      if t == 1 then ids[i] = 2
      elseif t == len then ids[i] = 3
      elseif t < len then ids[i] = 11 + rnd(60)
      else ids[i] = 0 end
      mask[i] = t <= len and 1 or 0
    end
    labels[b + 1] = rnd(3)
  end
  local function matrix(values)
    local flat = T.from_table(values, { dtype = "i32", tag = "activations" })
    local t = flat:reshape({ n, seq })
    flat:free()
    return t
  end
  return { input_ids = matrix(ids), attention_mask = matrix(mask), labels = labels, n = n }
end

local function free_batch(b)
  b.input_ids:free(); b.attention_mask:free()
end

-- Rows [start, start + n) of a batch (views of the id tensors; free with free_batch).
local function slice(b, start, n)
  local labels = {}
  for i = 1, n do labels[i] = b.labels[start + i] end
  return { input_ids = b.input_ids:narrow(start, n), attention_mask = b.attention_mask:narrow(start, n),
           labels = labels, n = n }
end

-- One micro-batch: forward, loss, backward of (dloss * scale), times the device scalar
-- scale_by when given (the device loss scale). Returns the loss value.
local function micro(m, loss, b, scale, scale_by)
  local logits = m:forward(b)
  local ok, v = pcall(function()
    local value = loss:forward({ logits }, b.labels)
    local g = loss:backward()[1]
    if scale_by then ops.scale_by_scalar_(g, scale_by, scale) else ops.scale_(g, scale) end
    m:backward(g)
    g:free()
    return value
  end)
  logits:free()
  if not ok then error(v, 0) end
  return v
end

-- Trains for `steps` optimizer steps of `accumulate` micro-batches each over the fixed
-- batch; returns the per-step losses (mean of the micro-batch losses), the scaler and
-- which steps the scaler skipped, its step count, the weights and the scale after each step.
-- device_path: the update a device run takes (trainer.train.run's device_update): the scale
-- on the device (Scaler:to_device) multiplying the seed there, unscale into a found-inf flag
-- tensor, the optimizer skipping on it (AdamW's adamw_multi, the sgd and adafactor ops) with
-- its step count corrected on the device,
-- the scale updated there from the flag; the flag and scale of each step are kept in
-- tensors and read only every read_every steps (then the optimizer's counts are fixed up,
-- as Run:sync_scaler does) and at the end. optim_cfg: the optimizer (default AdamW, lr 1e-3,
-- weight decay 0.01).
local function train(precision, steps, accumulate, batch, scaler_opts, device_path, read_every, optim_cfg)
  local m = new_model()
  amp.prepare(m, precision)
  local opt = optim.new(m, optim_cfg or { name = "adamw", lr = 1e-3, weight_decay = 0.01 })
  local scaler = amp.new_scaler(precision, nil, scaler_opts)
  local loss = losses.new({ name = "cross_entropy" })
  local per = math.floor(batch.n / accumulate)
  local out, skips, scales, kept = {}, {}, {}, {}
  if device_path then scaler:to_device("cpu") end
  local function sync()
    local n = scaler:read()
    opt:undo_steps(n)
    scaler.skipped_known = scaler.skipped
  end
  for step = 1, steps do
    opt:zero_grad()
    local total = 0
    for k = 0, accumulate - 1 do
      local mb = slice(batch, k * per, per)
      if device_path then
        total = total + micro(m, loss, mb, 1 / accumulate, scaler.dev.scale) / accumulate
      else
        total = total + micro(m, loss, mb, scaler.scale / accumulate) / accumulate
      end
      free_batch(mb)
    end
    if device_path then
      local flag = T.zeros({ 1 }, { dtype = "i32", tag = "workspace" })
      scaler:unscale_into(m, flag)
      opt:step({ skip_if = flag, skipped = scaler.dev.skipped, skipped_known = scaler.skipped_known })
      scaler:update_into(flag)
      kept[step] = { flag = flag, scale = scaler.dev.scale:to({ tag = "workspace" }) }
      if read_every and step % read_every == 0 then sync() end
    else
      local found = scaler:unscale(m)
      if not found then opt:step() end
      scaler:update(found)
      skips[step], scales[step] = found, scaler.scale
    end
    out[step] = total
  end
  if device_path then
    sync()
    for step, k in ipairs(kept) do
      skips[step], scales[step] = k.flag:item() ~= 0, k.scale:item()
      k.flag:free(); k.scale:free()
    end
    scaler:free()
  end
  local steps_done = opt.steps
  local params = {}
  for name, p in m:parameters() do
    if p.trainable ~= false then params[name] = p.value:tolist() end
  end
  opt:free(); loss:free(); m:free()
  return out, scaler, skips, steps_done, params, scales
end

-- ---------------------------------------------------------------- cases
return {
  { "activation_dtype_and_bad_precision", function()
    assert(amp.activation_dtype("fp32") == "f32" and amp.activation_dtype("bf16") == "bf16"
      and amp.activation_dtype("fp16") == "f16")
    local ok, err = pcall(amp.activation_dtype, "fp8")
    assert(not ok and errors.is_user_error(err) and errors.message(err):find("\"fp8\"", 1, true), tostring(err))
  end },

  { "scaler_halves_and_skips_on_injected_inf_and_doubles_after_clean_steps", function()
    local g = T.from_table({ 65536, -131072, 32768, 0 }, { tag = "grads" })
    local params = { { value = g, grad = g, trainable = true } }
    local s = amp.new_scaler("fp16", nil, { growth_interval = 3 })
    assert(s.scale == 65536 and s.enabled, "init 2^16")
    -- a clean step: grads divided by the scale exactly once
    assert(s:unscale(params) == false, "no inf")
    local v = g:values()
    assert(v[1] == 1 and v[2] == -2 and v[3] == 0.5 and v[4] == 0, table.concat(v, ","))
    local ok, err = pcall(s.unscale, s, params)
    assert(not ok and errors.message(err):find("twice", 1, true), "a second unscale is refused")
    s:update()
    assert(s.scale == 65536 and s.growth_tracker == 1)
    -- an injected inf: found, scale halves, the step counts as skipped, tracker resets
    local with_inf = T.from_table({ 1, math.huge, 1, 1 }, { tag = "grads" })
    params[2] = { value = with_inf, grad = with_inf, trainable = true }
    assert(s:unscale(params) == true, "inf found")
    params[2] = nil
    with_inf:free()
    s:update()
    assert(s.scale == 32768 and s.skipped == 1 and s.growth_tracker == 0, ("scale %g skipped %d"):format(s.scale, s.skipped))
    -- a NaN also skips
    g:fill(0 / 0)
    assert(s:unscale(params) == true, "nan found")
    s:update()
    assert(s.scale == 16384 and s.skipped == 2)
    -- growth_interval clean steps in a row double it
    for i = 1, 3 do
      g:fill(1)
      assert(s:unscale(params) == false)
      s:update()
      assert(s.scale == (i < 3 and 16384 or 32768), ("after %d clean steps scale %g"):format(i, s.scale))
    end
    -- state round trip
    local s2 = amp.new_scaler("fp16", s:state(), { growth_interval = 3 })
    assert(s2.scale == 32768 and s2.skipped == 2 and s2.growth_tracker == 0)
    -- disabled for bf16 / fp32: scale 1, nothing touched
    local b = amp.new_scaler("bf16")
    g:fill(0 / 0)
    assert(b.scale == 1 and b:unscale(params) == false and b:update(true) == 1 and b.skipped == 0)
    g:free()
  end },

  { "default_growth_interval_is_2000", function()
    local g = T.ones({ 2 }, { tag = "grads" })
    local params = { { value = g, grad = g } }
    local s = amp.new_scaler("fp16")
    for _ = 1, 1999 do s:unscale(params); s:update() ; g:fill(1) end
    assert(s.scale == 65536, "still 2^16 after 1999")
    s:unscale(params); s:update()
    assert(s.scale == 131072, "doubled at 2000")
    g:free()
  end },

  { "frozen_weights_in_half_occupy_half", function()
    local m = new_model()
    local frozen_f32 = 0
    for name, p in m:parameters() do
      if name:find("embeddings", 1, true) or name:find("layer.0.", 1, true) then
        p.trainable = false
        frozen_f32 = frozen_f32 + p.value:nbytes()
      end
    end
    local w0 = memory.stats().by_tag.weights
    local info = amp.prepare(m, "bf16")
    local w1 = memory.stats().by_tag.weights
    -- the tag counts allocator blocks (sizes rounded up to 512 bytes)
    assert(math.abs((w0 - w1) - frozen_f32 / 2) <= 512 * info.frozen_half,
      ("weights went %d -> %d; frozen f32 bytes %d"):format(w0, w1, frozen_f32))
    assert(info.weights_bytes_saved == frozen_f32 / 2 and info.frozen_half > 0)
    local frozen = {}
    for name, p in m:parameters() do
      if p.trainable == false then
        assert(p.value:dtype() == "bf16" and p.value:nbytes() == 2 * p.value:numel(), name)
        frozen[name] = p.value:values()
      else
        assert(p.value:dtype() == "f32", name .. " keeps an f32 master")
      end
    end
    -- an optimizer over the whole model accepts the half frozen weights and leaves them alone
    local opt = optim.new(m, { name = "adamw", lr = 1e-2 })
    local loss = losses.new({ name = "cross_entropy" })
    local b = fixed_batch(4, 8)
    opt:zero_grad()
    micro(m, loss, b, 1)
    opt:step()
    for name, p in m:parameters() do
      if frozen[name] then
        assert(p.grad == nil, name .. " has no grad")
        local v = p.value:values()
        for i = 1, #v do assert(v[i] == frozen[name][i], name .. " changed") end
      end
    end
    assert(memory.stats().by_tag.weights == w1, "no weights appeared")
    free_batch(b); opt:free(); loss:free(); m:free()
  end },

  { "bf16_cuts_peak_activations", function()
    local b = fixed_batch(16, 24)
    local peaks = {}
    for _, precision in ipairs({ "fp32", "bf16" }) do
      local m = new_model()
      amp.prepare(m, precision)
      local loss = losses.new({ name = "cross_entropy" })
      local a0 = memory.stats().by_tag.activations
      memory.reset_peak()
      micro(m, loss, b, 1)
      peaks[precision] = memory.stats().peak_by_tag.activations - a0
      assert(memory.stats().by_tag.activations == a0, ("%s: activations %d before, %d after backward"):format(precision, a0, memory.stats().by_tag.activations))
      loss:free(); m:free()
    end
    print(("    peak activations: fp32 %d B, bf16 %d B (%.2f)"):format(peaks.fp32, peaks.bf16, peaks.bf16 / peaks.fp32))
    assert(peaks.bf16 < 0.7 * peaks.fp32, ("peak activations fp32 %d, bf16 %d"):format(peaks.fp32, peaks.bf16))
    free_batch(b)
  end },

  { "bf16_and_fp16_losses_follow_fp32_over_20_steps", function()
    local b = fixed_batch(8, 12)
    local ref = train("fp32", 20, 1, b)
    assert(ref[20] < ref[1] * 0.8, ("fp32 learns: %g -> %g"):format(ref[1], ref[20]))
    local bf = train("bf16", 20, 1, b)
    local fp, scaler = train("fp16", 20, 1, b)
    local dbf, dfp = 0, 0
    for i = 1, 20 do dbf, dfp = math.max(dbf, math.abs(bf[i] - ref[i])), math.max(dfp, math.abs(fp[i] - ref[i])) end
    print(("    losses %.4f -> %.4f; max |bf16 - fp32| %.2g, max |fp16 - fp32| %.2g"):format(ref[1], ref[20], dbf, dfp))
    for i = 1, 20 do
      assert(math.abs(bf[i] - ref[i]) <= 0.03 * ref[1], ("step %d: bf16 %g fp32 %g"):format(i, bf[i], ref[i]))
      assert(math.abs(fp[i] - ref[i]) <= 0.01 * ref[1], ("step %d: fp16 %g fp32 %g"):format(i, fp[i], ref[i]))
    end
    assert(scaler.skipped == 0 and scaler.scale == 65536, ("fp16: %d skipped, scale %g"):format(scaler.skipped, scaler.scale))
    free_batch(b)
  end },

  { "fp16_overflow_skips_the_step_and_backs_off", function()
    -- too large an initial scale (2^20; this model's f16 activation gradients overflow
    -- above about 2^18 once training moves) overflows: those steps are skipped with the
    -- weights untouched (the next loss repeats) and the scale halves each time; the
    -- steps taken follow fp32's trajectory
    local b = fixed_batch(8, 12)
    local ref = train("fp32", 8, 1, b)
    local fp, scaler, skips = train("fp16", 8, 1, b, { init_scale = 2 ^ 20 })
    local k = scaler.skipped
    print(("    fp16 from scale 2^20: %d steps skipped, scale now 2^%g"):format(k, math.log(scaler.scale) / math.log(2)))
    assert(k >= 1 and k <= 3, ("skipped %d"):format(k))
    assert(scaler.scale == 2 ^ (20 - k), "halved once per skip")
    local taken = 0
    for i = 1, 8 do
      taken = taken + 1
      assert(math.abs(fp[i] - ref[taken]) <= 0.01 * ref[1], ("step %d: fp16 %g fp32 %g"):format(i, fp[i], ref[taken]))
      if skips[i] then
        taken = taken - 1
        if i < 8 then
          assert(fp[i + 1] == fp[i], ("skipped step %d changed the weights: %.9g then %.9g"):format(i, fp[i], fp[i + 1]))
        end
      end
    end
    assert(taken == 8 - k)
    free_batch(b)
  end },

  { "fp16_device_path_is_the_eager_path_bit_for_bit", function()
    -- the loss scale living in a device tensor (seed scaled by it, unscale by its
    -- inverse, updated from the found-inf flag there, the optimizer skipping on the flag and
    -- taking its step from the device skip count), read only every 4 steps, gives the eager
    -- loop's losses, skips, scale after each step, step count and weights exactly, over a run
    -- that skips (scale 2^24 overflows fp16's gradients) and grows (growth_interval 2); for
    -- AdamW, SGD with momentum (its first step) and Adafactor (its relative step and beta2)
    local b = fixed_batch(8, 12)
    local opts = { init_scale = 2 ^ 24, growth_interval = 2 }
    for _, cfg in ipairs({ { name = "adamw", lr = 1e-3, weight_decay = 0.01 },
                           { name = "sgd", lr = 1e-2, momentum = 0.9, weight_decay = 0.01 },
                           { name = "adafactor", weight_decay = 0.01 } }) do
      local fp, scaler, skips, n, w, sc = train("fp16", 10, 2, b, opts, nil, nil, cfg)
      local fd, scaler_d, skips_d, n_d, w_d, sc_d = train("fp16", 10, 2, b, opts, true, 4, cfg)
      local grew = false
      for i = 2, 10 do grew = grew or sc[i] > sc[i - 1] end
      assert(scaler.skipped >= 1 and grew, ("%s: the case must skip and grow: %d skipped"):format(cfg.name,
        scaler.skipped))
      for i = 1, 10 do
        assert(fd[i] == fp[i] and skips_d[i] == skips[i] and sc_d[i] == sc[i],
          ("%s step %d: loss %.17g vs %.17g, skip %s vs %s, scale %g vs %g"):format(cfg.name, i, fd[i], fp[i],
            tostring(skips_d[i]), tostring(skips[i]), sc_d[i], sc[i]))
      end
      assert(scaler_d.scale == scaler.scale and scaler_d.skipped == scaler.skipped and n_d == n
        and scaler_d.growth_tracker == scaler.growth_tracker,
        ("%s: scale %g vs %g, steps %d vs %d"):format(cfg.name, scaler_d.scale, scaler.scale, n_d, n))
      local function same(a, c, path)
        if type(a) == "table" then for k, v in pairs(a) do same(v, c[k], path .. "." .. k) end
        else assert(a == c, path .. (": %.17g vs %.17g"):format(a, c)) end
      end
      same(w_d, w, cfg.name .. " weights")
    end
    free_batch(b)
  end },

  { "accumulate_4x4_gives_the_gradients_of_one_batch_of_16", function()
    local b = fixed_batch(16, 10)
    local loss = losses.new({ name = "cross_entropy" })
    local function grads(k)
      local m = new_model()
      local opt = optim.new(m, { name = "adamw" })
      opt:zero_grad()
      local per = math.floor(16 / k)
      for i = 0, k - 1 do
        local mb = slice(b, i * per, per)
        micro(m, loss, mb, 1 / k)
        free_batch(mb)
      end
      local out = {}
      for name, p in m:parameters() do out[name] = p.grad:values() end
      opt:free(); m:free()
      return out
    end
    local one, acc = grads(1), grads(4)
    -- relative to each gradient's largest element; attention.self.key.bias has a zero
    -- gradient in exact arithmetic (softmax ignores a shift shared by all keys), so its
    -- rounding noise is measured against the model's largest gradient instead, and so is
    -- key.weight's, a sum over rows that mostly cancels for the same reason. The bound is
    -- float32 rounding of sums over the batch's rows: the encoder runs on the real rows only
    -- (trainer.nn.packing), so the 16-row and the 4-row batches' weight-gradient GEMMs sum
    -- 150 and ~37 rows in different blocks (query.weight 1.8e-6 seen, key.weight 3e-6 of its
    -- own largest element; the padded path had 4.3e-7, packed against padded at 16 rows 2e-7)
    local top = 0
    for _, g in pairs(one) do for i = 1, #g do top = math.max(top, math.abs(g[i])) end end
    local n, worst = 0, 0
    for name, g in pairs(one) do
      local rel = lib.rel_err(acc[name], g)
      if name:find("attention.self.key.", 1, true) then rel = rel * math.max(math.max(unpack(g)), -math.min(unpack(g))) / top end
      assert(rel <= 3e-6, ("%s: relative difference %g"):format(name, rel))
      worst = math.max(worst, rel)
      n = n + 1
    end
    print(("    4x4 vs 16: worst relative gradient difference %.3g over %d parameters"):format(worst, n))
    assert(n > 20, "every parameter compared")
    loss:free(); free_batch(b)
  end },

  { "accumulate_2x4_gives_the_losses_of_one_batch_of_8", function()
    local b = fixed_batch(8, 12)
    local one = train("fp32", 6, 1, b)
    local acc = train("fp32", 6, 2, b)
    for i = 1, 6 do
      assert(math.abs(acc[i] - one[i]) <= 1e-5 * one[i], ("step %d: 2x4 %.9g, 1x8 %.9g"):format(i, acc[i], one[i]))
    end
    free_batch(b)
  end },
}
