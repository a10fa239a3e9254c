-- trainer.plan: the memory ledger of a recipe predicted before a run (`trainer plan`).
--
-- Nothing is allocated: the figures are computed from the model's config.json (or preset)
-- and the recipe's keys, following what this runtime's modules actually keep; the model's
-- own terms (its parameters, what a layer keeps) are its family's plan_terms
-- (trainer.models.registry: config.json's model_type, or model.arch):
--   weights      every parameter: 4 bytes, or 2 for frozen ones under bf16/fp16
--   grads        4 bytes per trainable parameter (none for frozen ones); a run not under
--                mpirun and without accumulation frees them at each step's start and the
--                backward makes them as it frees the activations (Optimizer:zero_grad's
--                free), so the two never peak together: the total (the step's peak) then
--                counts the grads made by each moment of the backward beside what it holds,
--                and is below the tags' peaks' sum (tags_sum_bytes)
--   optimizer    AdamW 8 bytes per trainable parameter; SGD 4 with momentum; Adafactor the
--                factored row and column moments (+ 4 per element with beta1)
--   activations  per layer, what backward needs (the layer input, q, k, v, the attention
--                context, both LayerNorm inputs, the pre-activation (and its output under
--                the tanh GELU), f32 row statistics and the attention log-sum-exp; with a
--                frozen base only what the input gradients and the LoRA adapters need; each
--                family's plan_terms say what its layers remake instead), times the layers that keep
--                them at once (all, or one checkpoint segment plus every segment's input),
--                plus the embeddings and the backward's largest transient gradients; in the
--                activation dtype; for one micro-batch of batch.size rows (training runs
--                batch.accumulate of them one after another, each freed before the next, so
--                accumulation adds no activations) of model.max_length tokens (the worst case:
--                real batches pad to their longest); on a GPU also the batch feed's two slots
--   workspace    half-precision GEMM staging on the CPU, and there an active LoRA dropout's two
--                [tokens, in] copies in its fused op's backward; cuBLASLt's workspace on a GPU, and there
--                under bf16 a bf16 copy of each trainable weight a product reads; on the
--                CPU with oneDNN (core/cpu_device/cpu_gemm.h), every f32 Linear weight with both sides
--                >= 32 packed in f32 for the products that take a copy of their own (forward
--                and input gradient in a blocked layout; on AVX2 the forward's only: the runtime
--                says, tr_cpu_linear_pack_bytes): a frozen weight's, and a trained weight's
--                without accumulation, made for each product and freed after it
--                (Optimizer:transient_packs), so one at a time; a trained weight's under
--                accumulation kept for the run
-- Checked against measured peaks in tests/lua/test_plan.lua (within 15 % per tag).
local json = require("trainer.core.json")
local errors = require("trainer.core.errors")
local schema = require("trainer.recipe.schema")

local M = {}
local MiB = 2 ^ 20

-- cuBLASLt's workspace on a GPU (kernels/cuda's GEMM asks for this much, tag workspace).
M.CUBLASLT_WORKSPACE_BYTES = 32 * MiB
-- The CUDA context's own memory (module images, cuBLASLt's kernels, the driver's heaps):
-- outside the allocator and its ledger, but in nvidia-smi's figure. An estimate for a CUDA
-- 12/13 context with lazy module loading on a Hopper card, not measured here (no GPU yet);
-- `trainer plan` prints it beside the total, never in it.
M.CUDA_CONTEXT_BYTES = 500 * MiB

-- The batch feed's device buffers on a GPU (core/cuda_device/batch_feed.c, tag activations, kept
-- for the run): two slots, each the micro-batch's i32 token ids, mask, type ids and position
-- ids (4 per token) and the loss's i64 targets (at most one per text row), each rounded up to
-- a multiple of 4096 elements as the feed grows them.
function M.batch_feed_bytes(tokens, rows)
  local function round(n) return math.ceil(n / 4096) * 4096 end
  return 2 * (4 * round(4 * tokens) + 8 * round(rows))
end

-- ---------------------------------------------------------------- the model's shape
-- The model's config as config.json (or the preset, or model.config) gives it, unchecked.
local function model_config(m)
  if m.from then
    local path = m.from .. "/config.json"
    local f = io.open(path, "r")
    if not f then
      errors.user("model.from: %s: no config.json there; the plan needs the model's config (download the "
        .. "folder, or plan with a preset shape: model.from=nil model.arch=bert model.config=bert-large)", path)
    end
    f:close()
    return json.read(path)
  end
  if type(m.config) == "table" then return m.config end
  local preset = require("trainer.models.presets")[m.config or ""]
  if not preset then errors.user("model.config = %q is not a preset", tostring(m.config)) end
  return preset
end

-- The library of the CPU matrix products in this process ("onednn" or "openblas"; see
-- core/cpu_device/cpu_gemm.h); a user error when TRAINER_CPU_GEMM asks for something unusable.
local function cpu_gemm_library()
  local runtime = require("trainer.core.runtime")
  local C = require("trainer.core.ffi")
  local name = C.tr_cpu_gemm_library(runtime.ctx)
  if name == nil then errors.user("%s", require("ffi").string(C.tr_ctx_errmsg(runtime.ctx))) end
  return require("ffi").string(name)
end
M.cpu_gemm_library = cpu_gemm_library

-- Whether this process's CPU products run bf16 natively (core/cpu_device/cpu_gemm.h), for the time model.
local function cpu_bf16_native()
  local runtime = require("trainer.core.runtime")
  return require("trainer.core.ffi").tr_cpu_gemm_bf16_native(runtime.ctx) == 1
end

local function up(x, m) return math.ceil(x / m) * m end

-- Bytes of the packed copies oneDNN's blocked layout (AVX-512, AMX) makes of one f32 Linear
-- weight [O, I]: the forward's (B = W^T, N = O columns, K = I) and the input gradient's (B = W,
-- N = I, K = O), with N padded to 64 and K to 16 (oneDNN 2.6's AVX-512 blocking, measured;
-- exact for BERT's sizes), each a block of the CPU allocator (512-byte rounding); none for a
-- side under 32 (those products stay on OpenBLAS, cpu_gemm.c's route). Returns the total, the
-- forward's and the input gradient's. A model, for a plan of oneDNN on some machine rather
-- than this process's (M.estimate with opts.cpu_gemm = "onednn"): the most a Linear packs.
function M.blocked_packed_weight_bytes(O, I)
  if O < 32 or I < 32 then return 0, 0, 0 end
  local fwd, grad = up(4 * up(O, 64) * up(I, 16), 512), up(4 * up(I, 64) * up(O, 16), 512)
  return fwd + grad, fwd, grad
end

-- Bytes of the packed copies this process's CPU Linear keeps of one f32 weight [O, I], as the
-- runtime will make them (core/cpu_device/gemm_query.h: tr_cpu_linear_pack_bytes), each a
-- block of the CPU allocator (512-byte rounding): both products' where oneDNN's layout is
-- blocked (AVX-512, AMX); only the forward's where it is plain (AVX2: the input gradient
-- reads the weight as stored); none on OpenBLAS or for a side under 32. Returns the total,
-- the forward's and the input gradient's. Asks the runtime (which opens oneDNN): an estimate
-- given opts.cpu_gemm never calls it.
local pack_cache = {}
function M.packed_weight_bytes(O, I)
  local key = O .. "x" .. I
  local hit = pack_cache[key]
  if not hit then
    local runtime = require("trainer.core.runtime")
    local ffi = require("ffi")
    local C = require("trainer.core.ffi")
    local out = ffi.new("int64_t[2]")
    if C.tr_cpu_linear_pack_bytes(runtime.ctx, O, I, out) ~= 0 then
      errors.user("%s", ffi.string(C.tr_ctx_errmsg(runtime.ctx)))
    end
    hit = { up(tonumber(out[0]), 512), up(tonumber(out[1]), 512) }
    pack_cache[key] = hit
  end
  return hit[1] + hit[2], hit[1], hit[2]
end

-- Whether a Linear name is a LoRA target: trainer.lora's own suffix rule.
local function matches(name, targets)
  local match = require("trainer.train.lora").matches
  for _, t in ipairs(targets) do
    if match(name, t) then return true end
  end
  return false
end

-- ---------------------------------------------------------------- the estimate
-- recipe: as trainer.recipe resolves it, or a part of one (tests, scripts): the schema's
-- defaults (trainer.recipe.keys) fill what it leaves out, so the estimate reads values.
function M.estimate(recipe, opts)
  opts = opts or {}
  recipe = require("trainer.recipe.keys").with_defaults(recipe)
  local m = recipe.model
  local c = opts.model_config or model_config(m)
  local source = m.from and (m.from .. "/config.json") or "model.config"
  local registry = require("trainer.models.registry")
  local family = registry.family(registry.model_type_of(c, source, m.arch), source)
  local terms = family.plan_terms(c)
  local L, P = terms.layers, terms.positions
  local classification = m.task == "classification" or m.task == "cross_encoder"
  local K = m.task == "cross_encoder" and 1 or m.num_labels or (m.labels and #m.labels) or 3

  -- parameters: { count, rows, cols, trainable, product (a weight that a matrix product reads),
  -- part ("embeddings", "layer" or "head": where the backward makes its gradient) }
  local params = {}
  local lora = recipe.lora
  local targets = lora and (lora.targets or family.peft_targets) or {}
  local function add(n, rows, cols, trainable, product, part)
    params[#params + 1] = { n = n, rows = rows, cols = cols, trainable = trainable, product = product, part = part }
  end
  local full = not lora
  for _, p in ipairs(terms.embeddings) do add(p.n, p.rows, p.cols, full, p.product, "embeddings") end
  local lora_sites = {}
  for _, lin in ipairs(terms.linears) do
    local hit = lora and matches(lin[1], targets)
    if hit then lora_sites[#lora_sites + 1] = lin end
  end
  for _ = 1, L do
    for _, p in ipairs(terms.layer) do add(p.n, p.rows, p.cols, full, p.product, "layer") end
    for _, lin in ipairs(lora_sites) do
      add(lora.r * lin[2], lora.r, lin[2], true, true, "layer")   -- lora_A [r, in]
      add(lin[3] * lora.r, lin[3], lora.r, true, true, "layer")   -- lora_B [out, r]
    end
  end
  local head = classification and terms.head(K) or {}
  local saved = {}
  for _, n in ipairs(lora and lora.modules_to_save or {}) do saved[n] = true end
  -- a head parameter trains in a full fine-tune, or when lora.modules_to_save names its module
  local function head_trains(p)
    local trains = full
    for _, n in ipairs(p.saved_by or {}) do trains = trains or saved[n] or false end
    return trains
  end
  for _, p in ipairs(head) do add(p.n, p.rows, p.cols, head_trains(p), p.product, "head") end

  local half = recipe.precision == "bf16" or recipe.precision == "fp16"
  local n_all, n_train, weights, optimizer = 0, 0, 0, 0
  local grads_of = { embeddings = 0, layer = 0, head = 0 }   -- trainable bytes by part
  local oname = recipe.optim.name
  for _, p in ipairs(params) do
    n_all = n_all + p.n
    if p.trainable then
      n_train = n_train + p.n
      grads_of[p.part] = grads_of[p.part] + 4 * p.n
      weights = weights + 4 * p.n
      if oname == "adamw" then optimizer = optimizer + 8 * p.n
      elseif oname == "sgd" then
        if recipe.optim.momentum > 0 then optimizer = optimizer + 4 * p.n end
      else
        optimizer = optimizer + (p.cols > 1 and 4 * (p.rows + p.cols) or 4 * p.n)
        if recipe.optim.beta1 then optimizer = optimizer + 4 * p.n end
      end
    else
      weights = weights + (half and 2 or 4) * p.n
    end
  end
  local grads = 4 * n_train

  -- activations of one micro-batch: batch.size rows (batch.accumulate does not divide it)
  local b = recipe.batch.size
  local T = math.min(m.max_length or P, P)
  local N = b * T
  -- embedding models run every text column of a row through the model at once
  local texts = 1
  if not classification then
    local cols = recipe.data and recipe.data.columns and #recipe.data.columns or 2
    texts = cols
    local labelled = { cosent = true, cosine = true, softmax = true, angle = true, contrastive = true, online_contrastive = true,
      batch_hard_triplet = true, batch_semi_hard_triplet = true, batch_all_triplet = true }
    if recipe.loss and (labelled[recipe.loss.name] or ((recipe.loss.name == "matryoshka" or recipe.loss.name == "adaptive_layer")
      and labelled[recipe.loss.inner])) then
      texts = cols - 1
    end
    texts = math.max(1, texts)
    N = N * texts
  elseif m.task == "cross_encoder" and recipe.loss and recipe.loss.name == "cross_entropy" then
    -- the listwise loss: a row's query paired with each of its candidates, one text pair each
    texts = math.max(1, (recipe.data and recipe.data.columns and #recipe.data.columns or 3) - 1)
    N = N * texts
  end
  local n_texts, N_full = N / T, N
  if recipe.loss and recipe.loss.cached then N = math.min(N, recipe.loss.mini_batch * T) end
  local e = half and 2 or 4
  local device = recipe.device
  local gpu = device:match("^cuda") ~= nil or (device == "auto" and opts.cuda_available)
  local act = terms.activations({ tokens = N, bytes = e, full = full, sites = lora_sites, rank = lora and lora.r,
    gpu = gpu })
  local ck = recipe.checkpoint
  -- the segments training will use (trainer.checkpoint.segments; "auto": the segmentation of
  -- least peak for this shape), so the plan follows them; a recomputed segment's first layer
  -- reads its input from the boundary: not kept twice
  local gc = require("trainer.train.grad_checkpoint")
  -- a head that reads each text's first row only (a classifier, a cross-encoder, CLS pooling):
  -- the last layer keeps its share past the attention core for that row alone
  -- (and its backward's row-wise transient for that row alone)
  local pick = (classification or m.pooling == "cls") and (1 - 1 / T) or 0
  local picked, picked_t = pick * (act.rowwise or 0), pick * (act.rowwise_transient or 0)
  -- a layer's backward peaks twice: in the feed-forward, every keep of the layer alive and
  -- act.transient new; in the attention, the row-wise keeps released and
  -- act.attention_transient new. The larger is the layer's transient; the last layer under a
  -- row pick loses at most what brings its feed-forward's peak down to its attention's.
  local rowwise, attn_t = act.rowwise or 0, act.attention_transient or 0
  local transient = math.max(act.transient, attn_t - rowwise)
  local reduce = math.min(picked + picked_t, math.max(0, rowwise + transient - attn_t))
  picked_t = math.max(0, math.min(picked_t, reduce - picked))
  picked = math.min(picked, reduce)
  local cost = { per_layer = act.per_layer, boundary = act.boundary, credit = act.layer_input, last_credit = picked,
                 last_transient = picked_t }
  local sizes = gc.segments(L, ck, cost)
  local feed = gpu and M.batch_feed_bytes(N, b * texts) or 0
  local whole = { per_layer = act.per_layer, boundary = 0, last_credit = picked, last_transient = picked_t }
  local function activations_of(sz)
    return (sz and gc.peak(sz, cost) or gc.peak({ L }, whole)) + act.embeddings + transient + feed
  end
  local activations = activations_of(sizes)
  -- The grads and the activations of a step together. A run not under mpirun and without
  -- accumulation frees the grads at each step's start, and the backward makes a layer's as it
  -- frees what the layers above kept (Optimizer:zero_grad({ free = true })), so the two peaks
  -- never meet in full: each segment's backward (the whole encoder's, unsegmented) holds the
  -- head's grads and those of the layers down to its first one, at most, beside its own peak,
  -- and down to its last one beside its peak less the layers above that one; the step's end
  -- holds every grad beside the embeddings' activations. Under accumulation or mpirun the grads
  -- live through the forward: the sum.
  local g_layer, g_head = grads_of.layer / math.max(L, 1), grads_of.head
  local separate = not recipe.distributed and recipe.batch.accumulate == 1
  local function with_grads(sz)
    local a = activations_of(sz)
    if not separate then return a + grads end
    local sz1 = sz or { L }
    local peaks = sz and gc.segment_peaks(sz, cost) or gc.segment_peaks({ L }, whole)
    local worst, above = grads + act.embeddings, 0
    for s = #sz1, 1, -1 do
      local n, top = sz1[s], peaks[s] + act.embeddings + transient + feed
      worst = math.max(worst, top + g_head + (above + 1) * g_layer,
        top - (n - 1) * act.per_layer + g_head + (above + n) * g_layer)
      above = above + n
    end
    return math.min(a + grads, worst)
  end
  local workspace = 0
  local onednn = not gpu and (opts.cpu_gemm or cpu_gemm_library()) == "onednn"
  -- half weights on the CPU: the largest Linear weight staged to f32, three times over
  local largest = 0
  for _, lin in ipairs(terms.linears) do largest = math.max(largest, lin[2] * lin[3]) end
  if half and not gpu then workspace = 3 * 4 * largest + 4 * MiB end
  if gpu then workspace = workspace + M.CUBLASLT_WORKSPACE_BYTES end
  -- on a GPU under bf16, the bf16 copy of every trainable (f32) weight a product reads beside
  -- the bf16 activations (LoRA's factors, a full fine-tune's Linears), kept for the run and
  -- refreshed after each update (core/cuda_ops/weight_half.c)
  if gpu and recipe.precision == "bf16" then
    for _, p in ipairs(params) do
      if p.trainable and p.product then workspace = workspace + 2 * p.rows * p.cols end
    end
  end
  -- oneDNN's packed weights (CPU): every encoder Linear, and the classification head's
  -- (f32 weights only: half ones run unpacked, core/cpu_device/cpu_gemm.c), as this process
  -- packs them; planned for oneDNN by opts.cpu_gemm, as its blocked layout packs them
  -- A frozen weight's packs, and a trained weight's without accumulation, live for one
  -- product each (Optimizer:transient_packs): only the largest of them counts, once.
  local packed, packed_fwd, packed_grad, held, held_fwd, held_grad = 0, 0, 0, 0, false, false
  if onednn and not half then
    local packs = opts.cpu_gemm and M.blocked_packed_weight_bytes or M.packed_weight_bytes
    local per_product = recipe.batch.accumulate == 1
    local function add_packs(O, I, n, trained)
      local _, f, g = packs(O, I)
      if not trained or per_product then
        held, held_fwd, held_grad = math.max(held, f, g), held_fwd or f > 0, held_grad or g > 0
      else
        packed_fwd, packed_grad = packed_fwd + n * f, packed_grad + n * g
      end
    end
    for _, lin in ipairs(terms.linears) do add_packs(lin[3], lin[2], L, full) end
    for _, p in ipairs(head) do
      if p.linear then add_packs(p.rows, p.cols, 1, head_trains(p)) end
    end
    packed = packed_fwd + packed_grad + held
    workspace = workspace + packed
  end
  -- an active LoRA dropout on the CPU: dropout_linear's backward holds the dropped-out input
  -- and the adapter's input gradient beside its products, [N, in] each in the activations'
  -- dtype, freed as it returns (core/cpu_ops/dropout_linear_cpu.c; the CUDA slot fuses them).
  -- A pack made for one product is freed before it starts: the larger of the two counts.
  if lora and (lora.dropout or 0) > 0 and not gpu then
    local widest = 0
    for _, lin in ipairs(lora_sites) do widest = math.max(widest, lin[2]) end
    workspace = workspace + math.max(0, 2 * N * widest * e - held)
  end
  -- under mpirun (recipe.distributed): the gradient all-reduce's bucket buffers, on every
  -- rank (tag workspace; none with NCCL, which reduces the gradients in place)
  local collective
  if recipe.distributed then
    local nccl = gpu and recipe.distributed.backend ~= "mpi"
    collective = require("trainer.dist").buffer_bytes(grads, recipe.distributed, nccl)
    workspace = workspace + collective
  end

  -- a distillation teacher (loss.teacher): its frozen weights, bf16 on a GPU (trainer.losses.teacher)
  if recipe.loss and recipe.loss.teacher then
    local tf = io.open(recipe.loss.teacher .. "/config.json", "r")
    if not tf then
      errors.user("loss.teacher: %s: no config.json there; point loss.teacher at a model folder (config.json, "
        .. "model.safetensors and a tokenizer), as model.from", recipe.loss.teacher)
    end
    tf:close()
    local tc = model_config({ from = recipe.loss.teacher })
    local tsource = recipe.loss.teacher .. "/config.json"
    local tterms = registry.family(registry.model_type_of(tc, tsource), tsource).plan_terms(tc)
    local n = 0
    for _, p in ipairs(tterms.embeddings) do n = n + p.n end
    for _, p in ipairs(tterms.layer) do n = n + tterms.layers * p.n end
    weights = weights + (gpu and 2 or 4) * n
  end
  local by_tag = { weights = weights, grads = grads, optimizer = optimizer, activations = activations,
                   workspace = workspace }
  local bf16_native = half and not gpu and (opts.cpu_bf16_native == nil and cpu_bf16_native() or opts.cpu_bf16_native)
  -- the work of a step with checkpoint segments sz (nil: none): the layers it runs again
  local function cost_of(sz)
    return M.step_cost({ recipe = recipe, terms = terms, L = L, T = T, N = N_full, texts = n_texts,
      full = full, half_precision = half, gpu = gpu, sites = lora_sites, rank = lora and lora.r, params = params,
      optimizer = optimizer, recomputed = M.recomputed(L, sz), reruns = sz and #sz - 1 or 0, e = e,
      cpu_bf16_native = bf16_native })
  end
  local step_cost = cost_of(sizes)
  local held_all = weights + optimizer + workspace
  local total = held_all + with_grads(sizes)
  -- what each checkpoint choice would cost for this shape (the table `trainer plan` prints)
  local choices = { { spec = false, sizes = nil } }
  local seen = {}
  local function choice(spec, note)
    local sz = gc.segments(L, spec, cost)
    local key = table.concat(sz, ",")
    if seen[key] then
      if note then seen[key].note = (seen[key].note and seen[key].note .. ", " or "") .. note end
      return
    end
    local c1 = { spec = spec, sizes = sz, note = note }
    seen[key] = c1
    choices[#choices + 1] = c1
  end
  choice("auto", "auto")
  for _, n in ipairs({ 1, 2, 3, 4, 6, 8, 12, 16, 24, L }) do
    if n <= L then choice({ segments = n }) end
  end
  for _, c1 in ipairs(choices) do
    c1.activations = activations_of(c1.sizes)
    c1.total_bytes = held_all + with_grads(c1.sizes)
    c1.cost = cost_of(c1.sizes)
  end
  table.sort(choices, function(x, y) return (x.sizes and #x.sizes or 0) < (y.sizes and #y.sizes or 0) end)
  return {
    device = gpu and "cuda" or "cpu", total_bytes = total, by_tag = by_tag,
    tags_sum_bytes = weights + grads + optimizer + activations + workspace,
    parameters = n_all, trainable_parameters = n_train, micro_batch = b, seq_len = T,
    layers = L, texts = texts, checkpoint_sizes = sizes, checkpoint_choices = choices, cost = step_cost,
    cuda_context_bytes = gpu and M.CUDA_CONTEXT_BYTES or nil, collective_bytes = collective,
    packed_weight_bytes = packed > 0 and packed or nil,
    -- which products' copies those are (for the text)
    packed_products = packed > 0 and (packed_grad == 0 and not held_grad and "forward"
      or packed_fwd == 0 and not held_fwd and "input gradient" or "forward and input gradient") or nil,
    -- which packs are made per product: every one, or (a trained weight's kept under
    -- accumulation) the frozen weights'
    packed_transient = held > 0 and (packed_fwd + packed_grad == 0 and "all" or "frozen") or nil,
    eval = require("trainer.plan.eval").estimate(recipe, c.hidden_size or c.dim or c.d_model),   -- eval.sets' ir
    -- what it was planned from, for M.alternatives (not part of the JSON)
    recipe = recipe, opts = opts, model_config = c,
  }
end

-- The share of the layers a checkpointed backward runs again (segment sizes, or nil: none):
-- every segment's but the last, which keeps its forward's (trainer.nn.Checkpoint); reruns
-- (M.step_cost) counts those segments.
function M.recomputed(L, sizes)
  if not sizes or L == 0 then return 0 end
  return (L - sizes[#sizes]) / L
end

-- The work of one optimizer step, for trainer.plan.time.predict (which says how each part is
-- counted): { products = { { rows, flops, calls } }, bytes, ops, token_units (tokens x layers x
-- hidden x passes, a backward two), half, cpu_bf16_native }.
-- a: what M.estimate knows of the run (the recipe, the family's terms, layers L, tokens N of
-- a micro-batch's texts, seq T, ...).
function M.step_cost(a)
  local recipe, L, T, N = a.recipe, a.L, a.T, a.N
  local acc = recipe.batch.accumulate
  local loss = recipe.loss or {}
  local H = a.terms.linears[1] and a.terms.linears[1][2] or 0
  local wsum = 0
  for _, lin in ipairs(a.terms.linears) do wsum = wsum + lin[2] * lin[3] end
  local lsum = 0
  for _, lin in ipairs(a.sites or {}) do lsum = lsum + a.rank * (lin[2] + lin[3]) end
  -- GradCache: the texts in chunks of loss.mini_batch, each embedded twice (without, then with gradients)
  local chunks = 1
  if loss.cached then chunks = math.max(1, math.ceil(a.texts / loss.mini_batch)) end
  local rows = N / chunks
  local fwd_lin, fwd_lora, fwd_att = 2 * N * L * wsum, 2 * N * L * lsum, 4 * N * T * H * L
  local forwards = 1 + (loss.cached and 1 or 0) + (a.recomputed or 0)
  local fwd = fwd_lin + fwd_lora + fwd_att
  local bwd = (a.full and 2 or 1) * fwd_lin + 2 * fwd_lora + 2 * fwd_att
  -- a re-run segment's last layer skips the product only its output needs, where the family
  -- names one (terms.rerun_skips: a pre-norm layer's MLP output) and no adapter wraps it
  local skipped = 0
  for _, lin in ipairs(a.terms.linears) do
    if lin[1] == a.terms.rerun_skips then
      local adapted = false
      for _, site in ipairs(a.sites or {}) do adapted = adapted or site == lin end
      if not adapted then skipped = 2 * N * lin[2] * lin[3] * (a.reruns or 0) end
    end
  end
  local flops = forwards * fwd + bwd - skipped
  -- bytes: weights read per use (a frozen half weight 2 bytes, else 4; widened to f32 for a
  -- CPU product without native bf16: read 2, write 4, read 4), activations written and read
  local widen = a.half_precision and not a.gpu and not a.cpu_bf16_native
  local wb = a.half_precision and not a.full and (widen and 10 or 2) or 4
  local weight_bytes = L * wsum * wb * (forwards + 1) + (a.full and 8 * L * wsum or 0)
  local act = a.terms.activations({ tokens = N, bytes = a.e, full = a.full, sites = a.sites, rank = a.rank, gpu = a.gpu })
  local act_bytes = L * act.per_layer * (2 + forwards) * (widen and 2.5 or 1)
  local n_train = 0
  for _, p in ipairs(a.params) do if p.trainable then n_train = n_train + p.n end end
  local micro_bytes = weight_bytes + act_bytes + 8 * n_train
  local step_bytes = 2 * (8 * n_train + a.optimizer)
  -- ops: about 16 a layer forward and 24 backward, per chunk, and 60 around them (embeddings,
  -- pooling, the loss); the optimizer's few per trainable tensor
  local layer_ops = L * (16 * forwards + 24) * chunks
  local tensors = 0
  for _, p in ipairs(a.params) do if p.trainable then tensors = tensors + 1 end end
  -- product calls: each Linear once a forward, twice a backward (once for a frozen weight),
  -- the attention's two products (and twice that backward), per chunk
  -- each call weighed by the geometric mean of its weight's sides over the probe's (384 x 1536:
  -- 768), trainer.plan.time.call_seconds
  local lin_calls, site_calls = 0, 0
  for _, lin in ipairs(a.terms.linears) do lin_calls = lin_calls + math.sqrt(lin[2] * lin[3]) / 768 end
  for _, lin in ipairs(a.sites or {}) do site_calls = site_calls + math.sqrt(a.rank * (lin[2] + lin[3]) / 2) / 768 end
  local att_call = math.sqrt(T * H) / 768
  local calls = acc * chunks * L * (lin_calls * (forwards + (a.full and 2 or 1)) + att_call * (2 * forwards + 4)
    + site_calls * 3 * (forwards + 2))
  return { products = { { rows = rows, flops = acc * flops, calls = calls } }, bytes = acc * micro_bytes + step_bytes,
           token_units = acc * N * L * H * (forwards + 2),
           ops = acc * (layer_ops + 60) + 4 * tensors, half_precision = a.half_precision, cpu_bf16_native = a.cpu_bf16_native,
           micro_batches = acc }
end

-- true when the plan fits `budget` bytes, nil without a budget.
function M.fits(plan, budget)
  if not budget then return nil end
  return plan.total_bytes <= budget
end

-- The recipe changes that would make `plan` fit `budget` (trainer.plan.alternatives): a
-- list of { text = "batch.size=4 batch.accumulate=4", note, total_bytes, fits, combined },
-- empty when it fits already.
function M.alternatives(plan, budget)
  local o = {}
  for k, v in pairs(plan.opts or {}) do o[k] = v end
  o.model_config = plan.model_config
  local alts = require("trainer.plan.alternatives").search(plan.recipe, budget, function(r)
    local p = M.estimate(r, o)
    p.card = plan.card
    return p
  end)
  -- each one's predicted step time against the recipe's (trainer.plan.time)
  local base = M.step_seconds(plan)
  for _, a in ipairs(alts) do
    if a.plan and base then a.seconds = M.step_seconds(a.plan) end
  end
  return alts
end

-- The predicted seconds of one optimizer step of a plan (trainer.plan.time), or nil when the
-- device's rates cannot be had.
function M.step_seconds(plan)
  local time = require("trainer.plan.time")
  local ok, rates = pcall(time.rates, plan)
  if not ok then
    if errors.is_user_error(rates) then error(rates, 0) end
    return nil
  end
  local t = time.predict(plan, rates)
  return t and t.seconds, rates
end

-- The budget of a resolved recipe (trainer.recipe.resolve's result) and where it came from:
-- bytes and a text such as "memory.limit in recipes/base/lora_bf16.lua, from gpu_budget in
-- recipes/base/sizes.lua"; nil without memory.limit. A bad size raises a user error.
function M.budget(resolved)
  local limit = resolved.recipe.memory and resolved.recipe.memory.limit
  if limit == nil then return nil end
  local origins = resolved.origins or {}
  local file = origins["memory.limit"] or origins.memory or resolved.path or "the recipe"
  local n, why = schema.parse_size(limit)
  if not n then errors.user("%s: memory.limit = %s: %s", file, schema.show_value(limit), why) end
  local source = file:match("^command line") and "memory.limit on the command line"
    or ("memory.limit in %s"):format(file)
  -- a value taken from a module the recipe required (`limit = sizes.gpu_budget`): name the
  -- module's field too, when the file that set memory.limit mentions it
  local f = io.open(file, "r")
  local text = f and f:read("*a")
  if f then f:close() end
  if text then
    local found = {}
    for _, mod in ipairs(resolved.modules or {}) do
      if type(mod.value) == "table" then
        for k, v in pairs(mod.value) do
          if v == limit and type(k) == "string" and text:find(k, 1, true) then
            found[#found + 1] = ("%s in %s"):format(k, mod.path)
          end
        end
      end
    end
    if #found == 1 then source = ("%s, from %s"):format(source, found[1]) end
  end
  return n, source
end

-- The plan as `trainer plan --json` prints it: { device, total_bytes, by_tag, budget_bytes, fits }, plus
-- the figures behind it, where the budget came from and, over budget, the alternatives.
-- info (optional): { budget_source = "...", alternatives = list } (computed when absent).
function M.json(plan, budget, info)
  info = info or {}
  local out = {
    device = plan.device, total_bytes = plan.total_bytes, by_tag = plan.by_tag,
    tags_sum_bytes = plan.tags_sum_bytes,
    budget_bytes = budget or json.null, fits = json.null,
    -- the card planned on (trainer.core.card) or for (--card)
    card = plan.card and { name = plan.card.name, compute_capability = plan.card.cc,
      memory_bytes = plan.card.memory_bytes, planned = plan.card.planned or nil } or nil,
    parameters = plan.parameters, trainable_parameters = plan.trainable_parameters,
    micro_batch = plan.micro_batch, seq_len = plan.seq_len,
    cuda_context_bytes = plan.cuda_context_bytes,
    -- under mpirun every figure is one rank's; collective_bytes is part of workspace
    collective_bytes = plan.collective_bytes, per_rank = plan.collective_bytes and true or nil,
    eval = plan.eval,
  }
  local seconds, rates = M.step_seconds(plan)
  if seconds then
    out.predicted_step_s = seconds
    out.rates = { flops = rates.flops, half_flops = rates.half_flops, bytes = rates.bytes, source = rates.source }
  end
  if info.fit then out.fit = require("trainer.plan.fit").summary(info.fit) end
  M.choice_times(plan)
  if plan.checkpoint_choices then
    local list = {}
    for i, c in ipairs(plan.checkpoint_choices) do
      list[i] = { segments = c.sizes and #c.sizes or 0, sizes = c.sizes or json.null, activations = c.activations,
                  total_bytes = c.total_bytes, auto = (c.note or ""):find("auto", 1, true) and true or nil,
                  predicted_step_s = c.seconds }
    end
    out.checkpoint = { sizes = plan.checkpoint_sizes or json.null, choices = list }
  end
  if budget then
    out.fits = plan.total_bytes <= budget
    out.budget_source = info.budget_source or json.null
    if not out.fits then
      local alts = {}
      for i, a in ipairs(info.alternatives or (plan.recipe and M.alternatives(plan, budget)) or {}) do
        alts[i] = { overrides = a.args, command_line = a.text, note = a.note, total_bytes = a.total_bytes, fits = a.fits,
                    predicted_step_s = a.seconds }
      end
      out.alternatives = alts
    end
  end
  return out
end

-- Fills each checkpoint choice's predicted step time (seconds) where the device's rates are known.
function M.choice_times(plan)
  for _, c in ipairs(plan.checkpoint_choices or {}) do
    if c.seconds == nil and c.cost then
      c.seconds = M.step_seconds({ device = plan.device, card = plan.card, cost = c.cost }) or false
    end
  end
end

-- The checkpoint choices as lines: segments, layers per segment, activations and total for
-- each, the recipe's own marked with "<-" and "auto"'s choice named.
function M.format_choices(plan)
  local cs = plan.checkpoint_choices
  if not cs then return {} end
  local fs = schema.format_size
  local mine = plan.checkpoint_sizes and table.concat(plan.checkpoint_sizes, ",") or ""
  local lines = { ("checkpoint choices for this shape (%d layers; the backward recomputes one segment at a time, "
    .. "every segment's input kept):"):format(plan.layers),
    ("  %-20s %-18s %12s %12s %10s"):format("checkpoint", "layers/segment", "activations", "total", "step time") }
  M.choice_times(plan)
  local time = require("trainer.plan.time")
  local base
  for _, c in ipairs(cs) do if not c.sizes then base = c.seconds end end
  for _, c in ipairs(cs) do
    local what, per
    if not c.sizes then what, per = "false", "-"
    else
      what = ("{ segments = %d }"):format(#c.sizes)
      local lo, hi = math.huge, 0
      for _, n in ipairs(c.sizes) do lo, hi = math.min(lo, n), math.max(hi, n) end
      per = lo == hi and tostring(hi) or ("%d-%d"):format(lo, hi)
    end
    local key = c.sizes and table.concat(c.sizes, ",") or ""
    local marks = {}
    if c.note then marks[#marks + 1] = c.note == "auto" and "what \"auto\" picks" or c.note end
    if key == mine then marks[#marks + 1] = "<- this recipe" end
    local st = c.seconds and time.format_seconds(c.seconds) or "-"
    if c.seconds and base and c.sizes then marks[#marks + 1] = time.relative(c.seconds, base) end
    lines[#lines + 1] = ("  %-20s %-18s %12s %12s %10s  %s"):format(what, per, fs(c.activations), fs(c.total_bytes), st,
      table.concat(marks, ", ")):gsub("%s+$", "")
  end
  return lines
end

-- What one micro-batch runs through the model: "micro-batch: 16 rows x 3 texts = 48 texts of
-- up to 512 tokens", or "micro-batch: 16 texts of up to 512 tokens" when each row is one
-- text (a classifier's pair is one text).
function M.micro_batch_text(plan)
  local per = plan.texts or 1
  if per == 1 then return ("micro-batch: %d texts of up to %d tokens"):format(plan.micro_batch, plan.seq_len) end
  return ("micro-batch: %d rows x %d texts = %d texts of up to %d tokens"):format(plan.micro_batch, per,
    plan.micro_batch * per, plan.seq_len)
end

-- A table for people: per tag, bytes and share, then the total against the budget and,
-- over budget, the planned alternatives as overrides to add after the recipe.
-- info (optional): { budget_source = "memory.limit in ...", alternatives = list } (the
-- alternatives are computed when absent).
function M.format(plan, budget, path, info)
  info = info or {}
  local fs = schema.format_size
  local lines = {
    ("memory plan for %s on %s (%s; %d parameters, %d trainable)")
      :format(path, plan.card and ("%s: %s%s"):format(plan.device, require("trainer.core.card").describe(plan.card),
        plan.card.planned and ", planned with --card" or "") or plan.device,
        M.micro_batch_text(plan), plan.parameters, plan.trainable_parameters),
    ("%-12s %12s %7s"):format("tag", "bytes", "share"),
  }
  for _, tag in ipairs({ "weights", "grads", "optimizer", "activations", "workspace" }) do
    local v = plan.by_tag[tag]
    lines[#lines + 1] = ("%-12s %12s %6.1f%%"):format(tag, fs(v), 100 * v / (plan.tags_sum_bytes or plan.total_bytes))
  end
  lines[#lines + 1] = ("%-12s %12s"):format("total", fs(plan.total_bytes))
  if plan.tags_sum_bytes and plan.tags_sum_bytes > plan.total_bytes then
    lines[#lines + 1] = ("(the step's peak: the tags' peaks sum to %s, but the backward makes the grads as it frees "
      .. "the activations)"):format(fs(plan.tags_sum_bytes))
  end
  local seconds, rates = M.step_seconds(plan)
  if seconds then
    lines[#lines + 1] = ("predicted step time: %s (%d micro-batch%s; %.0f GFLOP/s%s, %.0f GB/s: %s)"):format(
      require("trainer.plan.time").format_seconds(seconds), plan.cost.micro_batches, plan.cost.micro_batches == 1 and ""
      or "es", (plan.cost.half_precision and plan.device == "cuda" and rates.half_flops or rates.flops) / 1e9,
      plan.cost.half_precision and plan.device == "cuda" and " half" or "", rates.bytes / 1e9, rates.source)
  end
  if plan.collective_bytes then
    lines[#lines + 1] = ("per rank under mpirun: workspace holds %s of all-reduce bucket buffers (distributed.bucket); "
      .. "every rank needs the total"):format(fs(plan.collective_bytes))
  end
  if plan.packed_weight_bytes then
    local which = plan.packed_products == "forward and input gradient" and plan.packed_products
      or plan.packed_products .. " only: the other product reads the weights as stored"
    lines[#lines + 1] = ("workspace holds %s of Linear weights packed for oneDNN (f32, %s%s; "
      .. "TRAINER_CPU_GEMM=openblas runs without them)"):format(fs(plan.packed_weight_bytes), which,
      plan.packed_transient == "all" and "; each made for its product and freed after it, so one at a time"
      or plan.packed_transient == "frozen" and "; a frozen weight's made for each product and freed after it" or "")
  end
  if plan.cuda_context_bytes then
    lines[#lines + 1] = ("%-12s %12s  (the CUDA context, outside the allocator: add it to compare with nvidia-smi; "
      .. "an estimate)"):format("+ context", "~" .. fs(plan.cuda_context_bytes))
  end
  for _, l in ipairs(M.format_choices(plan)) do lines[#lines + 1] = l end
  for _, l in ipairs(require("trainer.plan.eval").lines(plan)) do lines[#lines + 1] = l end
  if not budget then return table.concat(lines, "\n") end
  local source = info.budget_source and ("; the budget is " .. info.budget_source) or ""
  if plan.total_bytes <= budget then
    lines[#lines + 1] = ("fits the budget of %s (%s to spare)%s"):format(fs(budget), fs(budget - plan.total_bytes), source)
    return table.concat(lines, "\n")
  end
  lines[#lines + 1] = ("does NOT fit the budget of %s (%s over)%s"):format(fs(budget), fs(plan.total_bytes - budget), source)
  local alts = info.alternatives or (plan.recipe and M.alternatives(plan, budget)) or {}
  local fitting = {}
  for _, a in ipairs(alts) do if a.fits then fitting[#fitting + 1] = a end end
  if #fitting > 0 then
    lines[#lines + 1] = fitting[1].combined
      and "No single change fits; together these do (add them after the recipe on the command line):"
      or "These changes fit (add one after the recipe on the command line):"
    local time = require("trainer.plan.time")
    for _, a in ipairs(fitting) do
      local price = ""
      if a.seconds and seconds then
        price = ("; %s, %s"):format(time.format_seconds(a.seconds), time.relative(a.seconds, seconds))
      end
      lines[#lines + 1] = ("  %s -> %s (fits; %s%s)"):format(a.text, fs(a.total_bytes), a.note, price)
    end
  else
    local max_length = plan.recipe and plan.recipe.model and plan.recipe.model.max_length
    lines[#lines + 1] = ("Nothing trainer plan knows of fits%s. Raise the budget, shorten model.max_length%s, "
      .. "or train a smaller model."):format(
        alts[1] and (" (with %s the plan is still %s)"):format(alts[1].text, fs(alts[1].total_bytes)) or "",
        max_length and (" (now %d)"):format(max_length) or "")
  end
  return table.concat(lines, "\n")
end

return M
