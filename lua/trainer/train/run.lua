-- trainer.train.run: a training run built from a resolved recipe — the object `t` that the
-- default loop (trainer.loop) and a recipe's own `loop = function(t) ... end` drive.
--
--   local t = run.build(resolved)      -- resolved: what recipe.load returns
--   t:train_step()   -> metrics or nil (data exhausted)   one optimizer step (all micro-batches)
--   t:evaluate()     -> scores (spearman/pearson, accuracy, or eval.fn's)  (also on_eval)
--   t:save()         -> folder (checkpoint-STEP, atomic, keeps the last save.keep; on_save)
--   t:done()         -> true when the planned steps are done or a stop was requested
--   t:finish()       writes summary.json; t:free()
--   t.step, t.total_steps, t.epoch, t.model, t.tokenizer, t.loss, t.optimizer, t.schedule,
--   t.recipe, t.out, t.last_loss, t.last_eval
--
-- Order of construction (the wave's contract): model (recipe.model), lora.apply,
-- amp.prepare, checkpoint.apply, optimizer, schedule, data; then resume restores weights,
-- optimizer state, scaler, RNG counter and data cursor from a checkpoint so that the run
-- continues bit-identically (fp32 on the CPU).
-- The dropout RNG counter (model.rng.step) is the number of micro-batches done: a resumed
-- run draws the same masks as an unbroken one. Failures raise trainer.errors user errors;
-- a non-finite loss raises one naming the step and the last good checkpoint.
-- Host reads: on a device (or with opts.lazy_scalars) the losses return
-- trainer.train.deferred values and a step never waits for the device to know its loss: the
-- values are read once per logged step (log.every, the first and the last step), before an
-- evaluation, a save, an on_step hook and the summary (read_scalars), and the non-finite check
-- runs there, naming the step it happened at. metrics.jsonl gets the same rows (written once
-- their loss is known). On the CPU the losses return numbers and every step reads at once.
-- The optimizer update on a device reads nothing either (device_update: the clip norm is a
-- deferred value checked at the same reads, the found-inf flag stays on the device and the
-- optimizer skips on it; under fp16 the loss scale's update reads it there too).
-- The batches go to a device through trainer.train.batch_feed (pinned slots, a copy stream,
-- the compute stream waiting on an event: tokenising batch n + 1 overlaps the GPU's batch
-- n); on the CPU only with opts.batch_feed (its stand-in, for tests), which changes no value.
local T = require("trainer.core.tensor")
local json = require("trainer.core.json")
local errors = require("trainer.core.errors")
local native = require("trainer.native")
local memory = require("trainer.core.memory")
local outputs = require("trainer.train.outputs")
local deferred = require("trainer.train.deferred")

local M = {}

local Run = {}
Run.__index = Run
M.Run = Run

local C = require("trainer.core.ffi") -- declares clock_gettime (its system block)
local CLOCK_MONOTONIC = require("trainer.native").clock_monotonic_id()
local ts = require("ffi").new("struct tr_sys_timespec")

-- Seconds on the monotonic clock, for tokens/s and ETA.
function M.now()
  if C.clock_gettime(CLOCK_MONOTONIC, ts) ~= 0 then error("trainer.run.now: clock_gettime(CLOCK_MONOTONIC) failed", 0) end
  return tonumber(ts.tv_sec) + tonumber(ts.tv_nsec) * 1e-9
end

local function finite(x) return x == x and x ~= math.huge and x ~= -math.huge end
local function runtime_of() return require("trainer.core.runtime") end

-- ---------------------------------------------------------------- model
local function download_hint(m)
  local hub = m.hub or "ORG/NAME"
  return ("huggingface-cli download %s --local-dir %s"):format(hub, m.from)
end

-- A missing model folder is the most common first error: it names the download command.
function M.check_model_folder(m)
  if m.from and not native.is_dir(m.from) then
    errors.user("model.from: %s: no such model folder. Download it with:\n  %s\nor point model.from at a folder "
      .. "that holds config.json, model.safetensors and a tokenizer.", m.from, download_hint(m))
  end
end

-- Missing data files fail before any work, with the recipe's data.hint when it has one.
function M.check_data_files(d)
  if not d then return end
  for _, key in ipairs({ "train", "eval" }) do
    local path = d[key]
    if path then
      local f = io.open(path, "rb")
      if f then f:close() else
        errors.user("data.%s: %s: no such file. %s", key, path,
          d.hint and ("To get it: " .. d.hint .. ".")
            or "Give a .jsonl, .tsv or .csv file (optionally .gz) with the columns the recipe names.")
      end
    end
  end
end

local function build_model(recipe, device)
  local models = require("trainer.models")
  local m = recipe.model
  local opts = { device = device, seed = recipe.seed, task = m.task, pooling = m.pooling,
                 normalize = m.normalize, max_length = m.max_length, arch = m.arch }
  local model, tok_dir
  if m.from then
    M.check_model_folder(m)
    models.check_folder(m.from, m.tokenizer == nil)
    tok_dir = m.tokenizer or m.from
    if m.task == "classification" and not models.has_head(m.from, m.arch) then
      -- a new classification head on a pretrained encoder (transformers' behaviour): the head
      -- is new, and so is what the family starts anew with it; every other weight must be in
      -- the folder
      local n = m.num_labels or (m.labels and #m.labels) or 3
      opts.num_labels, opts.on_warning = n, function() end
      model = models.load_model(m.from, opts)
      model.labels = {}
      for i = 0, n - 1 do model.labels[i] = (m.labels and m.labels[i + 1]) or ("LABEL_" .. i) end
    else
      model = models.load_model(m.from, opts)
    end
  else
    local cfg, family = models.config_of(m)
    if not cfg then
      errors.user("model.config = %q: not a preset (tiny, bert-base, bert-large, minilm-l6, minilm-l12) or a "
        .. "table of config fields; use model.from for pretrained models", tostring(m.config))
    end

    if not m.tokenizer then errors.user("model.tokenizer: a model built from model.config needs a tokenizer folder") end
    tok_dir = m.tokenizer
    model = family.build(m.task == "classification" and "classification" or "embedding", { config = cfg,
      device = device, seed = recipe.seed, num_labels = m.num_labels, pooler = false, pooling = m.pooling,
      normalize = m.normalize })
    local limit = family.max_positions(cfg)
    model.max_length = math.min(m.max_length or limit, limit)
  end
  -- model.dropout overrides every dropout probability of the config (the family's set_dropout)
  if m.dropout then
    local family = require("trainer.models.registry").of_model(model)
    family.set_dropout(model, m.dropout)
  end
  return model, tok_dir
end

-- ---------------------------------------------------------------- build
function M.build(resolved, opts)
  opts = opts or {}
  local recipe = resolved.recipe
  local self = setmetatable({ recipe = recipe, source = resolved.path, out = recipe.out, opts = opts,
    step = 0, micro = 0, tokens = 0, train_time = 0, epoch = 0, hooks = recipe.hooks or {},
    last_loss = nil, last_eval = nil, first_eval = nil, evals = {}, last_checkpoint = nil,
    stop_signal = nil, pending = nil, held = {}, unread = {}, started = M.now(), wall_before = 0 }, Run)
  local runtime = require("trainer.core.runtime")
  self.device = runtime.device_name(runtime.parse_device(recipe.device))
  if recipe.memory then
    if recipe.memory.limit then memory.set_limit(recipe.memory.limit) end
    if recipe.memory.max_split_size then memory.set_max_split_size(recipe.memory.max_split_size) end
  end

  -- resume: find the checkpoint first, so a bad path fails before any work
  -- and a folder that holds another run's outputs is refused before anything is written
  if recipe.resume then
    self.resume_dir = M.find_resume(recipe)
    require("trainer.train.resume").check_target(resolved, self.resume_dir)
  end

  M.check_model_folder(recipe.model)
  M.check_data_files(recipe.data)
  -- config.json typed and ranged, and the memory plan against memory.limit or the device,
  -- before anything is allocated: a run that cannot fit stops now (exit 2), with the ledger
  self.plan = require("trainer.plan.check").check(recipe, self.device, resolved.path)
  -- under mpirun: this rank's membership of the job (trainer.dist), one GPU per rank; after
  -- the checks above, so that a recipe's mistake ends every rank plainly, before MPI starts
  self.dist = require("trainer.dist").setup(recipe)
  if self.dist then self.device = self.dist:device(self.device, recipe.device) end
  -- a precision the card does not compute in (bf16 before Ampere) stops here, before the model
  require("trainer.core.card").check_precision(self.device, recipe.precision, resolved.path)
  -- data before the model, as it is cheap to fail: a malformed line ends the run before model loading
  local data = require("trainer.train.data")
  self.train_ds, self.loader = data.train(recipe, { world = self.dist and self.dist.size })
  local eval_ds = data.eval(recipe)
  if eval_ds then
    self.eval_rows = {}
    for row in eval_ds:iter() do self.eval_rows[#self.eval_rows + 1] = row end
    self.eval_summary = eval_ds:summary()
    eval_ds:close()
  end

  local model, tok_dir = build_model(recipe, self.device)
  self.model = model
  self.tokenizer = require("trainer.core.tokenizer").load(tok_dir)
  -- a longer model.max_length than the model has positions for is cut to them, and said once
  local family = require("trainer.models.registry").of_model(model)
  local positions = family.max_positions(model.config)
  local want = recipe.model.max_length
  if want and want > positions and not (opts.quiet or recipe.log.quiet) and (not self.dist or self.dist.rank == 0) then
    io.stderr:write(("warning: model.max_length = %s is above the model's max_position_embeddings (%d, in %s); "
      .. "texts are cut at %d tokens. Set model.max_length to at most %d to silence this.\n"):format(
      require("trainer.cli.pretty").number(want), positions,
      recipe.model.from and (recipe.model.from .. "/config.json") or "model.config", positions, positions))
  end
  self.max_length = want and math.min(want, positions) or model.max_length

  if recipe.lora then self.lora_names = require("trainer.train.lora").apply(model, recipe.lora) end
  if recipe.precision ~= "fp32" then require("trainer.train.amp").prepare(model, recipe.precision) end
  -- "auto": the segmentation the plan found of least peak memory for this shape
  if recipe.checkpoint then
    require("trainer.train.grad_checkpoint").apply(model, recipe.checkpoint, self.plan and self.plan.checkpoint_sizes)
  end

  local losses = require("trainer.losses")
  local lspec = {}
  for k, v in pairs(recipe.loss) do lspec[k] = v end
  self.deferred = opts.lazy_scalars or self.device ~= "cpu"
  if self.device ~= "cpu" or opts.batch_feed then self.feed = require("trainer.train.batch_feed").new(self.device) end
  self.loss = losses.new(lspec, { dim = model.config.hidden_size, device = self.device, seed = recipe.seed,
    deferred = self.deferred })

  -- parameters: the model's and the loss's own (SoftmaxLoss' classifier), as (name, param)
  self.params = {}
  for name, p in model:parameters() do self.params[#self.params + 1] = { name, p } end
  for name, p in self.loss:parameters() do self.params[#self.params + 1] = { "loss." .. name, p } end
  local function iter()
    local i = 0
    return function()
      i = i + 1
      local e = self.params[i]
      if e then return e[1], e[2] end
    end
  end
  self.param_iter = iter
  -- DDP's start: the collective chosen, rank 0's weights on every rank
  if self.dist then
    self.dist:choose_backend()
    self.dist:broadcast_params(self.params)
  end
  self.optimizer = require("trainer.train.optim").new(iter(), recipe.optim)

  local per_epoch = self.loader:batches_per_epoch()
  self.batches_per_epoch = per_epoch
  local acc = recipe.batch.accumulate
  self.steps_per_epoch = math.max(1, math.ceil(per_epoch / acc))
  self.total_steps = recipe.steps or math.max(1, math.ceil(recipe.epochs * self.steps_per_epoch))
  self.schedule = require("trainer.train.schedule").new(recipe.schedule, recipe.optim.lr, self.total_steps)
  -- opts.scaler (tests): the fp16 scaler's init_scale, growth_interval, ... (amp.new_scaler)
  self.scaler = require("trainer.train.amp").new_scaler(recipe.precision, nil, opts.scaler)
  self.model.rng = self.model.rng or { seed = recipe.seed, step = 0 }

  if self.resume_dir then
    outputs.mkdir(self.out)
    self:load_checkpoint(self.resume_dir)
  end
  return self
end

-- ---------------------------------------------------------------- data
-- The next micro-batch. At the end of an epoch: nil when within_step (an optimizer step
-- never spans two epochs, as transformers' Trainer: the epoch's last step may have fewer
-- micro-batches), else the first batch of the next epoch. nil also when the data is empty.
function Run:next_batch(within_step)
  local b = self.loader:next()
  if b == nil then
    self.epoch = self.loader.epoch
    if within_step then return nil end
    b = self.loader:next()
  end
  return b
end

-- ---------------------------------------------------------------- one micro-batch
-- Forward, loss, backward of one batch (trainer.step.micro); gradients accumulate into
-- param.grad multiplied by `scale`. Returns the loss value and the number of non-pad tokens.
-- The dropout key's step is the count of micro-batches before this one.
function Run:micro_step(batch, scale)
  -- under mpirun each rank draws its own dropout masks (micro * N + rank; micro for one)
  self.model.rng.step = self.dist and (self.micro * self.dist.size + self.dist.rank) or self.micro
  self.micro = self.micro + 1
  return require("trainer.train.step").micro({ model = self.model, loss = self.loss, tokenizer = self.tokenizer,
    batch = batch, max_length = self.max_length, scale = scale, scale_by = self.scale_by,
    cached = self.recipe.loss.cached, feed = self.feed,
    mini_batch = self.recipe.loss.mini_batch, ntexts = self.train_ds.ntexts })
end

-- ---------------------------------------------------------------- one optimizer step
-- step: the step it happened at (default the one running).
function Run:failure(what, step)
  local ck = self.last_checkpoint
  errors.user("step %d: %s; the run stopped. %s", step or self.step + 1, what,
    ck and ("The last good checkpoint is %s: continue from it with a lower learning rate or a gradient clip, "
      .. "e.g. `trainer resume %s optim.lr=%s` or `trainer resume %s grad_clip=1.0`"):format(ck,
      self.out, require("trainer.cli.pretty").number(self.recipe.optim.lr / 10), self.out)
      or "No checkpoint was saved before it (set save.every to keep one); lower optim.lr or set grad_clip and rerun.")
end

-- Runs batch.accumulate micro-batches and one optimizer update. Returns the step's
-- metrics (also written to metrics.jsonl and passed to hooks.on_step), or nil when the
-- data has no batch left.
function Run:train_step()
  self:flush_metrics()
  local recipe = self.recipe
  local acc = recipe.batch.accumulate
  -- the allocator's peak is reset per step (metrics show each step's peak by tag); the
  -- run's peak is the maximum over steps and over what happened between them
  self:merge_peaks(memory.stats(self.device))
  memory.reset_peak(self.device)
  local t0 = M.now()
  self.model:train()
  self.optimizer:zero_grad()
  local scale = self.scaler.scale / acc
  if self.deferred and self.scaler.enabled then
    -- fp16 on a device: the scale lives there and multiplies the seed there
    self.scaler:to_device(self.device)
    scale, self.scale_by = 1 / acc, self.scaler.dev.scale
  end
  local sum, n, ntok = 0, 0, 0
  for i = 1, acc do
    local batch = self:next_batch(i > 1)
    if not batch then break end
    if i == 1 then self.step_epoch = self.epoch end
    local v, k = (self.dist and self.dist_micro_step or self.micro_step)(self, batch, scale, i == acc)
    if not deferred.is(v) and not finite(v) and not self.scaler.enabled then
      self:failure(("the loss is %s"):format(tostring(v)))
    end
    sum, n, ntok = deferred.add(sum, v), n + 1, ntok + k
  end
  if n == 0 then return nil end
  -- under mpirun the ranks agree on the loss every step: that reads it (one wait per step)
  if self.dist then sum, ntok = self:dist_reduce(deferred.value(sum), ntok) end
  local loss_value = deferred.div(sum, n)
  local lr = self.schedule:lr(self.step)
  local skipped, norm, seen = false, nil, nil
  if self.deferred then
    skipped, norm, seen = self:device_update(lr)
  else
    local found_inf = self.scaler:unscale(self.param_iter())
    if found_inf then
      skipped = true
    else
      if recipe.grad_clip then
        norm = require("trainer.train.clip").clip_grad_norm(self.param_iter(), recipe.grad_clip)
        if not finite(norm) then
          if self.scaler.enabled then skipped = true
          else self:failure(("the gradient norm is %s"):format(tostring(norm))) end
        end
      end
    end
    if not skipped then self.optimizer:step({ lr = lr }) end
  end
  if not seen then self.scaler:update(skipped) end
  self.step = self.step + 1
  local dt = math.max(M.now() - t0, 1e-9)
  self.train_time = self.train_time + dt
  self.tokens = self.tokens + ntok
  if not deferred.is(loss_value) then self.last_loss = loss_value end
  self.last_step_time = dt
  local s = memory.stats(self.device)
  self:merge_peaks(s)
  local m = {
    step = self.step, epoch = self:epochs_done(), loss = not deferred.is(loss_value) and loss_value or nil, lr = lr,
    tokens = ntok, tokens_per_s = ntok / dt,
    mem_allocated = s.allocated, mem_reserved = s.reserved, mem_peak = s.peak_allocated,
    mem_by_tag = s.by_tag, mem_peak_by_tag = s.peak_by_tag, grad_norm = not deferred.is(norm) and norm or nil,
    skipped = skipped or nil,
    loss_scale = self.scaler.enabled and not seen and self.scaler.scale or nil,
    allreduce_s = self.last_allreduce_s,   -- under mpirun: this step's gradient all-reduce
  }
  self.pending = m
  if deferred.is(loss_value) or deferred.is(norm) or seen then
    self.unread[#self.unread + 1] = { row = m, value = loss_value, norm = deferred.is(norm) and norm or nil,
      step = self.step, seen = seen }
    local every = recipe.log.every or 10
    if self.hooks.on_step or self.step % every == 0 or self.step == 1 or self.step >= self.total_steps then
      self:read_scalars()
    end
  end
  if self.progress then self.progress:update(self, m) end
  if self.hooks.on_step then self:call_hook("on_step", m) end
  return m
end

-- The optimizer update on a device (self.deferred): unscale, clip and the
-- optimizer are enqueued with no host read. The found-inf flag (a { 1 } i32 device tensor,
-- zeroed here) is set by the unscale (fp16) or by a non-finite clip norm, and AdamW, SGD and
-- Adafactor skip on it on the device. The norm is a deferred value, read with the loss at
-- the logged steps (a non-finite one stops the run there, naming its step). Under fp16 the
-- loss scale lives on the device too (amp Scaler:to_device): the unscale divides by it there,
-- its update reads the flag there, and the optimizer's step count leaves out the skips the
-- host has not read yet (on the device, from the scale's skip count); the
-- step's flag and new scale are copied (deferred leaves) and read with the loss (read_scalars),
-- so fp16 reads nothing per step either. Returns skipped (as far as known), the norm and,
-- under fp16, the step's deferred { flag, scale } (nil otherwise: the caller updates the
-- scaler on the host).
function Run:device_update(lr)
  local recipe, scaler = self.recipe, self.scaler
  local flag = self.found_flag
  if flag then flag:fill(0)
  else
    flag = T.keep(T.zeros({ 1 }, { dtype = "i32", device = self.device, tag = "workspace" }))
    self.found_flag = flag
  end
  scaler:unscale_into(self.param_iter(), flag)
  local norm
  if recipe.grad_clip then
    norm = require("trainer.train.clip").clip_grad_norm_into(self.param_iter(), recipe.grad_clip, flag)
  end
  -- every optimizer skips on the flag on the device (AdamW over a non-f32 gradient reads it
  -- first: optim's step); a non-finite clip norm without fp16 stops the run at its read
  local opt, dev = self.optimizer, scaler.dev
  local _, skipped = opt:step({ lr = lr, skip_if = flag, skipped = dev and dev.skipped,
    skipped_known = dev and scaler.skipped_known })
  skipped = skipped or false
  if not dev then return skipped, norm end
  -- a skip read here (not a device skip) is in the step counts already
  if skipped then scaler.skipped_known = scaler.skipped_known + 1 end
  scaler:update_into(flag)
  return skipped, norm, { flag = deferred.leaf(flag), scale = deferred.leaf(dev.scale) }
end

-- Reads the device loss scale (fp16 on a device) and takes the skips the optimizer made on the
-- device out of the optimizer's step counts: before a checkpoint, the summary, a log line.
function Run:sync_scaler()
  local sc = self.scaler
  if not sc.dev then return end
  local n = sc:read()
  if n > 0 then self.optimizer:undo_steps(n) end
  sc.skipped_known = sc.skipped
end

-- Under mpirun, one micro-batch: this rank's rows of the global micro-batch, its gradient
-- weighted by its share (trainer.dist). Returns its part of the global batch's loss (the
-- sum over ranks is the loss), and its tokens. A non-finite loss is kept for dist_reduce
-- (0 is returned), so that every rank fails at the same step instead of this one alone.
-- On the step's last micro-batch (last) the gradient all-reduce begins before its backward,
-- and buckets start as the encoder layers finish (DDP's overlap; not with GradCache, whose
-- several backwards per micro-batch make no gradient final before the last); accumulation
-- micro-batches before it reduce nothing.
function Run:dist_micro_step(batch, scale, last)
  local dist = self.dist
  if last then dist:begin_grads(self.params, not self.recipe.loss.cached and self.model or nil) end
  local rows, w = dist:shard(batch)
  if #rows == 0 then
    self.micro = self.micro + 1
    return 0, 0
  end
  local ok, v, k = pcall(self.micro_step, self, rows, scale * w)
  if last then dist:unhook() end
  if not ok then error(v, 0) end
  v = deferred.value(v)   -- the ranks agree on every step's loss: read it here (on a device, one wait)
  if not finite(v) and not self.scaler.enabled then
    self.dist_bad = self.dist_bad or tostring(v)
    return 0, k
  end
  return v * w / dist.size, k
end

-- Under mpirun, after the micro-batches: gradients averaged over the ranks, and the
-- step's loss, tokens, a non-finite loss and a stop signal summed, so that every rank
-- takes the same decisions (skip, fail, stop) after the same step.
function Run:dist_reduce(sum, ntok)
  local dist, bad = self.dist, self.dist_bad
  self.dist_bad = nil
  -- begun on the last micro-batch (dist_micro_step), or here when the data ended before it
  if not dist.pending then dist:begin_grads(self.params) end
  self.last_allreduce_s = dist:finish_grads() or 0
  local sig = native.stop_requested and native.stop_requested()
  local agreed = dist:agree({ sum, ntok, bad and 1 or 0, sig and 1 or 0, sig or 0 })
  if agreed[3] > 0 then
    dist:agree_to_fail()
    self:failure(bad and ("the loss is %s"):format(bad) or "the loss is not finite on another rank")
  end
  if agreed[4] > 0 then self.stop_signal = self.stop_signal or sig or math.floor(agreed[5] / agreed[4]) end
  return agreed[1], agreed[2]
end

-- Whether this process writes the run's files (only rank 0 under mpirun).
function Run:writes_outputs()
  return not self.dist or self.dist:is_root()
end

-- Completed epochs as a fraction, as the Hugging Face Trainer logs "epoch": the data
-- cursor's epoch plus the share of its batches already used (0.5 halfway, 1.0 after one
-- whole pass), for metrics.jsonl and summary.json.
function Run:epochs_done()
  local per, ld = self.batches_per_epoch, self.loader
  if not per or per <= 0 or not ld then return self.epoch end
  return ld.epoch + math.min(ld.position, per) / per
end

-- Reads the deferred losses of the steps since the last read (the one wait for the device),
-- fills their metrics rows and checks them: a non-finite loss stops the run naming its step.
function Run:read_scalars()
  -- first what the device's checks found (a bad token id or label: it names the index),
  -- before any value computed from it is judged
  local ok_dev, dev_err = pcall(runtime_of().check_device_errors, self.device)
  if not ok_dev then self:free_unread() error(dev_err, 0) end
  local list = self.unread
  if #list == 0 then return end
  self.unread = {}
  local function free_from(i)
    for j = i, #list do
      deferred.free(list[j].value); deferred.free(list[j].norm)
      if list[j].seen then deferred.free(list[j].seen.flag); deferred.free(list[j].seen.scale) end
    end
  end
  for i, rec in ipairs(list) do
    local ok, v = pcall(deferred.value, rec.value)
    local okn, nv = true, nil
    if ok then okn, nv = pcall(deferred.value, rec.norm) else deferred.free(rec.norm) end
    if not ok or not okn then
      if rec.seen then deferred.free(rec.seen.flag); deferred.free(rec.seen.scale) end
      free_from(i + 1)
      error(ok and nv or v, 0)
    end
    if not finite(v) and not self.scaler.enabled then
      free_from(i + 1)
      self:failure(("the loss is %s"):format(tostring(v)), rec.step)
    end
    -- the clip's norm on a device: its non-finite check, deferred to here (the optimizer skipped the step)
    if nv ~= nil and not finite(nv) and not self.scaler.enabled then
      free_from(i + 1)
      self:failure(("the gradient norm is %s"):format(tostring(nv)), rec.step)
    end
    rec.row.loss = v
    rec.row.grad_norm = nv
    if rec.seen then
      local fl, sc = deferred.value(rec.seen.flag), deferred.value(rec.seen.scale)
      rec.row.loss_scale = sc
      if fl ~= 0 then rec.row.skipped, rec.row.grad_norm = true, nil end
    end
    self.last_loss = v
  end
  self:sync_scaler()
end

-- Writes the finished steps' rows whose loss is known, in step order; the latest row stays
-- pending until the next step (an evaluation at this step adds its scores to it).
function Run:flush_metrics()
  if self.pending then self.held[#self.held + 1] = self.pending end
  self.pending = nil
  while self.held[1] and self.held[1].loss ~= nil do
    local row = table.remove(self.held, 1)
    if self.metrics then self.metrics:write(row) end
    if self.tb then self.tb:row(row) end
  end
end

-- ---------------------------------------------------------------- evaluation
-- An evaluation batch's tensors on the run's device: through the batch feed on a device
-- (uploads that do not wait for the device, as a training batch's), else tok:batch. Returns
-- the batch and the function that ends it (after the forward is queued).
local function eval_batch(self, texts)
  local tk = require("trainer.core.tokenizer")
  if self.feed then
    local enc = require("trainer.train.step").encode({ feed = self.feed, model = self.model, tokenizer = self.tokenizer },
      texts, { max_length = self.max_length })
    return enc, function() tk.free_batch(enc) self.feed:release() end
  end
  local b = self.tokenizer:batch(texts, { max_length = self.max_length, device = self.device })
  return b, function() tk.free_batch(b) end
end

-- The model's output for evaluation texts; the batch ends (tensors freed, feed slot
-- released) once the forward is queued, also when it fails.
local function eval_forward(self, texts)
  local b, done = eval_batch(self, texts)
  local ok, out = pcall(self.model.forward, self.model, b)
  done()
  if not ok then error(out, 0) end
  return out
end

-- Scores of the current model: eval.fn(t) if given, else STS (embedding models: Spearman
-- and Pearson of cosine vs gold) or NLI accuracy (classifiers) on data.eval.
function Run:evaluate()
  self:read_scalars()
  if not self:writes_outputs() then return nil end   -- under mpirun: once, on rank 0
  local recipe = self.recipe
  local evaluate = require("trainer.train.evaluate")
  local scores
  self.model:eval()
  local ok, err = pcall(function()
    if recipe.eval.fn then
      scores = evaluate.custom(recipe.eval.fn, self)
    elseif self.eval_rows and #self.eval_rows > 0 then
      local pairs_, gold = {}, {}
      for i, r in ipairs(self.eval_rows) do
        if type(r[#r]) ~= "number" then
          errors.user("%s: row %d has no numeric score or label in its last column; set data.eval_columns",
            recipe.data.eval, i)
        end
      end
      -- pairs sorted by length (stable): batches of similar lengths pad less; correlations
      -- and accuracy do not depend on the order of the pairs
      local order = {}
      for i = 1, #self.eval_rows do order[i] = i end
      local function len(i) local r = self.eval_rows[i] return #r[1] + #r[2] end
      table.sort(order, function(a, b)
        local la, lb = len(a), len(b)
        if la ~= lb then return la < lb end
        return a < b
      end)
      for k, i in ipairs(order) do
        local r = self.eval_rows[i]
        pairs_[k], gold[k] = { r[1], r[2] }, r[#r]
      end
      local opts = { batch_size = recipe.eval.batch_size }
      if self.model.task == "classification" then
        scores = evaluate.nli(function(batch) return eval_forward(self, batch) end, pairs_, gold, opts)
      else
        scores = evaluate.sts(function(texts) return eval_forward(self, texts) end, pairs_, gold, opts)
      end
      scores.n = nil
    end
  end)
  self.model:train()
  if not ok then error(err, 0) end
  -- the evaluation's batches may have held a bad token id: their check, read now
  runtime_of().check_device_errors(self.device)
  if not scores then return nil end
  self.last_eval = scores
  self.evals[#self.evals + 1] = { step = self.step, scores = scores }
  if self.step == 0 then self.first_eval = scores end
  if self.tb then self.tb:eval(self.step, scores) end
  if self.pending and self.pending.step == self.step then self.pending.eval = scores end
  if self.progress then self.progress:eval(self, scores) end
  if self.hooks.on_eval then self:call_hook("on_eval", scores) end
  return scores
end

-- ---------------------------------------------------------------- checkpoints
local MODEL_FILES = { "config.json", "tokenizer.json", "vocab.txt", "tokenizer_config.json", "special_tokens_map.json",
  "modules.json", "sentence_bert_config.json", "config_sentence_transformers.json", "1_Pooling/config.json",
  "sentencepiece.bpe.model" }

-- A safetensors write error of the C writer ("PATH: writing failed: `call`: strerror (...)"
-- or "PATH: cannot create PATH.tmp: strerror; ...") re-raised as trainer.outputs'
-- write_failed, which names the free space; any other error is re-raised as it is.
local function raise_write_error(err)
  local msg = errors.message(err)
  local path, why = msg:match("^(.-): writing failed: `[^`]*`: ([^(]-) %(")
  if not path then path, why = msg:match("^(.-): cannot create [^:]*: ([^;]*);") end
  if path then outputs.write_failed(path, why) end
  error(err, 0)
end

-- safetensors.save into a checkpoint (the C writer fsyncs and leaves no PATH.tmp behind).
local function save_tensors(path, list, meta)
  local inj = outputs.injected(path)
  if inj then outputs.write_failed(path, inj) end
  local ok, err = pcall(require("trainer.core.safetensors").save, path, list, meta)
  if not ok then raise_write_error(err) end
end

-- Writes checkpoint-STEP/ (atomically), prunes to the last save.keep. Returns the folder.
-- Built in checkpoint-STEP.tmp/: every file is fsync'ed as it is written, then the folder
-- (and 1_Pooling/) before the rename, then out/ after it, so that a checkpoint that has
-- its final name is whole and survives a crash. A failure removes the .tmp folder.
function Run:save()
  self:read_scalars()   -- a checkpoint's steps are checked (finite) and its last_loss known
  local dir = ("%s/checkpoint-%d"):format(self.out, self.step)
  if not self:writes_outputs() then self.last_checkpoint = dir return dir end   -- rank 0 writes it
  local tmp = dir .. ".tmp"
  outputs.remove_tree(tmp)
  outputs.mkdir(tmp)
  local ok, err = pcall(self.write_checkpoint, self, tmp)
  if not ok then outputs.remove_tree(tmp) error(err, 0) end
  outputs.remove_tree(dir)
  local rok, rerr = os.rename(tmp, dir)
  if not rok then
    outputs.remove_tree(tmp)
    errors.user("%s: cannot rename the checkpoint into place (%s)", dir, tostring(rerr))
  end
  outputs.sync(self.out)
  self.last_checkpoint = dir
  if self.recipe.save.keep then outputs.prune(self.out, self.recipe.save.keep) end
  if self.progress then self.progress:saved(self, dir) end
  if self.hooks.on_save then self:call_hook("on_save", dir) end
  return dir
end

-- The files of one checkpoint, written into the folder tmp.
function Run:write_checkpoint(tmp)
  self:sync_scaler()   -- the scaler's and the optimizer's numbers as of this step
  local recipe = self.recipe
  local optim = require("trainer.train.optim")
  local synced = { tmp }
  if recipe.lora then
    local lora = require("trainer.train.lora")
    local ok, err = pcall(lora.save, self.model, tmp, recipe.lora, recipe.model.from or recipe.model.tokenizer)
    if not ok then raise_write_error(err) end
  else
    save_tensors(tmp .. "/model.safetensors", require("trainer.models").state_list(self.model), { format = "pt" })
    local src = recipe.model.from or recipe.model.tokenizer
    for _, f in ipairs(MODEL_FILES) do
      if src and outputs.exists(src .. "/" .. f) then
        if f:find("/") then
          local sub = tmp .. "/" .. f:match("^(.*)/")
          outputs.mkdir(sub)
          synced[#synced + 1] = sub
        end
        outputs.copy_file(src .. "/" .. f, tmp .. "/" .. f)
      end
    end
  end
  local loss_params = {}
  for name, p in self.loss:parameters() do loss_params[#loss_params + 1] = { name, p.value } end
  if #loss_params > 0 then save_tensors(tmp .. "/loss.safetensors", loss_params) end
  local tensors, ometa = optim.flatten(self.optimizer:state())
  -- the run's peaks and wall time so far, so that a resumed run's summary covers every part
  self:merge_peaks(memory.stats(self.device))
  local meta = {
    peaks = self.peaks, wall_time = self:wall_time(),
    step = self.step, micro = self.micro, epoch = self.epoch, tokens = self.tokens, train_time = self.train_time,
    data = self.loader:state(), scaler = self.scaler:state(), rng = { seed = self.model.rng.seed, step = self.micro },
    optimizer = ometa, total_steps = self.total_steps, last_loss = self.last_loss,
    first_eval = self.first_eval, last_eval = self.last_eval,
    dist = self.dist and self.dist:checkpoint_meta(self.loader:state()) or nil,
  }
  local list = {}
  for k, v in pairs(tensors) do list[#list + 1] = { k, v } end
  table.sort(list, function(a, b) return a[1] < b[1] end)
  local raw = tmp .. "/trainer_state.safetensors"
  if #list == 0 then
    -- safetensors needs a tensor: a 1-element marker keeps the format uniform
    T.scope(function() save_tensors(raw, { { "marker", T.zeros({ 1 }) } }, { trainer_state = json.encode(meta) }) end)
  else
    save_tensors(raw, list, { trainer_state = json.encode(meta) })
  end
  outputs.gzip_file(raw, tmp .. "/trainer_state")
  os.remove(raw)
  for i = #synced, 1, -1 do outputs.sync(synced[i]) end
end

-- The checkpoint folder named by recipe.resume ("latest" or a path).
function M.find_resume(recipe)
  local r = recipe.resume
  if r == "latest" then
    local list = outputs.checkpoints(recipe.out)
    if #list == 0 then
      errors.user("resume = \"latest\": %s holds no checkpoint-STEP folder; run without resume (resume=nil) or "
        .. "name a checkpoint folder", recipe.out)
    end
    return list[#list].dir
  end
  if not native.is_dir(r) or not outputs.exists(r .. "/trainer_state") then
    errors.user("resume = %q: not a checkpoint folder (one holds trainer_state); use \"latest\" or a path such "
      .. "as %s/checkpoint-200", r, recipe.out)
  end
  return r
end

function Run:load_checkpoint(dir)
  local st = require("trainer.core.safetensors")
  local optim = require("trainer.train.optim")
  local recipe = self.recipe
  if recipe.lora then
    require("trainer.train.lora").load(self.model, dir)
  else
    local r = st.load(dir .. "/model.safetensors")
    require("trainer.models").load_weights(self.model, r, { on_warning = function() end })
    r:close()
  end
  if outputs.exists(dir .. "/loss.safetensors") then
    local r = st.load(dir .. "/loss.safetensors")
    local runtime = require("trainer.core.runtime")
    for name, p in self.loss:parameters() do
      T.scope(function()
        local t = r:tensor(name, { dtype = p.value:dtype(), device = self.device })
        runtime.check(require("trainer.core.ffi").tr_tensor_copy(runtime.ctx, p.value:ptr(), t:ptr()),
          "resume: " .. dir .. "/loss.safetensors")
      end)
    end
    r:close()
  end
  -- bounded, typed and checked against the model before any of it is used
  -- (the state's tensors are copied into the optimizer's and freed with the scope)
  local meta = T.scope(function()
    local meta, tensors = require("trainer.train.trainer_state").read(dir, { optimizer = self.optimizer,
      batches_per_epoch = self.batches_per_epoch, device = self.device, scratch = self.out,
      rank = self.dist and self.dist.rank, world = self.dist and self.dist.size or 1 })
    self.optimizer:load_state(optim.unflatten(tensors, meta.optimizer))
    return meta
  end)
  self.step, self.micro, self.epoch = meta.step, meta.micro, meta.epoch or 0
  self.tokens, self.train_time = meta.tokens or 0, meta.train_time or 0
  self.wall_before = meta.wall_time or 0
  if meta.peaks then self:merge_peaks(meta.peaks) end
  self.last_loss, self.first_eval, self.last_eval = meta.last_loss, meta.first_eval, meta.last_eval
  self.model.rng.step = meta.rng.step
  if self.scaler.load_state and meta.scaler and next(meta.scaler) then self.scaler:load_state(meta.scaler) end
  self.loader:restore(meta.data)
  self.resumed_from = dir
  self.last_checkpoint = dir
end

-- ---------------------------------------------------------------- hooks
-- Calls hooks[name](self, ...): an error inside it is the recipe's (trainer.train.user_code).
function Run:call_hook(name, ...)
  return require("trainer.train.user_code").call("hooks." .. name, self.hooks[name], self, ...)
end

-- ---------------------------------------------------------------- end
function Run:done()
  return self.step >= self.total_steps or self:stop_requested()
end

function Run:stop_requested()
  if self.stop_signal then return true end
  if self.dist then return false end   -- under mpirun: only the signal all ranks agreed on (dist_reduce)
  local sig = native.stop_requested and native.stop_requested()
  if sig then self.stop_signal = sig end
  return sig and true or false
end

-- Folds peaks into the run's peaks (self.peaks): an allocator snapshot's (peak_allocated,
-- peak_reserved, peak_by_tag), or a checkpoint's record of the run's (allocated, reserved,
-- by_tag).
function Run:merge_peaks(s)
  local p = self.peaks or { allocated = 0, reserved = 0, by_tag = {} }
  self.peaks = p
  p.allocated = math.max(p.allocated, s.peak_allocated or s.allocated)
  p.reserved = math.max(p.reserved, s.peak_reserved or s.reserved)
  local by_tag = s.peak_by_tag or s.by_tag
  for _, tag in ipairs(memory.tags) do p.by_tag[tag] = math.max(p.by_tag[tag] or 0, by_tag[tag] or 0) end
end

-- Seconds of wall time of the whole run: this process's since it was built, plus those of
-- the parts before it up to the checkpoint it resumed from.
function Run:wall_time()
  return self.wall_before + (M.now() - self.started)
end

-- summary.json: the final figures.
function Run:summary()
  self:sync_scaler()
  self:merge_peaks(memory.stats(self.device))
  local s = { peak_allocated = self.peaks.allocated, peak_reserved = self.peaks.reserved }
  local peak_by_tag = {}
  for _, tag in ipairs(memory.tags) do peak_by_tag[tag] = self.peaks.by_tag[tag] or 0 end
  return {
    steps = self.step, total_steps = self.total_steps, final_loss = self.last_loss or json.null,
    tokens_per_s = self.train_time > 0 and self.tokens / self.train_time or 0, tokens = self.tokens,
    train_time_s = self.train_time, wall_time_s = self:wall_time(),
    peak_allocated = s.peak_allocated, peak_reserved = s.peak_reserved, peak_by_tag = peak_by_tag,
    eval = self.last_eval or {}, eval_start = self.first_eval, epoch = self:epochs_done(),
    skipped_steps = self.scaler.skipped or 0, precision = self.recipe.precision, device = self.device,
    data = self.train_ds:summary(), eval_data = self.eval_summary,
    resumed_from = self.resumed_from, last_checkpoint = self.last_checkpoint,
    stopped_by_signal = self.stop_signal and true or nil,
    distributed = self.dist and self.dist:summary(s.peak_allocated, s.peak_reserved) or nil,
  }
end

function Run:finish()
  self:read_scalars()
  self:flush_metrics()
  if self.metrics then self.metrics:close() end   -- checked: a failed close is a failed write
  if self.tb then self.tb:close() end
  local s = self:summary()
  if not self:writes_outputs() then return s end
  outputs.write_atomic(self.out .. "/summary.json", json.encode(s, 2) .. "\n")
  return s
end

-- Releases the deferred values not read yet (an error path: they will never be).
function Run:free_unread()
  for _, rec in ipairs(self.unread or {}) do
    deferred.free(rec.value); deferred.free(rec.norm)
    if rec.seen then deferred.free(rec.seen.flag); deferred.free(rec.seen.scale) end
  end
  self.unread = {}
end

function Run:free()
  self:free_unread()
  if self.scaler and self.scaler.free then self.scaler:free() end
  if self.found_flag then self.found_flag:free() self.found_flag = nil end
  if self.metrics then self.metrics:close(true) end
  if self.tb then self.tb:close() end
  if self.loader then self.loader:close() end
  if self.train_ds then self.train_ds:close() end
  if self.optimizer then self.optimizer:free() end
  if self.loss then self.loss:free() end
  if self.model then self.model:free() end
  if self.tokenizer then self.tokenizer:free() end
  if self.feed then self.feed:free() self.feed = nil end
end

return M
