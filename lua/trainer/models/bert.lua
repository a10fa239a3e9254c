-- trainer.models.bert: the BERT family (model_type "bert"), and the BERT-shaped machinery the
-- families built on it share (trainer.models.roberta, distilbert, mpnet; ModernBERT takes its
-- config checks, init, top-level models and blocks): encoders made of trainer.nn modules
-- whose parameter names are exactly the Hugging Face state-dict names.
--
--   local bert = require("trainer.models.bert")
--   local cfg = bert.config(json.read("config.json"), "config.json")
--   local m = bert.build("embedding", { config = cfg, seed = 1 })   -- random init (transformers')
--   bert.load_weights(m, "models/x")                                 -- by name, prefix-tolerant
--   local e = m:forward({ input_ids =, attention_mask =, token_type_ids = })   -- [B, C]
--
-- This file is a family behind the interface of docs/ARCHITECTURE.md ("Adding a model"): the
-- fields M.shaped_family fills in. Three top-level models share the encoder:
--   BertModel           embeddings.*, encoder.layer.N.*, pooler.* (optional);
--   SentenceEncoder     the same names (the BertModel is transparent) + Pooling (+ Normalize);
--   SequenceClassifier  PREFIX. (the family's: "bert.") + the BertModel with pooler,
--                       classifier.*;
--   HeadClassifier      PREFIX. + the BertModel without pooler + a head on the first token
--                       (spec.head: RoBERTa's classifier.dense / out_proj, DistilBERT's).
-- Each holds `rng = { seed, step }`, shared by every dropout site (keys (seed, step,
-- layer, op)): the training loop sets model.rng.step; a re-run forward replays masks.
-- Inputs: input_ids [B, T] i32/i64, attention_mask [B, T] (nil: all ones), token_type_ids
-- [B, T] or nil (zeros). Position ids: the family's rule (position_ids): 0..T-1 here; a
-- family built on this file may give its own (RoBERTa's padding offset).
local Module = require("trainer.nn.module")
local registry = require("trainer.models.registry")
local sites = require("trainer.core.rng_sites")
local BertEmbeddings = require("trainer.models.bert.embeddings")
local BertEncoder = require("trainer.models.bert.encoder")
local BertLayer = require("trainer.models.bert.layer")
local packing = require("trainer.nn.packing")
local row_pick = require("trainer.nn.row_pick")
local BertPooler = require("trainer.models.bert.pooler")
local Pooling = require("trainer.nn.pooling")
local Normalize = require("trainer.nn.normalize")
local Dropout = require("trainer.nn.dropout")
local Linear = require("trainer.nn.linear")
local T = require("trainer.core.tensor")
local ops = require("trainer.core.ops")
local errors = require("trainer.core.errors")

local M = {}

-- ---------------------------------------------------------------- config
M.defaults = {
  hidden_act = "gelu", layer_norm_eps = 1e-12, type_vocab_size = 2, pad_token_id = 0,
  hidden_dropout_prob = 0.1, attention_probs_dropout_prob = 0.1, initializer_range = 0.02,
  position_embedding_type = "absolute",
}

-- The fields this runtime reads, with their types and ranges. The bounds are far beyond
-- any released encoder and keep a mistyped or absurd config.json (num_hidden_layers =
-- 1e9) from reaching the allocator; whether a valid shape fits in memory is `trainer
-- plan`'s question, asked before a run allocates (trainer.plan.check).
-- The fields of an encoder's shape, bounded alike in every family: the hidden size, layers,
-- heads, intermediate size (names: the family's config.json names of these four, BERT's by
-- default: { hidden =, layers =, heads =, intermediate = }), vocab_size and
-- max_position_embeddings (not required when positions_optional), then the fields of rest.
function M.shape_fields(names, positions_optional, rest)
  local n = names or {}
  local out = {
    { n.hidden or "hidden_size", "integer", 1, 65536, required = true },
    { n.layers or "num_hidden_layers", "integer", 1, 1024, required = true },
    { n.heads or "num_attention_heads", "integer", 1, 4096, required = true },
    { n.intermediate or "intermediate_size", "integer", 1, 1048576, required = true },
    { "vocab_size", "integer", 1, 16777216, required = true },
    { "max_position_embeddings", "integer", 1, 1048576, required = not positions_optional or nil },
  }
  for _, f in ipairs(rest) do out[#out + 1] = f end
  return out
end

local fields = M.shape_fields(nil, false, {
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
})
M.config_fields = fields

local function describe(f)
  if f[2] == "string" then return "a string" end
  if f[2] == "boolean" then return "true or false" end
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
-- range; a null (json.null) where null is allowed becomes nil. fields: the family's list
-- (BERT's by default), whose required ones a missing field's message names; label: the
-- family's name in it ("BERT").
local function check_field(cfg, f, source, fields_of, label)
  local name, v = f[1], cfg[f[1]]
  if type(v) == "userdata" and f.nullable then cfg[name] = nil return end
  if v == nil then
    if f.required then
      local needed = {}
      for _, g in ipairs(fields_of or fields) do if g.required then needed[#needed + 1] = g[1] end end
      errors.user("%s: %s is missing; a %s config.json gives it as %s (the fields needed are %s)",
        source, name, label or "BERT", describe(f), table.concat(needed, ", "))
    end
    return
  end
  local ok
  if f[2] == "string" then ok = type(v) == "string"
  elseif f[2] == "boolean" then ok = type(v) == "boolean"
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

-- Checks every field of a family's list in cfg (a copy it may write: nulls become nil).
function M.check_fields(cfg, fields_of, source, label)
  for _, f in ipairs(fields_of) do check_field(cfg, f, source, fields_of, label) end
end

-- The start of a config() of a family built on this file (fam: its table, with name): a copy
-- of the config.json table raw (source names the file in errors) with fields_of checked
-- (label: the family's name in a missing field's message), defaults filled in, `family`
-- (fam.name) added, and model_type fam's own when absent, else one of fam's.
function M.checked_copy(fam, raw, source, fields_of, defaults, label)
  if type(raw) ~= "table" then errors.user("%s: a model config must be a JSON object", source) end
  local cfg = {}
  for k, v in pairs(raw) do cfg[k] = v end
  M.check_fields(cfg, fields_of, source, label)
  for k, v in pairs(defaults) do if cfg[k] == nil then cfg[k] = v end end
  if cfg.model_type == nil then cfg.model_type = fam.name end
  if registry.family(cfg.model_type, source) ~= fam then
    errors.user("%s: model_type %q is not a %s model; check it with trainer.models.registry.config (or load it "
      .. "with trainer.load_model), which choose its family", source, cfg.model_type, fam.name)
  end
  cfg.family = fam.name
  return cfg
end

-- Checks of a config whose shape and padding id have BERT's names (ModernBERT's too).
-- The heads divide the hidden size.
function M.check_heads(cfg, source)
  if cfg.hidden_size % cfg.num_attention_heads ~= 0 then
    errors.user("%s: hidden_size %d is not a multiple of num_attention_heads %d", source, cfg.hidden_size,
      cfg.num_attention_heads)
  end
end

-- The padding id (nil: none) is a row of the vocabulary.
function M.check_pad(cfg, source)
  if cfg.pad_token_id and cfg.pad_token_id >= cfg.vocab_size then
    errors.user("%s: pad_token_id %d is not below vocab_size %d", source, cfg.pad_token_id, cfg.vocab_size)
  end
end

-- A checked copy of a config.json table (source names the file in errors) with defaults
-- filled in and `family` (fam.name) added, for the BERT-shaped family fam; a config without
-- model_type is fam's own. spec.finish_config(cfg, source) adds what a variant needs.
local function shaped_config(fam, spec, raw, source)
  source = source or "config"
  local cfg = M.checked_copy(fam, raw, source, fields, M.defaults)
  M.check_heads(cfg, source)
  if cfg.position_embedding_type ~= "absolute" then
    errors.user("%s: position_embedding_type %q is not supported (absolute only)", source,
      tostring(cfg.position_embedding_type))
  end
  if not pcall(ops.gelu_kind, cfg.hidden_act) then
    errors.user("%s: hidden_act %q is not supported (gelu, gelu_new, gelu_pytorch_tanh)", source, cfg.hidden_act)
  end
  M.check_pad(cfg, source)
  if spec.finish_config then spec.finish_config(cfg, source) end
  return cfg
end

-- ---------------------------------------------------------------- positions
-- BERT's absolute positions: token t of every row is at t (0-based).
local function absolute_max_positions(cfg) return cfg.max_position_embeddings end
M.absolute_max_positions = absolute_max_positions

-- Fills pos[base .. base + B*T - 1] (row-major [B, T]) with 0..T-1 per row; ids (a function
-- giving the token ids, indexed as pos is) is never called: a device batch is not read back.
local function absolute_position_ids(cfg, ids, pos, B, Tn, base)
  for b = 0, B - 1 do
    local row = base + b * Tn
    for t = 0, Tn - 1 do pos[row + t] = t end
  end
end
M.absolute_position_ids = absolute_position_ids

-- RoBERTa's rule (transformers' create_position_ids_from_input_ids), for the padding index
-- pad: fills pos[base .. base + B*T - 1] (row-major [B, T]) from the ids (a function giving
-- them, indexed as pos is) with pad + the running count of the row's non-pad tokens, and pad
-- at the pads.
function M.padded_position_ids(pad, ids, pos, B, Tn, base)
  local v = ids()
  for b = 0, B - 1 do
    local count, row = 0, base + b * Tn
    for t = 0, Tn - 1 do
      local i = row + t
      if v[i] ~= pad then count = count + 1; pos[i] = count + pad else pos[i] = pad end
    end
  end
end

-- ---------------------------------------------------------------- inputs
-- The tensors the embeddings and attention need; `owned` lists what the caller frees.
function M.prepare_inputs(cfg, input, device)
  if type(input) ~= "table" or not T.is_tensor(input.input_ids) then
    errors.user("model:forward: the input must be { input_ids = tensor [B, T], attention_mask =, token_type_ids = }")
  end
  local fam = registry.of_config(cfg)
  local ids = input.input_ids
  local shape = ids:shape()
  if #shape ~= 2 then errors.user("model:forward: input_ids must be [B, T], got %d dims", #shape) end
  local B, Tn = shape[1], shape[2]
  local limit = fam.max_positions(cfg)
  if Tn > limit then
    errors.user("model:forward: %d tokens is longer than the model's %d positions: truncate (max_length)", Tn, limit)
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
  -- batch, by the family's rule, so that a device step neither reads the ids back nor waits
  -- for an upload here), else made here by the same rule
  if input.position_ids then
    out.position_ids = input.position_ids
  else
    local pos = {}
    fam.position_ids(cfg, function() return ids:values() end, pos, B, Tn, 1)
    local p = T.from_table(pos, { dtype = "i32", device = ids:device() })
    out.position_ids = own(p:reshape({ B, Tn }))
    p:free()
  end
  if (cfg.type_vocab_size or 0) > 0 then
    out.token_type_ids = input.token_type_ids or own(T.zeros({ B, Tn }, { dtype = "i32", device = ids:device() }))
  end
  return out, owned
end

-- ---------------------------------------------------------------- forward
-- A model's forward: fn(...) in a scope (which frees its temporaries); on an error the
-- activations the model's modules saved so far are released and the error raised again.
local function guarded_forward(self, fn, ...)
  local ok, y = pcall(T.scope, fn, ...)
  if not ok then self:clear_saved(); error(y, 0) end
  return y
end
M.guarded_forward = guarded_forward

-- A top-level model's backward: fn() (the head's backward, in a scope of its own, so its
-- temporaries die before the base model's backward) gives the gradient of the base model's
-- output, which goes through base. Returns nil (the ids have no gradient).
local function backward_through(base, fn)
  T.scope(function() base:backward(T.scope(fn)) end)
  return nil
end
M.backward_through = backward_through

-- ---------------------------------------------------------------- BertModel
-- The start of a base model's constructor (a family's other than BERT's too): self's config
-- and rng (opts.rng, a shared { seed, step } table, or a new one of opts.seed); returns the
-- config its modules are built from: a copy of cfg with opts.device and opts.activation_dtype.
function M.model_config(self, cfg, opts)
  self.config = cfg
  self.rng = opts.rng or { seed = opts.seed or 0, step = 0 }
  local c = {}
  for k, v in pairs(cfg) do c[k] = v end
  c.device, c.activation_dtype = opts.device, opts.activation_dtype
  return c
end

local BertModel = Module:extend("BertModel")
M.BertModel = BertModel

-- opts: seed (init and dropout), pooler (default true), device, init ("random" default, or
-- "none": parameters stay as allocated), rng (a shared { seed, step } table), names ({ encoder,
-- attention_name, attention = BertAttention's, ffn = BertFeedForward's }: other weight names),
-- activation_dtype (of the embeddings' output, hence of every activation after it:
-- "bf16" / "f16" run the encoder in half with f32 weights; default the weights' dtype).
function BertModel.new(cfg, opts)
  opts = opts or {}
  local self = BertModel:create()
  local c = M.model_config(self, cfg, opts)
  self:add_module("embeddings", BertEmbeddings.new(c, self.rng))
  -- opts.names: another family's weight names for the same modules (trainer.models.distilbert)
  local names = opts.names or {}
  c.names, c.ffn_names, c.attention_name = names.attention, names.ffn, names.attention_name
  self:add_module(names.encoder or "encoder", BertEncoder.new(c, self.rng), "encoder")
  if opts.pooler ~= false then self:add_module("pooler", BertPooler.new(c)) end
  if opts.init ~= "none" then M.init_weights(self, cfg, opts.seed or 0) end
  return self
end

-- opts.pack_rows = true (what SentenceEncoder and SequenceClassifier pass: they read only
-- real rows, or row 0): when the batch has padding the encoder runs on the real rows only
-- (trainer.nn.packing): the embeddings' output is gathered, the last hidden state scattered
-- back to [B, T, C] with 0 in the padding rows. Without it every row is computed, as
-- transformers' last_hidden_state (padding rows included). The packing lives until the
-- backward (the layers saved it), or until the end of a forward without grad.
-- opts.rows = "first" (what a head that reads each sequence's first row passes): the last
-- layer computes that row only past its attention core (trainer.nn.row_pick), and the result
-- is [B, 1, C], the first rows of the last hidden state; the backward then takes [B, 1, C].
function BertModel:forward(input, opts)
  self:close_packing()
  self.picked = nil
  local pk
  local ok, h = pcall(T.scope, function()   -- frees the inputs made here and every temporary
    local x = M.prepare_inputs(self.config, input, self.embeddings.word_embeddings.weight.value:device())
    pk = opts and opts.pack_rows and packing.from_mask(x.mask) or nil
    local s = x.input_ids:shape()
    local rows = opts and opts.rows == "first" and row_pick.first(s[1], s[2], pk) or nil
    if rows then self.picked = { s[1], s[2] } end
    local function picked(y) return y:reshape({ s[1], 1, y:shape()[2] }) end
    if not pk then
      local y = self.encoder:forward(self.embeddings:forward(x), x.mask, rows)
      return rows and picked(y) or y
    end
    -- each step in its own scope: the embeddings' output dies at the gather, the packed
    -- rows at the encoder's end, the encoder's output at the scatter
    local y = T.scope(function()
      local ep = T.scope(function() return pk:gather(self.embeddings:forward(x)) end)
      return self.encoder:forward(ep, pk, rows)
    end)
    if rows then return picked(y) end
    return pk:scatter(y)
  end)
  if pk then
    if ok and self.grad_enabled then self.packing = pk else pk:close() end
  end
  if not ok then self.picked = nil; self:clear_saved(); error(h, 0) end
  return h
end

function BertModel:close_packing()
  if self.packing then self.packing:close(); self.packing = nil end
end

-- Saved state of this module (the packing) and, through Module, its tensors.
function BertModel:release()
  self:close_packing()
  self.picked = nil
  Module.release(self)
end

-- dhidden [B, T, C] ([B, 1, C] after a forward with rows = "first"): parameter gradients
-- accumulate; returns nil (ids have no gradient).
function BertModel:backward(dhidden)
  local pk, picked = self.packing, self.picked
  self.picked = nil
  local ok, err = pcall(T.scope, function()
    -- frozen embeddings (LoRA, a frozen stack) owe the encoder's input no gradient
    local frozen = not self.embeddings:any_trainable()
    if frozen then self.embeddings:clear_saved() end
    local dh = picked and dhidden:reshape({ picked[1], dhidden:numel() / picked[1] }) or dhidden
    if not pk then
      local de = self.encoder:backward(dh, not frozen)
      if de then self.embeddings:backward(de) end
      return
    end
    -- each step in its own scope: the packed gradient dies at the encoder's end, the
    -- encoder's at the scatter
    local de = T.scope(function()
      local dep = T.scope(function() return self.encoder:backward(picked and dh or pk:gather(dh), not frozen) end)
      return dep and pk:scatter(dep)
    end)
    if de then self.embeddings:backward(de) end
  end)
  self:close_packing()
  if not ok then error(err, 0) end
  return nil
end

-- ---------------------------------------------------------------- top-level models
-- A new model of class over base (a family's base model), carrying what the interface reads
-- of a top-level model: base's rng (shared by every dropout site) and config, its task
-- ("embedding", "classification") and, for a classifier, num_labels. Returns it and the
-- config.
function M.top_level(class, base, task, num_labels)
  local self = class:create()
  self.rng, self.config, self.num_labels, self.task = base.rng, base.config, num_labels, task
  return self, base.config
end

-- ---------------------------------------------------------------- SentenceEncoder
local SentenceEncoder = Module:extend("SentenceEncoder")
M.SentenceEncoder = SentenceEncoder

-- bert: a BertModel (added transparently: names stay embeddings.*, encoder.*);
-- opts: pooling (default "mean"), normalize (bool).
function SentenceEncoder.new(bert, opts)
  opts = opts or {}
  local self = M.top_level(SentenceEncoder, bert, "embedding")
  self:add_module("", bert, "bert")
  self:add_module("pooling", Pooling.new(opts.pooling or "mean"))
  if opts.normalize then self:add_module("normalize", Normalize.new()) end
  return self
end

-- The options of a base model's forward under a pooling: padding rows are skipped
-- (top.pack_rows = false computes them too: the embeddings are the same), and CLS pooling,
-- which reads each sequence's first row only, has the last layer compute that row alone
-- (M.first_row_opts); the mask the pooling then reads, nil for the picked rows.
function M.pooling_opts(top, pooling, mask)
  if pooling.mode == "cls" then return M.first_row_opts(top), nil end
  return { pack_rows = top.pack_rows ~= false }, mask
end

-- -> embeddings [B, C] (normalised when the model has a Normalize module)
function SentenceEncoder:forward(input)
  return guarded_forward(self, function()
    -- pool_mask: the attention mask less the prompt's tokens, where the pooling leaves them out
    local opts, mask = M.pooling_opts(self, self.pooling, input.pool_mask or input.attention_mask)
    local h = self.bert:forward(input, opts)
    local pooled = self.pooling:forward(h, mask)
    if not self.normalize then return pooled end
    return self.normalize:forward(pooled)
  end)
end

-- the pooled rows' gradient dies before the encoder's backward
function SentenceEncoder:backward(demb)
  return backward_through(self.bert, function()
    local dp = self.normalize and self.normalize:backward(demb) or demb
    return self.pooling:backward(dp)
  end)
end

-- ---------------------------------------------------------------- SequenceClassifier
local SequenceClassifier = Module:extend("SequenceClassifier")
M.SequenceClassifier = SequenceClassifier

-- bert: a BertModel with pooler; num_labels; opts: prefix (the family's weight_prefix; "bert"
-- default), dropout
-- (classifier_dropout, default the config's hidden_dropout_prob).
function SequenceClassifier.new(bert, num_labels, opts)
  opts = opts or {}
  if not bert.pooler then errors.user("SequenceClassifier: the BertModel needs its pooler") end
  local self, cfg = M.top_level(SequenceClassifier, bert, "classification", num_labels)
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

-- The options of a base model's forward for a head that reads each sequence's first row only:
-- padding rows are skipped (self.pack_rows = false computes them) and the last layer
-- computes the first rows only (self.pick_rows = false computes every row).
function M.first_row_opts(top)
  return { pack_rows = top.pack_rows ~= false, rows = top.pick_rows ~= false and "first" or nil }
end

-- -> logits [B, num_labels]; the pooler reads row 0 only (M.first_row_opts).
function SequenceClassifier:forward(input)
  return guarded_forward(self, function()
    local h = self.bert:forward(input, M.first_row_opts(self))
    local d = T.scope(function() return self.dropout:forward(self.bert.pooler:forward(h)) end)
    return self.classifier:forward(d)
  end)
end

-- each gradient dies once the next one back is made
function SequenceClassifier:backward(dlogits)
  return backward_through(self.bert, function()
    local dp = T.scope(function() return self.dropout:backward(self.classifier:backward(dlogits)) end)
    return self.bert.pooler:backward(dp)
  end)
end

-- ---------------------------------------------------------------- HeadClassifier
-- A family's *ForSequenceClassification whose head reads the first token's hidden row itself
-- (trainer.nn.classification_head: RoBERTa's dense + tanh + out_proj, DistilBERT's
-- pre_classifier + ReLU + classifier), over a BertModel without pooler.
local HeadClassifier = Module:extend("HeadClassifier")
M.HeadClassifier = HeadClassifier

-- bert: a BertModel without pooler; num_labels; opts: prefix (the family's weight_prefix),
-- head (ClassificationHead's opts: dense, out, act, input_dropout), under (the name the head
-- is added under: "classifier" for RoBERTa, "" for DistilBERT), p (the head's dropout),
-- device, seed, init.
function HeadClassifier.new(bert, num_labels, opts)
  local ClassificationHead = require("trainer.nn.classification_head")
  local self, cfg = M.top_level(HeadClassifier, bert, "classification", num_labels)
  self:add_module(opts.prefix, bert, "bert")
  local h = {}
  for k, v in pairs(opts.head) do h[k] = v end
  h.p, h.rng, h.layer, h.device = opts.p, self.rng, sites.head_layer(cfg.num_hidden_layers), opts.device
  self:add_module(opts.under, ClassificationHead.new(cfg.hidden_size, num_labels, h), "head")
  if opts.init ~= "none" then
    M.init_weights(self.head, cfg, (opts.seed or 0) + 7919, opts.under == "" and "" or opts.under .. ".")
  end
  return self
end

-- -> logits [B, num_labels]; the head reads row 0 only (M.first_row_opts).
function HeadClassifier:forward(input)
  return guarded_forward(self, function()
    return self.head:forward(self.bert:forward(input, M.first_row_opts(self)))
  end)
end

function HeadClassifier:backward(dlogits)
  return backward_through(self.bert, function() return self.head:backward(dlogits) end)
end

-- ---------------------------------------------------------------- init
-- transformers' _init_weights over model's parameters, by their full names (prefix .. name):
-- rule(full) gives 1 (a LayerNorm weight) or 0 (a bias) to fill with, or "normal", the std of
-- the weight's N(0, std) draw and the row to zero after it (a padding row; nil: none).
-- Seeded: the k-th parameter draws stream k of seed.
function M.init_params(model, seed, prefix, rule)
  local k = 0
  for name, p in model:parameters() do
    k = k + 1
    local how, std, pad = rule((prefix or "") .. name)
    local v = p.value
    if how ~= "normal" then v:fill(how)
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
      if pad and pad >= 0 and pad < v:shape()[1] then
        local row = v:narrow(pad, 1)
        row:fill(0)
        row:free()
      end
    end
  end
end

-- BERT's: Linear and Embedding weights ~ N(0, initializer_range), biases 0, LayerNorm weight
-- 1 / bias 0, the padding rows of embeddings 0.
function M.init_weights(model, cfg, seed, prefix)
  local std = cfg.initializer_range or 0.02
  M.init_params(model, seed, prefix, function(full)
    if full:match("LayerNorm%.weight$") or full:match("layer_norm%.weight$") then return 1 end
    if full:match("%.bias$") then return 0 end
    local pad
    if full:match("word_embeddings%.weight$") then pad = cfg.pad_token_id end
    if full:match("position_embeddings%.weight$") then pad = cfg.position_padding_idx end
    return "normal", std, pad
  end)
end

-- ---------------------------------------------------------------- loading weights
-- "", every family's weight_prefix (a *ForSequenceClassification's encoder), "model."
local prefix_list
local function prefixes_now()
  if not prefix_list then
    prefix_list = { "" }
    for _, fam in ipairs(registry.families()) do prefix_list[#prefix_list + 1] = fam.weight_prefix .. "." end
    prefix_list[#prefix_list + 1] = "model."
  end
  return prefix_list
end
local known_buffers = { "position_ids$", "token_type_ids$" }

local function is_buffer(name)
  for _, pat in ipairs(known_buffers) do if name:match(pat) then return true end end
  return false
end

-- The checkpoint key for a model parameter name: itself, or with the model's own prefix
-- stripped and any of the known prefixes added (checkpoints with or without "bert.").
local function candidates(name)
  local prefixes = prefixes_now()
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
  for _, p in ipairs(prefixes_now()) do if reader:has(p .. "pooler.dense.weight") then return true end end
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

-- ---------------------------------------------------------------- build
-- The model of a task for a config this family checked, randomly initialised (transformers'
-- init, seeded) unless opts.init = "none" (load_weights fills it then).
--   task "embedding"       a SentenceEncoder (opts.pooling, default mean; opts.normalize); it
--                          keeps a pooler when opts.pooler says so, by default when opts.weights
--                          (the safetensors reader its weights will come from) holds one
--   task "classification"  a SequenceClassifier: the BertModel with its pooler under the
--                          family's weight_prefix, and a head of opts.num_labels (default 3);
--                          with spec.head, a HeadClassifier: that head on the first token, no
--                          pooler
-- opts: config, device, seed, init, activation_dtype, and the task's own above. spec (what a
-- family built on BERT's modules changes): head, names (BertModel's opts.names: its weight
-- names), pooler = false (none, whatever opts.pooler and the weights say), head_p(cfg) (the
-- head's dropout; default classifier_dropout, else hidden_dropout_prob), finish(model, cfg,
-- opts) (run on the model built).
function M.shaped_build(fam, spec, task, opts)
  local cfg = opts.config
  if type(cfg) ~= "table" or cfg.family ~= fam.name then
    errors.user("%s.build: opts.config must be a config checked by %s.config", fam.name, fam.name)
  end
  local base_opts = { device = opts.device, seed = opts.seed, init = opts.init, activation_dtype = opts.activation_dtype,
    names = spec.names }
  local head, model = spec.head, nil
  if task == "classification" and head then
    base_opts.pooler = false
    local p
    if spec.head_p then p = spec.head_p(cfg)
    else
      p = cfg.classifier_dropout
      if type(p) ~= "number" then p = cfg.hidden_dropout_prob end
    end
    model = HeadClassifier.new(BertModel.new(cfg, base_opts), opts.num_labels or 3, { prefix = fam.weight_prefix,
      head = head, under = head.under, p = p, device = opts.device, seed = opts.seed, init = opts.init })
  elseif task == "classification" then
    model = SequenceClassifier.new(BertModel.new(cfg, base_opts), opts.num_labels or 3,
      { prefix = fam.weight_prefix, device = opts.device, seed = opts.seed, init = opts.init })
  elseif task == "embedding" then
    base_opts.pooler = opts.pooler
    if spec.pooler == false then base_opts.pooler = false end
    if base_opts.pooler == nil then base_opts.pooler = opts.weights ~= nil and M.has_pooler(opts.weights) end
    model = SentenceEncoder.new(BertModel.new(cfg, base_opts), { pooling = opts.pooling, normalize = opts.normalize })
  else
    errors.user("%s.build: task %q is unknown (embedding or classification)", fam.name, tostring(task))
  end
  if spec.finish then spec.finish(model, cfg, opts) end
  return model
end

-- The parameters a base checkpoint lacks that a classifier built on it starts anew (transformers
-- initialises them with a warning): the head, and the pooler when the folder has none.
local function is_head_param(name)
  return name:match("^classifier%.") ~= nil or name:match("%.pooler%.") ~= nil
end

-- Whether a reader holds a checkpoint's tensor named `leaf` under any prefix.
local function has_tensor(reader, leaf)
  for _, n in ipairs(reader:names()) do
    if n == leaf or n:sub(-#leaf - 1) == "." .. leaf then return true end
  end
  return false
end
M.has_tensor = has_tensor

-- The head parts of a family whose head reads the first token (spec.head: its names under
-- `under`): has_head, is_head_param and the plan's head terms.
local function head_fields(head)
  local at = head.under == "" and "" or head.under .. "."
  local dense, out = at .. head.dense, at .. head.out
  local function has(reader) return has_tensor(reader, out .. ".weight") end
  local function is_param(name)
    return name:sub(1, #dense + 1) == dense .. "." or name:sub(1, #out + 1) == out .. "."
  end
  local function terms(H)
    return function(K)
      local by = head.under ~= "" and { head.under } or {}
      local function saved(name, leaf)
        local t = { name, leaf }
        for _, b in ipairs(by) do t[#t + 1] = b end
        return t
      end
      return { { n = H * H + H, rows = H, cols = H, product = true, linear = dense, saved_by = saved(dense, head.dense) },
               { n = K * H + K, rows = K, cols = H, product = true, linear = out, saved_by = saved(out, head.out) } }
    end
  end
  return has, is_param, terms
end
M.head_fields = head_fields

-- ---------------------------------------------------------------- structure
-- The modules of class inside model, in order.
local function instances(model, class)
  local out = {}
  for _, m in model:named_modules() do
    if getmetatable(m) == class then out[#out + 1] = m end
  end
  return out
end
M.instances = instances

-- The stacks gradient checkpointing regroups (trainer.train.grad_checkpoint): each BertEncoder,
-- whose `layers` list it replaces with segments.
local function layer_stacks(model) return instances(model, BertEncoder) end

-- Every encoder layer in order, found inside checkpoint segments too: DDP hooks each one's
-- on_grads_final (trainer.dist), which BertLayer:backward calls.
local function layers(model) return instances(model, BertLayer) end

-- model.dropout: every dropout probability of the config, the Dropout modules'
-- (hidden_dropout_prob, the classifier's) and the attention probabilities', which
-- BertAttention applies inside ops.attention (attention_probs_dropout_prob), as setting both
-- config fields in transformers does.
local function set_dropout(model, p)
  for _, mod in model:named_modules() do
    if mod.__name == "Dropout" and mod.p then mod.p = p end
    if mod.__name == "BertAttention" then mod.attn_p = p end
  end
end

-- ---------------------------------------------------------------- the plan's terms
-- What a model of config c (config.json's fields as read, unchecked) builds and keeps, for
-- trainer.plan. Parameters are { n, rows, cols, product (a weight a matrix product reads),
-- linear (its module name, for a weight) }: the embeddings', one layer's and, for K labels,
-- the head's (each with the lora.modules_to_save names that train it). activations(a) gives
-- one layer's kept bytes for a.tokens tokens of a.bytes each: all of them (a.full), or under
-- LoRA what the input gradients and the adapters on a.sites (of rank a.rank) need; the
-- layer input's share; the share kept past the attention core (rowwise); a segment boundary;
-- the embeddings'; the backward's transient peak.
-- d: the shape (H hidden, L layers, I intermediate, A heads, V vocabulary, P positions, TV token
-- types), act (the feed-forward's activation name, default "gelu"), names (BertLayer.linears'
-- renames: names, ffn_names, attention_name: another family's weight names for BERT's layer)
-- and head(K), the head's parameters.
function M.shaped_plan_terms(d)
  local H, L, I, A, V, P, TV = d.H, d.L, d.I, d.A, d.V, d.P, d.TV
  local n = d.names or {}
  local linears = BertLayer.linears({ hidden_size = H, intermediate_size = I, names = n.names, ffn_names = n.ffn_names,
    attention_name = n.attention_name })
  -- q, k, v read the layer's input; the attention's output dense is the fourth
  local qkv, out_dense = {}, linears[4][1]
  for i = 1, 3 do qkv[linears[i][1]] = true end
  local layer = {}
  for _, lin in ipairs(linears) do
    layer[#layer + 1] = { n = lin[2] * lin[3], rows = lin[3], cols = lin[2], product = true, linear = lin[1] }   -- [out, in]
    layer[#layer + 1] = { n = lin[3], rows = lin[3], cols = 1 }                                               -- bias
  end
  layer[#layer + 1] = { n = 4 * H, rows = 4 * H, cols = 1 }   -- two LayerNorms
  -- the activation's output (output.dense's input) is kept under the tanh GELU, whose CUDA
  -- product makes it in its epilogue, and remade from the pre-activation in the backward under
  -- any other (BertFeedForward): then N x I more only while the feed-forward's backward runs
  local act_kept = ops.gelu_kind(d.act) == ops.gelu_kind("gelu_new")
  local function activations(a)
    local N, e = a.tokens, a.bytes
    local stats = (A + 4) * N * 4                  -- attention lse + LayerNorm mean/rstd, f32
    -- rowwise: the bytes of per_layer kept past the attention core, which the last layer keeps
    -- for its first rows only under a head that reads nothing else (trainer.nn.row_pick)
    local per_layer, layer_input, rowwise
    -- remade in the backward: the activation's output (elements), a block's output and the
    -- attention context (bytes)
    local remade, remade_input, remade_context = 0, 0, 0
    if a.full then
      -- q, k, v, both LayerNorm inputs, the pre-activation (and the activation's output where
      -- kept), in bf16 the layer input and the feed-forward's input. The attention context (the
      -- output dense's input, on CUDA also the output the attention's backward reads) is remade
      -- by the attention op in the backward (BertAttention.drop_output). In f32 the two block
      -- outputs the next Linears read (the feed-forward's input, the next layer's input) are
      -- remade from their norms' kept sums (BertLayer): a layer keeps neither, the stack's
      -- first its input alone, which is the stack's boundary
      local ffn = act_kept and 2 * N * I or N * I
      local outs = e == 4 and 0 or 2
      remade, remade_input = act_kept and 0 or N * I, e == 4 and N * H * e or 0
      remade_context = N * H * e
      per_layer = ((5 + outs) * N * H + ffn) * e + stats
      layer_input = outs > 0 and N * H * e or 0
      -- past the core: both LayerNorm inputs, the feed-forward's input (unless remade) and its
      -- kept [N, I] tensors
      rowwise = (2 * N * H + outs / 2 * N * H + ffn) * e + 16 * N
    else
      -- q, k, v, both LayerNorm inputs, pre-GELU; each adapted Linear's input once (a view
      -- shared by the adapters that read it: query/key/value all read the layer's input; the
      -- dropped-out copy is rebuilt in backward) and its rank-r intermediate
      per_layer = (5 * N * H + N * I) * e + stats
      rowwise = (2 * N * H + N * I) * e + 16 * N
      local inputs = {}
      for _, lin in ipairs(a.sites) do
        local src = qkv[lin[1]] and "layer" or lin[1]
        if not inputs[src] then inputs[src] = N * lin[2] * e end
        per_layer = per_layer + N * a.rank * e
        if src ~= "layer" then rowwise = rowwise + N * a.rank * e end
      end
      layer_input = inputs.layer or 0
      for src, bytes in pairs(inputs) do
        per_layer = per_layer + bytes
        -- (an adapted output dense's input is, on CUDA, the attention's kept whole output)
        if src ~= "layer" and not (a.gpu and src == out_dense) then rowwise = rowwise + bytes end
      end
      -- the attention output, kept on CUDA for the backward's row terms (models/bert/attention.lua):
      -- a tensor of its own unless an adapted output dense keeps the same one as its input
      if a.gpu and not inputs[out_dense] then per_layer = per_layer + N * H * e end
    end
    -- frozen embeddings (LoRA) keep nothing: no gradient is wanted there. The backward's
    -- transient peaks twice in a layer: in the feed-forward (transient), and in the attention
    -- (attention_transient, past the feed-forward's release of its keeps): the feed-forward's
    -- input gradient, the output block's two, the heads' dq, dk and dv, the remade context.
    return { per_layer = per_layer, layer_input = layer_input, boundary = N * H * e, rowwise = rowwise,
             embeddings = a.full and 2 * N * H * e or 0, transient = (N * I + 2 * N * H + remade) * e + remade_input,
             rowwise_transient = N * I * e, attention_transient = 6 * N * H * e + remade_input + remade_context }
  end
  local embeddings = { { n = V * H, rows = V, cols = H }, { n = P * H, rows = P, cols = H } }
  if TV > 0 then embeddings[#embeddings + 1] = { n = TV * H, rows = TV, cols = H } end
  embeddings[#embeddings + 1] = { n = 2 * H, rows = 2 * H, cols = 1 }
  return {
    layers = L, positions = P, linears = linears, layer = layer, activations = activations,
    embeddings = embeddings, head = d.head,
  }
end

local function plan_terms(c)
  local H = c.hidden_size
  return M.shaped_plan_terms({ H = H, L = c.num_hidden_layers, I = c.intermediate_size, A = c.num_attention_heads,
    V = c.vocab_size, P = c.max_position_embeddings or 512, TV = c.type_vocab_size or 2, act = c.hidden_act,
    head = function(K)
      return { { n = H * H + H, rows = H, cols = H, product = true, linear = "pooler.dense", saved_by = { "pooler", "pooler.dense" } },
               { n = K * H + K, rows = K, cols = H, product = true, linear = "classifier", saved_by = { "classifier" } } }
    end })
end

-- ---------------------------------------------------------------- the family
-- Fills F (a new table by default) with the fields of the model-family interface for a
-- BERT-shaped family. spec: name, weight_prefix (transformers' base_model_prefix: the encoder's
-- names inside its *ForSequenceClassification), and what a variant changes: max_positions(cfg),
-- position_ids(cfg, ids, pos, B, T, base), finish_config(cfg, source), peft_targets, and
-- M.shaped_build's head, names, head_p; classifier_class: transformers'
-- *ForSequenceClassification class of each model_type.
function M.shaped_family(spec, F)
  F = F or {}
  F.name, F.weight_prefix = spec.name, spec.weight_prefix
  F.config_fields, F.defaults = fields, M.defaults
  F.config = function(raw, source) return shaped_config(F, spec, raw, source) end
  F.max_positions = spec.max_positions or absolute_max_positions
  F.position_ids = spec.position_ids or absolute_position_ids
  F.build = function(task, opts) return M.shaped_build(F, spec, task, opts or {}) end
  F.load_weights, F.state_list, F.has_head, F.is_head_param = M.load_weights, M.state_list, M.has_head, is_head_param
  -- spec.head: a head on the first token (nn.classification_head's names and activation)
  -- instead of BERT's pooler + classifier
  if spec.head then
    local terms
    F.has_head, F.is_head_param, terms = head_fields(spec.head)
    F.plan_terms = function(c)
      local t = plan_terms(c)
      t.head = terms(c.hidden_size)
      return t
    end
  end
  F.layer_stacks, F.layers, F.set_dropout = layer_stacks, layers, set_dropout
  -- the one encoder stack: its first k layers give hidden state k, as transformers returns it
  F.adaptive_stack = function(model)
    local s = layer_stacks(model)
    return #s == 1 and s[1] or nil
  end
  F.plan_terms = F.plan_terms or plan_terms
  -- PEFT's target_modules for the family when none are given (its
  -- TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING)
  F.peft_targets = spec.peft_targets or { "query", "value" }
  F.classifier_class = spec.classifier_class
  return F
end

-- this module is the BERT family itself
M.shaped_family({ name = "bert", weight_prefix = "bert",
  classifier_class = { bert = "BertForSequenceClassification" } }, M)

return M
