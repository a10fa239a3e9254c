-- trainer.models.roberta: the RoBERTa family (model_type "roberta", "xlm-roberta", "camembert"):
-- BERT's modules and weights (trainer.models.bert) under the prefix "roberta.", with
-- position ids offset past the padding id.
--
-- What differs from BERT, as transformers' RobertaEmbeddings has it:
--   * position ids: create_position_ids_from_input_ids, the running count of non-pad tokens
--     of the row offset by pad_token_id (the first real token is at pad_token_id + 1), and
--     pad_token_id at the pads; the position table's row pad_token_id is the padding row;
--   * so the longest input is max_position_embeddings - pad_token_id - 1 tokens;
--   * token types: as the config says (type_vocab_size 1 in released checkpoints).
--   * classification: transformers' RobertaClassificationHead on the first token (dropout,
--     classifier.dense, tanh, dropout, classifier.out_proj), no pooler, the encoder under
--     "roberta." as RobertaForSequenceClassification saves it.
local bert = require("trainer.models.bert")
local errors = require("trainer.core.errors")

local spec = { name = "roberta", weight_prefix = "roberta",
  classifier_class = { roberta = "RobertaForSequenceClassification", ["xlm-roberta"] = "XLMRobertaForSequenceClassification",
    camembert = "CamembertForSequenceClassification" },
  head = { under = "classifier", dense = "dense", out = "out_proj", act = "tanh", input_dropout = true } }

function spec.max_positions(cfg) return cfg.max_position_embeddings - cfg.pad_token_id - 1 end

-- pad + the running count of non-pad tokens, pad at the pads (bert.padded_position_ids)
function spec.position_ids(cfg, ids, pos, B, Tn, base)
  bert.padded_position_ids(cfg.pad_token_id, ids, pos, B, Tn, base)
end

function spec.finish_config(cfg, source)
  cfg.position_padding_idx = cfg.pad_token_id
  if cfg.max_position_embeddings <= cfg.pad_token_id + 1 then
    errors.user("%s: max_position_embeddings %d leaves no position after the %d that %s reserves for padding",
      source, cfg.max_position_embeddings, cfg.pad_token_id + 1, cfg.model_type)
  end
end

return bert.shaped_family(spec)
