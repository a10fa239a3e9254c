-- trainer.models.bert.embeddings (BertEmbeddings): BERT's input embeddings,
--   y = Dropout(LayerNorm(word[ids] + token_type[type_ids] + position[pos_ids]))
-- (summed in that order, as transformers does). Children: word_embeddings,
-- position_embeddings, token_type_embeddings (absent when type_vocab_size is 0),
-- LayerNorm. Dropout site (layer 0, rng_sites.dropout.embeddings). The caller (the model
-- family, lua/trainer/models/) builds the position and token-type ids by its own rule.
-- forward({ input_ids =, token_type_ids =, position_ids = }) -> [B, T, C]; backward -> nil.
-- When none of its parameters trains (LoRA on the encoder), the forward keeps nothing (no
-- LayerNorm input or statistics) and the backward does nothing: no gradient is wanted here.
local Module = require("trainer.nn.module")
local T = require("trainer.core.tensor")
local sites = require("trainer.core.rng_sites")
local Embedding = require("trainer.nn.embedding")
local LayerNorm = require("trainer.nn.layernorm")
local Dropout = require("trainer.nn.dropout")
local ops = require("trainer.core.ops")

local BertEmbeddings = Module:extend("BertEmbeddings")

-- cfg: vocab_size, hidden_size, max_position_embeddings, type_vocab_size, pad_token_id,
-- layer_norm_eps, hidden_dropout_prob, device, activation_dtype, position_padding_idx.
-- opts (a family whose embeddings are these without a position table: ModernBERT's
-- drop(norm(tok_embeddings(ids)))): names { word =, norm =, dropout = } (the children's
-- names), word_only (no position table and no token types: the word lookup alone), eps,
-- norm_bias (false: a LayerNorm without bias), p (the dropout's probability).
function BertEmbeddings.new(cfg, rng, opts)
  opts = opts or {}
  local n = opts.names or {}
  local self = BertEmbeddings:create()
  local C, o = cfg.hidden_size, { device = cfg.device, activation_dtype = cfg.activation_dtype }
  local function with(t) for k, v in pairs(o) do t[k] = v end return t end
  self:add_module(n.word or "word_embeddings", Embedding.new(cfg.vocab_size, C, with({ padding_idx = cfg.pad_token_id })),
    "word_embeddings")
  if not opts.word_only then
    self:add_module("position_embeddings", Embedding.new(cfg.max_position_embeddings, C,
      with({ padding_idx = cfg.position_padding_idx })))
  end
  if not opts.word_only and (cfg.type_vocab_size or 0) > 0 then
    self:add_module("token_type_embeddings", Embedding.new(cfg.type_vocab_size, C, with({})))
  end
  self:add_module(n.norm or "LayerNorm", LayerNorm.new(C, { eps = opts.eps or cfg.layer_norm_eps, device = cfg.device,
    bias = opts.norm_bias }), "norm")
  self:add_module(n.dropout or "dropout", Dropout.new(opts.p or cfg.hidden_dropout_prob, rng, 0, sites.dropout.embeddings),
    "dropout")
  return self
end

function BertEmbeddings:forward(input)
  self.frozen = not self:any_trainable()
  return T.scope(function()
    -- the summed lookups and their norm die before the dropout's output is made
    local n = T.scope(function()
      local e = self.word_embeddings:forward(input.input_ids)
      -- each added lookup dies once added
      if self.token_type_embeddings and input.token_type_ids then
        T.scope(function() ops.add_(e, self.token_type_embeddings:forward(input.token_type_ids)) end)
      end
      if self.position_embeddings then
        T.scope(function() ops.add_(e, self.position_embeddings:forward(input.position_ids)) end)
      end
      if self.frozen or not self.grad_enabled then
        local norm = self.norm   -- no statistics kept
        return (ops.layernorm(e, norm.weight.value, norm.bias and norm.bias.value, norm.eps))
      end
      return self.norm:forward(e)
    end)
    return self.dropout:forward(n)
  end)
end

function BertEmbeddings:backward(dy)
  if self.frozen then self:clear_saved() return nil end
  T.scope(function()
    local de = T.scope(function() return self.norm:backward(self.dropout:backward(dy)) end)   -- the dropout's gradient dies here
    self.word_embeddings:backward(de)
    if self.token_type_embeddings and self.token_type_embeddings.saved.ids then self.token_type_embeddings:backward(de) end
    if self.position_embeddings then self.position_embeddings:backward(de) end
  end)
  return nil
end

return BertEmbeddings
