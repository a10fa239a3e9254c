-- trainer.plan.time: the predicted time of one optimizer step, so that `trainer plan` shows the
-- price of each memory saving (checkpointing recomputes the forward, GradCache embeds twice,
-- accumulation runs smaller products more often, half precision converts) and memory.fit can
-- choose by it.
--
-- A step's work (trainer.plan.step_cost, in plan.cost) is counted in five parts:
--   flops    the matrix products of every micro-batch: each Linear 2 x tokens x in x out in the
--            forward, twice that in the backward of a trainable weight (input and weight
--            gradients), once for a frozen one (input gradient only); the attention 4 x tokens x
--            seq x hidden forward and twice that backward; plus one forward more of every
--            recomputed layer (checkpointing's: every segment's but the last) and of the whole
--            model under a cached loss
--            (GradCache's first pass without gradients)
--   calls    the product calls, each with a fixed cost beyond its FLOPs (M.call_seconds):
--            what makes many small products slower than few large ones at the same work
--   tokens   the element-wise work (layer norms, GELU, softmax, dropout, residuals, casts):
--            tokens x layers x hidden x passes (a backward counts two)
--   bytes    what the step moves through memory: each product's weight read once per use, the
--            activations written and read, the gradients accumulated per micro-batch, the
--            optimizer's read and write of every trainable parameter's state once per step
--   ops      the ops each micro-batch launches, at a fixed cost each (dispatch, a launch)
-- at the device's rates. On the CPU they are measured once on this machine (M.probe_cpu: a
-- product at two sizes, in f32 and with bf16 activations, a streaming add, a small model's
-- micro-batch at two depths and two sizes in f32 and bf16; about two seconds, in CPU time over
-- the threads, so that a busy machine measures its own speed, not its neighbours') and cached
-- under the user's cache folder. On a GPU they are the card's published peak rates
-- (trainer.plan.cards), or, for a card not listed, figures from its compute capability and
-- multiprocessors, with the element-wise work left to the bytes. The prediction ranks choices
-- rather than timing them: docs/BENCHMARKS.md ("Predicted step time") puts it beside measured
-- steps.
local json = require("trainer.core.json")

local M = {}

-- The rows of a product at which a device reaches half its rate, where its rates do not say
-- (the CPU's probe measures its own).
M.ROWS_HALF = { cpu = 24, cuda = 384 }
-- Seconds each op costs beyond its work (Lua dispatch and the op table on the CPU, a launch on a GPU).
M.OP_SECONDS = { cpu = 15e-6, cuda = 8e-6 }

-- ---------------------------------------------------------------- the CPU's rates
local function cache_dir()
  local d = os.getenv("TRAINER_CACHE_DIR")
  if d and d ~= "" then return d end
  local x = os.getenv("XDG_CACHE_HOME")
  if x and x ~= "" then return x .. "/trainer" end
  local home = os.getenv("HOME")
  if home and home ~= "" then return home .. "/.cache/trainer" end
  return nil
end
M.cache_dir = cache_dir

-- "model name, N threads, library": what the cached rates are valid for.
local function cpu_identity()
  local name = "unknown CPU"
  local f = io.open("/proc/cpuinfo", "r")
  if f then
    for line in f:lines() do
      local v = line:match("^model name%s*:%s*(.-)%s*$")
      if v then name = v break end
    end
    f:close()
  end
  local C = require("trainer.core.ffi")
  local runtime = require("trainer.core.runtime")
  local threads = os.getenv("OMP_NUM_THREADS") or "default"
  local lib = C.tr_cpu_gemm_library(runtime.ctx)
  lib = lib ~= nil and require("ffi").string(lib) or "?"
  return ("%s, %s threads, %s"):format(name, threads, lib)
end

-- The threads the CPU products run on: OMP_NUM_THREADS, else every CPU the system has.
function M.cpu_threads()
  local n = tonumber(os.getenv("OMP_NUM_THREADS") or "")
  if n and n >= 1 then return n end
  n = 0
  local f = io.open("/proc/cpuinfo", "r")
  if f then
    for line in f:lines() do if line:match("^processor%s*:") then n = n + 1 end end
    f:close()
  end
  return math.max(1, n)
end

-- Seconds of CPU this process has used, over the threads the products run on: the time its
-- work takes on an idle machine, which the wall clock of a shared one does not show (a
-- neighbour's work stretches it).
local function cpu_now()
  return require("trainer.core.sys").cpu_time() / M.cpu_threads()
end

-- Times fn (repeated until `at_least` seconds passed) and returns seconds per call, the best
-- of three rounds (a shared machine's other work only ever slows a round down).
local function best_time(fn, at_least)
  local now = cpu_now
  local best = math.huge
  fn()   -- warm-up: first-touch pages, packed weights, the library's threads
  for _ = 1, 3 do
    local n, t0 = 0, now()
    repeat fn() n = n + 1 until now() - t0 >= at_least
    best = math.min(best, (now() - t0) / n)
  end
  return best
end

-- Measures this machine's rates through the runtime's own ops, in CPU time over the threads
-- (cpu_now), in about two seconds:
--   flops, rows_half   a product of [rows x 384] by [384 x 1536] (MiniLM's feed-forward) at 128
--                      and at 2048 rows: its times t(r) = 2 K N (r + rows_half) / flops give both
--   product_half       how much longer the same product takes with bf16 activations (widened
--                      to f32 where the CPU has no native bf16 products)
--   bytes              an add over 16 MiB operands (larger than the caches)
--   op_seconds, token_seconds, token_half_seconds   a small model's micro-batch (M.probe_layers)
function M.probe_cpu()
  local memory = require("trainer.core.memory")
  -- The probe's tensors are not the run's: memory.limit does not bound them (a plan that
  -- would stop a run above it must still get its rates), and when nothing of the run was
  -- allocated yet, the peaks start after the probe, as if it had been cached.
  local before = memory.stats()
  memory.set_limit(nil)
  local ok, r = pcall(M.probe_cpu_rates)
  memory.empty_cache()
  memory.set_limit(before.limit > 0 and before.limit or nil)
  if before.allocated == 0 then memory.reset_peak() end
  if not ok then error(r, 0) end
  return r
end

function M.probe_cpu_rates()
  local T = require("trainer.core.tensor")
  local ops = require("trainer.core.ops")
  return T.scope(function()
    local K, N = 384, 1536
    local w = T.randn({ K, N })
    local t = {}
    for i, r in ipairs({ 128, 2048 }) do
      local a, out = T.randn({ r, K }), T.empty({ r, N })
      t[i] = best_time(function() ops.matmul(a, w, { out = out }) end, 0.15)
    end
    local slope = (t[2] - t[1]) / (2048 - 128)
    local flops = 2 * K * N / math.max(slope, 1e-15)
    local rows_half = math.max(1, (t[1] / slope) - 128)
    if slope <= 0 then flops, rows_half = 2 * K * N * 2048 / t[2], 1 end
    local ah = ops.cast(T.randn({ 2048, K }), "bf16")
    local th = best_time(function() local o = ops.matmul(ah, w, { dtype = "bf16" }) o:free() end, 0.15)
    local x, y = T.randn({ 4 * 2 ^ 20 }), T.randn({ 4 * 2 ^ 20 })
    local add = best_time(function() ops.add_(x, y) end, 0.15)
    local r = { flops = flops, rows_half = rows_half, product_half = math.max(0.25, th / t[2]),
                bytes = 3 * 4 * 4 * 2 ^ 20 / add }
    for k, v in pairs(M.probe_layers(r)) do r[k] = v end
    return r
  end)
end

-- What a small BERT classifier's micro-batch (forward and backward; hidden 384, 6 heads)
-- takes on this CPU beyond its products (counted as trainer.plan.step_cost counts them, at
-- the rates measured):
--   op_seconds           the fixed cost of an op whatever its size (dispatch, the element-wise
--                        kernels' threads, the allocator): 1 and 3 layers at 2 sequences of 16
--                        tokens, the difference less the two layers' products, over their 80
--                        ops (40 a layer: 16 forward, 24 backward, as trainer.plan counts them);
--   token_seconds        the element-wise work (layer norms, GELU, softmax, dropout, residuals,
--                        the attention's own loops, the casts) per activation element of a
--                        layer (a token's hidden state), a unit of a forward (a backward is
--                        two): 2 layers at 8 and at 32 sequences of 32, less their products and
--                        ops, the difference over the tokens between them x 2 layers x 3 units
--                        x 384;
--   token_half_seconds   the same under bf16 (amp.prepare: half activations, the conversions).
function M.probe_layers(rates)
  local registry = require("trainer.models.registry")
  local T = require("trainer.core.tensor")
  local losses = require("trainer.losses")
  local function run(L, rows, S, precision)
    local shape = { hidden_size = 384, num_hidden_layers = L, num_attention_heads = 6, intermediate_size = 1536,
                    vocab_size = 64, max_position_embeddings = 64 }
    local cfg, family = registry.config(shape, "the plan's CPU probe", registry.default)
    local model = family.build("classification", { config = cfg, seed = 1, num_labels = 2 })
    model:train()
    if precision ~= "fp32" then require("trainer.train.amp").prepare(model, precision) end
    local loss = losses.new({ name = "cross_entropy" })
    local ids, mask, labels = {}, {}, {}
    for i = 1, rows * S do ids[#ids + 1] = 3 + i % 60; mask[#mask + 1] = 1 end
    for i = 1, rows do labels[i] = i % 2 end
    local input = T.from_table(ids, { dtype = "i32" }):reshape({ rows, S })
    local attn = T.from_table(mask, { dtype = "i32" }):reshape({ rows, S })
    local t = best_time(function()
      T.scope(function()
        local logits = model:forward({ input_ids = input, attention_mask = attn })
        loss:forward({ logits }, labels)
        local g = loss:backward()[1]
        model:backward(g)
      end)
    end, 0.1)
    loss:free(); model:free(); input:free(); attn:free()
    return t
  end
  -- one layer's products over N tokens of sequences of S, forward and backward
  local wsum = 4 * 384 * 384 + 2 * 384 * 1536
  local function products(N, S)
    local weighed = 3 * (4 * 384 + 2 * math.sqrt(384 * 1536)) / 768 + 6 * math.sqrt(S * 384) / 768
    return 3 * (2 * N * wsum + 4 * N * S * 384) / rates.flops + weighed * M.call_seconds(rates.flops, rates.rows_half)
  end
  local ok, r = pcall(function()
    local t1, t3 = run(1, 2, 16, "fp32"), run(3, 2, 16, "fp32")
    local op = math.max(5e-6, ((t3 - t1) / 2 - products(32, 16)) / 40)
    local function rest(rows, precision)
      local pf = precision == "fp32" and 1 or rates.product_half
      return run(2, rows, 32, precision) - 2 * products(rows * 32, 32) * pf - 80 * op
    end
    -- the part that grows with the tokens: the difference of two sizes (what does not grow with
    -- them, the casts of the weights under bf16, is not per token)
    local units = (1024 - 256) * 2 * 3 * 384
    return { op_seconds = op,
             token_seconds = math.max(0, (rest(32, "fp32") - rest(8, "fp32")) / units),
             token_half_seconds = math.max(0, (rest(32, "bf16") - rest(8, "bf16")) / units) }
  end)
  return ok and r or {}
end

-- The CPU's rates: { flops, bytes, rows_half, product_half, op_seconds, token_seconds,
-- token_half_seconds, source }. TRAINER_CPU_RATES="gflops=40,gbps=12" (and optionally
-- rows_half=N, product_half=X, op_us=N, token_ns=N, token_half_ns=N) gives them (tests, or a machine whose figures are known); else the cache file
-- (cache_dir()/cpu_rates.json, one entry per CPU identity), else M.probe_cpu(), written there.
local cpu_cache
function M.cpu_rates()
  local given = os.getenv("TRAINER_CPU_RATES")
  if given and given ~= "" then
    local g, b = tonumber(given:match("gflops=([%d%.eE+-]+)")), tonumber(given:match("gbps=([%d%.eE+-]+)"))
    if not g or not b or g <= 0 or b <= 0 then
      require("trainer.core.errors").user("TRAINER_CPU_RATES=%q: give at least gflops=N,gbps=N (e.g. "
        .. "TRAINER_CPU_RATES=gflops=40,gbps=12; optionally rows_half, product_half, op_us, token_ns, "
        .. "token_half_ns), or unset it to measure them", given)
    end
    local function num(k) return tonumber(given:match(k .. "=([%d%.eE+-]+)")) end
    local op, tok, toh = num("op_us"), num("token_ns"), num("token_half_ns")
    return { flops = g * 1e9, bytes = b * 1e9, rows_half = num("rows_half"), op_seconds = op and op * 1e-6,
             token_seconds = tok and tok * 1e-9, token_half_seconds = toh and toh * 1e-9,
             product_half = num("product_half"), source = "TRAINER_CPU_RATES" }
  end
  if cpu_cache then return cpu_cache end
  local id = cpu_identity()
  local dir = cache_dir()
  local path = dir and (dir .. "/cpu_rates.json")
  local all = {}
  if path then
    local ok, t = pcall(json.read, path)
    if ok and type(t) == "table" then all = t end
  end
  local r = all[id]
  if type(r) ~= "table" or type(r.flops) ~= "number" or type(r.bytes) ~= "number" or type(r.rows_half) ~= "number"
      or type(r.token_half_seconds) ~= "number" then
    r = M.probe_cpu()
    all[id] = r
    if path and require("trainer.core.sys").mkdir_p(dir) then
      local tmp = path .. ".tmp" .. tostring(os.time())
      local f = io.open(tmp, "w")
      if f then
        f:write(json.encode(all, 2), "\n")
        f:close()
        os.rename(tmp, path)
      end
    end
  end
  cpu_cache = { flops = r.flops, bytes = r.bytes, rows_half = r.rows_half, op_seconds = r.op_seconds,
    token_seconds = r.token_seconds, token_half_seconds = r.token_half_seconds, product_half = r.product_half,
    source = path and ("measured on this CPU, cached in " .. path)
    or "measured on this CPU" }
  return cpu_cache
end

-- ---------------------------------------------------------------- a GPU's rates
-- { flops (f32), half_flops (bf16/fp16 tensor cores, dense), bytes, source } of a card
-- (trainer.core.card.of or trainer.plan.cards.find): its row of the card table when its name
-- matches one, else from its compute capability and multiprocessors at a 1.5 GHz clock.
function M.card_rates(card)
  local cards = require("trainer.plan.cards")
  local row = cards.rates_of(card)
  if row then return { flops = row.tflops * 1e12, half_flops = row.half_tflops * 1e12, bytes = row.gbps * 1e9,
    source = ("%s's published peak rates"):format(row.name) } end
  local sms = (card and card.multiprocessors and card.multiprocessors > 0) and card.multiprocessors or 80
  local major = card and card.major or 8
  -- f32 FMA lanes per multiprocessor and dense half tensor-core FLOPs a clock per multiprocessor
  local lanes = major >= 8 and 128 or 64
  local tensor = major >= 9 and 4096 or major >= 8 and 2048 or 1024
  local clock = 1.5e9
  return { flops = 2 * lanes * sms * clock, half_flops = tensor * sms * clock, bytes = (major >= 9 and 3000 or 1500) * 1e9,
    source = ("estimated from compute capability %s and %d multiprocessors"):format(card and card.cc or "?", sms) }
end

-- What a product call costs beyond its FLOPs: a product of r rows of the probe's shape
-- ([r x 384] by [384 x 1536]) takes 2 K N (r + rows_half) / flops, so the fixed part of such
-- a call is 2 K N rows_half / flops. Another shape's call costs that times the geometric
-- mean of its sides over the probe's (768): between a cost fixed per call and one that grows
-- with the operand (a rows_half of its own), as measured on the MiniLM, BERT-base and small
-- shapes (docs/BENCHMARKS.md); step_cost counts the calls so weighed.
function M.call_seconds(flops, rows_half)
  return 2 * 384 * 1536 * rows_half / flops
end

-- The rates of the device a plan is for.
function M.rates(plan)
  if plan.device == "cuda" then return M.card_rates(plan.card) end
  return M.cpu_rates()
end

-- ---------------------------------------------------------------- the prediction
-- Seconds of one optimizer step of `plan` (its cost, from trainer.plan.estimate) at `rates`,
-- and the parts: { seconds, compute_s, memory_s, ops_s }.
function M.predict(plan, rates)
  local c = plan.cost
  if not c then return nil end
  local dev = plan.device == "cuda" and "cuda" or "cpu"
  local flops_rate = rates.flops
  -- half products: the tensor cores on a GPU; on the CPU oneDNN's native bf16 where it has
  -- it (about twice f32), else widened to f32 (the same rate, and the copies counted in bytes)
  -- half products: the tensor cores on a GPU; on the CPU as much longer (or shorter, with
  -- native bf16) as its probe measured
  local product_factor = 1
  if c.half_precision then
    if dev == "cuda" then flops_rate = rates.half_flops or flops_rate
    else product_factor = rates.product_half or (c.cpu_bf16_native and 0.6 or 1.1) end
  end
  local compute = 0
  for _, p in ipairs(c.products) do
    compute = compute + p.flops / flops_rate + p.calls * M.call_seconds(flops_rate, rates.rows_half or M.ROWS_HALF[dev])
  end
  compute = compute * product_factor
  -- the element-wise work per token and layer (measured on the CPU; on a GPU in the bytes)
  local per_token = c.half_precision and rates.token_half_seconds or rates.token_seconds or 0
  local tokens = (c.token_units or 0) * per_token
  local memory = c.bytes / rates.bytes
  local ops = c.ops * (rates.op_seconds or M.OP_SECONDS[dev])
  return { seconds = compute + tokens + memory + ops, compute_s = compute, tokens_s = tokens, memory_s = memory,
           ops_s = ops }
end

-- "+30 %" (or "-12 %") of a time against a base time; "same" within half a percent.
function M.relative(t, base)
  local d = 100 * (t - base) / base
  if math.abs(d) < 0.5 then return "same time" end
  return ("%+.0f %% time"):format(d)
end

-- A duration for people: "1.84 s", "312 ms", "41 us".
function M.format_seconds(s)
  if s >= 1 then return ("%.2f s"):format(s) end
  if s >= 1e-3 then return ("%.0f ms"):format(s * 1e3) end
  return ("%.0f us"):format(s * 1e6)
end

return M
