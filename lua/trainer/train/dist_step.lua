-- trainer.train.dist_step: the parts of an optimizer step under mpirun (trainer.dist, DDP's
-- semantics): each rank's share of a global micro-batch, and after the micro-batches the
-- gradients averaged and the loss, tokens, a non-finite loss and a stop signal agreed, so
-- that every rank takes the same decision after the same step.
local sys = require("trainer.core.sys")
local deferred = require("trainer.train.deferred")

local Run = {}   -- methods of the run (trainer.train.run gathers them)

local function finite(x) return x == x and x ~= math.huge and x ~= -math.huge end

-- Under mpirun, one micro-batch: this rank's rows of the global micro-batch, its gradient
-- weighted by its share (trainer.dist). Returns its part of the global batch's loss (the
-- sum over ranks is the loss), and its tokens. A non-finite loss is kept for dist_reduce
-- (0 is returned), so that every rank fails at the same step instead of this one alone.
-- On the step's last micro-batch (last) the gradient all-reduce begins before its backward,
-- and buckets start as the encoder layers finish (DDP's overlap; not with GradCache or
-- adaptive_layer, whose several backwards per micro-batch make no gradient final before the
-- last); accumulation micro-batches before it reduce nothing.
function Run:dist_micro_step(batch, scale, last)
  local dist = self.dist
  local loss = self.recipe.loss
  local several = loss.cached or loss.name == "adaptive_layer"
  if last then dist:begin_grads(self.params, not several and self.model or nil) end
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
  local sig = sys.stop_requested()
  local agreed = dist:agree({ sum, ntok, bad and 1 or 0, sig and 1 or 0, sig or 0 })
  if agreed[3] > 0 then
    dist:agree_to_fail()
    self:failure(bad and ("the loss is %s"):format(bad) or "the loss is not finite on another rank")
  end
  if agreed[4] > 0 then self.stop_signal = self.stop_signal or sig or math.floor(agreed[5] / agreed[4]) end
  return agreed[1], agreed[2]
end

return Run
