-- trainer.train.step: one micro-batch of training — tokenize, forward, loss, backward — for the
-- training loop (which owns zero_grad, accumulation, the scaler, clipping and the
-- optimizer step).
--
--   local step = require("trainer.train.step")
--   local loss_value, n_tokens = step.micro {
--     model = m, loss = l, tokenizer = tok, batch = rows,   -- rows from trainer.train.data
--     max_length = 128,      -- default model.max_length
--     scale = 1 / accumulate * scaler.scale,   -- multiplies the loss gradient (default 1)
--     scale_by = tensor,                        -- optional: a { 1 } f32 device scalar it also multiplies by
--     cached = false, mini_batch = 32,          -- GradCache (default: the loss's own, from its recipe
--                                               -- table: loss = { cached = true, mini_batch = 32 })
--     ntexts = ds.ntexts,    -- text columns per row (default: the row's leading strings)
--     feed = f,              -- optional trainer.train.batch_feed: the batch goes to the device
--                            -- through pinned slots and a copy stream (a run on a GPU)
--   }
--
-- A row is what trainer.train.data yields: the text columns in order, then the score or label
-- when there is one (the labels handed to the loss).
--   * classification models (model.task == "classification"): the
--     1 or 2 text columns are one input (a text pair), the logits go to the loss;
--   * embedding models: every text column is embedded and the loss gets one embeddings
--     tensor [B, C] per column. All columns go through the model in ONE forward (rows
--     col1[1..B], col2[1..B], ...): one padded batch, and distinct dropout masks per text,
--     since the keyed mask depends on the element's position in the batch.
-- Parameter gradients ACCUMULATE (+=) into param.grad, scaled by ctx.scale; the returned
-- loss value is unscaled. n_tokens counts the non-padding tokens the model saw.
--
-- The cached path (GradCache, as sentence-transformers' CachedMultipleNegativesRankingLoss and
-- CachedGISTEmbedLoss; any embedding loss):
--   1. embed the texts in chunks of mini_batch with grad disabled (nothing is kept);
--   2. compute the loss on all the embeddings and its gradient with respect to them;
--   3. re-run each chunk with grad enabled and back-propagate that chunk's gradient.
-- Dropout stays on in both passes (set_grad_enabled(false), not eval()). Chunk j draws
-- its dropout masks from the model's seed + j * 2^32 (the key's high word; seeds below
-- 2^32 therefore never collide) at the loop's step, in pass 1 and in its replay alike, so
-- the replay recomputes exactly the embeddings the loss saw; chunk 0 uses the seed
-- itself, so with mini_batch >= the number of texts the cached path is bitwise the plain
-- one. Activation memory is bounded by one chunk (plus the [N, C] embeddings).
local T = require("trainer.core.tensor")
local ops = require("trainer.core.ops")
local errors = require("trainer.core.errors")
local base = require("trainer.losses.base")
local keys = require("trainer.recipe.keys")
local registry = require("trainer.models.registry")
local deferred = require("trainer.train.deferred")
local host = require("trainer.losses.host")

local M = {}

local CHUNK_SEED_STRIDE = 4294967296   -- 2^32: the high word of the Philox key

-- ---------------------------------------------------------------- rows
-- Text columns (lists of strings) and labels (a list, or nil) of a batch of rows.
function M.split_rows(rows, ntexts)
  if type(rows) ~= "table" or #rows == 0 then
    errors.user("step.micro: ctx.batch must be a non-empty list of rows (text columns, then the score or label)")
  end
  local first = rows[1]
  if not ntexts then
    ntexts = 0
    while type(first[ntexts + 1]) == "string" do ntexts = ntexts + 1 end
  end
  if ntexts < 1 then
    errors.user("step.micro: a row must start with its text columns (got %s first)", type(first[1]))
  end
  local cols, labels = {}, nil
  for c = 1, ntexts do cols[c] = {} end
  if #first > ntexts then labels = {} end
  for i, row in ipairs(rows) do
    for c = 1, ntexts do
      if type(row[c]) ~= "string" then
        errors.user("step.micro: row %d column %d is %s, expected a text (rows are the text columns, then the "
          .. "score or label)", i, c, type(row[c]))
      end
      cols[c][i] = row[c]
    end
    if labels then labels[i] = row[ntexts + 1] end
  end
  return cols, labels
end

local function device_of(model)
  local _, p = model:parameters()()   -- the first parameter's device
  return p and p.value:device() or "cpu"
end

local function count_tokens(enc)
  local n = 0
  for _, v in ipairs(enc.attention_mask:values()) do n = n + v end
  return n
end

-- ---------------------------------------------------------------- the batch's tensors
-- The integer targets the loss would upload itself (cross-entropy's class ids, MNRL's
-- arange), for the feed to carry with the tokens; nil when the loss has none or the labels
-- are not all integers (the loss then reports them).
local function feed_targets(loss, B, labels)
  if loss.kind == "mnrl" then
    local t = {}
    for i = 1, B do t[i] = i - 1 end
    return t
  end
  if (loss.kind == "cross_entropy" or loss.kind == "softmax") and type(labels) == "table" and #labels == B then
    for i = 1, B do
      local y = labels[i]
      if type(y) ~= "number" or y ~= math.floor(y) or math.abs(y) > 2 ^ 53 then return nil end
    end
    return labels
  end
  return nil
end

-- Tokenised texts as tensors on the model's device, and their non-padding tokens: through
-- ctx.feed when there is one (the targets and the position ids ride along: enc.targets,
-- enc.position_ids), else tok:batch.
local function encode(ctx, texts, opts, targets)
  if ctx.feed then
    -- the position ids by the model family's rule (a model of no family makes its own)
    local model = ctx.model
    local family = registry.of_model(model)
    local positions = family and function(ids, pos, B, L) family.position_ids(model.config, ids, pos, B, L, 0) end
    return ctx.feed:encode(ctx.tokenizer, texts, opts, targets, positions)
  end
  local enc = ctx.tokenizer:batch(texts, opts)
  return enc, count_tokens(enc)
end

M.encode = encode   -- also an evaluation's way to the device (trainer.train.run)

-- The queued work that reads the last encoded batch: its feed slot may be refilled after it.
local function release(ctx)
  if ctx.feed then ctx.feed:release() end
end

-- Hands the fed targets to the loss for its next forward (losses.base targets()).
local function give_targets(loss, enc)
  local t = enc.targets
  enc.targets = nil
  loss.fed_targets = t
end

-- Takes back fed targets the loss did not use (it failed before, or has none to make).
local function take_back_targets(loss)
  local t = loss.fed_targets
  loss.fed_targets = nil
  if T.is_tensor(t) and not t:is_freed() then t:free() end
end

local function free_enc(enc)
  for _, t in pairs(enc) do if T.is_tensor(t) and not t:is_freed() then t:free() end end
end

local function free_list(list)
  for _, t in ipairs(list) do if T.is_tensor(t) and not t:is_freed() then t:free() end end
end

local function is_classifier(model)
  return model.task == "classification"
end

-- The loss gradients (one per embeddings tensor) as one [N, C] tensor scaled by ctx.scale
-- (and by the device scalar ctx.scale_by when given: the fp16 loss scale living on the
-- device; then ctx.scale is only 1 / accumulate); the list is freed.
local function joined_grad(grads, ctx)
  local d, new = base.cat_rows(grads)
  if new then free_list(grads) end
  local scale = ctx.scale or 1
  if ctx.scale_by then ops.scale_by_scalar_(d, ctx.scale_by, scale)
  elseif scale ~= 1 then ops.scale_(d, scale) end
  return d
end

-- ---------------------------------------------------------------- plain path
-- One forward and backward of the model over texts (B rows of labels), the loss reading
-- loss_inputs(out), the list of tensors it takes from the model's output. Returns the
-- loss value and the token count.
local function plain_step(ctx, texts, B, labels, opts, loss_inputs)
  local model, loss = ctx.model, ctx.loss
  local n_tokens
  local ok, value = pcall(T.scope, function()
    local enc, k = encode(ctx, texts, opts, ctx.feed and feed_targets(loss, B, labels))
    n_tokens = k
    give_targets(loss, enc)
    local out = model:forward(enc)
    free_enc(enc)   -- now: the ids are not needed after the forward
    local v = loss:forward(loss_inputs(out), labels)
    take_back_targets(loss)
    model:backward(joined_grad(loss:backward(), ctx))
    return v
  end)
  take_back_targets(loss)
  release(ctx)
  if not ok then error(value, 0) end
  return value, n_tokens
end

-- A listwise loss (a cross-encoder's cross_entropy): the rows are (query, positive,
-- negative, ...); every (query, candidate) pair is one input, in column blocks (the B
-- positives' pairs, then each negative column's), one logit each.
local function listwise_classifier(ctx, cols, labels, opts)
  if #cols < 3 then
    errors.user("cross_entropy (listwise) loss: rows need a query, its positive and at least one negative; got %d "
      .. "text columns (data.columns: query, positive, negative, ...)", #cols)
  end
  local B, texts = #cols[1], {}
  for c = 2, #cols do
    for i = 1, B do texts[#texts + 1] = { cols[1][i], cols[c][i] } end
  end
  ctx.loss.queries = B
  return plain_step(ctx, texts, B, labels, opts, function(logits) return { logits } end)
end

local function plain_classifier(ctx, cols, labels, opts)
  if ctx.loss.listwise then return listwise_classifier(ctx, cols, labels, opts) end
  if #cols > 2 then errors.user("step.micro: a classifier takes 1 or 2 text columns, got %d", #cols) end
  local texts = cols[1]
  if #cols == 2 then
    texts = {}
    for i = 1, #cols[1] do texts[i] = { cols[1][i], cols[2][i] } end
  end
  return plain_step(ctx, texts, #texts, labels, opts, function(logits) return { logits } end)
end

local function flatten(cols)
  local texts = {}
  for _, col in ipairs(cols) do for _, t in ipairs(col) do texts[#texts + 1] = t end end
  return texts
end

-- Views of the column blocks of e [ncols * B, C].
local function column_views(e, ncols, B)
  local out = {}
  for c = 1, ncols do out[c] = e:narrow((c - 1) * B, B) end
  return out
end

local function plain_embedding(ctx, cols, labels, opts)
  local B = #cols[1]
  return plain_step(ctx, flatten(cols), B, labels, opts, function(e) return column_views(e, #cols, B) end)
end

-- ---------------------------------------------------------------- cached path
local function cached_embedding(ctx, cols, labels, opts)
  local model, loss = ctx.model, ctx.loss
  local mb = keys.value("loss.mini_batch", ctx.mini_batch or loss.mini_batch)
  local B = #cols[1]
  local texts = flatten(cols)
  local N = #texts
  local chunks = {}
  for s = 1, N, mb do
    local chunk = {}
    for i = s, math.min(s + mb - 1, N) do chunk[#chunk + 1] = texts[i] end
    local copts = opts
    if type(opts.prompt_length) == "table" then
      copts = {}
      for k, v in pairs(opts) do copts[k] = v end
      local pl = {}
      for i = s, math.min(s + mb - 1, N) do pl[#pl + 1] = opts.prompt_length[i] end
      copts.prompt_length = pl
    end
    chunks[#chunks + 1] = { start = s - 1, texts = chunk, opts = copts }
  end
  local rng = model.rng or { seed = 0, step = 0 }
  local seed0, grad_was = rng.seed, model.grad_enabled
  local function chunk_seed(j) return seed0 + (j - 1) * CHUNK_SEED_STRIDE end
  local n_tokens = 0
  -- each step in its own scope, so that what it makes dies when the step ends; the feed's
  -- slot is released after each chunk's batch is read (and again on an error: a no-op
  -- when it was)
  local ok, value = pcall(T.scope, function()
    local v, d = T.scope(function()
      -- 1. the embeddings [N, C] without activations, chunk by chunk (the chunks die
      --    when joined)
      model:set_grad_enabled(false)
      local all = T.scope(function()
        local parts = {}
        for j, ch in ipairs(chunks) do
          rng.seed = chunk_seed(j)
          parts[j] = T.scope(function()
            local enc, k = encode(ctx, ch.texts, ch.opts)
            n_tokens = n_tokens + k
            return model:forward(enc)
          end)
          release(ctx)
        end
        return (base.cat_rows(parts))
      end)
      rng.seed = seed0
      model:set_grad_enabled(grad_was)
      -- 2. the loss and its gradient with respect to every embedding
      local v = loss:forward(column_views(all, #cols, B), labels)
      return v, joined_grad(loss:backward(), ctx)
    end)
    -- 3. each chunk again, with grad, under the same dropout key; its batch and
    --    embeddings die before its backward
    for j, ch in ipairs(chunks) do
      rng.seed = chunk_seed(j)
      T.scope(function()
        T.scope(function() model:forward((encode(ctx, ch.texts, ch.opts))) end)
        model:backward(d:narrow(ch.start, #ch.texts))
      end)
      release(ctx)
    end
    rng.seed = seed0
    return v
  end)
  rng.seed = seed0
  model:set_grad_enabled(grad_was)
  if not ok then release(ctx); error(value, 0) end
  return value, n_tokens
end

-- ---------------------------------------------------------------- adaptive layers
-- AdaptiveLayerLoss (trainer.losses.adaptive_layer): one full run of the model, then one
-- per sampled hidden state k with the encoder cut after its k-th layer (its first k; 0: the
-- embeddings' output), each run's forward, loss and backward done before the next, so at
-- most one run's activations are alive. The cut runs see the same dropout keys as the full
-- one (keyed by layer, site and position), so each reproduces the full run's hidden state.
local function cut_encoder(model)
  local family = require("trainer.models.registry").of_model(model)
  local enc = family and family.adaptive_stack(model)
  if type(enc) ~= "table" or type(enc.layers) ~= "table" then
    errors.user("loss.name = \"adaptive_layer\": the %s family has no encoder layer stack trainer can cut into the "
      .. "hidden states sentence-transformers reads; use another loss for this model", family and family.name or "model's")
  end
  for _, layer in ipairs(enc.layers) do
    if layer.__name == "Checkpoint" then
      errors.user("loss.name = \"adaptive_layer\" with checkpoint: not supported; set checkpoint = false")
    end
  end
  return enc
end

local function adaptive_pass(ctx, loss, texts, B, ncols, labels, opts, weight, kl)
  local model = ctx.model
  local n_tokens, rows
  local sub = setmetatable({ scale = (ctx.scale or 1) * weight }, { __index = ctx })
  local ok, value = pcall(T.scope, function()
    local enc, k = encode(ctx, texts, opts, ctx.feed and feed_targets(loss.loss, B, labels))
    n_tokens = k
    give_targets(loss.loss, enc)
    local out = model:forward(enc)
    free_enc(enc)
    local v = loss.loss:forward(column_views(out, ncols, B), labels)
    take_back_targets(loss.loss)
    v = deferred.mul(weight, v)
    local d = joined_grad(loss.loss:backward(), sub)
    if kl then
      rows = host.rows(out)
      if kl.target then
        local kv, g = loss:kl(rows, kl.target)
        v = deferred.add(v, kv)
        local gt = T.from_table(g, { device = d:device() })
        if ctx.scale_by then ops.scale_by_scalar_(gt, ctx.scale_by, ctx.scale or 1)
        elseif (ctx.scale or 1) ~= 1 then ops.scale_(gt, ctx.scale) end
        ops.add_(d, gt)
      end
    end
    model:backward(d)
    return v
  end)
  take_back_targets(loss.loss)
  release(ctx)
  if not ok then error(value, 0) end
  return value, n_tokens, rows
end

local function adaptive_embedding(ctx, cols, labels, opts)
  local loss, model = ctx.loss, ctx.model
  local enc = cut_encoder(model)
  local full = enc.layers
  local L = #full
  local B, ncols, texts = #cols[1], #cols, flatten(cols)
  local rng = model.rng or { seed = 0, step = 0 }
  local picks = loss:layers(L, rng.seed, rng.step)
  local want_kl = loss.kl_temperature > 0 and #picks > 0
  local value, n_tokens, final = adaptive_pass(ctx, loss, texts, B, ncols, labels, opts, loss.last_layer_weight,
    want_kl and {} or nil)
  local target = want_kl and loss:target(final) or nil
  local ok, err = pcall(function()
    for _, k in ipairs(picks) do
      local cut = {}
      for i = 1, k do cut[i] = full[i] end
      enc.layers = cut
      local v = adaptive_pass(ctx, loss, texts, B, ncols, labels, opts, loss.prior_layers_weight / #picks,
        want_kl and { target = target } or nil)
      value = deferred.add(value, v)
    end
  end)
  enc.layers = full
  if not ok then deferred.free(value); error(err, 0) end
  return value, n_tokens
end

-- ---------------------------------------------------------------- entry
-- One micro-batch (see the top of the file). Returns the loss value (unscaled) and the
-- number of non-padding tokens.
function M.micro(ctx)
  if type(ctx) ~= "table" or not ctx.model or not ctx.loss or not ctx.tokenizer then
    errors.user("step.micro(ctx): ctx needs model, loss, tokenizer and batch")
  end
  local model = ctx.model
  local cols, labels = M.split_rows(ctx.batch, ctx.ntexts)
  local opts = { max_length = ctx.max_length or model.max_length, truncation = true, padding = "longest",
    device = device_of(model) }
  -- a distillation loss with a teacher model: the teacher's embeddings or scores are the labels
  if ctx.loss.teacher then labels = ctx.loss.teacher:labels(cols, opts.max_length) end
  -- ctx.prompts[c]: the text put before column c's texts (data.prompts); where the model's
  -- pooling leaves prompts out, each text's prompt length rides along (opts.prompt_length)
  if ctx.prompts then
    local P = require("trainer.models.prompts")
    local lengths, any = {}, false
    for c, col in ipairs(cols) do
      local p = ctx.prompts[c]
      local n = (p and not is_classifier(model)) and P.pool_length(model, ctx.tokenizer, p) or 0
      if p then
        local t = {}
        for i, s in ipairs(col) do t[i] = p .. s end
        cols[c] = t
      end
      for _ = 1, #col do lengths[#lengths + 1] = n end
      any = any or n > 0
    end
    if any then opts.prompt_length = lengths end
  end
  local cached = ctx.cached
  if cached == nil then cached = ctx.loss.cached end
  local ok, value, n_tokens = pcall(function()
    if is_classifier(model) then
      if cached then errors.user("loss.cached: the cached (GradCache) form is for embedding losses, not a classifier") end
      return plain_classifier(ctx, cols, labels, opts)
    elseif ctx.loss.adaptive then
      if cached then errors.user("loss.cached: adaptive_layer has no cached form (nor has sentence-transformers')") end
      return adaptive_embedding(ctx, cols, labels, opts)
    elseif cached then
      return cached_embedding(ctx, cols, labels, opts)
    end
    return plain_embedding(ctx, cols, labels, opts)
  end)
  if not ok then
    model:clear_saved()
    if ctx.loss.release then ctx.loss:release() end
    -- an error about one row (a label out of range) names the data file and line it came from
    local row = type(value) == "table" and value.row and ctx.batch[value.row]
    if row and row.file and row.line and errors.is_user_error(value) then
      errors.user("%s: line %d: %s", row.file, row.line, value.detail)
    end
    error(value, 0)
  end
  return value, n_tokens
end

return M
