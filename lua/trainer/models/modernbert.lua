-- trainer.models.modernbert: the ModernBERT family (model_type "modernbert"), transformers'
-- modeling_modernbert.py over trainer.nn modules whose parameter names are its state-dict names.
--
--   ModernBertModel     embeddings.tok_embeddings, embeddings.norm, layers.N.{attn_norm (none in
--                       layer 0), attn.Wqkv, attn.Wo, mlp_norm, mlp.Wi, mlp.Wo}, final_norm
--   SentenceEncoder     the same names + Pooling (+ Normalize): a sentence-transformers folder
--   Classifier          model.* + head.dense, head.norm, classifier (ModernBertForSequenceClassification:
--                       pooling "cls" or "mean" by classifier_pooling, then dense, act, norm, dropout,
--                       classifier)
--
-- What differs from BERT: pre-norm layers (x + attn(attn_norm(x)), then h + mlp(mlp_norm(h))) and a
-- final norm; LayerNorms and Linears without biases by default (norm_bias, attention_bias,
-- mlp_bias); no position table: queries and keys are rotated (ops.rotary, rotate-half RoPE at the
-- sequence index) with global_rope_theta in global layers and local_rope_theta in local ones;
-- every global_attn_every_n_layers-th layer (0, n, 2n, ...) is global, the others see keys within
-- local_attention / 2 positions (the attention op's window); the MLP is GeGLU (ops.geglu: Wi's
-- output halves [x | gate], gelu(x) * gate). Newer config.json files give layer_types
-- ("full_attention" / "sliding_attention") and rope_parameters instead; both forms are read.
-- Initialisation: N(0, std) with transformers' stds per weight (its truncation at
-- initializer_cutoff_factor std is not applied).
-- Every row runs padded ([B, T], the attention op's key mask): the packed inference path
-- (ops.attention_packed) takes neither rotary positions nor a window, so the model ignores
-- pack_rows; padded query rows cost compute, not correctness (pooling reads the real rows).
local Module = require("trainer.nn.module")
local registry = require("trainer.models.registry")
local bert = require("trainer.models.bert")
local BertAttention = require("trainer.models.bert.attention")
local BertEmbeddings = require("trainer.models.bert.embeddings")
local BertEncoder = require("trainer.models.bert.encoder")
local sites = require("trainer.core.rng_sites")
local LayerNorm = require("trainer.nn.layernorm")
local Linear = require("trainer.nn.linear")
local Dropout = require("trainer.nn.dropout")
local Pooling = require("trainer.nn.pooling")
local row_pick = require("trainer.nn.row_pick")
local T = require("trainer.core.tensor")
local ops = require("trainer.core.ops")
local errors = require("trainer.core.errors")

local M = {}
M.name = "modernbert"
M.weight_prefix = "model"

-- ---------------------------------------------------------------- config
M.defaults = {
  hidden_activation = "gelu", max_position_embeddings = 8192, initializer_range = 0.02,
  initializer_cutoff_factor = 2.0, norm_eps = 1e-5, norm_bias = false, pad_token_id = 50283,
  attention_bias = false, attention_dropout = 0, global_attn_every_n_layers = 3, local_attention = 128,
  global_rope_theta = 160000.0, local_rope_theta = 10000.0, embedding_dropout = 0, mlp_bias = false,
  mlp_dropout = 0, classifier_pooling = "cls", classifier_dropout = 0, classifier_bias = false,
  classifier_activation = "gelu",
}

-- BERT's shape fields (max_position_embeddings has a default), then ModernBERT's own
M.config_fields = bert.shape_fields(nil, true, {
  { "pad_token_id", "integer", 0, 16777216, nullable = true },
  { "norm_eps", "number", 0, 1, open_low = true, open_high = true },
  { "norm_bias", "boolean" },
  { "attention_bias", "boolean" },
  { "mlp_bias", "boolean" },
  { "classifier_bias", "boolean" },
  { "attention_dropout", "number", 0, 1, open_high = true },
  { "embedding_dropout", "number", 0, 1, open_high = true },
  { "mlp_dropout", "number", 0, 1, open_high = true },
  { "classifier_dropout", "number", 0, 1, open_high = true, nullable = true },
  { "global_attn_every_n_layers", "integer", 1, 1024 },
  { "local_attention", "integer", 0, 1048576 },
  { "global_rope_theta", "number", 0, 1e12, open_low = true },
  { "local_rope_theta", "number", 0, 1e12, open_low = true },
  { "initializer_range", "number", 0, 1e3 },
  { "initializer_cutoff_factor", "number", 0, 1e3, nullable = true },
  { "hidden_activation", "string" },
  { "classifier_activation", "string" },
  { "classifier_pooling", "string" },
  { "layer_types", "table", nullable = true },
  { "rope_parameters", "table", nullable = true },
  { "model_type", "string" },
})

local function fail(source, field, v, what)
  errors.user("%s: %s is %s, but it must be %s; fix the value in %s (or use the config.json that came with the "
    .. "weights)", source, field, type(v) == "string" and ("%q"):format(v) or tostring(v), what, source)
end

local function check_field(cfg, f, source)
  local name, v = f[1], cfg[f[1]]
  if type(v) == "userdata" then   -- json null
    if f.nullable then cfg[name] = nil return end
    fail(source, name, "null", "given")
  end
  if v == nil then
    if f.required then
      errors.user("%s: %s is missing; a ModernBERT config.json gives it (the fields needed are hidden_size, "
        .. "num_hidden_layers, num_attention_heads, intermediate_size, vocab_size)", source, name)
    end
    return
  end
  local kind = f[2]
  if kind == "string" or kind == "boolean" or kind == "table" then
    if type(v) ~= kind then fail(source, name, v, "a " .. kind) end
    return
  end
  local ok = type(v) == "number" and v == v
    and (f.open_low and v > f[3] or not f.open_low and v >= f[3])
    and (f.open_high and v < f[4] or not f.open_high and v <= f[4])
    and (kind ~= "integer" or v == math.floor(v))
  if not ok then
    fail(source, name, v, ("%s %s%s and %s%s"):format(kind == "integer" and "a whole number" or "a number",
      f.open_low and "> " or ">= ", tostring(f[3]), f.open_high and "< " or "<= ", tostring(f[4])))
  end
end

-- Each layer's kind, "full_attention" or "sliding_attention": config.json's layer_types, else
-- transformers' rule (layer i is global when i % global_attn_every_n_layers == 0).
local function layer_kinds(cfg, source)
  local kinds = {}
  if cfg.layer_types then
    if #cfg.layer_types ~= cfg.num_hidden_layers then
      errors.user("%s: layer_types lists %d layers but num_hidden_layers is %d", source, #cfg.layer_types,
        cfg.num_hidden_layers)
    end
    for i, k in ipairs(cfg.layer_types) do
      if k ~= "full_attention" and k ~= "sliding_attention" then
        errors.user("%s: layer_types[%d] is %q; ModernBERT's are \"full_attention\" and \"sliding_attention\"",
          source, i, tostring(k))
      end
      kinds[i] = k
    end
  else
    for i = 1, cfg.num_hidden_layers do
      kinds[i] = (i - 1) % cfg.global_attn_every_n_layers == 0 and "full_attention" or "sliding_attention"
    end
  end
  return kinds
end

-- rope_parameters { full_attention = { rope_theta = }, sliding_attention = { ... } } (newer
-- config.json files) overrides global_rope_theta / local_rope_theta, each checked against
-- that field's range; only the default rope type.
local function read_rope(cfg, source)
  local rp = cfg.rope_parameters
  if not rp then return end
  for kind, field in pairs({ full_attention = "global_rope_theta", sliding_attention = "local_rope_theta" }) do
    local t = rp[kind]
    if type(t) == "table" then
      if t.rope_type ~= nil and t.rope_type ~= "default" then
        errors.user("%s: rope_parameters.%s.rope_type %q is not supported (default only)", source, kind,
          tostring(t.rope_type))
      end
      local theta = t.rope_theta
      if theta ~= nil and type(theta) ~= "userdata" then
        local f
        for _, g in ipairs(M.config_fields) do if g[1] == field then f = g end end
        if not (type(theta) == "number" and theta > f[3] and theta <= f[4]) then
          errors.user("%s: rope_parameters.%s.rope_theta is %s, but it must be a number > %s and <= %s; fix the value "
            .. "in %s (or use the config.json that came with the weights)", source, kind,
            type(theta) == "string" and ("%q"):format(theta) or type(theta) == "table" and "a list or object"
            or tostring(theta), tostring(f[3]), tostring(f[4]), source)
        end
        cfg[field] = theta
      end
    end
  end
end

-- A checked copy of a config.json table (source names the file in errors), defaults filled in.
function M.config(raw, source)
  source = source or "config"
  if type(raw) ~= "table" then errors.user("%s: a model config must be a JSON object", source) end
  local cfg = {}
  for k, v in pairs(raw) do cfg[k] = v end
  for _, f in ipairs(M.config_fields) do check_field(cfg, f, source) end
  for k, v in pairs(M.defaults) do if cfg[k] == nil then cfg[k] = v end end
  if cfg.model_type == nil then cfg.model_type = M.name end
  if registry.family(cfg.model_type, source) ~= M then
    errors.user("%s: model_type %q is not a ModernBERT model; check it with trainer.models.registry.config",
      source, cfg.model_type)
  end
  cfg.family = M.name
  bert.check_heads(cfg, source)
  local D = cfg.hidden_size / cfg.num_attention_heads
  if D % 2 ~= 0 then
    errors.user("%s: the head size hidden_size / num_attention_heads = %d is odd; rotary embeddings rotate pairs",
      source, D)
  end
  for _, f in ipairs({ "hidden_activation", "classifier_activation" }) do
    if not pcall(ops.gelu_kind, cfg[f]) then
      errors.user("%s: %s %q is not supported (gelu, gelu_new, gelu_pytorch_tanh)", source, f, cfg[f])
    end
  end
  if cfg.classifier_pooling ~= "cls" and cfg.classifier_pooling ~= "mean" then
    errors.user("%s: classifier_pooling %q is not supported (cls or mean)", source, cfg.classifier_pooling)
  end
  -- transformers' default pad id (50283) belongs to ModernBERT's own vocabulary: a smaller
  -- config that names none has no padding row
  if raw.pad_token_id == nil and cfg.pad_token_id >= cfg.vocab_size then cfg.pad_token_id = nil end
  bert.check_pad(cfg, source)
  read_rope(cfg, source)
  cfg.layer_kinds = layer_kinds(cfg, source)
  return cfg
end

-- No position table: rotary embeddings take any position; the config's bound stands.
function M.max_positions(cfg) return cfg.max_position_embeddings end

-- Positions 0..T-1 per row (the rotary angle's position), as BERT's; the ids are never read.
M.position_ids = bert.absolute_position_ids

-- ---------------------------------------------------------------- layers
local function add(a, b)   -- a + b, new
  return ops.add(a, b)
end

-- ModernBertAttention: qkv = Wqkv(x) split into q, k, v [B, T, H, D]; q and k rotated; the
-- attention op (window for a local layer); Wo; out_drop.
local Attention = Module:extend("ModernBertAttention")

function Attention.new(cfg, rng, layer, kind)
  local self = Attention:create()
  local C = cfg.hidden_size
  self.heads, self.head_dim, self.C = cfg.num_attention_heads, C / cfg.num_attention_heads, C
  self.global = kind == "full_attention"
  self.theta = self.global and cfg.global_rope_theta or cfg.local_rope_theta
  self.window = self.global and 0 or math.floor(cfg.local_attention / 2)
  self.attn_p = cfg.attention_dropout or 0
  self.rng, self.layer = rng, layer
  local o = { device = cfg.device, bias = cfg.attention_bias }
  self:add_module("Wqkv", Linear.new(C, 3 * C, o))
  self:add_module("Wo", Linear.new(C, C, o))
  self:add_module("out_drop", Dropout.new(self.attn_p, rng, layer, sites.dropout.attention_output), "drop")
  return self
end

-- The window the op takes for T keys: 0 (every key) in a global layer, or when the window
-- already covers every key.
function Attention:window_for(Tn)
  if self.window == 0 or self.window >= Tn - 1 then return 0 end
  return self.window
end

-- BERT's attention options (the probabilities' dropout) and the window.
function Attention:attn_opts(Tn)
  local o = BertAttention.attn_opts(self)
  o.window = self:window_for(Tn)
  return o
end

-- rows (trainer.nn.row_pick): Wo and the dropout run on the picked rows; the result is [B, C].
function Attention:forward(x, mask, rows)
  local s = x:shape()
  local B, Tn, C, H, D = s[1], s[2], self.C, self.heads, self.head_dim
  if self.grad_enabled then self.saved.rows = rows end
  return T.scope(function()
    local aopts = self:attn_opts(Tn)
    if rows then aopts.query_rows = 1 end   -- only the first query of each sequence is read
    local q4, k4, v4 = T.scope(function()
      -- each copy is freed once read: at most [N, 3C] and three [N, C] are held at once
      local qkv = self.Wqkv:forward(x)
      local q, k, v = ops.narrow_cols(qkv, 0, C), ops.narrow_cols(qkv, C, C), ops.narrow_cols(qkv, 2 * C, C)
      qkv:free()
      local shape4 = { B, Tn, H, D }
      local function rotated(t)
        local t4 = t:reshape(shape4)
        local r = ops.rotary(t4, self.theta)
        t4:free()
        t:free()
        return r
      end
      local q4 = rotated(q)
      local k4 = rotated(k)
      return q4, k4, v:reshape(shape4)
    end)
    local a4, lse = ops.attention(q4, k4, v4, mask, aopts)
    if self.grad_enabled then BertAttention.keep_attention(self, q4, k4, v4, lse, a4, mask, aopts) end
    local a = a4:reshape({ B, Tn, C })
    if rows then a = rows:gather(a) end
    local o = self.Wo:forward(a, rows)
    if self.grad_enabled then BertAttention.drop_output(self, self.Wo) end   -- remade in the backward
    return self.drop:forward(o, rows)
  end)
end

function Attention:backward(dy, want_dx)
  local q4 = self:saved_tensor("q")
  local sh, rows = q4:shape(), self.saved.rows
  return T.scope(function()
    -- each gradient is freed as soon as it is read, so that the backward holds no more than
    -- the three heads' gradients and their concatenation at once (trainer.plan counts that)
    local dd = self.drop:backward(dy)
    local out = BertAttention.give_remade_output(self, self.Wo, rows)
    local da = self.Wo:backward(dd)
    dd:free()
    if rows then
      local dr = da
      da = rows:scatter(dr, { sh[1], sh[2], self.C })
      dr:free()
    end
    local da4 = da:reshape(q4:shape())
    da:free()
    local dq4, dk4, dv4 = BertAttention.attention_backward(self, da4, out)
    da4:free()
    if out then out:free() end
    self:release()
    local dqkv = T.scope(function()
      local dq = ops.rotary_backward(dq4, self.theta)
      dq4:free()
      local dk = ops.rotary_backward(dk4, self.theta)
      dk4:free()
      local C = self.C
      return ops.cat_cols({ dq:reshape({ sh[1], sh[2], C }), dk:reshape({ sh[1], sh[2], C }),
                            dv4:reshape({ sh[1], sh[2], C }) })
    end)
    if want_dx == false and not self.Wqkv:any_trainable() then
      self.Wqkv:release()
      return nil
    end
    return self.Wqkv:backward(dqkv, want_dx)
  end)
end

-- ModernBertMLP: Wi (C -> 2I), GeGLU (gelu(x) * gate), drop, Wo (I -> C).
local MLP = Module:extend("ModernBertMLP")

function MLP.new(cfg, rng, layer)
  local self = MLP:create()
  local C, I = cfg.hidden_size, cfg.intermediate_size
  self.act = ops.gelu_kind(cfg.hidden_activation or "gelu")
  local o = { device = cfg.device, bias = cfg.mlp_bias }
  self:add_module("Wi", Linear.new(C, 2 * I, o))
  self:add_module("drop", Dropout.new(cfg.mlp_dropout or 0, rng, layer, sites.dropout.feedforward_output))
  self:add_module("Wo", Linear.new(I, C, o))
  return self
end

-- Wo's input, drop(geglu(h)) ([N, I], the largest tensor of a layer), is not kept: a plain Wo
-- that kept it for its weight gradient has it dropped here and remade from h in the backward
-- (one GeGLU pass; the dropout replays its keyed mask), so a layer keeps h alone for its MLP.
-- rows: the trainer.nn.row_pick x's rows are (the dropout's masks), or nil.
function MLP:forward(x, rows)
  return T.scope(function()
    local h = self.Wi:forward(x, rows)
    self:keep("h", h)
    local y = self.Wo:forward(self.drop:forward(ops.geglu(h, self.act), rows), rows)
    if Linear.drop_input(self.Wo) then self.saved.remake = true end
    return y
  end)
end

-- What forward keeps, without its output: for the re-run of a checkpointed segment's last
-- layer (Layer:keep_for_backward). Wo's product and the dropout before it are skipped where
-- Wo is a plain Linear: the backward remakes Wo's input as after forward, and reads nothing
-- else of them.
function MLP:keep_for_backward(x, rows)
  if not Linear.skip_forward(self.Wo) then
    self:forward(x, rows):free()
    return
  end
  T.scope(function()
    local h = self.Wi:forward(x, rows)
    self:keep("h", h)
    self.drop:skip_forward(rows)
    self.saved.remake = self.Wo.weight.trainable or nil
  end)
end

function MLP:backward(dy, want_dx)
  local h = self:saved_tensor("h")
  return T.scope(function()
    if self.saved.remake then Linear.give_input(self.Wo, self.drop:replay(ops.geglu(h, self.act))) end
    local dg = self.drop:backward(self.Wo:backward(dy))
    if dg:dtype() ~= h:dtype() or h:device() ~= "cpu" then
      local dh = ops.geglu_backward(dg, h, self.act)
      self:release()
      return self.Wi:backward(dh, want_dx)
    end
    -- on the CPU, in place: dh overwrites h, which nothing reads after (no second [N, 2I] buffer)
    self.saved.h = nil
    self:release()
    local dh = ops.geglu_backward_(dg, h, self.act)
    dg:free()
    local dx = self.Wi:backward(dh, want_dx)
    dh:free()
    return dx
  end)
end

-- ModernBertEncoderLayer: pre-norm, h = x + attn(attn_norm(x)) (no attn_norm in layer 0),
-- y = h + mlp(mlp_norm(h)).
local Layer = Module:extend("ModernBertEncoderLayer")

function Layer.new(cfg, rng, index)
  local self = Layer:create()
  local C = cfg.hidden_size
  local no = { eps = cfg.norm_eps, device = cfg.device, bias = cfg.norm_bias }
  if index > 0 then self:add_module("attn_norm", LayerNorm.new(C, no)) end
  self:add_module("attn", Attention.new(cfg, rng, index + 1, cfg.layer_kinds[index + 1]))
  self:add_module("mlp_norm", LayerNorm.new(C, no))
  self:add_module("mlp", MLP.new(cfg, rng, index + 1))
  return self
end

-- A plain Linear after a LayerNorm keeps the norm's output for its weight gradient, while the
-- norm keeps its input: the Linear's copy is dropped (flag set in saved) and remade from the
-- norm's input in the backward (one layernorm pass, the same bits), so a layer keeps N x C
-- less per norm.
local function drop_norm_output(lin, saved, flag)
  if Linear.drop_input(lin) then saved[flag] = true end
end

local function remake_norm_output(lin, norm, saved, flag)
  if not saved[flag] then return end
  saved[flag] = nil
  local x = norm:saved_tensor("x")
  T.scope(function()
    Linear.give_input(lin, (ops.layernorm(x, norm.weight.value, norm.bias and norm.bias.value, norm.eps)))
  end)
end

-- The layer's forward; output false: only what the backward reads is made and kept, the
-- output (h + the MLP's) is not (Layer:keep_for_backward).
local function run_layer(self, x, mask, rows, output)
  if self.grad_enabled then self.saved.rows, self.saved.x_shape = rows, rows and x:shape() end
  return T.scope(function()
    local h = T.scope(function()
      local a = self.attn_norm and self.attn_norm:forward(x) or x
      local o = self.attn:forward(a, mask, rows)
      if self.attn_norm then drop_norm_output(self.attn.Wqkv, self.saved, "remake_attn") end
      return add(rows and rows:gather(x) or x, o)
    end)
    local hn = self.mlp_norm:forward(h)
    if output == false then
      self.mlp:keep_for_backward(hn, rows)
      drop_norm_output(self.mlp.Wi, self.saved, "remake_mlp")
      return nil
    end
    local m = self.mlp:forward(hn, rows)
    drop_norm_output(self.mlp.Wi, self.saved, "remake_mlp")
    return add(h, m)
  end)
end

-- rows (trainer.nn.row_pick, the last layer under a head that reads the first rows only):
-- past the attention core the layer runs on those rows, and returns [B, C].
function Layer:forward(x, mask, rows)
  return run_layer(self, x, mask, rows)
end

-- What forward keeps for the backward, without the output: a checkpointed backward re-runs a
-- segment's last layer for its keeps alone, the next segment holding its output already
-- (trainer.nn.Checkpoint). Pre-norm, nothing the backward reads comes after the MLP's output
-- product, which is skipped (a quarter of a layer's products at ModernBERT's shapes).
function Layer:keep_for_backward(x, mask, rows)
  run_layer(self, x, mask, rows, false)
end

-- want_dx = false: no input gradient is owed (the first layer over frozen embeddings).
function Layer:backward(dy, want_dx)
  local dx = T.scope(function()
    remake_norm_output(self.mlp.Wi, self.mlp_norm, self.saved, "remake_mlp")
    local dh = T.scope(function() return ops.add_(self.mlp_norm:backward(self.mlp:backward(dy)), dy) end)
    local need = want_dx ~= false
    local rows, xs = self.saved.rows, self.saved.x_shape
    self.saved.rows, self.saved.x_shape = nil, nil
    if self.attn_norm then remake_norm_output(self.attn.Wqkv, self.attn_norm, self.saved, "remake_attn") end
    local da = self.attn:backward(dh, need or (self.attn_norm ~= nil and self.attn_norm:any_trainable()))
    if not need then
      if da and self.attn_norm then self.attn_norm:backward(da):free() elseif self.attn_norm then
        self.attn_norm:release()
      end
      if da then da:free() end
      return nil
    end
    local dxa = self.attn_norm and self.attn_norm:backward(da) or da
    if dxa ~= da then da:free() end
    -- the residual's gradient: the picked rows' in x's layout (the others' is 0)
    return ops.add_(dxa, rows and rows:scatter(dh, xs) or dh)
  end)
  if self.on_grads_final then self.on_grads_final() end
  return dx
end

-- ---------------------------------------------------------------- ModernBertModel
local Model = Module:extend("ModernBertModel")
M.ModernBertModel = Model

-- The attention mask as the op reads it (i32 or f32): the input's, or a new one.
local function prepare_mask(cfg, input)
  if type(input) ~= "table" or not T.is_tensor(input.input_ids) then
    errors.user("model:forward: the input must be { input_ids = tensor [B, T], attention_mask = }")
  end
  local ids = input.input_ids
  local shape = ids:shape()
  if #shape ~= 2 then errors.user("model:forward: input_ids must be [B, T], got %d dims", #shape) end
  if shape[2] > M.max_positions(cfg) then
    errors.user("model:forward: %d tokens is longer than the model's %d positions: truncate (max_length)", shape[2],
      M.max_positions(cfg))
  end
  local mask = input.attention_mask
  if mask == nil then return T.ones(shape, { dtype = "i32", device = ids:device() }) end
  if mask:dtype() == "i32" or mask:dtype() == "f32" then return mask end
  return ops.cast(mask, "i32", { tag = "activations" })
end

-- opts: seed, device, init ("none": parameters stay as allocated), rng, activation_dtype.
function Model.new(cfg, opts)
  opts = opts or {}
  local self = Model:create()
  local c = bert.model_config(self, cfg, opts)
  -- ModernBertEmbeddings, drop(norm(tok_embeddings(ids))): BERT's without positions or token
  -- types, under its names
  self:add_module("embeddings", BertEmbeddings.new(c, self.rng, { names = { word = "tok_embeddings", norm = "norm",
    dropout = "drop" }, word_only = true, eps = cfg.norm_eps, norm_bias = cfg.norm_bias, p = cfg.embedding_dropout or 0 }))
  -- the layer stack, BERT's encoder over these layers ("layers.N"), added transparently
  self:add_module("", BertEncoder.new(c, self.rng, { prefix = "layers.",
    layer = function(i) return Layer.new(c, self.rng, i) end }), "stack")
  self:add_module("final_norm", LayerNorm.new(cfg.hidden_size, { eps = cfg.norm_eps, device = opts.device,
    bias = cfg.norm_bias }))
  if opts.init ~= "none" then M.init_weights(self, cfg, opts.seed or 0) end
  return self
end

-- -> the last hidden state [B, T, C] (final_norm's output), every row computed (opts.pack_rows,
-- which the sentence encoder passes, is not taken: see the top of the file); with opts.rows =
-- "first" (a head that reads each sequence's first row only) the last layer computes that row
-- alone past its attention core (trainer.nn.row_pick) and the result is [B, 1, C].
function Model:forward(input, opts)
  self.picked = nil
  return bert.guarded_forward(self, function()
    local mask = prepare_mask(self.config, input)   -- one this scope made dies with it
    local s = input.input_ids:shape()
    local rows = opts and opts.rows == "first" and row_pick.first(s[1], s[2]) or nil
    local h = self.stack:forward(self.embeddings:forward({ input_ids = input.input_ids }), mask, rows)
    if not rows then return self.final_norm:forward(h) end
    if self.grad_enabled then self.picked = s[1] end
    return self.final_norm:forward(h):reshape({ s[1], 1, self.config.hidden_size })
  end)
end

-- dhidden: [B, T, C], or [B, 1, C] after a forward with opts.rows = "first".
function Model:backward(dhidden)
  local picked = self.picked
  self.picked = nil
  T.scope(function()
    local frozen = not self.embeddings:any_trainable()
    if frozen then self.embeddings:clear_saved() end
    local dh = picked and dhidden:reshape({ picked, self.config.hidden_size }) or dhidden
    local de = T.scope(function() return self.stack:backward(self.final_norm:backward(dh), not frozen) end)
    if de then self.embeddings:backward(de) end
  end)
  return nil
end

-- ---------------------------------------------------------------- the classifier
-- ModernBertForSequenceClassification: pooled = cls row or masked mean (classifier_pooling);
-- logits = classifier(drop(head.norm(act(head.dense(pooled))))).
local Classifier = Module:extend("ModernBertClassifier")
M.Classifier = Classifier

function Classifier.new(model, num_labels, opts)
  opts = opts or {}
  local self, cfg = bert.top_level(Classifier, model, "classification", num_labels)
  local C = cfg.hidden_size
  self.act = ops.gelu_kind(cfg.classifier_activation)
  self:add_module("model", model)
  self:add_module("pooling", Pooling.new(cfg.classifier_pooling))
  self:add_module("head.dense", Linear.new(C, C, { device = opts.device, bias = cfg.classifier_bias }), "dense")
  self:add_module("head.norm", LayerNorm.new(C, { eps = cfg.norm_eps, device = opts.device, bias = cfg.norm_bias }),
    "norm")
  self:add_module("drop", Dropout.new(cfg.classifier_dropout or 0, self.rng, sites.head_layer(cfg.num_hidden_layers),
    sites.dropout.head))
  self:add_module("classifier", Linear.new(C, num_labels, { device = opts.device }))
  if opts.init ~= "none" then M.init_head(self, cfg, (opts.seed or 0) + 7919) end
  return self
end

function Classifier:forward(input)
  return bert.guarded_forward(self, function()
    local d = T.scope(function()
      local pooled = T.scope(function()
        local opts, mask = bert.pooling_opts(self, self.pooling, input.attention_mask)
        return self.pooling:forward(self.model:forward(input, opts), mask)
      end)
      local hd = self.dense:forward(pooled)
      self:keep("hd", hd)
      return self.drop:forward(self.norm:forward(ops.gelu(hd, self.act)))
    end)
    return self.classifier:forward(d)
  end)
end

function Classifier:backward(dlogits)
  local hd = self:saved_tensor("hd")
  return bert.backward_through(self.model, function()
    local da = self.norm:backward(self.drop:backward(self.classifier:backward(dlogits)))
    local dp = self.dense:backward(ops.gelu_backward(da, hd, self.act))
    self:release()
    return self.pooling:backward(dp)
  end)
end

-- ---------------------------------------------------------------- init
-- transformers' _init_weights: weights ~ N(0, std) with std initializer_range for the token
-- embeddings, Wqkv and Wi, initializer_range / sqrt(2 L) for both Wo and head.dense, and
-- hidden_size^-0.5 for the classifier; biases 0, LayerNorm weights 1. Seeded: the k-th parameter
-- draws stream k of seed.
local function std_of(name, cfg)
  local r = cfg.initializer_range or 0.02
  if name:match("Wo%.weight$") or name:match("head%.dense%.weight$") then
    return r / math.sqrt(2 * cfg.num_hidden_layers)
  end
  if name:match("^classifier%.weight$") then return cfg.hidden_size ^ -0.5 end
  return r
end

-- The rule of bert.init_params for cfg: norms' weights 1, biases 0, the rest drawn (the token
-- embeddings' padding row zeroed).
local function init_rule(cfg)
  return function(full)
    if full:match("norm%.weight$") then return 1 end
    if full:match("%.bias$") then return 0 end
    return "normal", std_of(full, cfg), full:match("tok_embeddings%.weight$") and cfg.pad_token_id or nil
  end
end

function M.init_weights(model, cfg, seed) bert.init_params(model, seed, nil, init_rule(cfg)) end

function M.init_head(clf, cfg, seed)
  for _, name in ipairs({ "dense", "norm", "classifier" }) do
    bert.init_params(clf[name], seed, name == "classifier" and "classifier." or "head." .. name .. ".", init_rule(cfg))
    seed = seed + 1
  end
end

-- ---------------------------------------------------------------- build
-- task "embedding": a SentenceEncoder over the ModernBertModel (opts.pooling, default mean;
-- opts.normalize); "classification": the classifier of opts.num_labels (default 3).
function M.build(task, opts)
  opts = opts or {}
  local cfg = opts.config
  if type(cfg) ~= "table" or cfg.family ~= M.name then
    errors.user("%s.build: opts.config must be a config checked by %s.config", M.name, M.name)
  end
  local base = Model.new(cfg, { device = opts.device, seed = opts.seed, init = opts.init,
    activation_dtype = opts.activation_dtype })
  if task == "classification" then
    return Classifier.new(base, opts.num_labels or 3, { device = opts.device, seed = opts.seed, init = opts.init })
  elseif task == "embedding" then
    return bert.SentenceEncoder.new(base, { pooling = opts.pooling, normalize = opts.normalize })
  end
  base:free()
  errors.user("%s.build: task %q is unknown (embedding or classification)", M.name, tostring(task))
end

-- Loading and saving by the Hugging Face names, prefix-tolerant ("model." or none): BERT's.
M.load_weights, M.state_list, M.has_head = bert.load_weights, bert.state_list, bert.has_head

-- The head a base checkpoint lacks: head.* and classifier.*.
function M.is_head_param(name)
  return name:match("^classifier%.") ~= nil or name:match("^head%.") ~= nil
end

-- ---------------------------------------------------------------- structure
function M.layer_stacks(model) return bert.instances(model, BertEncoder) end
function M.layers(model) return bert.instances(model, Layer) end
-- No stack to cut for adaptive_layer: the final norm follows the layers, and transformers'
-- hidden states (what sentence-transformers' AdaptiveLayerLoss reads) come before it, so a
-- cut run would not reproduce them.
function M.adaptive_stack() return nil end

-- Every dropout probability of the config: the Dropout modules' and the attention
-- probabilities'.
function M.set_dropout(model, p)
  for _, mod in model:named_modules() do
    if mod.__name == "Dropout" and mod.p then mod.p = p end
    if getmetatable(mod) == Attention then mod.attn_p = p end
  end
end

-- PEFT has no default target_modules for ModernBERT: its fused attention input and the GeGLU
-- up-projection ("Wo" names both output projections).
M.peft_targets = { "Wqkv", "Wi" }

-- transformers' sequence classifier of the family (a cross-encoder's config.json names it)
M.classifier_class = { modernbert = "ModernBertForSequenceClassification" }

-- ---------------------------------------------------------------- the plan's terms
-- As bert.lua's plan_terms. Layer 0 has no attn_norm, and final_norm has its size: the
-- parameters add up as L equal layers.
function M.plan_terms(c)
  local C, L, I = c.hidden_size, c.num_hidden_layers, c.intermediate_size
  local A, V = c.num_attention_heads, c.vocab_size
  local nb = c.norm_bias == true and 2 or 1   -- LayerNorm vectors
  local ab, mb = c.attention_bias == true, c.mlp_bias == true
  local linears = { { "attn.Wqkv", C, 3 * C, ab }, { "attn.Wo", C, C, ab }, { "mlp.Wi", C, 2 * I, mb },
                    { "mlp.Wo", I, C, mb } }
  local layer = {}
  for _, lin in ipairs(linears) do
    layer[#layer + 1] = { n = lin[2] * lin[3], rows = lin[3], cols = lin[2], product = true, linear = lin[1] }
    if lin[4] then layer[#layer + 1] = { n = lin[3], rows = lin[3], cols = 1 } end
  end
  layer[#layer + 1] = { n = 2 * nb * C, rows = 2 * nb * C, cols = 1 }   -- attn_norm and mlp_norm
  local plain = {}
  for _, lin in ipairs(linears) do plain[#plain + 1] = { lin[1], lin[2], lin[3] } end
  local function activations(a)
    local N, e = a.tokens, a.bytes
    local stats = (A + 8) * N * 4   -- attention lse + two LayerNorms' mean/rstd, f32
    -- the MLP backward's [N, I] and [N, 2I] gradients; on the CPU the GeGLU's gradient
    -- overwrites Wi's kept output (MLP:backward), so only the [N, I] one is new there
    local mlp_t = (a.gpu and 3 or 1) * N * I
    -- rowwise: the share kept past the attention core (the mlp_norm's statistics among them)
    local per_layer, layer_input, rowwise
    if a.full then
      -- the layer input (attn_norm's), q, k, v, the residual sum (mlp_norm's) and Wi's output
      -- (2I); the norms' outputs (Wqkv's and Wi's inputs), the attention output (Wo's input:
      -- the attention op again) and the gate's output (mlp.Wo's input) are remade in the
      -- backward. Layer 0, without attn_norm, has Wqkv keep its input: in the embeddings' term
      per_layer = (5 * N * C + 2 * N * I) * e + stats
      layer_input = N * C * e
      rowwise = (N * C + 2 * N * I) * e + 16 * N
    else
      -- both LayerNorm inputs, q, k, v, Wi's output; each adapted Linear's input and its rank-r
      -- intermediate
      per_layer = (5 * N * C + 2 * N * I) * e + stats
      rowwise = (N * C + 2 * N * I) * e + 16 * N
      layer_input = N * C * e
      for _, lin in ipairs(a.sites) do
        per_layer = per_layer + N * (lin[2] + a.rank) * e
        if lin[1] ~= "attn.Wqkv" then rowwise = rowwise + N * (lin[2] + a.rank) * e end
      end
      if a.gpu then per_layer = per_layer + N * C * e end
    end
    return { per_layer = per_layer, layer_input = layer_input, boundary = N * C * e, rowwise = rowwise,
             embeddings = a.full and 3 * N * C * e or 0, transient = (mlp_t + 2 * N * C) * e,
             rowwise_transient = mlp_t * e,
             -- the attention's backward: dq, dk, dv and their concatenation, the remade output
             attention_transient = (6 * N * C + (a.full and N * C or 0)) * e }
  end
  return {
    layers = L, positions = c.max_position_embeddings or 8192, linears = plain, layer = layer,
    activations = activations,
    -- the product a checkpointed re-run of a segment's last layer skips (Layer:keep_for_backward)
    rerun_skips = "mlp.Wo",
    embeddings = { { n = V * C, rows = V, cols = C }, { n = nb * C, rows = nb * C, cols = 1 } },
    head = function(K)
      local hb = c.classifier_bias == true and C or 0
      return { { n = C * C + hb, rows = C, cols = C, product = true, linear = "head.dense",
                 saved_by = { "head", "head.dense" } },
               { n = nb * C, rows = nb * C, cols = 1, saved_by = { "head", "head.norm" } },
               { n = K * C + K, rows = K, cols = C, product = true, linear = "classifier", saved_by = { "classifier" } } }
    end,
  }
end

return M
