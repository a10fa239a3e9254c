-- trainer.nn.row_pick: the first row of every sequence, for an encoder's last layer when what
-- reads the last hidden state reads nothing else (a classifier's pooler or head, CLS pooling).
-- Past the attention core every op of a layer works row by row (the output dense, dropout,
-- residual, LayerNorm, feed-forward), so the last layer runs that part on these B rows only,
-- while its keys and values still cover every row: at 128 tokens a row this drops nearly all
-- of the last layer's feed-forward and output products, forward and backward. The attention
-- op itself computes each sequence's first query only (its query_rows = 1: the other rows'
-- output is 0, and their gradient, 0 here, is not read); the projections still run on every
-- row.
--
--   local rp = row_pick.first(B, T, pk)   -- pk: the packing of the layer input's rows, or nil
--   local y  = rp:gather(x)               -- x in the layer input's layout -> [B, C] (new)
--   local d  = rp:scatter(y, shape)       -- [B, C] -> the layer input's shape, other rows 0 (new)
--   rp:dropout(x, p, key)                 -- and dropout_backward: the padded layout's masks
--   rp:close()
--
-- Invariants:
--   * the picked rows hold exactly what the full layer computes on them: the same row-wise
--     ops on the same inputs, and each dropout element keeps the bit of its PADDED index
--     (ops.dropout_segments), so masks, checkpoint replays and LoRA dropout replays are the
--     full layer's;
--   * the layer input's layout is the padded [B, T, ...] one, or the packed real rows of a
--     packing (trainer.nn.packing), whose row of each sequence's first token it picks;
--   * it duck-types a packing where modules take one for their dropout masks (Dropout,
--     LoraLinear, nn.dropout_add_norm): dropout and dropout_backward only.
local ffi = require("ffi")
local ops = require("trainer.core.ops")
local packing = require("trainer.nn.packing")

local M = {}
local RowPick = {}
RowPick.__index = RowPick

function M.is(x) return getmetatable(x) == RowPick end

-- The packed row of padded row r under packing pk, or nil when r is padding.
local function packed_row(pk, r)
  for s = 0, pk.nseg - 1 do
    local first, rows, padded = pk.segs[3 * s], pk.segs[3 * s + 1], pk.segs[3 * s + 2]
    if r >= padded and r < padded + rows then return tonumber(first + (r - padded)) end
  end
  return nil
end

-- The first row of each of B sequences of T rows, the layer input padded [B, T, ...] (pk nil)
-- or packed by pk. nil when some sequence's first row is padding (a left-padded batch): the
-- caller then runs the layer whole.
function M.first(B, T, pk)
  local src = ffi.new("int64_t[?]", 3 * B)
  local pad = ffi.new("int64_t[?]", 3 * B)
  for b = 0, B - 1 do
    local r = b * T
    local s = r
    if pk then
      s = packed_row(pk, r)
      if not s then return nil end
    end
    src[3 * b], src[3 * b + 1], src[3 * b + 2] = b, 1, s
    pad[3 * b], pad[3 * b + 1], pad[3 * b + 2] = b, 1, r
  end
  return setmetatable({ B = B, T = T, src = src, pad = pad }, RowPick)
end

-- x: the layer input's layout (rows of its last dimension's width) -> [B, width] (new).
function RowPick:gather(x)
  local s = x:shape()
  return packing.gather_segments(x, { self.B, s[#s] }, self.src, self.B, "row_pick:gather")
end

-- y [B, C] -> a new tensor of `shape` (the layer input's, a table) with y in the picked rows
-- and 0 in every other.
function RowPick:scatter(y, shape)
  return packing.scatter_segments(y, shape, self.src, self.B, "row_pick:scatter")
end

function RowPick:dropout(x, p, key)
  return ops.dropout_segments(x, p, key, self.pad, self.B)
end

function RowPick:dropout_backward(dy, p, key)
  return ops.dropout_segments_backward(dy, p, key, self.pad, self.B)
end

-- Nothing to free (the tables are plain memory); kept for the packing's protocol.
function RowPick:close() end

return M
