-- bench/gpu/step_budget.lua: the launch budget of one BERT bf16 + checkpointing + LoRA training
-- step on device = "cuda", and its predicted time at an H200's ceilings.
--
--   build/cudacpu/trainer run bench/gpu/step_budget.lua [--layers 1 --hidden 96 --heads 3
--       --intermediate 192 --seq 40 --batch 2 --vocab 500] [--target-layers 24 --target-hidden 1024
--       --target-heads 16 --target-intermediate 4096 --target-seq 512 --target-batch 16
--       --target-vocab 30522] [--act gelu|gelu_new] [--lora-dropout P] [--json PATH]
--
-- The LoRA is the flagship recipe's (recipes/scandi_lora.lua: r 8, alpha 16, dropout 0.1 on query
-- and value; --lora-dropout 0 for none).
-- One step (after a warm-up step) runs at the measured shape (small: the emulator runs every
-- CUDA thread as a fiber) with every op of trainer.core.ops wrapped: each op call's tensors
-- (their shapes, dtypes and bytes) and, under the emulator (tools/cudacpu), the kernel launches
-- it made (cudacpu_launch_log: names, and the WMMA products of the tensor-core attention).
-- Each call's figures are then taken to the target shape (default BERT-large, 16 x 512) by
-- substituting each dimension of its tensors (batch, seq, batch x seq, hidden, heads, head size,
-- intermediate, vocab: the measured shape's values must differ from each other, which the
-- defaults do); the step is measured at `layers` and `layers` + 1 layers, and the target's is
-- the first plus (target-layers - layers) times what the extra layer added, so the embeddings,
-- pooler, loss and the first layer's own work (no input gradient into frozen embeddings) count
-- once.
-- Per op: bytes = every tensor it reads or writes once (the minimum the op's math needs at its
-- layout), FLOPs = its products (2 m n k each; attention: the products its kernels compute,
-- beside the minimum FlashAttention-2 needs), and the predicted time
--   max(bytes / 4.3 TB/s, FLOPs / rate), rate 790 TFLOP/s for bf16/f16 products on the tensor
--   cores (cuBLASLt, the WMMA attention), 60 TFLOP/s for the rest (f32 CUDA cores).
-- The sum is a floor, not a forecast: no launch latency, no overlap, no kernel below its ceiling.
-- The first GPU run measures what the floor predicts. Prints the table, the predicted step
-- time and tokens/s, and where the Linear's bias and the GELU run (the bias in the product's
-- cuBLASLt epilogue; the GELU and its derivative in them too for --act gelu_new, the tanh form
-- cuBLASLt computes, else passes of their own: BERT's "gelu", the default, is the erf form), and
-- whether the backward sums input gradients in add_ passes (none: linear_backward adds each
-- into the gradient already there, in the product); --json writes the rows.
local ffi = require("ffi")
local bert = require("trainer.models.bert")
local optim = require("trainer.train.optim")
local losses = require("trainer.losses")
local amp = require("trainer.train.amp")
local ops = require("trainer.core.ops")
local lora = require("trainer.train.lora")
local checkpoint = require("trainer.train.grad_checkpoint")

local HBM, TENSOR, SIMT = 4.3e12, 790e12, 60e12

-- ---------------------------------------------------------------- options
local opt = { layers = 1, hidden = 96, heads = 3, intermediate = 192, seq = 40, batch = 2, vocab = 500,
  ["target-layers"] = 24, ["target-hidden"] = 1024, ["target-heads"] = 16, ["target-intermediate"] = 4096,
  ["target-seq"] = 512, ["target-batch"] = 16, ["target-vocab"] = 30522 }
local json_path
opt.act = "gelu"
opt.lora_dropout = 0.1
do
  local i = 1
  while arg and arg[i] do
    local k = arg[i]:match("^%-%-([%w-]+)$")
    local v = arg[i + 1]
    if k == "json" and v then json_path = v
    elseif k == "act" and v then opt.act = v
    elseif k == "lora-dropout" and tonumber(v) then opt.lora_dropout = tonumber(v)
    elseif k and opt[k] ~= nil and tonumber(v) then opt[k] = math.floor(tonumber(v))
    else error("bench/gpu/step_budget.lua: unknown flag or bad value at " .. tostring(arg[i]), 0) end
    i = i + 2
  end
end
local D, tD = math.floor(opt.hidden / opt.heads), math.floor(opt["target-hidden"] / opt["target-heads"])

-- the measured shape's dimensions and where each goes at the target
local dim_map = {
  [opt.batch] = opt["target-batch"], [opt.seq] = opt["target-seq"], [opt.batch * opt.seq] = opt["target-batch"] *
  opt["target-seq"], [opt.hidden] = opt["target-hidden"], [opt.heads] = opt["target-heads"], [D] = tD,
  [opt.intermediate] = opt["target-intermediate"], [opt.vocab] = opt["target-vocab"],
}
do
  local n = 0
  for _ in pairs(dim_map) do n = n + 1 end
  if n ~= 8 then error("bench/gpu/step_budget.lua: the measured dimensions must differ from each other", 0) end
end

-- ---------------------------------------------------------------- the launch log (emulator only)
local here = debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or "bench/gpu"
local log_ok = dofile(here .. "/launch_log.lua")
local rec = log_ok and ffi.new("struct cudacpu_launch") or nil
local function log_count() return log_ok and ffi.C.cudacpu_launch_log_count() or 0 end
local function kernel_name(s)
  if s == "cudaLaunchHostFunc" then return "cublasLt product" end
  return (s:gsub("<[^>]*>", "<>"))
end

-- ---------------------------------------------------------------- op figures
local function is_tensor(x) return type(x) == "table" and type(x.nbytes) == "function" and type(x.shape) == "function" end
local function half(t) local d = t:dtype() return d == "bf16" or d == "f16" end

-- the shape at the target: each dimension substituted
local function target_numel(shape)
  local n = 1
  for _, s in ipairs(shape) do n = n * (dim_map[s] or s) end
  return n
end
local function elem_bytes(t) return t:nbytes() / math.max(1, t:numel()) end

-- FLOPs (measured, target, minimum at target) of a product op, and whether it runs on the
-- tensor cores; nil for the others
local function attn_dims(q, target)
  local s = q:shape()
  local f = target and function(x) return dim_map[x] or x end or function(x) return x end
  return f(s[1]), f(s[2]), f(s[3]), f(s[4])
end
local products
products = {
  linear = function(a) -- x, w: 2 rows in out
    local x, w = a[1], a[2]
    local out = w:shape()[1]
    local m = 2 * x:numel() * out
    local t = 2 * target_numel(x:shape()) * (dim_map[out] or out)
    return m, t, t, half(x)
  end,
  linear_backward = function(a) -- dout, x, w, dw, dbias, want_dx
    local dout, w, dw, want_dx = a[1], a[3], a[4], a[6]
    local inn = w:shape()[2]
    local k = (want_dx ~= false and 1 or 0) + (dw and 1 or 0)
    local m = 2 * k * dout:numel() * inn
    local t = 2 * k * target_numel(dout:shape()) * (dim_map[inn] or inn)
    return m, t, t, half(dout)
  end,
  linear_gelu = function(a) return products.linear(a) end,
  linear_backward_dgelu = function(a) -- dout, x, w, h, kind, dw, dbias, dhbias
    local dout, w, dw = a[1], a[3], a[6]
    local inn = w:shape()[2]
    local k = 1 + (dw and 1 or 0)
    return 2 * k * dout:numel() * inn, 2 * k * target_numel(dout:shape()) * (dim_map[inn] or inn),
      2 * k * target_numel(dout:shape()) * (dim_map[inn] or inn), half(dout)
  end,
  matmul = function(a, outs)
    local x, y, o = a[1], a[2], outs[1]
    local sx = x:shape()
    local kk = (a[3] and a[3].trans_a) and sx[#sx - 1] or sx[#sx]
    local m = 2 * o:numel() * kk
    local t = 2 * target_numel(o:shape()) * (dim_map[kk] or kk)
    return m, t, t, half(x) and half(y)
  end,
  -- the forward: S = Q K^T and O = P V
  attention = function(a)
    local B, Tn, H, Dh = attn_dims(a[1], false)
    local tB, tT, tH, tDh = attn_dims(a[1], true)
    local tc = half(a[1]) and Dh % 16 == 0 and Dh >= 32 and Dh <= 128
    return 4 * B * H * Tn * Tn * Dh, 4 * tB * tH * tT * tT * tDh, 4 * tB * tH * tT * tT * tDh, tc
  end,
  -- dK/dV (4 products) and dQ (3), and the forward's output recomputed (2) unless the caller
  -- passed it (opts.out); FlashAttention-2's minimum is 5 (S recomputed, dP, dV, dK, dQ)
  attention_backward = function(a)
    local B, Tn, H, Dh = attn_dims(a[2], false)
    local tB, tT, tH, tDh = attn_dims(a[2], true)
    local tc = half(a[2]) and Dh % 16 == 0 and Dh >= 32 and Dh <= 128
    local one = 2 * B * H * Tn * Tn * Dh
    local tone = 2 * tB * tH * tT * tT * tDh
    local n = (a[7] and a[7].out) and 7 or 9
    return n * one, n * tone, 5 * tone, tc
  end,
}

local rows -- the measurement in progress: rows by key, and in order
local in_backward = false -- whether the model's backward is running (its add_ calls are counted apart)
local function note(name, args, outs, first, last)
  local bytes, tbytes, seen = 0, 0, {}
  local function add(t)
    if is_tensor(t) and not seen[t] then
      seen[t] = true
      bytes = bytes + t:nbytes()
      tbytes = tbytes + target_numel(t:shape()) * elem_bytes(t)
    end
  end
  for i = 1, args.n do add(args[i]) end
  for _, t in ipairs(outs) do add(t) end
  local fl, tfl, tmin, tensor = 0, 0, 0, false
  if products[name] then fl, tfl, tmin, tensor = products[name](args, outs) end
  local kernels, launches = {}, {}
  for i = first, last - 1 do
    ffi.C.cudacpu_launch_log_get(i, rec)
    local k = kernel_name(ffi.string(rec.name))
    if not kernels[k] then kernels[#kernels + 1] = k; kernels[k] = true end
    launches[#launches + 1] = i
  end
  -- an op that launched nothing (a frozen projection's backward with no gradient owed) moves nothing
  if log_ok and #launches == 0 then bytes, tbytes = 0, 0 end
  local key = name .. "|" .. table.concat(kernels, ",")
  local r = rows[key]
  if not r then
    r = { key = key, op = name, kernels = table.concat(kernels, ", "), calls = 0, backward_calls = 0, launches = 0,
      bytes = 0, flops = 0, mma_flops = 0, t_bytes = 0, t_flops = 0, t_min_flops = 0, tensor = tensor }
    rows[key] = r
    rows[#rows + 1] = r
  end
  r.calls, r.launches = r.calls + 1, r.launches + #launches
  if in_backward then r.backward_calls = r.backward_calls + 1 end
  r.bytes, r.flops = r.bytes + bytes, r.flops + fl
  r.log = r.log or {}
  for _, i in ipairs(launches) do r.log[#r.log + 1] = i end
  r.t_bytes, r.t_flops, r.t_min_flops = r.t_bytes + tbytes, r.t_flops + tfl, r.t_min_flops + tmin
end

-- every function of ops that may launch work, wrapped; calls inside a wrapped call are its own
local wrapped, depth = {}, 0
local skip = { rng_key = true, gelu_kind = true, supported = true, built = true, cuda_built = true,
  cpu_products = true, names = true }
local function wrap_ops()
  for name, f in pairs(ops) do
    if type(f) == "function" and not skip[name] then
      wrapped[name] = f
      ops[name] = function(...)
        if depth > 0 then return f(...) end
        depth = depth + 1
        local first = log_count()
        local res = { n = 0 }
        local function keep(...) res = { n = select("#", ...), ... } end
        keep(pcall(f, ...))
        depth = depth - 1
        if not res[1] then error(res[2], 0) end
        local outs = {}
        for i = 2, res.n do if is_tensor(res[i]) then outs[#outs + 1] = res[i] end end
        note(name, { n = select("#", ...), ... }, outs, first, log_count())
        return unpack(res, 2, res.n)
      end
    end
  end
end
local function unwrap_ops() for name, f in pairs(wrapped) do ops[name] = f end end

-- ---------------------------------------------------------------- model and step
local random_batch = dofile(here .. "/../random_batch.lua")   -- the emulator's build root has no bench/
local data = random_batch.new(opt.batch, opt.seq, opt.vocab, 42, 103, 101, 102, "cuda")
local batch, labels = { input_ids = data.input_ids, attention_mask = data.attention_mask }, data.labels

-- One measured step of a model of `layers` layers: its rows.
local function measure(layers)
  local cfg = bert.config({ hidden_size = opt.hidden, num_hidden_layers = layers, num_attention_heads = opt.heads,
    intermediate_size = opt.intermediate, vocab_size = opt.vocab, max_position_embeddings = 512,
    hidden_act = opt.act, hidden_dropout_prob = 0.1, attention_probs_dropout_prob = 0.1 }, "bench")
  local model = bert.SequenceClassifier.new(bert.BertModel.new(cfg, { seed = 1, device = "cuda" }), 2,
    { seed = 1, device = "cuda" })
  model:train()
  lora.apply(model, { r = 8, alpha = 16, dropout = opt.lora_dropout, targets = { "query", "value" } })
  amp.prepare(model, "bf16")
  checkpoint.apply(model, { every = 1 })
  local opt_ = optim.new(model, { name = "adamw", lr = 1e-5 })
  local loss = losses.new({ name = "cross_entropy" })
  local function step(n)
    model.rng.step = n
    opt_:zero_grad()
    local logits = model:forward(batch)
    loss:forward({ logits }, labels)
    local g = loss:backward()[1]
    in_backward = true
    model:backward(g)
    in_backward = false
    g:free(); logits:free()
    opt_:step()
  end
  step(1)
  rows = {}
  wrap_ops()
  if log_ok then ffi.C.cudacpu_launch_log(1) end
  local ok, err = pcall(step, 2)
  in_backward = false
  unwrap_ops()
  if log_ok then
    -- the WMMA products of each row's launches, once every launch ran (deferred streams)
    assert(ffi.C.cudaDeviceSynchronize() == 0, "cudaDeviceSynchronize")
    ffi.C.cudacpu_launch_log(0)
    for _, r in ipairs(rows) do
      for _, i in ipairs(r.log or {}) do
        ffi.C.cudacpu_launch_log_get(i, rec)
        r.mma_flops = r.mma_flops + tonumber(rec.mma_syncs) * 2 * 16 * 16 * 16
      end
    end
  end
  opt_:free(); loss:free(); model:free()
  if not ok then error(err, 0) end
  return rows
end

-- the step at the target's layers: what one more layer adds, times the layers, plus the rest
local L1 = opt.layers
local one, two = measure(L1), measure(L1 + 1)
batch.input_ids:free(); batch.attention_mask:free()
local fields = { "calls", "backward_calls", "launches", "bytes", "flops", "mma_flops", "t_bytes", "t_flops",
  "t_min_flops" }
rows = {}
for _, r2 in ipairs(two) do
  local r1 = one[r2.key] or {}
  local r = { op = r2.op, kernels = r2.kernels, tensor = r2.tensor }
  for _, f in ipairs(fields) do
    local per_layer = r2[f] - (r1[f] or 0)
    r[f] = math.max(0, (r1[f] or 0) - L1 * per_layer + opt["target-layers"] * per_layer)
  end
  rows[#rows + 1] = r
end

-- ---------------------------------------------------------------- the table
local total, total_launches = 0, 0
for _, r in ipairs(rows) do
  local rate = r.tensor and TENSOR or SIMT
  local tb, tf = r.t_bytes / HBM, r.t_flops / rate
  r.predicted_s = math.max(tb, tf)
  r.bound = r.t_flops == 0 and "memory" or (tf > tb and (r.tensor and "tensor" or "fp32") or "memory")
  r.floor_s = math.max(tb, r.t_min_flops / rate)
  total, total_launches = total + r.predicted_s, total_launches + r.launches
end
table.sort(rows, function(a, b) return a.predicted_s > b.predicted_s end)

local tokens = opt["target-batch"] * opt["target-seq"]
io.write(("step budget: BERT %d layers, hidden %d, %d heads (head size %d), intermediate %d, hidden_act %s, bf16 + "
  .. "checkpointing + LoRA r 8 (query, value, dropout " .. opt.lora_dropout .. "), %d x %d tokens; measured at %s layers, hidden %d, %d heads, "
  .. "intermediate %d, %d x %d%s\n"):format(opt["target-layers"], opt["target-hidden"], opt["target-heads"], tD,
  opt["target-intermediate"], opt.act, opt["target-batch"], opt["target-seq"], L1 .. " and " .. (L1 + 1), opt.hidden,
  opt.heads, opt.intermediate, opt.batch, opt.seq, log_ok and " under the emulator" or " (no launch log: not the emulator)"))
io.write(("ceilings: %.1f TB/s HBM, %.0f TFLOP/s bf16 tensor, %.0f TFLOP/s fp32\n"):format(HBM / 1e12, TENSOR / 1e12,
  SIMT / 1e12))
io.write(("%-28s %-58s %7s %8s %10s %10s %10s %10s %-7s\n"):format("op", "kernels", "calls", "launches", "MB",
  "GFLOP", "min GFLOP", "pred us", "bound"))
for _, r in ipairs(rows) do
  io.write(("%-28s %-58s %7d %8d %10.1f %10.1f %10.1f %10.1f %-7s\n"):format(r.op, r.kernels == "" and "-" or r.kernels,
    math.floor(r.calls + 0.5), math.floor(r.launches + 0.5), r.t_bytes / 1e6, r.t_flops / 1e9,
    r.t_min_flops / 1e9, r.predicted_s * 1e6, r.bound))
end
-- where the bias and the GELU ran: a kernel of its own beside a product, or its epilogue
local bias_kernels, gelu_fused, gelu_passes, dgelu_fused, dgelu_passes = 0, 0, 0, 0, 0
for _, r in ipairs(rows) do
  if r.op == "linear" or r.op == "linear_gelu" then
    for k in r.kernels:gmatch("[^,]+") do
      k = k:gsub("^%s+", "")
      if k ~= "cublasLt product" and k ~= "map1_kernel<>" then bias_kernels = bias_kernels + r.launches end
    end
  end
  if r.op == "linear_gelu" and r.kernels == "cublasLt product" then gelu_fused = gelu_fused + r.calls end
  if r.op == "gelu" or r.kernels:find("gelu_fwd", 1, true) then gelu_passes = gelu_passes + r.calls end
  if r.op == "linear_backward_dgelu" and not r.kernels:find("gelu_bwd", 1, true) then
    dgelu_fused = dgelu_fused + r.calls
  end
  if r.kernels:find("gelu_bwd", 1, true) then dgelu_passes = dgelu_passes + r.calls end
end
io.write(("epilogues: the Linear's bias in the cuBLASLt product (%s); the GELU %s\n"):format(
  bias_kernels == 0 and "no bias pass" or ("%d launches beside the products"):format(math.floor(bias_kernels + 0.5)),
  gelu_fused > 0 and gelu_passes == 0 and ("in the up-projection's epilogue (GELU_AUX_BIAS, %d calls; tanh form)")
    :format(math.floor(gelu_fused + 0.5))
  or ("a pass of its own (%d calls%s)"):format(math.floor(gelu_passes + 0.5),
    opt.act == "gelu" and ": erf form, which cuBLASLt's tanh GELU epilogue does not compute" or "")))
io.write(("epilogues: the GELU derivative %s\n"):format(dgelu_fused > 0 and dgelu_passes == 0 and
  ("in the down-projection's input-gradient product (DGELU, %d calls)"):format(math.floor(dgelu_fused + 0.5))
  or ("a pass of its own (%d calls)"):format(math.floor(dgelu_passes + 0.5))))
-- input gradients that meet (the residual and the attention's three projections, a LoRA path
-- beside its base) add in the products (linear_backward's beta = 1), not in add_ passes
local backward_adds = 0
for _, r in ipairs(rows) do if r.op == "add_" then backward_adds = backward_adds + r.backward_calls end end
io.write(("input gradients: %s\n"):format(backward_adds == 0 and "summed in the products (no add_ in the backward)"
  or ("%d add_ passes in the backward"):format(math.floor(backward_adds + 0.5))))
io.write(("predicted step time %.2f ms (%d launches; launch latency not counted), %.0f tokens/s at the ceilings\n")
  :format(total * 1e3, math.floor(total_launches + 0.5), tokens / total))

if json_path then
  local f = assert(io.open(json_path, "w"))
  local parts = {}
  for _, r in ipairs(rows) do
    parts[#parts + 1] = ('{"op": "%s", "kernels": "%s", "calls": %d, "launches": %d, "bytes": %.0f, "flops": %.0f, '
      .. '"min_flops": %.0f, "tensor": %s, "predicted_s": %.9g, "bound": "%s", "measured_mma_flops": %.0f}')
      :format(r.op, r.kernels, math.floor(r.calls + 0.5), math.floor(r.launches + 0.5), r.t_bytes,
      r.t_flops, r.t_min_flops, tostring(r.tensor), r.predicted_s, r.bound, r.mma_flops)
  end
  f:write(('{"predicted_step_s": %.9g, "tokens_per_s": %.1f, "launches": %d, "act": "%s", "bias_kernels": %d, '
    .. '"gelu_fused_calls": %d, "gelu_pass_calls": %d, "dgelu_fused_calls": %d, "dgelu_pass_calls": %d, '
    .. '"backward_add_calls": %d, "rows": [\n  %s\n]}\n'):format(total, tokens / total, math.floor(total_launches + 0.5),
    opt.act, math.floor(bias_kernels + 0.5), math.floor(gelu_fused + 0.5), math.floor(gelu_passes + 0.5),
    math.floor(dgelu_fused + 0.5), math.floor(dgelu_passes + 0.5), math.floor(backward_adds + 0.5),
    table.concat(parts, ",\n  ")))
  f:close()
end
