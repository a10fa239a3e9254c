-- trainer.train.batch_feed: a training micro-batch's way to the device without a host wait
-- over core/cuda_device/batch_feed.h. The tokenizer's host output (ids, type
-- ids, mask) and the loss's integer targets are copied into one of two pinned host slots
-- and uploaded on the feed's own copy stream; the compute stream waits for the upload on
-- the device. So the host tokenises and pads batch n + 1 while the GPU still runs batch n,
-- and a step queues its work without waiting for the previous one (tok:batch with a device
-- waits: its copies are synchronous).
--
--   local feed = require("trainer.train.batch_feed").new("cuda:0")
--   local enc, n_tokens = feed:encode(tokenizer, texts, opts, targets, positions)
--     -- enc.input_ids, enc.attention_mask, enc.token_type_ids: i32 [B, T] views on the
--     -- device; enc.targets: an i64 [#targets] view when targets (a list of integers) is
--     -- given; enc.position_ids: i32 [B, T] when positions (a function (ids, pos, B, T) that
--     -- fills pos[0 .. B*T-1] from ids(), both 0-based [B, T] i32 host arrays: the model
--     -- family's position_ids) is given, made on the host with the batch, so that the model
--     -- neither uploads them nor reads the ids back; n_tokens counted on the host (no read
--     -- of the device mask)
--   ... forward, backward (the caller frees the views as it frees a tok:batch) ...
--   feed:release()      -- the work that reads the batch is queued: its slot may be refilled
--   feed:free()
-- On the CPU the same object is the stand-in the normal test suite runs (a run with
-- opts.batch_feed): the slots are plain memory and the upload a copy; the values are the
-- ones tok:batch gives, so a run gives the same bits with or without it.
local ffi = require("ffi")
local C = require("trainer.core.ffi")
local runtime = require("trainer.core.runtime")
local T = require("trainer.core.tensor")
local errors = require("trainer.core.errors")

local M = {}

local Feed = {}
Feed.__index = Feed

-- Each part of the i32 buffer starts on a multiple of this many elements (256 bytes), as
-- a fresh allocation would, for the kernels' vector loads.
local ALIGN = 64

local function aligned(n) return math.ceil(n / ALIGN) * ALIGN end

function M.new(device)
  local f = C.tr_batch_feed_new(runtime.ctx, runtime.parse_device(device))
  if f == nil then runtime.raise("batch_feed.new") end
  return setmetatable({ _f = ffi.gc(f, C.tr_batch_feed_free), device = device }, Feed)
end

function Feed:handle()
  if self._f == nil then errors.user("this batch feed was freed") end
  return self._f
end

-- A [rows, cols] (or [rows]) view of `flat` from element `start`.
local function view(flat, start, rows, cols)
  local ctx = runtime.ctx
  local part = C.tr_tensor_narrow(ctx, flat, start, rows * (cols or 1))
  if part == nil then runtime.raise("batch_feed.view") end
  local dims = cols and ffi.new("int64_t[2]", rows, cols) or ffi.new("int64_t[1]", rows)
  local r = C.tr_tensor_reshape(ctx, part, cols and 2 or 1, dims)
  C.tr_tensor_free(part)
  return T.wrap(r, "batch_feed.view")
end

local h32p, h64p = ffi.new("int32_t*[1]"), ffi.new("int64_t*[1]")
local d32p, d64p = ffi.new("tr_tensor*[1]"), ffi.new("tr_tensor*[1]")

-- Tokenises texts (tok:batch's opts: max_length, truncation, padding) into the next slot and
-- queues its upload. Returns the batch's tensors and its count of non-padding tokens;
-- opts.prompt_length (tok:batch's) adds enc.pool_mask.
function Feed:encode(tokenizer, texts, opts, targets, positions)
  local f = self:handle()
  local out = tokenizer:encode_host(texts, opts)
  local B, L = tonumber(out.batch), tonumber(out.seq_len)
  local n, stride = B * L, aligned(B * L)
  local nt = targets and #targets or 0
  local parts = positions and 4 or 3
  local ok, err = pcall(function()
    runtime.check(C.tr_batch_feed_begin(f, parts * stride, nt, h32p, h64p), "batch_feed.encode")
    local h32 = h32p[0]
    ffi.copy(h32, out.ids, n * 4)
    ffi.copy(h32 + stride, out.attention_mask, n * 4)
    ffi.copy(h32 + 2 * stride, out.type_ids, n * 4)
    for i = 1, nt do h64p[0][i - 1] = targets[i] end
    if positions then positions(function() return out.ids end, h32 + 3 * stride, B, L) end
  end)
  local mask = out.attention_mask
  local n_tokens = 0
  if ok then for i = 0, n - 1 do n_tokens = n_tokens + mask[i] end end
  -- opts.prompt_length: the pooling's mask without the prompt's tokens (trainer.models.prompts),
  -- uploaded on its own (it exists only where a model leaves its prompts out)
  local prompts = require("trainer.models.prompts")
  local pool = ok and prompts.any(opts and opts.prompt_length) and prompts.pool_mask(mask, B, L, opts.prompt_length)
  C.tr_tok_batch_free(out)
  if not ok then error(err, 0) end
  runtime.check(C.tr_batch_feed_upload(f, d32p, d64p), "batch_feed.encode")
  local d32, d64 = d32p[0], d64p[0]
  local enc = T.scope(function()
    return { input_ids = view(d32, 0, B, L), attention_mask = view(d32, stride, B, L),
             token_type_ids = view(d32, 2 * stride, B, L), targets = nt > 0 and view(d64, 0, nt) or nil,
             position_ids = positions and view(d32, 3 * stride, B, L) or nil }
  end)
  if pool then
    local pok, pm = pcall(require("trainer.core.tokenizer").host_tensor, pool, B, L, self.device)
    if not pok then
      for _, t in pairs(enc) do t:free() end
      error(pm, 0)
    end
    enc.pool_mask = pm
  end
  return enc, n_tokens
end

-- The work that reads the last encoded batch is queued (after its backward).
function Feed:release()
  runtime.check(C.tr_batch_feed_release(self:handle()), "batch_feed.release")
end

-- The slot of the last encode (0 or 1), and whether its host buffer is pinned.
function Feed:slot() return tonumber(C.tr_batch_feed_slot(self:handle())) end
function Feed:pinned() return C.tr_batch_feed_pinned(self:handle()) == 1 end

function Feed:free()
  if self._f ~= nil then
    ffi.gc(self._f, nil)
    C.tr_batch_feed_free(self._f)
    self._f = nil
  end
end

return M
