-- trainer.nn.Checkpoint: gradient checkpointing of a segment of encoder layers.
--
--   y  = ckpt:forward(x, mask)   -- runs the layers keeping NOTHING inside them; keeps only
--                                   a view of x (and of mask) and the rng key of this forward
--   dx = ckpt:backward(dy)       -- re-runs the forward with grad on, under the rng key saved
--                                   by the forward, then back-propagates through the layers
--
-- Invariants:
--   * the re-run sees the same input, mask and dropout key (seed, step) as the forward, so
--     every activation, dropout mask and gradient is bitwise what the plain layers produce
--     (the layers are the same objects, called the same way, in the same order);
--   * the children are registered under their own names ("layer.N") and the container is
--     added to its parent transparently, so parameter names do not change;
--   * with grad disabled (eval, or an outer no-grad pass such as GradCache's) forward is
--     the plain forward and keeps nothing at all;
--   * what the layers keep during the re-run is released by their own backward, so at most
--     one segment's activations are alive at a time, plus every segment's input;
--   * the re-run's last layer, where it has keep_for_backward (a pre-norm family's: ModernBERT),
--     keeps what its backward reads and skips what only its output needed;
--   * a segment marked keeps_forward (the encoder's last, trainer.train.grad_checkpoint) runs
--     its forward with its layers keeping what they keep, and its backward runs no re-run:
--     its backward starts as the forward ends (the head and the loss between), when the
--     re-run would have made the same tensors beside the same segment inputs. The same peak
--     and bits, one segment's forward less per step.
local Module = require("trainer.nn.module")
local packing = require("trainer.nn.packing")

local Checkpoint = Module:extend("Checkpoint")

-- layers: list of modules with forward(x, mask) -> new tensor and backward(dy) -> new dx;
-- names: their child names (e.g. "layer.3"); rng: the model's shared { seed, step } table.
function Checkpoint.new(layers, names, rng)
  local self = Checkpoint:create()
  self.layers, self.rng = {}, rng or { seed = 0, step = 0 }
  for i, layer in ipairs(layers) do
    self.layers[i] = self:add_module(names[i], layer, false)
  end
  return self
end

-- ---------------------------------------------------------------- running
-- rows (trainer.nn.row_pick): given to the last layer (the encoder's last segment).
-- for_backward (the backward's re-run): the last layer, where it has keep_for_backward, keeps
-- what its backward reads without making its output, which the next segment holds already;
-- nil is returned then.
local function run(self, x, mask, rows, for_backward)
  local h = x:reshape(x:shape())
  local n = #self.layers
  for i, layer in ipairs(self.layers) do
    local ok, nh
    if i == n and for_backward and layer.keep_for_backward then
      ok, nh = pcall(layer.keep_for_backward, layer, h, mask, rows)
      if ok then nh = nil end
    else
      -- prev: the layer whose output h is, within the segment (a layer may remake its input from it)
      ok, nh = pcall(layer.forward, layer, h, mask, i == n and rows or nil, self.layers[i - 1])
    end
    h:free()
    if not ok then error(nh, 0) end
    h = nh
  end
  return h
end

local function set_inner_grad(self, on)
  for _, layer in ipairs(self.layers) do layer:set_grad_enabled(on) end
end

function Checkpoint:forward(x, mask, rows)
  if not self.grad_enabled then return run(self, x, mask, rows) end
  if self.keeps_forward then
    local y = run(self, x, mask, rows)
    self.saved.kept = true
    return y
  end
  set_inner_grad(self, false)
  local ok, y = pcall(run, self, x, mask, rows)
  set_inner_grad(self, true)
  if not ok then error(y, 0) end
  self:keep("x", x)
  if packing.is(mask) then self.saved.mask = mask   -- the model owns (and closes) a packing
  elseif mask then self:keep("mask", mask) end
  self.saved.rng = { seed = self.rng.seed, step = self.rng.step }   -- numbers: the loop may move on
  self.saved.rows = rows
  return y
end

-- want_dx = false: the segment's input gradient is not needed (see Encoder:backward); nil then.
function Checkpoint:backward(dy, want_dx)
  if self.saved.kept then
    self.saved.kept = nil
  else
    local x = self:saved_tensor("x")
    local mask, key, rows = self.saved.mask, self.saved.rng, self.saved.rows
    local seed, step = self.rng.seed, self.rng.step
    self.rng.seed, self.rng.step = key.seed, key.step
    local ok, y = pcall(run, self, x, mask, rows, true)
    self.rng.seed, self.rng.step = seed, step
    self:release()
    if not ok then self:clear_saved(); error(y, 0) end
    if y then y:free() end
  end
  local g = dy:reshape(dy:shape())
  for i = #self.layers, 1, -1 do
    local ok2, ng = pcall(self.layers[i].backward, self.layers[i], g, i > 1 or want_dx)
    g:free()
    if not ok2 then self:clear_saved(); error(ng, 0) end
    g = ng
  end
  return g
end

return Checkpoint
