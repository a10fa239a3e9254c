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
--   * a packing owns a view of the mask and its row index, freed by close() (it has no
--     free(), so a module's release() never frees one it merely saved). The model that
--     made it closes it after its backward, or at the end of a forward without grad.
-- gather and scatter are the embedding lookup and its scatter-add (ops.embedding*), which
-- every backend has.
local ffi = require("ffi")
local T = require("trainer.core.tensor")
local ops = require("trainer.core.ops")

local M = {}
local Packing = {}
Packing.__index = Packing

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
  local rows, segs = {}, {}
  local prev = -2
  for i = 1, B * Tn do
    if v[i] ~= 0 then
      local r = i - 1
      rows[#rows + 1] = r
      if r == prev + 1 then
        segs[#segs].n = segs[#segs].n + 1
      else
        segs[#segs + 1] = { first = #rows - 1, n = 1, padded = r }
      end
      prev = r
    end
  end
  local N = #rows
  if N == 0 or N == B * Tn then return nil end
  local self = setmetatable({ B = B, T = Tn, N = N, nseg = #segs }, Packing)
  self.rows = T.from_table(rows, { dtype = "i64", tag = "activations" })
  self.mask = mask:reshape(shape)
  -- the stream offsets need C; kept per width (one model has one, but a packing is cheap to share)
  self.seg_rows = segs
  self.segs_by_width = {}
  return self
end

-- The segment table for rows of width C: int64_t[3 * nseg] (packed first row, rows, padded
-- element offset), made once per width.
function Packing:segments(C)
  local t = self.segs_by_width[C]
  if not t then
    t = ffi.new("int64_t[?]", 3 * self.nseg)
    for s, g in ipairs(self.seg_rows) do
      t[3 * s - 3], t[3 * s - 2], t[3 * s - 1] = g.first, g.n, g.padded * C
    end
    self.segs_by_width[C] = t
  end
  return t
end

local function width(x) local s = x:shape() return s[#s] end

-- [B, T, ...] (any shape of B * T rows: [B * T, C], [B, T, H, D]) -> the real rows [N, C],
-- C = the elements of one row; a new tensor.
function Packing:gather(x)
  local C = x:numel() / (self.B * self.T)
  local x2 = x:reshape({ self.B * self.T, C })
  local ok, out = pcall(ops.embedding, self.rows, x2)
  x2:free()
  if not ok then error(out, 0) end
  return out
end

-- [N, C] -> [B, T, C] with the padding rows 0, a new tensor.
function Packing:scatter(x)
  local C = width(x)
  local out = T.zeros({ self.B * self.T, C }, { dtype = x:dtype(), device = x:device(), tag = "activations" })
  local ok, err = pcall(ops.embedding_backward, out, x, self.rows, -1)
  if not ok then out:free(); error(err, 0) end
  local y = out:reshape({ self.B, self.T, C })
  out:free()
  return y
end

-- Dropout of packed x [N, C] with the padded layout's masks (a new tensor).
function Packing:dropout(x, p, key)
  return ops.dropout_segments(x, p, key, self:segments(width(x)), self.nseg)
end

function Packing:dropout_backward(dy, p, key)
  return ops.dropout_segments_backward(dy, p, key, self:segments(width(dy)), self.nseg)
end

function Packing:close()
  if self.rows then self.rows:free(); self.rows = nil end
  if self.mask then self.mask:free(); self.mask = nil end
end

return M
