-- trainer.models.mpnet: the MPNet family (model_type "mpnet"): BERT's post-norm layers
-- (trainer.models.bert's modules) with a relative-position bias in every attention, under
-- MPNet's weight names.
--
-- What differs from BERT, as transformers' modeling_mpnet has it:
--   * weights: embeddings.{word_embeddings, position_embeddings, LayerNorm} (no token types),
--     encoder.layer.N.attention.attn.{q, k, v, o}, .attention.LayerNorm, .intermediate.dense,
--     .output.dense, .output.LayerNorm, encoder.relative_attention_bias, pooler.dense;
--     "mpnet." inside MPNetForSequenceClassification and MPNetForMaskedLM, none in a
--     sentence-transformers folder (loading tries both, bert.load_weights);
--   * position ids: RoBERTa's rule (the running count of non-pad tokens offset by the padding
--     id, the padding id at the pads) with MPNetEmbeddings' padding id, 1 whatever the config
--     says; so the longest input is max_position_embeddings - 2 tokens;
--   * the attention scores gain encoder.relative_attention_bias[bucket(j - i), h] (one table
--     [32, heads] shared by the layers; T5's bidirectional bucketing with 32 buckets and
--     max_distance 128, computed in the attention kernels per query and key, never as a
--     B x H x T x T tensor): the encoder owns the table (trainer.models.bert.encoder);
--   * LayerNorm eps from config.json (1e-5 in released checkpoints);
--   * classification: MPNetClassificationHead on the first token (dropout, classifier.dense,
--     tanh, dropout, classifier.out_proj; hidden_dropout_prob), no pooler, the encoder under
--     "mpnet.";
--   * LoRA: PEFT's default targets for mpnet are q and v.
-- Its tokenizer (MPNetTokenizer's tokenizer.json) is WordPiece with a RoBERTa-style
-- post-processor (<s> A </s></s> B </s>), which trainer.tokenizer reads as it is.
local bert = require("trainer.models.bert")
local errors = require("trainer.core.errors")

-- MPNetEmbeddings' padding index: positions count from it, whatever pad_token_id is.
local PADDING_IDX = 1
-- transformers' MPNetEncoder buckets with 32 buckets and max_distance 128 whatever the config
-- says (compute_position_bias' defaults); the table must then have 32 rows.
local NUM_BUCKETS, MAX_DISTANCE = 32, 128

-- MPNet's weight names for BERT's modules (BertModel's opts.names).
local NAMES = { attention = { query = "attn.q", key = "attn.k", value = "attn.v", dense = "attn.o", norm = "LayerNorm" } }

local spec = {
  name = "mpnet", weight_prefix = "mpnet",
  classifier_class = { mpnet = "MPNetForSequenceClassification" },
  head = { under = "classifier", dense = "dense", out = "out_proj", act = "tanh", input_dropout = true },
  -- PEFT's TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING["mpnet"]
  peft_targets = { "q", "v" },
  -- build: BERT's with MPNet's names; the encoder's relative-position bias comes from the
  -- checked config's relative_attention_num_buckets
  names = NAMES,
}

-- MPNetClassificationHead's dropouts are hidden_dropout_prob
function spec.head_p(cfg) return cfg.hidden_dropout_prob end

function spec.max_positions(cfg) return cfg.max_position_embeddings - PADDING_IDX - 1 end

-- The padding index + the running count of non-pad tokens, the padding index at the pads
-- (create_position_ids_from_input_ids with padding_idx 1: bert.padded_position_ids).
function spec.position_ids(cfg, ids, pos, B, Tn, base)
  bert.padded_position_ids(PADDING_IDX, ids, pos, B, Tn, base)
end

function spec.finish_config(cfg, source)
  cfg.position_padding_idx = PADDING_IDX
  if cfg.max_position_embeddings <= PADDING_IDX + 1 then
    errors.user("%s: max_position_embeddings %d leaves no position after the %d that MPNet reserves for padding",
      source, cfg.max_position_embeddings, PADDING_IDX + 1)
  end
  if cfg.type_vocab_size ~= 0 then
    errors.user("%s: type_vocab_size %d: MPNet has no token type embeddings; leave the field out", source,
      cfg.type_vocab_size)
  end
  local nb = cfg.relative_attention_num_buckets
  if nb ~= NUM_BUCKETS then
    errors.user("%s: relative_attention_num_buckets is %s, but transformers' MPNet buckets relative positions into %d "
      .. "(its table must have %d rows); use %d", source, tostring(nb), NUM_BUCKETS, NUM_BUCKETS, NUM_BUCKETS)
  end
  cfg.relative_attention_max_distance = MAX_DISTANCE
end

local F = bert.shaped_family(spec, {})

-- config.json's defaults for MPNet (MPNetConfig's), where BERT's differ: filled in before
-- BERT's checks, which add the rest.
local own_defaults = { layer_norm_eps = 1e-5, pad_token_id = 1, type_vocab_size = 0,
  relative_attention_num_buckets = NUM_BUCKETS }
F.defaults = {}
for k, v in pairs(bert.defaults) do F.defaults[k] = v end
for k, v in pairs(own_defaults) do F.defaults[k] = v end
F.config_fields = {}
for i, f in ipairs(bert.config_fields) do F.config_fields[i] = f end
F.config_fields[#F.config_fields + 1] = { "relative_attention_num_buckets", "integer", 1, 65536 }

local shaped_config = F.config
function F.config(raw, source)
  if type(raw) ~= "table" then errors.user("%s: a model config must be a JSON object", source or "config") end
  local c = {}
  for k, v in pairs(raw) do c[k] = v end
  for k, v in pairs(own_defaults) do if c[k] == nil then c[k] = v end end
  bert.check_fields(c, { F.config_fields[#F.config_fields] }, source or "config", "MPNet")
  return shaped_config(c, source)
end

-- trainer plan's terms for a config.json table as read: BERT's layer under MPNet's names, no
-- token types, the bias table beside the embeddings, the head on the first token.
local bert_terms = F.plan_terms
function F.plan_terms(c)
  local H = c.hidden_size
  local t = bert.shaped_plan_terms({ H = H, L = c.num_hidden_layers, I = c.intermediate_size,
    A = c.num_attention_heads, V = c.vocab_size, P = c.max_position_embeddings or 514, TV = 0, act = c.hidden_act,
    names = { names = NAMES.attention } })
  local A = c.num_attention_heads
  t.embeddings[#t.embeddings + 1] = { n = NUM_BUCKETS * A, rows = NUM_BUCKETS, cols = A }
  t.head = bert_terms(c).head
  return t
end

return F
