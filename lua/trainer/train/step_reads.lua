-- trainer.train.step_reads: what the steps leave on the device, read back once per logged step.
-- On a device (or with opts.lazy_scalars) a step's loss, clip norm and fp16 found-inf flag and
-- scale are trainer.train.deferred values kept in t.unread; read_scalars reads them (the one
-- wait for the device) at the logged steps (log.every, the first and the last), before an
-- evaluation, a save, an on_step hook and the summary, fills their metrics rows and checks
-- them: a non-finite loss or norm stops the run naming the step it happened at.
-- flush_metrics writes the rows whose loss is known, in step order. On the CPU the values are
-- numbers already and nothing waits.
local deferred = require("trainer.train.deferred")

local Run = {}   -- methods of the run (trainer.train.run gathers them)

local function finite(x) return x == x and x ~= math.huge and x ~= -math.huge end
local function runtime_of() return require("trainer.core.runtime") end

-- Frees what one step left unread (its loss, norm, and fp16 flag and scale).
local function free_record(rec)
  deferred.free(rec.value); deferred.free(rec.norm)
  if rec.seen then deferred.free(rec.seen.flag); deferred.free(rec.seen.scale) end
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
    for j = i, #list do free_record(list[j]) end
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

-- Reads the device loss scale (fp16 on a device) and takes the skips the optimizer made on the
-- device out of the optimizer's step counts: before a checkpoint, the summary, a log line.
function Run:sync_scaler()
  local sc = self.scaler
  if not sc.dev then return end
  local n = sc:read()
  if n > 0 then self.optimizer:undo_steps(n) end
  sc.skipped_known = sc.skipped
end

-- Releases the deferred values not read yet (an error path: they will never be).
function Run:free_unread()
  for _, rec in ipairs(self.unread or {}) do free_record(rec) end
  self.unread = {}
end

return Run
