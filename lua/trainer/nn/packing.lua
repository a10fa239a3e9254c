-- trainer.nn.packing: the encoder layers without the padding. A batch of short texts padded
-- to its longest is mostly padding (STS-B pairs: ~460 real tokens of ~1100 padded rows), and
-- every linear layer, layernorm, GELU, dropout and residual add of the padded rows is wasted
-- work: their outputs are masked out of attention and pooling. A packing lists the real rows
-- of the padded [B, T, C] layout; the encoder runs on them stored back to back as [N, C].
--
--   local pk = packing.from_mask(mask)        -- nil when there is no padding to skip
--   local xp = pk:gather(x)                   -- [B, T, C] -> [N, C] (a new tensor)
--   local y  = pk:scatter(xp)                 -- [N, C] -> [B, T, C], padding rows 0 (new)
--   local d  = pk:dropout(xp, p, key)         -- the padded layout's masks (new)
--   pk.lengths, pk.prefix                     -- real rows per batch row; true when each row's
--                                             -- real tokens lead it (ops.attention_packed)
--   pk:close()                                -- frees its index and mask view
--
-- Invariants:
--   * results equal the padded computation's on every real row: per-row ops see the same
--     rows; attention runs on the padded layout (pk:scatter before it, pk:gather after);
--     dropout draws each real element's keep bit from its PADDED index (one stream offset
--     per run of consecutive real rows, core/ops/ops_row_segments.h), so the masks, and with
--     them checkpoint replays and the LoRA dropout replay, are the padded run's;
--   * padding rows of a scattered tensor are exactly 0 (finite keys and values for the
--     masked attention; zero gradients, as the padded path's masked rows had);
--   * a packing owns a view of the mask (and its segment table, plain memory), freed by
--     close() (it has no free(), so a module's release() never frees one it merely saved).
--     The model that made it closes it after its backward, or at the end of a forward
--     without grad.
-- gather, scatter and dropout are one device-dispatched copy, fill or dropout per run of
-- rows (core/ops/ops_row_segments.h).
local ffi = require("ffi")
local C = require("trainer.core.ffi")
local T = require("trainer.core.tensor")
local ops = require("trainer.core.ops")
local runtime = require("trainer.core.runtime")

local M = {}
local Packing = {}
Packing.__index = Packing

-- out is freed and the runtime's error raised when status is not 0.
local function fill(out, status, what)
  if status ~= 0 then out:free(); runtime.raise(what) end
end

function M.is(x) return getmetatable(x) == Packing end

-- A packing of mask [B, T] (nonzero = real token) on the CPU, or nil: no mask, a mask with
-- no padding (nothing to skip) or no real token, or a device other than the CPU (the GPU
-- keeps the padded path until tests/gpu has run this one there).
function M.from_mask(mask)
  if not T.is_tensor(mask) or mask:device() ~= "cpu" then return nil end
  local shape = mask:shape()
  if #shape ~= 2 then return nil end
  local B, Tn = shape[1], shape[2]
  local v = mask:values()
  local runs = {}   -- { packed first row, rows, padded first row }
  -- lengths: real rows per batch row, for ops.attention_packed; prefix: every row's real
  -- tokens come first, the masks tokenizers make (a run may span batch rows: a full row and
  -- the next one's start, so the lengths are counted per row, not per run)
  local len, prefix = ffi.new("int64_t[?]", B), true
  local N, prev = 0, -2
  for i = 1, B * Tn do
    if v[i] ~= 0 then
      local r = i - 1
      if r == prev + 1 then runs[#runs][2] = runs[#runs][2] + 1
      else runs[#runs + 1] = { N, 1, r } end
      N, prev = N + 1, r
      local b = math.floor(r / Tn)
      if len[b] ~= r - b * Tn then prefix = false end
      len[b] = len[b] + 1
    end
  end
  if N == 0 or N == B * Tn then return nil end
  local self = setmetatable({ B = B, T = Tn, N = N, nseg = #runs, prefix = prefix }, Packing)
  self.lengths = { ptr = len, n = B, T = Tn }
  self.segs = ffi.new("int64_t[?]", 3 * #runs)
  for s, g in ipairs(runs) do self.segs[3 * s - 3], self.segs[3 * s - 2], self.segs[3 * s - 1] = g[1], g[2], g[3] end
  self.mask = T.keep(mask:reshape(shape))   -- the packing's own view, freed by close()
  return self
end

-- A new tensor of `shape` holding the rows of x that the segment table segs (nseg runs of
-- (out row, rows, x row)) lists; what names the caller in an error. Also trainer.nn.row_pick's.
function M.gather_segments(x, shape, segs, nseg, what)
  local out = ops.new(shape, x)
  fill(out, C.tr_op_gather_segments(runtime.ctx, out:ptr(), x:ptr(), segs, nseg), what)
  return out
end

-- The inverse: a new tensor of `shape` with x's rows where segs puts them, 0 in every other.
function M.scatter_segments(x, shape, segs, nseg, what)
  local out = ops.new(shape, x)
  fill(out, C.tr_op_scatter_segments(runtime.ctx, out:ptr(), x:ptr(), segs, nseg), what)
  return out
end

-- [B, T, ...] (any shape of B * T rows: [B * T, C], [B, T, H, D]) -> the real rows [N, C],
-- C = the elements of one row; a new tensor.
function Packing:gather(x)
  return M.gather_segments(x, { self.N, x:numel() / (self.B * self.T) }, self.segs, self.nseg, "packing:gather")
end

-- [N, C] -> [B, T, C] with the padding rows 0, a new tensor.
function Packing:scatter(x)
  local s = x:shape()
  return M.scatter_segments(x, { self.B, self.T, s[#s] }, self.segs, self.nseg, "packing:scatter")
end

-- Dropout of packed x [N, C] with the padded layout's masks (a new tensor).
function Packing:dropout(x, p, key)
  return ops.dropout_segments(x, p, key, self.segs, self.nseg)
end

function Packing:dropout_backward(dy, p, key)
  return ops.dropout_segments_backward(dy, p, key, self.segs, self.nseg)
end

function Packing:close()
  if self.mask then self.mask:free(); self.mask = nil end
end

return M
