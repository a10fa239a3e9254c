-- trainer.train.train_step: one optimizer step of a run, t:train_step(), the body of the
-- training loop (trainer.train.loop): batch.accumulate micro-batches (forward, loss, backward:
-- trainer.train.step), then the update (unscale, clip, the optimizer; on a device with no host
-- read: device_update), the step's metrics row and the on_step hook.
-- The dropout key's step is the count of micro-batches before this one; an optimizer step
-- never spans two epochs. A non-finite loss or gradient norm stops the run naming its step
-- and the last good checkpoint (failure); on a device that check waits for the step's read
-- (trainer.train.step_reads). Under mpirun the micro-batch and the agreement after it are
-- trainer.train.dist_step's.
local T = require("trainer.core.tensor")
local errors = require("trainer.core.errors")
local memory = require("trainer.core.memory")
local deferred = require("trainer.train.deferred")
local sys = require("trainer.core.sys")

local Run = {}   -- methods of the run (trainer.train.run gathers them)

local function finite(x) return x == x and x ~= math.huge and x ~= -math.huge end

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

-- Forward, loss, backward of one batch (trainer.step.micro); gradients accumulate into
-- param.grad multiplied by `scale`. Returns the loss value and the number of non-pad tokens.
-- The dropout key's step is the count of micro-batches before this one.
function Run:micro_step(batch, scale)
  -- under mpirun each rank draws its own dropout masks (micro * N + rank; micro for one)
  self.model.rng.step = self.dist and (self.micro * self.dist.size + self.dist.rank) or self.micro
  self.micro = self.micro + 1
  -- the batch's dataset's own loss (data.train.NAME.loss), else the recipe's
  local loss, lspec = self.loss, self.recipe.loss
  local own = batch.dataset and self.losses and self.losses[batch.dataset]
  if own then loss, lspec = own, self:batch_dataset(batch).loss_spec end
  return require("trainer.train.step").micro({ model = self.model, loss = loss, tokenizer = self.tokenizer,
    batch = batch, max_length = self.max_length, scale = scale, scale_by = self.scale_by,
    cached = lspec.cached, feed = self.feed,
    mini_batch = lspec.mini_batch, ntexts = self:batch_dataset(batch).ntexts,
    prompts = self:column_prompts(batch.dataset) })
end

-- The dataset a batch came from (one of several: batch.dataset names it).
function Run:batch_dataset(batch)
  if self.train_ds.multi then return self.train_ds:part(batch.dataset).ds end
  return self.train_ds
end

-- data.prompts (or a dataset's prompts) as a list by text column (trainer.models.prompts.of_columns),
-- made once per dataset; name: the dataset of several, nil for one.
function Run:column_prompts(name)
  self._column_prompts = self._column_prompts or {}
  local key = name or ""
  if self._column_prompts[key] == nil then
    local ds, spec, what = self.train_ds, self.recipe.data and self.recipe.data.prompts, "data.prompts"
    if name then
      ds = self.train_ds:part(name).ds
      spec, what = ds.prompts_spec, ("data.train.%s.prompts"):format(name)
    end
    self._column_prompts[key] = spec ~= nil and require("trainer.models.prompts").of_columns(spec, ds.columns,
      ds.ntexts or #ds.columns, what) or false
  end
  return self._column_prompts[key] or nil
end

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
  local t0 = sys.now()
  self.model:train()
  -- the gradients are freed, not zeroed: none is held through the forward (the backward makes
  -- them); under mpirun the all-reduce lists them before the last backward, so they stay
  self.optimizer:zero_grad({ free = not self.dist })
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
  local dt = math.max(sys.now() - t0, 1e-9)
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

-- Completed epochs as a fraction, as the Hugging Face Trainer logs "epoch": the data
-- cursor's epoch plus the share of its batches already used (0.5 halfway, 1.0 after one
-- whole pass), for metrics.jsonl and summary.json.
function Run:epochs_done()
  local per, ld = self.batches_per_epoch, self.loader
  if not per or per <= 0 or not ld then return self.epoch end
  return ld.epoch + math.min(ld.position, per) / per
end

return Run
