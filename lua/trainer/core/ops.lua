-- trainer.core.ops: the C ops (core/ops/ops_*.h) callable from Lua, so that
-- models, losses and tests are written in Lua.
--
-- Conventions:
--   * forward functions allocate their outputs and return them; `opts.tag` (default
--     "activations") and `opts.dtype` (default: the input's) choose how; saved statistics
--     (layernorm mean/rstd, attention lse, cross-entropy lse) are f32;
--   * backward functions take the gradient buffers of parameters to ACCUMULATE into (+=;
--     nil skips them: frozen weights have none) and return the input gradient, a new
--     tensor (tag "activations"), or nil when `want_dx` is false;
--   * the caller frees what it gets (tensor:free()); nothing here relies on the GC.
-- Errors from C (shape, dtype, device mismatches) are raised as user errors naming the op.
local ffi = require("ffi")
local C = require("trainer.core.ffi")
local runtime = require("trainer.core.runtime")
local T = require("trainer.core.tensor")
local errors = require("trainer.core.errors")

local M = {}
local ctx = runtime.ctx
local check = runtime.check

local function p(t) return t and t:ptr() or nil end

-- A new tensor with x's device; shape, dtype and tag from the arguments.
local function new(shape, like, dtype, tag)
  return T.empty(shape, { dtype = dtype or like:dtype(), device = like:device(), tag = tag or "activations" })
end
M.new = new

local function shape_with_last(x, last)
  local s = x:shape()
  s[#s] = last
  return s
end

-- ---------------------------------------------------------------- the plain ops
-- The ops whose outputs the op table infers are made from it (trainer.core.op_binding): each
-- takes the op's input tensors in C order, then its scalars (defaults from the table), then
-- opts (tag; dtype for a forward's activation), and returns its new outputs:
--   linear(x, w, bias, opts)             layernorm(x, weight, bias, eps, opts) -> out, mean, rstd
--   gelu(x, kind, opts)                  gelu_backward(dout, x, kind)   gelu_backward_(dout, x, kind)
--   bias_gelu(h, bias, kind, opts)       (h gets its bias in place, the pre-activation the
--                                        backward reads; out = gelu(h))
--   linear_gelu(x, w, bias, kind, opts) -> out, h   (h = linear(x, w, bias), out = gelu(h);
--                                        on CUDA the tanh form in the product's epilogue)
--   tanh(x, opts), softmax(x, opts)      tanh_backward(dout, y), softmax_backward(dout, y)
--                                        (from the forward's OUTPUT y)
--   add(a, b, opts), mul(a, b, opts)     scale(x, alpha, opts)
--   embedding(ids, table, opts)          l2norm(x, eps, opts), l2norm_backward(dout, x, eps)
--   cosine_sim(a, b) -> sim [N, M] f32   cosine_sim_backward(dsim, a, b) -> da, db (f32)
--   abs_diff(a, b, opts) = |a - b|       abs_diff_backward(dout, a, b) -> da, db = -da
--   pool (below: it takes the mode by name)
for name, fn in pairs(require("trainer.core.op_binding").functions()) do M[name] = fn end

-- An RNG key for dropout and attention dropout: { seed, step, layer, op }.
function M.rng_key(k)
  local key = ffi.new("tr_rng_key")
  key.seed = k.seed or 0
  key.step = k.step or 0
  key.layer = k.layer or 0
  key.op = k.op or 0
  return key
end

-- ---------------------------------------------------------------- linear algebra
-- out = alpha * op(a) op(b) + bias; opts: trans_a, trans_b, alpha, bias, out (then
-- out = ... + beta * out with opts.beta), tag, dtype.
function M.matmul(a, b, opts)
  opts = opts or {}
  local out = opts.out
  if not out then
    local sa, sb = a:shape(), b:shape()
    local m = opts.trans_a and sa[#sa] or sa[#sa - 1]
    local n = opts.trans_b and sb[#sb - 1] or sb[#sb]
    local shape = {}
    for i = 1, #sa - 2 do shape[i] = sa[i] end
    shape[#shape + 1] = m
    shape[#shape + 1] = n
    out = new(shape, a, opts.dtype, opts.tag)
  end
  local ok, err = pcall(check, C.tr_op_matmul(ctx, out:ptr(), a:ptr(), b:ptr(), p(opts.bias),
    opts.trans_a and 1 or 0, opts.trans_b and 1 or 0, opts.alpha or 1, opts.out and (opts.beta or 0) or 0), "matmul")
  if not ok then
    if not opts.out then out:free() end
    error(err, 0)
  end
  return out
end

-- Runs a C call that fills freshly allocated outputs; frees them if it fails.
local function fill(outs, status, what)
  if status ~= 0 then
    for _, t in ipairs(outs) do t:free() end
    runtime.raise(what)
  end
end

-- dw, dbias accumulate (+=) when given; returns dx (=) unless want_dx == false.
-- x may be nil when dw is (a frozen weight's backward needs only w).
-- into: a tensor of x's shape the input gradient accumulates into (+=, in the product: no
-- temporary, no add pass), returned as dx; want_dx is then ignored.
function M.linear_backward(dout, x, w, dw, dbias, want_dx, into)
  if into then
    check(C.tr_op_linear_backward_acc(ctx, into:ptr(), p(dw), p(dbias), dout:ptr(), p(x), w:ptr()), "linear_backward")
    return into
  end
  local dx = nil
  if want_dx ~= false then
    dx = x and new(x:shape(), x, dout:dtype()) or new(shape_with_last(dout, w:shape()[2]), dout)
  end
  fill({ dx }, C.tr_op_linear_backward(ctx, p(dx), p(dw), p(dbias), dout:ptr(), p(x), w:ptr()), "linear_backward")
  return dx
end

-- The backward of out = linear(gelu(h), w, bias) through to h (core/ops/ops_linear_gelu.h): returns
-- dh (=, new: h's shape and dtype); dw, dbias and dhbias (the bias gradient of the layer that
-- made h) accumulate (+=) when given; x may be nil when dw is.
function M.linear_backward_dgelu(dout, x, w, h, kind, dw, dbias, dhbias)
  local dh = new(h:shape(), h)
  fill({ dh }, C.tr_op_linear_backward_dgelu(ctx, dh:ptr(), p(dw), p(dbias), p(dhbias), dout:ptr(), p(x), w:ptr(),
    h:ptr(), kind or 0), "linear_backward_dgelu")
  return dh
end

-- ---------------------------------------------------------------- normalisation, activations (backward)
function M.layernorm_backward(dout, x, weight, mean, rstd, dweight, dbias, want_dx)
  local dx = want_dx ~= false and new(x:shape(), x, dout:dtype()) or nil
  fill({ dx }, C.tr_op_layernorm_backward(ctx, p(dx), p(dweight), p(dbias), dout:ptr(), x:ptr(), weight:ptr(),
    mean:ptr(), rstd:ptr()), "layernorm_backward")
  return dx
end

-- The end of a post-LN block in one op: sum = residual + dropout(x, prob, key, offset), out =
-- layernorm(sum). Returns out, sum (the layernorm input, what the backward reads; x's dtype,
-- as the unfused add gives it), mean and rstd (f32). key may be nil when prob is 0.
-- opts.stats = false: out alone (no backward will read the rest; on CUDA the sum is not written).
function M.dropout_add_layernorm(x, residual, weight, bias, eps, prob, key, offset, opts)
  opts = opts or {}
  local rows = x:numel() / x:shape()[#x:shape()]
  local out = new(x:shape(), x, opts.dtype, opts.tag)
  if opts.stats == false then
    fill({ out }, C.tr_op_dropout_add_layernorm(ctx, out:ptr(), nil, nil, nil, x:ptr(), residual:ptr(), weight:ptr(),
      p(bias), prob or 0, eps or 1e-12, key, offset or 0), "dropout_add_layernorm")
    return out
  end
  local sum = new(x:shape(), x, nil, opts.tag)
  local mean = new({ rows }, x, "f32", opts.tag)
  local rstd = new({ rows }, x, "f32", opts.tag)
  fill({ out, sum, mean, rstd }, C.tr_op_dropout_add_layernorm(ctx, out:ptr(), sum:ptr(), mean:ptr(), rstd:ptr(),
    x:ptr(), residual:ptr(), weight:ptr(), p(bias), prob or 0, eps or 1e-12, key, offset or 0), "dropout_add_layernorm")
  return out, sum, mean, rstd
end

-- Returns dx (=, the gradient of the dropout's input) and dresidual (=, the layernorm input's
-- gradient), both in dout's dtype; dweight, dbias accumulate (+=) when given. prob, key and
-- offset are the forward's.
function M.dropout_add_layernorm_backward(dout, sum, weight, mean, rstd, dweight, dbias, prob, key, offset)
  local dx = new(sum:shape(), sum, dout:dtype())
  local dres = new(sum:shape(), sum, dout:dtype())
  fill({ dx, dres }, C.tr_op_dropout_add_layernorm_backward(ctx, dx:ptr(), dres:ptr(), p(dweight), p(dbias), dout:ptr(),
    sum:ptr(), weight:ptr(), mean:ptr(), rstd:ptr(), prob or 0, key, offset or 0), "dropout_add_layernorm_backward")
  return dx, dres
end

-- the gelu op's forms; "relu" (2) only through gelu / gelu_backward, not the fused bias and
-- linear GELU ops
M.GELU_ERF, M.GELU_TANH, M.RELU = 0, 1, 2
local gelu_kinds = { gelu = 0, erf = 0, gelu_new = 1, gelu_pytorch_tanh = 1, tanh = 1, gelu_fast = 1, relu = 2 }
function M.gelu_kind(name)
  local k = gelu_kinds[name or "gelu"]
  if not k then errors.user("unsupported activation %q (gelu, gelu_new, gelu_pytorch_tanh, relu)", tostring(name)) end
  return k
end

-- dx (=, new) = dout * gelu'(h) with the h bias_gelu left; dbias accumulates (+=) the column
-- sums of dx when given, in the same pass.
function M.bias_gelu_backward(dout, h, kind, dbias)
  local dx = new(h:shape(), h, dout:dtype())
  fill({ dx }, C.tr_op_bias_gelu_backward(ctx, dx:ptr(), p(dbias), dout:ptr(), h:ptr(), kind or 0), "bias_gelu_backward")
  return dx
end

-- ---------------------------------------------------------------- attention
-- The relative-position, window and query-row arguments of both attention ops, from opts:
-- rel_bias ([num_buckets, H] f32 table or nil), max_distance (128), bidirectional (true),
-- window (0: every key), query_rows (0: every query).
local function attn_position(opts)
  local bidir = opts.bidirectional
  return p(opts.rel_bias), opts.max_distance or 128, (bidir == nil or bidir) and 1 or 0, opts.window or 0,
    opts.query_rows or 0
end

-- q, k, v: [B, T, H, D]; mask [B, T] or nil; opts: scale, dropout, key (an rng_key),
-- rel_bias (a relative-position bias table [num_buckets, H], f32, added per query/key pair by
-- the bucket of j - i), max_distance (the bucketing's, 128), bidirectional (true), window (0
-- = every key; w > 0: keys within w positions of the query), query_rows (0 = every query; n:
-- only each sequence's first n queries, the other rows of out 0 and of lse -inf).
-- Returns out [B, T, H, D] and lse [B, H, T] (f32), which the backward needs.
function M.attention(q, k, v, mask, opts)
  opts = opts or {}
  local s = q:shape()
  local out = new(s, q, opts.dtype, opts.tag)
  local lse = new({ s[1], s[3], s[2] }, q, "f32", opts.tag)
  fill({ out, lse }, C.tr_op_attention(ctx, out:ptr(), lse:ptr(), q:ptr(), k:ptr(), v:ptr(), p(mask),
    opts.scale or 0, opts.dropout or 0, opts.key, attn_position(opts)), "attention")
  return out, lse
end

-- q, k, v: [N, H, D], the packed rows of `lengths.n` sequences back to back (lengths.ptr:
-- int64_t[n], host; lengths.T: the padded layout's length, or nil; trainer.nn.packing makes
-- them); each sequence attends over its own rows. Forward only, no mask, no dropout; opts:
-- scale. Returns out [N, H, D] and lse [H * N] (f32). For prefix masks the padded op's bits
-- on the real rows (core/ops/attention_packed.c).
function M.attention_packed(q, k, v, lengths, opts)
  opts = opts or {}
  local s = q:shape()
  local out = new(s, q, opts.dtype, opts.tag)
  local lse = new({ s[1] * s[2] }, q, "f32", opts.tag)
  fill({ out, lse }, C.tr_op_attention_packed(ctx, out:ptr(), lse:ptr(), q:ptr(), k:ptr(), v:ptr(), lengths.ptr,
    lengths.n, lengths.T or 0, opts.scale or 0), "attention_packed")
  return out, lse
end

-- dq, dk, dv (new) from the gradient of the forward's output; lse, mask and opts' scale,
-- dropout, key, rel_bias, max_distance, bidirectional, window and query_rows are the forward's
-- (query_rows n: dout's rows past n are not read, dq's are 0).
-- opts.out: the forward's output itself, when it was kept (CUDA reads it instead of
-- recomputing it; the same numbers either way). opts.drel_bias: the bias table's gradient
-- [num_buckets, H] f32, accumulated (+=).
function M.attention_backward(dout, q, k, v, lse, mask, opts)
  opts = opts or {}
  local dq, dk, dv = new(q:shape(), q, dout:dtype()), new(k:shape(), k, dout:dtype()), new(v:shape(), v, dout:dtype())
  local rel_bias, max_distance, bidirectional, window, query_rows = attn_position(opts)
  fill({ dq, dk, dv }, C.tr_op_attention_backward(ctx, dq:ptr(), dk:ptr(), dv:ptr(), dout:ptr(), q:ptr(), k:ptr(),
    v:ptr(), p(opts.out), lse:ptr(), p(mask), opts.scale or 0, opts.dropout or 0, opts.key, p(opts.drel_bias),
    rel_bias, max_distance, bidirectional, window, query_rows), "attention_backward")
  return dq, dk, dv
end

-- ---------------------------------------------------------------- elementwise, in place
-- a = a + b.
function M.add_(a, b) check(C.tr_op_add(ctx, a:ptr(), a:ptr(), b:ptr()), "add_") return a end

-- GELU's backward in place: dout becomes dout * gelu'(x) and is returned (the backward then
-- holds one [N, I] gradient where a new output would hold two).
function M.gelu_backward_(dout, x, kind)
  check(C.tr_op_gelu_backward(ctx, dout:ptr(), dout:ptr(), x:ptr(), kind or 0), "gelu_backward_")
  return dout
end

-- GeGLU's backward in place: dh overwrites h (dout's dtype must be h's), and h is returned.
function M.geglu_backward_(dout, h, kind)
  check(C.tr_op_geglu_backward(ctx, h:ptr(), dout:ptr(), h:ptr(), kind or 0), "geglu_backward_")
  return h
end

function M.scale_(x, alpha) check(C.tr_op_scale(ctx, x:ptr(), x:ptr(), alpha), "scale_") return x end

-- y += alpha * x
function M.axpy_(y, x, alpha) check(C.tr_op_axpy(ctx, y:ptr(), x:ptr(), alpha or 1), "axpy_") return y end

function M.cast(x, dtype, opts)
  opts = opts or {}
  local out = new(x:shape(), x, dtype, opts.tag or x:tag())
  fill({ out }, C.tr_op_cast(ctx, out:ptr(), x:ptr()), "cast")
  return out
end

-- dtable += scatter of dout by ids (rows equal to padding_idx skipped; -1 = none).
function M.embedding_backward(dtable, dout, ids, padding_idx)
  check(C.tr_op_embedding_backward(ctx, dtable:ptr(), dout:ptr(), ids:ptr(), padding_idx or -1), "embedding_backward")
end

function M.dropout(x, prob, key, offset, opts)
  opts = opts or {}
  local out = new(x:shape(), x, opts.dtype, opts.tag)
  fill({ out }, C.tr_op_dropout(ctx, out:ptr(), x:ptr(), prob, key, offset or 0), "dropout")
  return out
end

function M.dropout_backward(dout, prob, key, offset)
  local dx = new(dout:shape(), dout)
  fill({ dx }, C.tr_op_dropout_backward(ctx, dx:ptr(), dout:ptr(), prob, key, offset or 0), "dropout_backward")
  return dx
end

-- out [..., R] = dropout(x, prob, key, offset) w^T (w [R, I], no bias: LoRA's down-projection;
-- core/ops/ops_dropout_linear.h): on CUDA one pass over x, the dropped-out copy never written.
function M.dropout_linear(x, w, prob, key, offset, opts)
  opts = opts or {}
  local out = new(shape_with_last(x, w:shape()[1]), x, opts.dtype, opts.tag)
  fill({ out }, C.tr_op_dropout_linear(ctx, out:ptr(), x:ptr(), w:ptr(), prob, key, offset or 0), "dropout_linear")
  return out
end

-- Its backward with the forward's x, w, prob, key, offset: dx (+=, or nil) += dropout_backward(dout w),
-- dw (+=, f32, or nil) += dout^T dropout(x). Returns dx.
function M.dropout_linear_backward(dout, x, w, dx, dw, prob, key, offset)
  check(C.tr_op_dropout_linear_backward(ctx, p(dx), p(dw), dout:ptr(), x:ptr(), w:ptr(), prob, key, offset or 0),
    "dropout_linear_backward")
  return dx
end

-- Dropout of a packed [N, C] tensor, segment by segment (core/ops/ops_row_segments.h): segs is
-- an int64_t[3 * nseg] cdata of (packed first row, rows, padded first row); trainer.nn.packing makes it.
function M.dropout_segments(x, prob, key, segs, nseg)
  local out = new(x:shape(), x)
  fill({ out }, C.tr_op_dropout_segments(ctx, out:ptr(), x:ptr(), prob, key, segs, nseg), "dropout_segments")
  return out
end

function M.dropout_segments_backward(dout, prob, key, segs, nseg)
  local dx = new(dout:shape(), dout)
  fill({ dx }, C.tr_op_dropout_segments_backward(ctx, dx:ptr(), dout:ptr(), prob, key, segs, nseg),
    "dropout_segments_backward")
  return dx
end

-- ---------------------------------------------------------------- losses, pooling, similarity
-- Mean cross-entropy of logits [N, K] against integer targets [N]; returns loss [1] and lse [N].
function M.cross_entropy(logits, targets, opts)
  opts = opts or {}
  local loss = new({ 1 }, logits, "f32", opts.tag)
  local lse = new({ logits:shape()[1] }, logits, "f32", opts.tag)
  fill({ loss, lse }, C.tr_op_cross_entropy(ctx, loss:ptr(), lse:ptr(), logits:ptr(), targets:ptr(),
    opts.ignore_index or -100, opts.label_smoothing or 0), "cross_entropy")
  return loss, lse
end

function M.cross_entropy_backward(logits, lse, targets, dloss, opts)
  opts = opts or {}
  local dlogits = new(logits:shape(), logits)
  fill({ dlogits }, C.tr_op_cross_entropy_backward(ctx, dlogits:ptr(), dloss or 1, logits:ptr(), lse:ptr(),
    targets:ptr(), opts.ignore_index or -100, opts.label_smoothing or 0), "cross_entropy_backward")
  return dlogits
end

M.pool_modes = { mean = 0, cls = 1, max = 2, mean_sqrt_len = 3 }
local function pool_mode(name)
  local m = M.pool_modes[name or "mean"]
  if not m then errors.user("unknown pooling %q (mean, cls, max, mean_sqrt_len)", tostring(name)) end
  return m
end

-- hidden [B, T, C], mask [B, T] -> [B, C]; mode: a name of M.pool_modes.
local pool, pool_backward = M.pool, M.pool_backward
function M.pool(hidden, mask, mode, opts) return pool(hidden, mask, pool_mode(mode), opts) end
function M.pool_backward(dout, hidden, mask, mode) return pool_backward(dout, hidden, mask, pool_mode(mode)) end

-- Scored-pair losses over sim = cosine_sim(u, v) [B, B] and gold scores (a Lua array of B
-- numbers): loss ({ 1 } f32) and dsim (the gradient w.r.t. sim, [B, B] f32), both on sim's
-- device (core/ops/ops_score_loss.h). k: CoSENT's scale, or the cosine loss's score_scale.
local function score_loss(fn, name, sim, scores, k)
  local B = sim:shape()[1]
  local y = ffi.new("float[?]", math.max(B, 1))
  for i = 1, B do y[i - 1] = scores[i] end
  local loss, dsim = new({ 1 }, sim, "f32"), new({ B, B }, sim, "f32")
  fill({ loss, dsim }, fn(ctx, loss:ptr(), dsim:ptr(), sim:ptr(), y, k), name)
  return loss, dsim
end

function M.cosent_loss(sim, scores, scale) return score_loss(C.tr_op_cosent_loss, "cosent_loss", sim, scores, scale) end

function M.cosine_mse_loss(sim, scores, score_scale)
  return score_loss(C.tr_op_cosine_mse_loss, "cosine_mse_loss", sim, scores, score_scale)
end

-- ---------------------------------------------------------------- reductions, optimizer helpers
local function reduce(fn, name, x, lastdim, opts)
  opts = opts or {}
  local shape = { 1 }
  if lastdim then
    shape = x:shape()
    shape[#shape] = nil
    if #shape == 0 then shape = { 1 } end
  end
  local out = new(shape, x, "f32", opts.tag)
  fill({ out }, fn(ctx, out:ptr(), x:ptr(), lastdim and 1 or 0), name)
  return out
end
function M.sum(x, lastdim, opts) return reduce(C.tr_op_sum, "sum", x, lastdim, opts) end
function M.mean(x, lastdim, opts) return reduce(C.tr_op_mean, "mean", x, lastdim, opts) end

local function ptr_array(list)
  local arr = ffi.new("tr_tensor*[?]", math.max(#list, 1))
  for i, t in ipairs(list) do arr[i - 1] = t:ptr() end
  return arr
end

-- The L2 norm over a list of tensors (gradient clipping).
function M.global_norm(list)
  local out = ffi.new("float[1]")
  check(C.tr_op_global_norm(ctx, out, ptr_array(list), #list), "global_norm")
  return tonumber(out[0])
end

-- Multiplies every tensor by scale in place; true when any held an inf or NaN.
function M.scale_check_finite(list, scale)
  local found = ffi.new("int[1]")
  check(C.tr_op_scale_check_finite(ctx, found, ptr_array(list), #list, scale), "scale_check_finite")
  return found[0] ~= 0
end

-- One fused AdamW step in place (torch.optim.AdamW semantics). o: lr, beta1, beta2, eps,
-- weight_decay, step (1-based), grad_scale (divides the gradient). The C op's optional half_copy
-- (a bf16/f16 copy of the weight refreshed by the step) is passed NULL: trainable
-- parameters stay f32 and the forward reads them directly (see trainer.amp).
function M.adamw_(param, grad, m, v, o)
  check(C.tr_op_adamw(ctx, param:ptr(), grad:ptr(), m:ptr(), v:ptr(), nil, o.lr, o.beta1 or 0.9,
    o.beta2 or 0.999, o.eps or 1e-8, o.weight_decay or 0, o.step, o.grad_scale or 1), "adamw")
end

-- One torch.optim.SGD step in place (core/ops/ops_optim.h). buf: the momentum buffer
-- (nil when o.momentum is 0). o: lr, momentum, dampening, weight_decay, nesterov (bool), step
-- (1-based), grad_scale; skip_if (a found-inf flag, nil: never skip), skipped / skipped_known
-- (the device loss scale's skip count and the value of it the host last read: the step
-- applied is o.step less the skips since; nil: o.step), all read where they live. No half copy.
function M.sgd_(param, grad, buf, o)
  check(C.tr_op_sgd(ctx, param:ptr(), grad:ptr(), p(buf), nil, o.lr, o.momentum or 0, o.dampening or 0,
    o.weight_decay or 0, o.nesterov and 1 or 0, o.step, o.grad_scale or 1, p(o.skip_if), p(o.skipped),
    o.skipped_known or 0), "sgd")
end

-- One Adafactor step in place: st = { exp_avg, row, col, v } (what the parameter's rank and
-- beta1 ask for), cfg a tr_adafactor_config, o = { step, grad_scale, skip_if, skipped,
-- skipped_known } as sgd_. The learning rate used is not read back (on a device that would
-- wait for the step).
function M.adafactor_(param, grad, st, cfg, o)
  check(C.tr_op_adafactor(ctx, param:ptr(), grad:ptr(), p(st.exp_avg), p(st.row), p(st.col), p(st.v), nil, cfg,
    o.step, o.grad_scale or 1, nil, p(o.skip_if), p(o.skipped), o.skipped_known or 0), "adafactor")
end

-- ---------------------------------------------------------------- device-resident list ops (core/ops/ops_multi_tensor.h)
-- Their results stay in tensors (on a GPU: device memory), so an optimizer step never waits
-- for the host. A found-inf flag is a { 1 } i32 tensor the ops only set to 1.

-- norm (a { 1 } f32 tensor on the list's device, made when nil) = the L2 norm of the list.
function M.global_norm_into(list, norm)
  norm = norm or T.empty({ 1 }, { dtype = "f32", device = list[1] and list[1]:device() or "cpu", tag = "workspace" })
  check(C.tr_op_global_norm_into(ctx, norm:ptr(), ptr_array(list), #list), "global_norm_into")
  return norm
end

-- Every tensor *= min(1, max_norm / (norm + eps)) (eps 1e-6, torch's) reading norm where it
-- lives; a non-finite norm leaves them alone and sets found_inf (when given).
function M.clip_by_norm_(list, norm, max_norm, found_inf, eps)
  check(C.tr_op_clip_by_norm(ctx, ptr_array(list), #list, norm:ptr(), p(found_inf), max_norm, eps or 1e-6),
    "clip_by_norm")
end

-- Every tensor *= scale; found_inf set to 1 when a result is inf or NaN (never cleared).
function M.scale_check_finite_into(list, scale, found_inf)
  check(C.tr_op_scale_check_finite_into(ctx, found_inf:ptr(), ptr_array(list), #list, scale),
    "scale_check_finite_into")
end

-- AdamW over every parameter of the lists in one call (one launch on CUDA); decay: a list of
-- booleans (nil: all decay); skip_if: a found-inf flag (nil: never skip). o as adamw_, plus
-- o.skipped / o.skipped_known: the device loss scale's skip count and the value of it the
-- host last read (the step applied is o.step less the skips since; nil: o.step).
function M.adamw_multi_(params, grads, ms, vs, decay, skip_if, o)
  local n = #params
  local dec = nil
  if decay then
    dec = ffi.new("int32_t[?]", math.max(n, 1))
    for i = 1, n do dec[i - 1] = decay[i] and 1 or 0 end
  end
  check(C.tr_op_adamw_multi_steps(ctx, ptr_array(params), ptr_array(grads), ptr_array(ms), ptr_array(vs), nil, dec,
    n, p(skip_if), o.lr, o.beta1 or 0.9, o.beta2 or 0.999, o.eps or 1e-8, o.weight_decay or 0, o.step,
    o.grad_scale or 1, p(o.skipped), o.skipped_known or 0), "adamw_multi")
end

-- ---------------------------------------------------------------- the device loss scale (core/ops/ops_loss_scale.h)
-- The fp16 scaler's update on device tensors from this step's found-inf flag: st = { scale,
-- inv (f32 { 1 }), tracker, skipped (i32 { 1 }) }; o = { growth_factor, backoff_factor,
-- growth_interval }.
function M.loss_scale_update_(st, found_inf, o)
  check(C.tr_op_loss_scale_update(ctx, st.scale:ptr(), st.inv:ptr(), st.tracker:ptr(), st.skipped:ptr(),
    found_inf:ptr(), o.growth_factor, o.backoff_factor, o.growth_interval), "loss_scale_update")
end

-- x *= s[0] * factor (s a { 1 } f32 tensor on x's device, e.g. the loss scale). Returns x.
function M.scale_by_scalar_(x, s, factor)
  check(C.tr_op_scale_by_scalar(ctx, x:ptr(), s:ptr(), factor or 1), "scale_by_scalar")
  return x
end

-- scale_check_finite_into with the factor read from scale (a { 1 } f32 tensor).
function M.scale_check_finite_by_into(list, scale, found_inf)
  check(C.tr_op_scale_check_finite_by_into(ctx, found_inf:ptr(), ptr_array(list), #list, scale:ptr()),
    "scale_check_finite_into")
end

-- ---------------------------------------------------------------- feature matrices (core/ops/ops_pair_features.h)
-- dst[:, dst_col + j] (=, or += when accumulate) src[:, src_col + j] for j < ncols (0-based
-- columns of the last dim; rows are the leading dims flattened). Returns dst.
function M.copy_cols_(dst, dst_col, src, src_col, ncols, accumulate)
  check(C.tr_op_copy_cols(ctx, dst:ptr(), dst_col, src:ptr(), src_col, ncols, accumulate and 1 or 0), "copy_cols")
  return dst
end

-- A new tensor of columns [start, start + n) of x's last dim (a copy, not a view).
function M.narrow_cols(x, start, n, opts)
  opts = opts or {}
  local out = new(shape_with_last(x, n), x, opts.dtype, opts.tag)
  fill({ out }, C.tr_op_copy_cols(ctx, out:ptr(), 0, x:ptr(), start, n, 0), "narrow_cols")
  return out
end

-- Concatenation along the last dim of tensors with the same rows.
function M.cat_cols(list, opts)
  opts = opts or {}
  local width = 0
  for _, t in ipairs(list) do width = width + t:shape()[#t:shape()] end
  local out = new(shape_with_last(list[1], width), list[1], opts.dtype, opts.tag)
  local col = 0
  for _, t in ipairs(list) do
    local c = t:shape()[#t:shape()]
    fill({ out }, C.tr_op_copy_cols(ctx, out:ptr(), col, t:ptr(), 0, c, 0), "cat_cols")
    col = col + c
  end
  return out
end

-- ---------------------------------------------------------------- the op table
-- Raises the user error of trainer.ops.<caller> given an op name that is not a string.
local function check_op_name(caller, name)
  if type(name) ~= "string" then
    errors.user("trainer.ops.%s: the op name must be a string such as \"linear\", got %s", caller, type(name))
  end
end

-- Whether the op `name` (its name in the C op table, core/ops/op_list.h: "linear",
-- "attention_backward", ...) can run on `device` ("cpu", "cuda", "cuda:N" or an index) in
-- this build and this process, answered without running it.
function M.supported(name, device)
  check_op_name("supported", name)
  return C.tr_op_supported(name, runtime.parse_device(device)) == 1
end

-- Whether the op `name` has an implementation compiled for `device`'s backend ("cpu":
-- its CPU slot; "cuda", "cuda:N": its CUDA slot) in this build, present device or not.
function M.built(name, device)
  check_op_name("built", name)
  return C.tr_op_built(name, runtime.parse_device(device)) == 1
end

-- Whether this build has the CUDA backend (nvcc was found when it was built).
function M.cuda_built() return C.tr_cuda_built() == 1 end

-- How this process runs its CPU matrix products: { library = "onednn" | "openblas",
-- bf16 = "native" | "f32", isa_max = "cpu" | "avx2" } (bf16 x bf16 products in bf16 on the CPU's
-- bf16 instructions, or widened to f32, core/cpu_device/cpu_gemm.h; isa_max "avx2" for a binary
-- built with make ISA_MAX=avx2, which never runs AVX-512 code). TRAINER_CPU_GEMM chooses the library; a value
-- it cannot have is a user error.
function M.cpu_products()
  local lib = C.tr_cpu_gemm_library(runtime.ctx)
  if lib == nil then errors.user("%s", ffi.string(C.tr_ctx_errmsg(runtime.ctx))) end
  return { library = ffi.string(lib), bf16 = C.tr_cpu_gemm_bf16_native(runtime.ctx) == 1 and "native" or "f32",
           isa_max = ffi.string(C.tr_cpu_isa_max()) }
end

-- Makes each oneDNN pack of the f32 CPU weight t (a trainer.core.tensor) live for one product
-- (on true) or until t is next written (false, the default): for a weight the optimizer
-- writes after every use, whose packs could never serve twice (core/cpu_device/gemm_query.h,
-- tr_cpu_weight_transient_packs). Any other tensor is left alone.
function M.transient_packs(t, on)
  runtime.check(C.tr_cpu_weight_transient_packs(runtime.ctx, t:ptr(), on and 1 or 0), "ops.transient_packs")
end

-- The names of the op table's ops, in its order.
function M.names()
  local names = {}
  for i = 0, C.tr_op_count() - 1 do names[#names + 1] = ffi.string(C.tr_op_name(i)) end
  return names
end

return M
