-- trainer.models.bert: BERT-family encoders (bert, roberta, xlm-roberta) built from
-- trainer.nn modules, with parameter names exactly the Hugging Face state-dict names.
--
--   local bert = require("trainer.models.bert")
--   local cfg = bert.config(json.read("config.json"), "config.json")
--   local m = bert.BertModel.new(cfg, { seed = 1 })         -- random init (transformers')
--   bert.load_weights(m, "models/x")                          -- by name, prefix-tolerant
--   local h = m:forward({ input_ids =, attention_mask =, token_type_ids = })   -- [B, T, C]
--
-- Three top-level models share the encoder:
--   BertModel           embeddings.*, encoder.layer.N.*, pooler.* (optional);
--   SentenceEncoder     the same names (the BertModel is transparent) + Pooling (+ Normalize);
--   SequenceClassifier  "bert." (or "roberta.") + the BertModel with pooler, classifier.*.
-- Each holds `rng = { seed, step }`, shared by every dropout site (keys (seed, step,
-- layer, op)): the training loop sets model.rng.step; a re-run forward replays masks.
-- Inputs: input_ids [B, T] i32/i64, attention_mask [B, T] (nil: all ones), token_type_ids
-- [B, T] or nil (zeros). Position ids: 0..T-1 for bert; for roberta / xlm-roberta,
-- transformers' create_position_ids_from_input_ids (cumulative count of non-pad tokens,
-- offset by pad_token_id + 1, pad positions get pad_token_id).
local Module = require("trainer.nn.module")
local sites = require("trainer.core.rng_sites")
local Embeddings = require("trainer.nn.embeddings")
local Encoder = require("trainer.nn.encoder")
local packing = require("trainer.nn.packing")
local Pooler = require("trainer.nn.pooler")
local Pooling = require("trainer.nn.pooling")
local Normalize = require("trainer.nn.normalize")
local Dropout = require("trainer.nn.dropout")
local Linear = require("trainer.nn.linear")
local T = require("trainer.core.tensor")
local ops = require("trainer.core.ops")
local errors = require("trainer.core.errors")

local M = {}

-- ---------------------------------------------------------------- config
local families = { bert = "bert", roberta = "roberta", ["xlm-roberta"] = "roberta", camembert = "roberta" }

M.defaults = {
  hidden_act = "gelu", layer_norm_eps = 1e-12, type_vocab_size = 2, pad_token_id = 0,
  hidden_dropout_prob = 0.1, attention_probs_dropout_prob = 0.1, initializer_range = 0.02,
  model_type = "bert", position_embedding_type = "absolute",
}

-- The fields this runtime reads, with their types and ranges. The bounds are far beyond
-- any released encoder and keep a mistyped or absurd config.json (num_hidden_layers =
-- 1e9) from reaching the allocator; whether a valid shape fits in memory is `trainer
-- plan`'s question, asked before a run allocates (trainer.plan.check).
local fields = {
  { "hidden_size", "integer", 1, 65536, required = true },
  { "num_hidden_layers", "integer", 1, 1024, required = true },
  { "num_attention_heads", "integer", 1, 4096, required = true },
  { "intermediate_size", "integer", 1, 1048576, required = true },
  { "vocab_size", "integer", 1, 16777216, required = true },
  { "max_position_embeddings", "integer", 1, 1048576, required = true },
  { "type_vocab_size", "integer", 0, 65536 },
  { "pad_token_id", "integer", 0, 16777216, nullable = true },
  { "layer_norm_eps", "number", 0, 1, open_low = true, open_high = true },
  { "hidden_dropout_prob", "number", 0, 1, open_high = true },
  { "attention_probs_dropout_prob", "number", 0, 1, open_high = true },
  { "classifier_dropout", "number", 0, 1, open_high = true, nullable = true },
  { "initializer_range", "number", 0, 1e3 },
  { "hidden_act", "string" },
  { "model_type", "string" },
  { "position_embedding_type", "string", nullable = true },
}
M.config_fields = fields

local function describe(f)
  if f[2] == "string" then return "a string" end
  local lo = (f.open_low and "> " or ">= ") .. tostring(f[3])
  local hi = (f.open_high and "< " or "<= ") .. tostring(f[4])
  return ("%s %s and %s"):format(f[2] == "integer" and "a whole number" or "a number", lo, hi)
end

local function shown(v)
  if type(v) == "string" then return ("%q"):format(v) end
  if type(v) == "table" then return "a list or object" end
  if type(v) == "userdata" then return "null" end
  return tostring(v)
end

-- Raises the error of field f of cfg (from source) unless its value is of its type and
-- range; a null (json.null) where null is allowed becomes nil.
local function check_field(cfg, f, source)
  local name, v = f[1], cfg[f[1]]
  if type(v) == "userdata" and f.nullable then cfg[name] = nil return end
  if v == nil then
    if f.required then
      errors.user("%s: %s is missing; a BERT config.json gives it as %s (the fields needed are hidden_size, "
        .. "num_hidden_layers, num_attention_heads, intermediate_size, vocab_size, max_position_embeddings)",
        source, name, describe(f))
    end
    return
  end
  local ok
  if f[2] == "string" then ok = type(v) == "string"
  else
    ok = type(v) == "number" and v == v
      and (f.open_low and v > f[3] or not f.open_low and v >= f[3])
      and (f.open_high and v < f[4] or not f.open_high and v <= f[4])
      and (f[2] ~= "integer" or v == math.floor(v))
  end
  if not ok then
    errors.user("%s: %s is %s, but it must be %s; fix the value in %s (or use the config.json that came with "
      .. "the weights)", source, name, shown(v), describe(f), source)
  end
end

-- A checked copy of a config.json table (source names the file in errors) with defaults
-- filled in and `family` ("bert" or "roberta") added.
function M.config(raw, source)
  source = source or "config"
  if type(raw) ~= "table" then errors.user("%s: a model config must be a JSON object", source) end
  local cfg = {}
  for k, v in pairs(raw) do cfg[k] = v end
  for _, f in ipairs(fields) do check_field(cfg, f, source) end
  for k, v in pairs(M.defaults) do if cfg[k] == nil then cfg[k] = v end end
  cfg.family = families[cfg.model_type]
  if not cfg.family then
    errors.user("%s: model_type %q is not supported (bert, roberta, xlm-roberta)", source, tostring(cfg.model_type))
  end
  if cfg.hidden_size % cfg.num_attention_heads ~= 0 then
    errors.user("%s: hidden_size %d is not a multiple of num_attention_heads %d", source, cfg.hidden_size,
      cfg.num_attention_heads)
  end
  if cfg.position_embedding_type ~= "absolute" then
    errors.user("%s: position_embedding_type %q is not supported (absolute only)", source,
      tostring(cfg.position_embedding_type))
  end
  if not pcall(ops.gelu_kind, cfg.hidden_act) then
    errors.user("%s: hidden_act %q is not supported (gelu, gelu_new, gelu_pytorch_tanh)", source, cfg.hidden_act)
  end
  if cfg.pad_token_id == nil then cfg.pad_token_id = cfg.family == "roberta" and 1 or 0 end
  if cfg.pad_token_id >= cfg.vocab_size then
    errors.user("%s: pad_token_id %d is not below vocab_size %d", source, cfg.pad_token_id, cfg.vocab_size)
  end
  if cfg.family == "roberta" then
    cfg.position_padding_idx = cfg.pad_token_id
    if cfg.max_position_embeddings <= cfg.pad_token_id + 1 then
      errors.user("%s: max_position_embeddings %d leaves no position after the %d that %s reserves for padding",
        source, cfg.max_position_embeddings, cfg.pad_token_id + 1, cfg.model_type)
    end
  end
  return cfg
end

-- The longest input the position table allows (roberta spends pad_token_id + 1 rows).
function M.max_positions(cfg)
  if cfg.family == "roberta" then return cfg.max_position_embeddings - cfg.pad_token_id - 1 end
  return cfg.max_position_embeddings
end

-- ---------------------------------------------------------------- inputs
-- The tensors the embeddings and attention need; `owned` lists what the caller frees.
function M.prepare_inputs(cfg, input, device)
  if type(input) ~= "table" or not T.is_tensor(input.input_ids) then
    errors.user("model:forward: the input must be { input_ids = tensor [B, T], attention_mask =, token_type_ids = }")
  end
  local ids = input.input_ids
  local shape = ids:shape()
  if #shape ~= 2 then errors.user("model:forward: input_ids must be [B, T], got %d dims", #shape) end
  local B, Tn = shape[1], shape[2]
  if Tn > M.max_positions(cfg) then
    errors.user("model:forward: %d tokens is longer than the model's %d positions: truncate (max_length)",
      Tn, M.max_positions(cfg))
  end
  local owned, out = {}, { input_ids = ids }
  local function own(t) owned[#owned + 1] = t return t end
  -- attention mask as i32 (the attention op reads i32 or f32)
  local mask = input.attention_mask
  if mask == nil then
    out.mask = own(T.ones({ B, Tn }, { dtype = "i32", device = ids:device() }))
  elseif mask:dtype() == "i32" or mask:dtype() == "f32" then
    out.mask = mask
  else
    out.mask = own(ops.cast(mask, "i32", { tag = "activations" }))
  end
  -- position ids: the caller's (trainer.train.batch_feed makes them on the host with the
  -- batch, by this rule, so that a device step neither reads the ids back nor waits for an
  -- upload here), else made here
  if input.position_ids then
    out.position_ids = input.position_ids
  else
    local pos = {}
    if cfg.family == "roberta" then
      local v, pad = ids:values(), cfg.pad_token_id
      for b = 0, B - 1 do
        local count = 0
        for t = 1, Tn do
          local i = b * Tn + t
          if v[i] ~= pad then count = count + 1; pos[i] = count + pad else pos[i] = pad end
        end
      end
    else
      for b = 0, B - 1 do for t = 1, Tn do pos[b * Tn + t] = t - 1 end end
    end
    local p = T.from_table(pos, { dtype = "i32", device = ids:device() })
    out.position_ids = own(p:reshape({ B, Tn }))
    p:free()
  end
  if (cfg.type_vocab_size or 0) > 0 then
    out.token_type_ids = input.token_type_ids or own(T.zeros({ B, Tn }, { dtype = "i32", device = ids:device() }))
  end
  return out, owned
end

-- ---------------------------------------------------------------- BertModel
local BertModel = Module:extend("BertModel")
M.BertModel = BertModel

-- opts: seed (init and dropout), pooler (default true), device, init ("random" default, or
-- "none": parameters stay as allocated), rng (a shared { seed, step } table),
-- activation_dtype (of the embeddings' output, hence of every activation after it:
-- "bf16" / "f16" run the encoder in half with f32 weights; default the weights' dtype).
function BertModel.new(cfg, opts)
  opts = opts or {}
  local self = BertModel:create()
  self.config = cfg
  self.rng = opts.rng or { seed = opts.seed or 0, step = 0 }
  local c = {}
  for k, v in pairs(cfg) do c[k] = v end
  c.device = opts.device
  c.activation_dtype = opts.activation_dtype
  self:add_module("embeddings", Embeddings.new(c, self.rng))
  self:add_module("encoder", Encoder.new(c, self.rng))
  if opts.pooler ~= false then self:add_module("pooler", Pooler.new(c)) end
  if opts.init ~= "none" then M.init_weights(self, cfg, opts.seed or 0) end
  return self
end

-- opts.pack_rows = true (what SentenceEncoder and SequenceClassifier pass: they read only
-- real rows, or row 0): when the batch has padding the encoder runs on the real rows only
-- (trainer.nn.packing): the embeddings' output is gathered, the last hidden state scattered
-- back to [B, T, C] with 0 in the padding rows. Without it every row is computed, as
-- transformers' last_hidden_state (padding rows included). The packing lives until the
-- backward (the layers saved it), or until the end of a forward without grad.
function BertModel:forward(input, opts)
  self:close_packing()
  local pk
  local ok, h = pcall(T.scope, function()   -- frees the inputs made here and every temporary
    local x = M.prepare_inputs(self.config, input, self.embeddings.word_embeddings.weight.value:device())
    pk = opts and opts.pack_rows and packing.from_mask(x.mask) or nil
    if not pk then return self.encoder:forward(self.embeddings:forward(x), x.mask) end
    -- each step in its own scope: the embeddings' output dies at the gather, the packed
    -- rows at the encoder's end, the encoder's output at the scatter
    local y = T.scope(function()
      local ep = T.scope(function() return pk:gather(self.embeddings:forward(x)) end)
      return self.encoder:forward(ep, pk)
    end)
    return pk:scatter(y)
  end)
  if pk then
    if ok and self.grad_enabled then self.packing = pk else pk:close() end
  end
  if not ok then self:clear_saved(); error(h, 0) end
  return h
end

function BertModel:close_packing()
  if self.packing then self.packing:close(); self.packing = nil end
end

-- Saved state of this module (the packing) and, through Module, its tensors.
function BertModel:release()
  self:close_packing()
  Module.release(self)
end

-- dhidden [B, T, C]: parameter gradients accumulate; returns nil (ids have no gradient).
function BertModel:backward(dhidden)
  local pk = self.packing
  local ok, err = pcall(T.scope, function()
    -- frozen embeddings (LoRA, a frozen stack) owe the encoder's input no gradient
    local frozen = not self.embeddings:any_trainable()
    if frozen then self.embeddings:clear_saved() end
    if not pk then
      local de = self.encoder:backward(dhidden, not frozen)
      if de then self.embeddings:backward(de) end
      return
    end
    -- each step in its own scope: the packed gradient dies at the encoder's end, the
    -- encoder's at the scatter
    local de = T.scope(function()
      local dep = T.scope(function() return self.encoder:backward(pk:gather(dhidden), not frozen) end)
      return dep and pk:scatter(dep)
    end)
    if de then self.embeddings:backward(de) end
  end)
  self:close_packing()
  if not ok then error(err, 0) end
  return nil
end

-- ---------------------------------------------------------------- SentenceEncoder
local SentenceEncoder = Module:extend("SentenceEncoder")
M.SentenceEncoder = SentenceEncoder

-- bert: a BertModel (added transparently: names stay embeddings.*, encoder.*);
-- opts: pooling (default "mean"), normalize (bool).
function SentenceEncoder.new(bert, opts)
  opts = opts or {}
  local self = SentenceEncoder:create()
  self.rng = bert.rng
  self.config = bert.config
  self:add_module("", bert, "bert")
  self:add_module("pooling", Pooling.new(opts.pooling or "mean"))
  if opts.normalize then self:add_module("normalize", Normalize.new()) end
  return self
end

-- -> embeddings [B, C] (normalised when the model has a Normalize module)
-- self.pack_rows = false computes the padding rows too (the embeddings are the same).
function SentenceEncoder:forward(input)
  local ok, y = pcall(T.scope, function()
    local h = self.bert:forward(input, { pack_rows = self.pack_rows ~= false })
    local pooled = self.pooling:forward(h, input.attention_mask)
    if not self.normalize then return pooled end
    return self.normalize:forward(pooled)
  end)
  if not ok then self:clear_saved(); error(y, 0) end
  return y
end

function SentenceEncoder:backward(demb)
  T.scope(function()
    -- the pooled rows' gradient dies before the encoder's backward
    local dh = T.scope(function()
      local dp = self.normalize and self.normalize:backward(demb) or demb
      return self.pooling:backward(dp)
    end)
    self.bert:backward(dh)
  end)
  return nil
end

-- ---------------------------------------------------------------- SequenceClassifier
local SequenceClassifier = Module:extend("SequenceClassifier")
M.SequenceClassifier = SequenceClassifier

-- bert: a BertModel with pooler; num_labels; opts: prefix ("bert" default), dropout
-- (classifier_dropout, default the config's hidden_dropout_prob).
function SequenceClassifier.new(bert, num_labels, opts)
  opts = opts or {}
  local self = SequenceClassifier:create()
  local cfg = bert.config
  if not bert.pooler then errors.user("SequenceClassifier: the BertModel needs its pooler") end
  self.rng, self.config, self.num_labels = bert.rng, cfg, num_labels
  self:add_module(opts.prefix or "bert", bert, "bert")
  local p = opts.dropout
  if p == nil then p = cfg.classifier_dropout end
  if type(p) ~= "number" then p = cfg.hidden_dropout_prob end
  self:add_module("dropout", Dropout.new(p, self.rng, sites.head_layer(cfg.num_hidden_layers), sites.dropout.head))
  self:add_module("classifier", Linear.new(cfg.hidden_size, num_labels, { device = opts.device }))
  if opts.init ~= "none" then
    M.init_weights(self.classifier, cfg, (opts.seed or 0) + 7919, "classifier.")
  end
  return self
end

-- -> logits [B, num_labels]; the pooler reads row 0 only, so padding rows are skipped
-- (self.pack_rows = false computes them).
function SequenceClassifier:forward(input)
  local ok, logits = pcall(T.scope, function()
    local h = self.bert:forward(input, { pack_rows = self.pack_rows ~= false })
    local d = T.scope(function() return self.dropout:forward(self.bert.pooler:forward(h)) end)
    return self.classifier:forward(d)
  end)
  if not ok then self:clear_saved(); error(logits, 0) end
  return logits
end

-- each gradient dies once the next one back is made
function SequenceClassifier:backward(dlogits)
  T.scope(function()
    local dh = T.scope(function()
      local dp = T.scope(function() return self.dropout:backward(self.classifier:backward(dlogits)) end)
      return self.bert.pooler:backward(dp)
    end)
    self.bert:backward(dh)
  end)
  return nil
end

-- ---------------------------------------------------------------- init
-- transformers' _init_weights: Linear and Embedding weights ~ N(0, initializer_range),
-- biases 0, LayerNorm weight 1 / bias 0, the padding rows of embeddings 0. Seeded: the
-- k-th parameter draws stream k of seed.
function M.init_weights(model, cfg, seed, prefix)
  local std = cfg.initializer_range or 0.02
  local k = 0
  for name, p in model:parameters() do
    k = k + 1
    local full = (prefix or "") .. name
    local v = p.value
    if full:match("LayerNorm%.weight$") then v:fill(1)
    elseif full:match("%.bias$") then v:fill(0)
    else
      local dtype, device = v:dtype(), v:device()
      local direct = dtype == "f32" and device == "cpu"
      -- drawn in f32 on the CPU; a draw that is converted afterwards is workspace
      local r = T.randn(v:shape(), { seed = seed, stream = sites.bert_param(k), tag = direct and "weights" or "workspace" })
      ops.scale_(r, std)
      v:free()
      if direct then v = r
      else
        v = r:to({ dtype = dtype, device = device, tag = "weights" })
        r:free()
      end
      p.value = T.keep(v)
      local pad
      if full:match("word_embeddings%.weight$") then pad = cfg.pad_token_id end
      if full:match("position_embeddings%.weight$") then pad = cfg.position_padding_idx end
      if pad and pad >= 0 and pad < v:shape()[1] then
        local row = v:narrow(pad, 1)
        row:fill(0)
        row:free()
      end
    end
  end
end

-- ---------------------------------------------------------------- loading weights
local prefixes = { "", "bert.", "roberta.", "model." }
local known_buffers = { "position_ids$", "token_type_ids$" }

local function is_buffer(name)
  for _, pat in ipairs(known_buffers) do if name:match(pat) then return true end end
  return false
end

-- The checkpoint key for a model parameter name: itself, or with the model's own prefix
-- stripped and any of the known prefixes added (checkpoints with or without "bert.").
local function candidates(name)
  local base = name
  for _, p in ipairs(prefixes) do
    if p ~= "" and name:sub(1, #p) == p then base = name:sub(#p + 1) break end
  end
  local out = { name }
  for _, p in ipairs(prefixes) do if p .. base ~= name then out[#out + 1] = p .. base end end
  return out
end

-- Copies every parameter from a safetensors file/folder (or an open reader) by name.
-- Missing weights are a user error listing them; unexpected ones (other than buffers
-- such as position_ids) are returned as warnings. opts: on_warning(msg), optional(name)
-- (true for parameters that may keep their initial values, e.g. a new classifier head:
-- each one left so is reported in a warning).
function M.load_weights(model, source, opts)
  opts = opts or {}
  local st = require("trainer.core.safetensors")
  local reader, own = source, false
  if type(source) == "string" then reader, own = st.load(source), true end
  local path = reader.path
  local used, missing, warnings, new_init = {}, {}, {}, {}
  local ok, err = pcall(function()
    for name, p in model:parameters() do
      local key
      for _, c in ipairs(candidates(name)) do
        if reader:has(c) then key = c break end
      end
      if not key then
        if opts.optional and opts.optional(name) then new_init[#new_init + 1] = name
        else missing[#missing + 1] = name end
      else
        used[key] = true
        local info = reader:info(key)
        local want = p.value:shape()
        local same = table.concat(info.shape, ",") == table.concat(want, ",")
        if not same and opts.optional and opts.optional(name) then
          new_init[#new_init + 1] = name .. " (shape differs)"
        elseif not same then
          errors.user("%s: %s has shape [%s] but the model (from config.json) expects [%s]", path, key,
            table.concat(info.shape, ", "), table.concat(want, ", "))
        else
          -- into the parameter's own memory: a new tensor per parameter would hold the
          -- largest one twice and show it in the weights ledger's peak
          reader:read_into(key, p.value)
        end
      end
    end
    if #missing > 0 then
      errors.user("%s: %d weight%s the model needs %s missing: %s%s (is config.json the one of these weights?)",
        path, #missing, #missing == 1 and "" or "s", #missing == 1 and "is" or "are",
        table.concat(missing, ", ", 1, math.min(#missing, 8)), #missing > 8 and ", ..." or "")
    end
    if #new_init > 0 then
      warnings[#warnings + 1] = ("%s: %d weight%s not in the checkpoint, newly initialised (train them): %s"):format(
        path, #new_init, #new_init == 1 and "" or "s", table.concat(new_init, ", "))
    end
    local unexpected = {}
    for _, key in ipairs(reader:names()) do
      if not used[key] and not is_buffer(key) then unexpected[#unexpected + 1] = key end
    end
    if #unexpected > 0 then
      warnings[#warnings + 1] = ("%s: %d tensor%s not used by the model: %s%s"):format(path, #unexpected,
        #unexpected == 1 and "" or "s", table.concat(unexpected, ", ", 1, math.min(#unexpected, 8)),
        #unexpected > 8 and ", ..." or "")
    end
  end)
  if own then reader:close() end
  if not ok then error(err, 0) end
  for _, w in ipairs(warnings) do if opts.on_warning then opts.on_warning(w) end end
  return warnings
end

-- Whether a safetensors reader holds pooler weights (under any known prefix).
function M.has_pooler(reader)
  for _, p in ipairs(prefixes) do if reader:has(p .. "pooler.dense.weight") then return true end end
  return false
end

-- Whether a safetensors reader holds a trained classification head (classifier.weight, as
-- BertForSequenceClassification saves it, under any prefix).
function M.has_head(reader)
  for _, n in ipairs(reader:names()) do
    if n == "classifier.weight" or n:sub(-#"classifier.weight" - 1) == ".classifier.weight" then return true end
  end
  return false
end

-- All parameters as an ordered { { name, tensor }, ... } list for safetensors.save.
function M.state_list(model)
  local out = {}
  for name, p in model:parameters() do out[#out + 1] = { name, p.value } end
  return out
end

return M
