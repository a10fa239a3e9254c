-- The C ops through trainer.ops: values on small known cases, gradient accumulation,
-- half dtypes, and errors that name the op. (Each op's backward is proven against
-- finite differences in the C tests; these prove the binding.)
local T = require("trainer.core.tensor")
local ops = require("trainer.core.ops")
local errors = require("trainer.core.errors")
local memory = require("trainer.core.memory")

local function near(a, b, tol, what)
  assert(math.abs(a - b) <= (tol or 1e-5) * math.max(1, math.abs(b)), ("%s: %.9g vs %.9g"):format(what or "value", a, b))
end

local function free(...) for _, t in ipairs({ ... }) do t:free() end end

return {
  { "linear_forward_backward", function()
    local x = T.from_table({ { 1, 2, 3 }, { -1, 0, 2 } })
    local w = T.from_table({ { 1, 0, 0 }, { 0, 1, 0 }, { 0, 0, 1 }, { 1, 1, 1 } })
    local b = T.from_table({ 0.5, 0, 0, -1 })
    local y = ops.linear(x, w, b)
    local v = y:tolist()
    assert(v[1][1] == 1.5 and v[1][4] == 5 and v[2][4] == 0, table.concat(v[1], ","))
    local dw, db = T.zeros({ 4, 3 }, { tag = "grads" }), T.zeros({ 4 }, { tag = "grads" })
    local dy = T.ones({ 2, 4 })
    local dx = ops.linear_backward(dy, x, w, dw, db)
    assert(dx:tolist()[1][1] == 2)                -- column sums of w
    assert(dw:tolist()[1][1] == 0 and dw:tolist()[4][3] == 5 and db:tolist()[1] == 2)
    ops.linear_backward(dy, x, w, dw, db, false)  -- accumulates, no dx
    assert(dw:tolist()[4][3] == 10 and db:tolist()[1] == 4)
    free(x, w, b, y, dw, db, dy, dx)
  end },
  { "linear_backward_into_adds_the_input_gradient_in_place", function()
    local x = T.from_table({ { 1, 2, 3 }, { -1, 0, 2 } })
    local w = T.from_table({ { 1, 0, 0 }, { 0, 1, 0 }, { 0, 0, 1 }, { 1, 1, 1 } })
    local dy = T.ones({ 2, 4 })
    local dw = T.zeros({ 4, 3 }, { tag = "grads" })
    -- f32; bf16 with a bf16 weight (the native bf16 product where the CPU has one) and with
    -- the f32 weight (staged to f32)
    local start = T.from_table({ { 10, 20, 30 }, { -1, -2, -3 } })
    for _, c in ipairs({ { "f32", "f32" }, { "bf16", "bf16" }, { "bf16", "f32" } }) do
      local into, dyd, wd = start:to(c[1]), dy:to(c[1]), w:to(c[2])
      assert(ops.linear_backward(dyd, nil, wd, nil, nil, nil, into) == into, "returns into")
      local back = into:to("f32")
      local v = back:tolist()
      assert(v[1][1] == 12 and v[1][3] == 32 and v[2][2] == 0, c[1] .. ": " .. table.concat(v[1], ","))
      free(into, dyd, wd, back)
    end
    start:free()
    -- the weight gradient beside it, as linear_backward's
    local into = T.zeros({ 2, 3 })
    ops.linear_backward(dy, x, w, dw, nil, false, into)   -- into wins over want_dx
    assert(into:tolist()[1][1] == 2 and dw:tolist()[4][3] == 5)
    local ok, err = pcall(ops.linear_backward, dy, x, w, nil, nil, nil, T.zeros({ 2, 4 }))
    assert(not ok and tostring(err):find("linear_backward", 1, true), tostring(err))
    free(x, w, dy, dw, into)
  end },
  { "layernorm_normalises", function()
    local x = T.randn({ 4, 16 }, { seed = 1 })
    local w, b = T.ones({ 16 }), T.zeros({ 16 })
    local y, mean, rstd = ops.layernorm(x, w, b, 1e-5)
    for _, row in ipairs(y:tolist()) do
      local s, sq = 0, 0
      for _, v in ipairs(row) do s = s + v; sq = sq + v * v end
      near(s / 16, 0, 1e-5, "mean")
      near(sq / 16, 1, 1e-3, "variance")
    end
    assert(mean:dtype() == "f32" and rstd:numel() == 4)
    local dw, db = T.zeros({ 16 }), T.zeros({ 16 })
    local dx = ops.layernorm_backward(T.ones({ 4, 16 }), x, w, mean, rstd, dw, db)
    near(db:tolist()[1], 4, 1e-6, "dbias")
    free(x, w, b, y, mean, rstd, dw, db, dx)
  end },
  { "gelu_and_softmax", function()
    local x = T.from_table({ { 0, 1, -1 } })
    local g = ops.gelu(x, ops.gelu_kind("gelu")):tolist()[1]
    near(g[2], 0.8413447, 1e-6, "gelu(1)")
    local s = ops.softmax(x):tolist()[1]
    near(s[1] + s[2] + s[3], 1, 1e-6, "softmax sums to 1")
    local ok, e = pcall(ops.gelu_kind, "swish")
    assert(not ok and errors.is_user_error(e))
    free(x)
  end },
  { "attention_shapes_and_mask", function()
    local B, L, H, D = 2, 5, 2, 4
    local q = T.randn({ B, L, H, D }, { seed = 2 })
    local k = T.randn({ B, L, H, D }, { seed = 3 })
    local v = T.randn({ B, L, H, D }, { seed = 4 })
    local mask = T.from_table({ { 1, 1, 1, 1, 1 }, { 1, 1, 1, 0, 0 } }, { dtype = "i32" })
    local out, lse = ops.attention(q, k, v, mask)
    assert(out:shape()[4] == D and lse:shape()[2] == H and lse:shape()[3] == L)
    local dq, dk, dv = ops.attention_backward(T.ones({ B, L, H, D }), q, k, v, lse, mask)
    -- padded keys get no gradient
    local dkv = dk:tolist()
    for h = 1, H do for d = 1, D do assert(dkv[2][5][h][d] == 0 and dkv[2][4][h][d] == 0) end end
    free(q, k, v, mask, out, lse, dq, dk, dv)
  end },
  { "cross_entropy_known_value", function()
    local logits = T.zeros({ 2, 3 })
    local targets = T.from_table({ 0, 2 }, { dtype = "i64" })
    local loss, lse = ops.cross_entropy(logits, targets)
    near(loss:item(), math.log(3), 1e-6, "loss")
    local d = ops.cross_entropy_backward(logits, lse, targets, 1):tolist()
    near(d[1][1], (1 / 3 - 1) / 2, 1e-6, "dlogit of the target")
    free(logits, targets, loss, lse)
  end },
  { "pooling_similarity_reductions", function()
    local h = T.from_table({ { { 1, 2 }, { 3, 4 }, { 100, 100 } } })
    local mask = T.from_table({ { 1, 1, 0 } }, { dtype = "i32" })
    local m = ops.pool(h, mask, "mean"):tolist()[1]
    assert(m[1] == 2 and m[2] == 3)
    local c = ops.pool(h, mask, "cls"):tolist()[1]
    assert(c[1] == 1)
    local a = T.from_table({ { 1, 0 }, { 0, 2 } })
    local sim = ops.cosine_sim(a, a):tolist()
    near(sim[1][1], 1, 1e-6) near(sim[1][2], 0, 1e-6) near(sim[2][2], 1, 1e-6)
    near(ops.sum(a):item(), 3, 1e-6, "sum")
    near(ops.global_norm({ a, a }), math.sqrt(10), 1e-6, "global norm")
    local inf = T.from_table({ 1, math.huge })
    assert(ops.scale_check_finite({ inf }, 0.5) == true)
    assert(ops.scale_check_finite({ a }, 2) == false and a:tolist()[2][2] == 4)
    free(h, mask, a, inf)
  end },
  { "adamw_first_step", function()
    local p = T.from_table({ 1.0 })
    local g = T.from_table({ 0.5 })
    local m, v = T.zeros({ 1 }, { tag = "optimizer" }), T.zeros({ 1 }, { tag = "optimizer" })
    ops.adamw_(p, g, m, v, { lr = 0.1, weight_decay = 0.01, step = 1 })
    -- decay then a bias-corrected step of size lr * g / (|g| + eps) = lr
    near(p:item(), 1 * (1 - 0.1 * 0.01) - 0.1 * 0.5 / (0.5 + 1e-8), 1e-6, "param")
    free(p, g, m, v)
  end },
  { "bf16_linear_close_to_f32", function()
    local x = T.randn({ 8, 32 }, { seed = 5 })
    local w = T.randn({ 16, 32 }, { seed = 6 })
    local y32 = ops.linear(x, w, nil):values()
    local xh = x:to("bf16")
    local yh = ops.linear(xh, w, nil)
    assert(yh:dtype() == "bf16")
    local v = yh:values()
    for i = 1, #v do assert(math.abs(v[i] - y32[i]) <= 0.05 * math.max(1, math.abs(y32[i])), i) end
    free(x, w, xh, yh)
  end },
  { "shape_errors_name_the_op_and_free_outputs", function()
    collectgarbage()
    local before = memory.stats().allocated
    local x = T.zeros({ 2, 3 })
    local w = T.zeros({ 4, 5 })
    local ok, e = pcall(ops.linear, x, w, nil)
    assert(not ok and errors.is_user_error(e), tostring(e))
    assert(e.msg:find("linear", 1, true), e.msg)
    free(x, w)
    assert(memory.stats().allocated == before, "a failed op leaked its output")
  end },
  { "cpu_products_says_library_and_bf16_path", function()
    local info = ops.cpu_products()
    assert(info.library == "onednn" or info.library == "openblas", "library " .. tostring(info.library))
    assert(info.bf16 == "native" or info.bf16 == "f32", "bf16 " .. tostring(info.bf16))
    -- native bf16 products are oneDNN's: OpenBLAS has none
    if info.library == "openblas" then assert(info.bf16 == "f32", "OpenBLAS with native bf16 products") end
    -- a bf16 Linear gives the f32 product of its rounded operands to bf16's precision on either path
    local x = T.from_table({ { 1.5, -2, 0.25, 3 }, { 0.5, 1, -1, 2 } }):to({ dtype = "bf16" })
    local w = T.from_table({ { 1, 0.5, -0.25, 2 }, { -1, 1, 1, 0.125 }, { 0.75, 0, 2, -2 } }):to({ dtype = "bf16" })
    local yt = ops.linear(x, w)
    local y = yt:tolist()
    local want = { { 1.5 - 1 - 0.0625 + 6, -1.5 - 2 + 0.25 + 0.375, 1.125 + 0.5 - 6 },
                   { 0.5 + 0.5 + 0.25 + 4, -0.5 + 1 - 1 + 0.25, 0.375 - 2 - 4 } }
    for i = 1, 2 do for j = 1, 3 do near(y[i][j], want[i][j], 1e-2, ("y[%d][%d] on %s bf16"):format(i, j, info.bf16)) end end
    free(x, w, yt)
  end },
  { "op_table_supported", function()
    local names = ops.names()
    assert(#names >= 40, "op table has " .. #names .. " ops")
    local seen = {}
    for _, n in ipairs(names) do seen[n] = true; assert(ops.supported(n, "cpu"), n .. " must run on the cpu") end
    assert(seen.linear and seen.attention_backward and seen.adafactor, "op names")
    assert(not ops.supported("no_such_op", "cpu"))
    -- supported also needs the device: without a GPU no CUDA device is present
    if require("trainer.core.ffi").tr_cuda_device_count() == 0 then assert(not ops.supported("linear", "cuda")) end
    assert(not ops.supported("linear", "cuda:15"))
    local ok, e = pcall(ops.supported, "linear", "tpu")
    assert(not ok and tostring(e):find("unknown device"), tostring(e))
  end },
  { "op_table_cuda_slot_of_every_op", function()
    -- a build with the CUDA backend fills every op's CUDA slot (core/cuda_ops/), one without
    -- fills none (the dispatcher's "not built" error); no GPU is needed to ask
    local cuda, missing = ops.cuda_built(), {}
    for _, n in ipairs(ops.names()) do
      assert(ops.built(n, "cpu"), n .. " has no CPU slot")
      if ops.built(n, "cuda") ~= cuda or ops.built(n, "cuda:3") ~= cuda then missing[#missing + 1] = n end
    end
    assert(#missing == 0, (cuda and "no CUDA slot built for: " or "a CUDA slot in a build without CUDA: ")
      .. table.concat(missing, ", "))
    assert(not ops.built("no_such_op", "cuda") and not ops.built("linear", -2))
    print(("  op table: %d ops, CUDA slots %s"):format(#ops.names(), cuda and "built for every one" or "not built (no nvcc)"))
  end },
}
