-- Packed encoder rows (trainer.nn.packing): a batch with padding runs its encoder layers on
-- the real rows only, with the same numbers as the padded path. With dropout ON (hidden,
-- attention and LoRA dropout) the loss and every gradient match the padded run within
-- float rounding (the masks are the padded layout's, bit for bit: the dropout test below);
-- eval outputs match on real rows and are 0 on padding rows; nothing is left allocated; a
-- batch without padding is not packed; a bad segment table is a clear error.
local T = require("trainer.core.tensor")
local ops = require("trainer.core.ops")
local memory = require("trainer.core.memory")
local bert = require("trainer.models.bert")
local lora = require("trainer.train.lora")
local checkpoint = require("trainer.train.grad_checkpoint")
local packing = require("trainer.nn.packing")
local ffi = require("ffi")
local C = require("trainer.core.ffi")
local runtime = require("trainer.core.runtime")
local lib = dofile(require("trainer.native").root() .. "/tests/lua/testlib.lua")

local function int_tensor(values, shape)
  local t = T.from_table(values, { dtype = "i32" })
  local r = t:reshape(shape)
  t:free()
  return r
end

local function tiny_encoder(layers)
  local cfg = bert.config({ hidden_size = 32, num_hidden_layers = layers, num_attention_heads = 4,
    intermediate_size = 64, vocab_size = 60, max_position_embeddings = 64, hidden_dropout_prob = 0.1,
    attention_probs_dropout_prob = 0.1 }, "tiny")
  return bert.SentenceEncoder.new(bert.BertModel.new(cfg, { seed = 3, pooler = false }), { pooling = "mean" })
end

-- [B, Tn] ids with lengths from 1 to Tn (most rows are padding), and a loss weight [B, 32].
local function batch(B, Tn)
  local ids, mask = {}, {}
  for b = 0, B - 1 do
    local len = 1 + (b * 5) % Tn
    for t = 1, Tn do
      local i = b * Tn + t
      ids[i] = t <= len and (((b * 7 + t * 13) % 55) + 5) or 0
      mask[i] = t <= len and 1 or 0
    end
  end
  local x = { input_ids = int_tensor(ids, { B, Tn }), attention_mask = int_tensor(mask, { B, Tn }) }
  return x, T.randn({ B, 32 }, { seed = 9, stream = 1, tag = "activations" })
end

local function free_input(x, w) x.input_ids:free(); x.attention_mask:free(); w:free() end

-- fn(model, x, w) on a tiny encoder of `layers` layers and a batch [B, Tn], all freed after it.
local function with_tiny(layers, B, Tn, fn)
  local model = tiny_encoder(layers)
  local x, w = batch(B, Tn)
  fn(model, x, w)
  free_input(x, w)
  model:free()
end

-- loss = sum(embedding * w), its gradients and the activations' peak (lib.loss_grads_peak),
-- the packing closed by the backward.
local function run(model, x, w, pack)
  model.pack_rows = pack
  local loss, grads, peak = lib.loss_grads_peak(model, x, w, "pack=" .. tostring(pack))
  assert(model.bert.packing == nil, "the packing must be closed by the backward")
  return loss, grads, peak
end

local close = lib.close_to_scale

local bytes = lib.bytes

local function same_as_padded(model, x, w)
  local l0, g0, peak0 = run(model, x, w, false)
  local l1, g1, peak1 = run(model, x, w, true)
  lib.same_loss_and_grads(l0, g0, l1, g1, "packed")
  assert(peak1 < peak0, ("packed peak activations %d not below the padded %d"):format(peak1, peak0))
end

return {
  { "dropout_segments_draw_the_padded_masks", function()
    local B, Tn, Cw = 3, 7, 24
    local mask = int_tensor({ 1, 1, 1, 0, 0, 0, 0,  1, 1, 1, 1, 1, 1, 1,  1, 1, 0, 0, 0, 0, 0 }, { B, Tn })
    local pk = assert(packing.from_mask(mask))
    assert(pk.N == 12 and pk.nseg == 2, ("rows %d, segments %d (rows 0-2, then 7-16 run together)"):format(pk.N, pk.nseg))
    local x = T.randn({ B, Tn, Cw }, { seed = 2, stream = 3, tag = "activations" })
    local key = ops.rng_key({ seed = 11, step = 2, layer = 1, op = 2 })
    local full = ops.dropout(x, 0.3, key)
    local xp = pk:gather(x)
    local dp = pk:dropout(xp, 0.3, key)
    local want = pk:gather(full)
    assert(bytes(dp) == bytes(want), "packed dropout differs from the padded dropout's real rows")
    local bfull = ops.dropout_backward(x, 0.3, key)
    local bp = pk:dropout_backward(xp, 0.3, key)
    local bwant = pk:gather(bfull)
    assert(bytes(bp) == bytes(bwant), "packed dropout backward differs from the padded one")
    -- scatter puts the rows back, 0 elsewhere
    local back = pk:scatter(xp)
    local xv, bv, mv = x:values(), back:values(), mask:values()
    for i = 1, #xv do
      local want_v = mv[math.floor((i - 1) / Cw) + 1] ~= 0 and xv[i] or 0
      assert(bv[i] == want_v, ("scatter element %d: %g, want %g"):format(i, bv[i], want_v))
    end
    for _, t in ipairs({ full, xp, dp, want, bfull, bp, bwant, back, x }) do t:free() end
    pk:close()
    mask:free()
  end },

  { "bad_segment_table_is_a_clear_error", function()
    local x = T.zeros({ 4, 8 }, { tag = "activations" })
    local segs = ffi.new("int64_t[3]", 2, 3, 0)   -- rows 2..4 of 4
    local key = ops.rng_key({ seed = 1, step = 1, layer = 1, op = 1 })
    local ok, err = pcall(ops.dropout_segments, x, 0.5, key, segs, 1)
    assert(not ok and tostring(err):find("segment 0 (packed rows 2..4 at padded row 0) lies outside the 4 packed rows", 1, true),
      "want the bad segment named: " .. tostring(err))
    -- runs out of padded order, and a run past the padded rows: refused before any row moves
    local padded = T.full({ 6, 8 }, 7, { tag = "activations" })
    for _, bad in ipairs({ { 0, 2, 3, 2, 2, 1 }, { 0, 4, 3 } }) do
      local t = ffi.new("int64_t[?]", #bad, bad)
      ok, err = pcall(function()
        runtime.check(C.tr_op_scatter_segments(runtime.ctx, padded:ptr(), x:ptr(), t, #bad / 3), "scatter")
      end)
      assert(not ok and tostring(err):find("scatter_segments: segment", 1, true), "bad table accepted: " .. tostring(err))
      for _, v in ipairs(padded:values()) do assert(v == 7, "a refused scatter changed the output") end
    end
    padded:free()
    x:free()
  end },

  { "lengths_and_prefix_of_a_packing", function()
    -- row 0 full and row 1's start form one run; lengths must still be per batch row
    local mask = int_tensor({ 1, 1, 1, 1,  1, 1, 0, 0,  0, 0, 0, 0,  1, 0, 0, 0 }, { 4, 4 })
    local pk = assert(packing.from_mask(mask))
    local got = {}
    for b = 0, pk.lengths.n - 1 do got[#got + 1] = tonumber(pk.lengths.ptr[b]) end
    assert(table.concat(got, ",") == "4,2,0,1", "lengths " .. table.concat(got, ","))
    assert(pk.prefix, "real tokens first in every row: a prefix packing")
    pk:close(); mask:free()
    local holes = int_tensor({ 1, 0, 1, 0,  1, 1, 1, 0 }, { 2, 4 })
    pk = assert(packing.from_mask(holes))
    assert(not pk.prefix and tonumber(pk.lengths.ptr[0]) == 2, "a row with a hole is not a prefix")
    pk:close(); holes:free()
  end },

  { "attention_packed_gives_the_padded_bits", function()
    -- short rows on the register kernel (T <= 32, D 32 or 64), longer rows and other head
    -- sizes on the padded kernel inside the op: both must be the padded op's bits
    -- { B, T, H, D, longest }: the last pads to a fixed 40 with no row past 20 (the padded op
    -- takes its tiled path for T = 40, and so must the packed one)
    for _, c in ipairs({ { 5, 20, 3, 32 }, { 3, 32, 2, 64 }, { 4, 9, 2, 32 }, { 3, 40, 2, 32 }, { 3, 13, 2, 48 },
                         { 4, 40, 2, 32, 20 } }) do
      local B, Tn, H, D = c[1], c[2], c[3], c[4]
      local m = {}
      for b = 0, B - 1 do
        local len = b == 1 and 0 or Tn - (b * 7) % Tn   -- a full row, an empty one, tails
        if c[5] then len = math.min(len, c[5]) end
        for t = 1, Tn do m[b * Tn + t] = t <= len and 1 or 0 end
      end
      local mask = int_tensor(m, { B, Tn })
      local pk = assert(packing.from_mask(mask))
      local N = pk.N
      local qp, kp, vp = T.randn({ N, H * D }, { seed = 4 }), T.randn({ N, H * D }, { seed = 5 }), T.randn({ N, H * D }, { seed = 6 })
      local function padded(x)
        local s = pk:scatter(x)
        local r = s:reshape({ B, Tn, H, D })
        s:free()
        return r
      end
      local q4, k4, v4 = padded(qp), padded(kp), padded(vp)
      local out4, lse4 = ops.attention(q4, k4, v4, mask)
      local o3 = out4:reshape({ B, Tn, H * D })
      local want = pk:gather(o3)
      local q3, k3, v3 = qp:reshape({ N, H, D }), kp:reshape({ N, H, D }), vp:reshape({ N, H, D })
      local out, lse = ops.attention_packed(q3, k3, v3, pk.lengths)
      local what = ("B=%d T=%d H=%d D=%d"):format(B, Tn, H, D)
      assert(bytes(out) == bytes(want), what .. ": packed attention differs from the padded op's real rows")
      local lv, pv = lse:values(), lse4:values()
      local off = 0
      for b = 0, B - 1 do
        local n = tonumber(pk.lengths.ptr[b])
        for h = 0, H - 1 do
          for i = 0, n - 1 do
            local a, w2 = lv[H * off + h * n + i + 1], pv[(b * H + h) * Tn + i + 1]
            assert(a == w2, ("%s: lse of row %d head %d query %d is %.9g, padded %.9g"):format(what, b, h, i, a, w2))
          end
        end
        off = off + n
      end
      for _, t in ipairs({ qp, kp, vp, q4, k4, v4, out4, lse4, o3, want, q3, k3, v3, out, lse, mask }) do t:free() end
      pk:close()
    end
  end },

  { "attention_packed_rejects_lengths_that_do_not_sum_to_the_rows", function()
    local q = T.randn({ 5, 2, 32 }, { seed = 1 })
    local len = ffi.new("int64_t[2]", 2, 2)
    local ok, err = pcall(ops.attention_packed, q, q, q, { ptr = len, n = 2 })
    assert(not ok and tostring(err):find("the 2 sequence lengths sum to 4 but q has 5 rows", 1, true), tostring(err))
    q:free()
  end },

  { "packed_eval_forward_has_the_bits_of_a_forward_with_gradients", function()
    -- a forward without gradients runs attention_packed; one with gradients (what a
    -- checkpoint or GradCache replay runs) the padded op: the same bits
    -- heads of 32: the register kernel (on AVX-512) inside the op
    local cfg = bert.config({ hidden_size = 64, num_hidden_layers = 2, num_attention_heads = 2,
      intermediate_size = 64, vocab_size = 60, max_position_embeddings = 64 }, "tiny")
    local model = bert.SentenceEncoder.new(bert.BertModel.new(cfg, { seed = 3, pooler = false }), { pooling = "mean" })
    local x, w = batch(5, 12)
    model:eval()
    local e0 = model:forward(x)
    model:set_grad_enabled(true)
    local e1 = model:forward(x)
    model:release()
    assert(bytes(e0) == bytes(e1), "an eval forward without gradients differs from one with them")
    e0:free(); e1:free()
    free_input(x, w)
    model:free()
  end },

  { "no_padding_is_not_packed", function()
    local mask = int_tensor({ 1, 1, 1, 1, 1, 1 }, { 2, 3 })
    assert(packing.from_mask(mask) == nil, "a batch without padding has nothing to skip")
    local empty = int_tensor({ 0, 0, 0, 0, 0, 0 }, { 2, 3 })
    assert(packing.from_mask(empty) == nil, "no real token: nothing to pack")
    assert(packing.from_mask(nil) == nil)
    mask:free(); empty:free()
  end },

  { "packed_training_matches_padded_with_dropout", function()
    with_tiny(2, 6, 9, function(model, x, w)
      same_as_padded(model, x, w)
    end)
  end },

  { "packed_lora_and_checkpointing_match_padded", function()
    with_tiny(3, 5, 10, function(model, x, w)
      lora.apply(model, { r = 4, alpha = 8, dropout = 0.2, targets = { "query", "value" } })
      same_as_padded(model, x, w)
      checkpoint.apply(model, { every = 1 })
      same_as_padded(model, x, w)
    end)
  end },

  { "packed_eval_rows_match_and_padding_rows_are_zero", function()
    with_tiny(2, 4, 8, function(model, x, w)
      model:eval()
      local bm = model.bert
      local function hidden(pack)
        local h = bm:forward(x, { pack_rows = pack })
        local v = h:values()
        h:free()
        return v
      end
      local a0 = memory.stats().by_tag.activations
      local h0, h1 = hidden(false), hidden(true)
      assert(memory.stats().by_tag.activations == a0, "an eval forward left activations allocated")
      assert(bm.packing == nil, "a forward without grad must close its packing")
      local mv = x.attention_mask:values()
      local real0, real1 = {}, {}
      for i = 1, #h0 do
        if mv[math.floor((i - 1) / 32) + 1] ~= 0 then
          real0[#real0 + 1], real1[#real1 + 1] = h0[i], h1[i]
        else
          assert(h1[i] == 0, ("padding element %d is %g, want 0"):format(i, h1[i]))
        end
      end
      close(real0, real1, 1e-5, "real rows")
    end)
  end },
}
