-- trainer.models.distilbert: the DistilBERT family (model_type "distilbert"): BERT's post-norm
-- layers (trainer.models.bert's modules) under DistilBERT's config fields and weight names.
--
-- What differs from BERT, as transformers' modeling_distilbert has it:
--   * config.json: dim, n_layers, n_heads, hidden_dim, activation ("gelu" or "relu"), dropout,
--     attention_dropout, seq_classif_dropout, sinusoidal_pos_embds; LayerNorm eps 1e-12;
--   * no token types; positions 0..T-1;
--   * weights: embeddings.{word_embeddings, position_embeddings, LayerNorm},
--     transformer.layer.N.attention.{q_lin, k_lin, v_lin, out_lin}, .sa_layer_norm,
--     .ffn.{lin1, lin2}, .output_layer_norm; "distilbert." inside
--     DistilBertForSequenceClassification, none in a sentence-transformers folder;
--   * no dropout after the attention's out_lin (the block's Dropout stays at p = 0);
--   * sinusoidal_pos_embds: the position table starts as transformers' sin/cos table (computed
--     in float64, rounded to float32) instead of random values; it trains as transformers 5
--     trains it (its parameter keeps requires_grad);
--   * classification: pre_classifier + ReLU + dropout (seq_classif_dropout) + classifier on
--     the first token, no pooler.
-- The checked config carries, beside config.json's own fields, the names BERT's modules read
-- (hidden_size = dim, num_hidden_layers = n_layers, ...): the modules are BERT's.
local bert = require("trainer.models.bert")
local T = require("trainer.core.tensor")
local errors = require("trainer.core.errors")

local M = { name = "distilbert", weight_prefix = "distilbert" }

-- ---------------------------------------------------------------- config
M.defaults = {
  activation = "gelu", dropout = 0.1, attention_dropout = 0.1, seq_classif_dropout = 0.2, initializer_range = 0.02,
  pad_token_id = 0, sinusoidal_pos_embds = false,
}

-- The fields read, typed and bounded as BERT's are (trainer.models.bert).
M.config_fields = bert.shape_fields({ hidden = "dim", layers = "n_layers", heads = "n_heads", intermediate = "hidden_dim" },
  false, {
  { "pad_token_id", "integer", 0, 16777216, nullable = true },
  { "dropout", "number", 0, 1, open_high = true },
  { "attention_dropout", "number", 0, 1, open_high = true },
  { "seq_classif_dropout", "number", 0, 1, open_high = true, nullable = true },
  { "initializer_range", "number", 0, 1e3 },
  { "activation", "string" },
  { "sinusoidal_pos_embds", "boolean" },
  { "model_type", "string" },
})

-- DistilBERT's weight names for BERT's modules (BertModel's opts.names).
local NAMES = {
  encoder = "transformer", attention_name = "",
  attention = { query = "attention.q_lin", key = "attention.k_lin", value = "attention.v_lin",
                dense = "attention.out_lin", norm = "sa_layer_norm", dropout = "attention.dropout" },
  ffn = { dense1 = "ffn.lin1", dense2 = "ffn.lin2", norm = "output_layer_norm", dropout = "ffn.dropout" },
}

function M.config(raw, source)
  source = source or "config"
  local cfg = bert.checked_copy(M, raw, source, M.config_fields, M.defaults, "DistilBERT")
  if cfg.dim % cfg.n_heads ~= 0 then
    errors.user("%s: dim %d is not a multiple of n_heads %d", source, cfg.dim, cfg.n_heads)
  end
  if cfg.activation ~= "gelu" and cfg.activation ~= "relu" then
    errors.user("%s: activation %q is not supported (gelu, relu)", source, cfg.activation)
  end
  bert.check_pad(cfg, source)
  -- the names BERT's modules read
  cfg.hidden_size, cfg.num_hidden_layers, cfg.num_attention_heads = cfg.dim, cfg.n_layers, cfg.n_heads
  cfg.intermediate_size, cfg.hidden_act, cfg.layer_norm_eps = cfg.hidden_dim, cfg.activation, 1e-12
  cfg.hidden_dropout_prob, cfg.attention_probs_dropout_prob = cfg.dropout, cfg.attention_dropout
  cfg.classifier_dropout, cfg.type_vocab_size = cfg.seq_classif_dropout, 0
  return cfg
end

-- BERT's absolute positions: 0..T-1 per row, the ids never read
M.max_positions, M.position_ids = bert.absolute_max_positions, bert.absolute_position_ids

-- ---------------------------------------------------------------- sinusoidal positions
-- transformers' create_sinusoidal_embeddings: row p, column j = p / 10000^(2 floor(j/2) / dim),
-- sin in the even columns and cos in the odd ones, in float64, rounded to float32.
local function sinusoidal_table(n, dim)
  local v = {}
  for p = 0, n - 1 do
    for j = 0, dim - 1 do
      local a = p / 10000 ^ (2 * math.floor(j / 2) / dim)
      v[p * dim + j + 1] = j % 2 == 0 and math.sin(a) or math.cos(a)
    end
  end
  return v
end

-- Under sinusoidal_pos_embds, the position table gets the sinusoidal table.
local function sinusoidal_positions(model, cfg)
  if not cfg.sinusoidal_pos_embds then return end
  for name, p in model:parameters() do
    if name:match("embeddings%.position_embeddings%.weight$") then
      do
        local flat = T.from_table(sinusoidal_table(cfg.max_position_embeddings, cfg.dim), { dtype = "f32", tag = "workspace" })
        local src = flat:reshape({ cfg.max_position_embeddings, cfg.dim })
        flat:free()
        local w = src:to({ dtype = p.value:dtype(), device = p.value:device(), tag = "weights" })
        src:free()
        p.value:free()
        p.value = T.keep(w)
      end
    end
  end
end

-- ---------------------------------------------------------------- build
local HEAD = { under = "", dense = "pre_classifier", out = "classifier", act = "relu" }

-- What BERT's build (bert.shaped_build) takes from DistilBERT: its names, no pooler, its head
-- (its dropout seq_classif_dropout, the checked config's classifier_dropout), and the
-- sinusoidal table and no dropout after the attention's out_lin on the model built.
local SPEC = { names = NAMES, pooler = false, head = HEAD }

function SPEC.finish(model, cfg, opts)
  for _, mod in model:named_modules() do
    if mod.__name == "BertAttention" then mod.dropout.p, mod.dropout.fixed = 0, true end
  end
  if opts.init ~= "none" then sinusoidal_positions(model, cfg) end
end

-- The model of a task (see docs/ARCHITECTURE.md "Adding a model"): "embedding", the encoder
-- under its own names (embeddings.*, transformer.*) with pooling; "classification",
-- DistilBertForSequenceClassification's names (distilbert.*, pre_classifier, classifier).
function M.build(task, opts) return bert.shaped_build(M, SPEC, task, opts or {}) end

-- ---------------------------------------------------------------- weights
-- bert.load_weights (prefix-tolerant, by name); a sinusoidal table a checkpoint lacks keeps
-- the computed one.
function M.load_weights(model, source, opts)
  opts = opts or {}
  local cfg = model.config
  if not (cfg and cfg.sinusoidal_pos_embds) then return bert.load_weights(model, source, opts) end
  local o = {}
  for k, v in pairs(opts) do o[k] = v end
  local optional = opts.optional
  o.optional = function(name)
    return name:match("embeddings%.position_embeddings%.weight$") ~= nil or (optional ~= nil and optional(name))
  end
  -- filled first: the checkpoint's table, when it has one, overwrites it
  sinusoidal_positions(model, cfg)
  return bert.load_weights(model, source, o)
end

M.state_list = bert.state_list

local has_head, is_head_param, head_terms = bert.head_fields(HEAD)
M.has_head, M.is_head_param = has_head, is_head_param

M.layer_stacks, M.layers, M.adaptive_stack = bert.layer_stacks, bert.layers, bert.adaptive_stack

-- model.dropout: dropout, attention_dropout and seq_classif_dropout at once (the attention
-- output's Dropout, absent in DistilBERT, stays at 0).
function M.set_dropout(model, p)
  for _, mod in model:named_modules() do
    if mod.__name == "Dropout" and mod.p and not mod.fixed then mod.p = p end
    if mod.__name == "BertAttention" then mod.attn_p = p end
  end
end

-- trainer plan's terms for a config.json table as read (DistilBERT's field names).
function M.plan_terms(c)
  local H = c.dim or 768
  return bert.shaped_plan_terms({ H = H, L = c.n_layers or 6, I = c.hidden_dim or 3072, A = c.n_heads or 12,
    V = c.vocab_size or 30522, P = c.max_position_embeddings or 512, TV = 0, act = c.activation,
    names = { names = NAMES.attention, ffn_names = NAMES.ffn, attention_name = NAMES.attention_name },
    head = head_terms(H) })
end

-- LoRA's targets when a recipe names none: the query and value projections, as for BERT
-- (PEFT's TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING has no "distilbert" entry; its
-- DistilBERT examples name these two)
M.peft_targets = { "q_lin", "v_lin" }

-- transformers' sequence classifier of the family (a cross-encoder's config.json names it)
M.classifier_class = { distilbert = "DistilBertForSequenceClassification" }

return M
