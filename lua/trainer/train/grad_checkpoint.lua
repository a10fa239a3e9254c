-- trainer.train.grad_checkpoint: gradient checkpointing of a model's encoder, from the recipe's
-- `checkpoint` key.
--
--   local checkpoint = require("trainer.train.grad_checkpoint")
--   checkpoint.apply(model, { segments = 2 })   -- or { every = k }, "auto", false
--   checkpoint.segments(6, "auto")              --> { 2, 2, 2 }   (layers per segment)
--
-- apply asks the model's family for its layer stacks (layer_stacks: each with a `layers` list,
-- trainer.models.registry) and regroups the layers into
-- trainer.nn.Checkpoint containers, one per segment; parameter names, the layers
-- themselves (LoRA-wrapped or not) and their order stay as they were. apply(model, false)
-- restores the plain layers, so the same model can run both ways. Applying twice
-- re-segments from the plain layers.
--
-- Segmentation of L layers:
--   { segments = n }  n contiguous segments as even as possible (the first L % n get one
--                     layer more); n larger than L is clamped to L (one layer each);
--   { every = k }     segments of k layers, the last one holding the rest;
--   "auto"            with a cost (the plan's bytes of one layer's recompute and of one
--                     segment boundary, trainer.plan), the even segmentation of least peak
--                     memory (M.best); without one, about sqrt(L) segments:
--                     n = max(1, floor(sqrt(L) + 0.5)).
--
-- Peak activation memory of a segmentation (M.peak): the backward runs the segments last to
-- first, and segment s's backward recomputes its layers while the inputs of segments 1..s are
-- still kept, so the peak is max over s of (s * boundary + size_s * per_layer - credit),
-- credit being what a segment's first layer keeps that is its input (already a boundary).
-- When the head reads the first rows only (trainer.nn.row_pick) the encoder's last layer keeps
-- last_credit less and its backward's transient is last_transient smaller, so the last
-- segment's peak is the larger of its backward at that layer and at the layer before it.
-- The even split puts the larger segments first, where fewer boundaries are alive.
local errors = require("trainer.core.errors")
local Checkpoint = require("trainer.nn.checkpoint")

local M = {}

local function is_int(v) return type(v) == "number" and v >= 1 and v == math.floor(v) end

-- The peak bytes of each segment's backward for segment sizes under cost { per_layer,
-- boundary, credit, last_credit, last_transient } (see the top), the backward's transient of
-- a layer not included: a list in the segments' order.
function M.segment_peaks(sizes, cost)
  local out = {}
  for s, n in ipairs(sizes) do
    local base = s * cost.boundary + n * cost.per_layer - (cost.credit or 0)
    if s == #sizes and (cost.last_credit or 0) + (cost.last_transient or 0) > 0 then
      base = base - cost.last_credit - (cost.last_transient or 0)
      if n > 1 then base = math.max(base, s * cost.boundary + (n - 1) * cost.per_layer - (cost.credit or 0)) end
    end
    out[s] = base
  end
  return out
end

-- The peak bytes of segment sizes under cost: the largest of M.segment_peaks.
function M.peak(sizes, cost)
  local worst = 0
  for _, v in ipairs(M.segment_peaks(sizes, cost)) do worst = math.max(worst, v) end
  return worst
end

-- The even segmentation of L layers with the least peak under cost (ties: fewer segments,
-- the fewer boundaries to keep), and that peak.
function M.best(L, cost)
  local best, best_peak
  for n = 1, L do
    local sizes = M.segments(L, { segments = n })
    local pk = M.peak(sizes, cost)
    if not best_peak or pk < best_peak then best, best_peak = sizes, pk end
  end
  return best, best_peak
end

-- The layer count of each segment for L layers, or nil when spec disables checkpointing.
-- cost (optional): what "auto" minimises (see the top).
function M.segments(L, spec, cost)
  if spec == nil or spec == false then return nil end
  local sizes = {}
  if spec == "auto" or spec == true then
    if cost then return (M.best(L, cost)) end
    return M.segments(L, { segments = math.max(1, math.floor(math.sqrt(L) + 0.5)) })
  elseif type(spec) == "table" and spec.segments ~= nil and spec.every == nil then
    if not is_int(spec.segments) then
      errors.user("checkpoint.segments must be a positive integer, got %s", tostring(spec.segments))
    end
    local n = math.min(spec.segments, L)
    local base, extra = math.floor(L / n), L % n
    for i = 1, n do sizes[i] = base + (i <= extra and 1 or 0) end
  elseif type(spec) == "table" and spec.every ~= nil and spec.segments == nil then
    if not is_int(spec.every) then
      errors.user("checkpoint.every must be a positive integer, got %s", tostring(spec.every))
    end
    local left = L
    while left > 0 do
      sizes[#sizes + 1] = math.min(spec.every, left)
      left = left - spec.every
    end
  else
    errors.user("checkpoint must be false, \"auto\", { segments = n } or { every = k }, got %s",
      type(spec) == "table" and "a table with neither (or both) of segments and every" or tostring(spec))
  end
  return sizes
end

-- The shared rng table of the layers (any Dropout's), else the model's.
local function rng_of(layers, model)
  for _, layer in ipairs(layers) do
    for _, m in layer:named_modules() do
      if m.rng then return m.rng end
    end
  end
  return model.rng
end

-- The model's layer stacks (its family's layer_stacks); none for a module no family built.
local function encoders(model)
  local family = require("trainer.models.registry").of_model(model)
  return family and family.layer_stacks(model) or {}
end

-- Restores an encoder's plain layers (undoes a previous apply).
local function unwrap(enc)
  if not enc._plain then return end
  local children = {}
  for i, entry in ipairs(enc._plain) do
    children[i] = entry
  end
  enc._children = children
  local layers = {}
  for i, entry in ipairs(enc._plain) do layers[i] = entry[2] end
  enc.layers = layers
  enc._plain = nil
end

-- Wraps the encoder layers of model per spec (see the top of the file). Returns the
-- segment sizes of the (last) encoder, or nil when checkpointing is off. A user error
-- when the model has no encoder and spec asks for checkpointing. planned (optional): the
-- sizes a plan chose for "auto" (trainer.plan's checkpoint_sizes), used when they cover
-- the encoder's layers.
function M.apply(model, spec, planned)
  local encs = encoders(model)
  local sizes
  for _, enc in ipairs(encs) do
    unwrap(enc)
    local total = 0
    for _, n in ipairs(planned or {}) do total = total + n end
    if planned and (spec == "auto" or spec == true) and total == #enc.layers then sizes = planned
    else sizes = M.segments(#enc.layers, spec) end
    if sizes then
      local plain = {}
      for i, entry in ipairs(enc._children) do plain[i] = entry end
      local rng = rng_of(enc.layers, model)
      local children, segs, k = {}, {}, 0
      for s, n in ipairs(sizes) do
        local layers, names = {}, {}
        for j = 1, n do
          k = k + 1
          layers[j], names[j] = plain[k][2], plain[k][1]
        end
        local ckpt = Checkpoint.new(layers, names, rng)
        ckpt.training, ckpt.grad_enabled = layers[1].training, layers[1].grad_enabled
        segs[s] = ckpt
        children[s] = { "", ckpt, false }
      end
      -- the last segment's backward follows its forward: it keeps what its layers keep
      -- rather than run them twice (trainer.nn.Checkpoint)
      segs[#segs].keeps_forward = true
      -- an encoder's children after its layers stay (MPNet's relative_attention_bias)
      for i = k + 1, #plain do children[#children + 1] = plain[i] end
      enc._plain, enc._children, enc.layers = plain, children, segs
    end
  end
  if sizes == nil and spec and #encs == 0 then
    errors.user("checkpoint = %s: this model has no encoder layers to checkpoint; set checkpoint = false",
      type(spec) == "table" and "{ ... }" or tostring(spec))
  end
  return sizes
end

return M
