-- trainer.models.bert.feedforward (BertFeedForward): BERT's feed-forward block, post-LN:
--   y = LayerNorm(x + Dropout(Dense2(act(Dense1(x)))))
-- (the last three in one fused op over the Dropout and LayerNorm children: nn.dropout_add_norm)
-- Children carry the Hugging Face names relative to the layer: intermediate.dense,
-- output.dense, output.LayerNorm (the block is added to the layer under "", transparent).
-- act is GELU (erf or tanh form, from hidden_act). Dropout site: (layer, rng_sites.dropout.feedforward_output).
local Module = require("trainer.nn.module")
local sites = require("trainer.core.rng_sites")
local Linear = require("trainer.nn.linear")
local LayerNorm = require("trainer.nn.layernorm")
local Dropout = require("trainer.nn.dropout")
local add_norm = require("trainer.nn.dropout_add_norm")
local ops = require("trainer.core.ops")

local BertFeedForward = Module:extend("BertFeedForward")
local TANH_GELU = ops.gelu_kind("gelu_new")

-- The Linear children: { name, in, out, field } in construction order (and so parameter
-- order). trainer.plan reads the same list through BertLayer.linears.
-- cfg.ffn_names renames children by field (dense1, dense2, norm, dropout), as cfg.names does
-- BertAttention's.
function BertFeedForward.linears(cfg)
  local C, I, n = cfg.hidden_size, cfg.intermediate_size, cfg.ffn_names or {}
  return { { n.dense1 or "intermediate.dense", C, I, "dense1" }, { n.dense2 or "output.dense", I, C, "dense2" } }
end

function BertFeedForward.new(cfg, rng, layer)
  local self = BertFeedForward:create()
  local C, o = cfg.hidden_size, { device = cfg.device }
  self.act = ops.gelu_kind(cfg.hidden_act or "gelu")
  for _, l in ipairs(BertFeedForward.linears(cfg)) do self:add_module(l[1], Linear.new(l[2], l[3], o), l[4]) end
  local n = cfg.ffn_names or {}
  self:add_module(n.norm or "output.LayerNorm", LayerNorm.new(C, { eps = cfg.layer_norm_eps, device = cfg.device }), "norm")
  self:add_module(n.dropout or "output.dropout", Dropout.new(cfg.hidden_dropout_prob, rng, layer,
    sites.dropout.feedforward_output), "dropout")
  return self
end

-- Dense1 keeps its bias in the GEMM and the GELU runs alone: the fused ops.bias_gelu (the bias
-- in the GELU's pass, its gradient in the GELU derivative's pass) measured no faster on the
-- CPU, where OpenBLAS clears a bias-less GEMM's output in a pass of its own and the bias
-- gradient's GEMV is already cheap (bench/fused_ops.lua). The tanh form goes through
-- Linear:forward_gelu (ops.linear_gelu), which on CUDA is one cuBLASLt product with the GELU
-- in its epilogue (cuBLASLt's GELU is the tanh form, so erf stays a pass of its own) and on
-- the CPU the same two ops; a dense1 that LoRA wraps adds its path before the GELU, so it
-- keeps the two ops.
-- x: [.., C], or the packed real rows [N, C] with pk their packing (trainer.nn.packing),
-- which the dropout needs for the padded layout's masks.
function BertFeedForward:forward(x, pk)
  local h, a
  -- both plain Linears: the backward then goes through dense2:backward_dgelu on CUDA
  self.fused_gelu = self.act == TANH_GELU and type(self.dense1.forward_gelu) == "function" and
    type(self.dense2.backward_dgelu) == "function" or nil
  if self.fused_gelu then
    a, h = self.dense1:forward_gelu(x, self.act)
  else
    h = self.dense1:forward(x, pk)   -- pk: a LoRA dropout's masks follow the padded layout
    a = ops.gelu(h, self.act)
  end
  self:keep("h", h)
  h:free()
  local o = self.dense2:forward(a, pk)
  -- dense2 kept a, its weight gradient's input ([N, I], as large as h): a plain dense2 after
  -- the GELU pass of its own has it dropped here and remade from h in the backward (one GELU
  -- pass, the same op on the same input: the same bits), so the block keeps h alone
  if not self.fused_gelu and Linear.drop_input(self.dense2) then self.saved.remake = true end
  a:free()
  local y = add_norm.forward(self.dropout, self.norm, o, x, pk)   -- norm(x + dropout(o)), fused
  o:free()
  return y
end

-- On CUDA, after forward_gelu, dense2's input gradient and the GELU derivative (and dense1's
-- bias gradient) are one op, Linear:backward_dgelu; the CPU keeps the ops it ran before
-- (linear_backward_dgelu there composes them, with dense1's bias gradient summed apart).
function BertFeedForward:backward(dy)
  local h = self:saved_tensor("h")
  local dod, dsum = add_norm.backward(self.dropout, self.norm, dy)
  if self.saved.remake then
    local a = ops.gelu(h, self.act)
    Linear.give_input(self.dense2, a)
    a:free()
  end
  local dh, bias_done
  if self.fused_gelu and h:device() ~= "cpu" then
    dh, bias_done = self.dense2:backward_dgelu(dod, h, self.act, self.dense1), true
    dod:free()
  else
    -- in place: the GELU's input gradient overwrites its output's, one [N, I] held, not two
    dh = ops.gelu_backward_(self.dense2:backward(dod), h, self.act)
    dod:free()
  end
  self:release()
  self.dense1:backward(dh, nil, bias_done, dsum)   -- dsum += dense1's input gradient, in its product
  dh:free()
  return dsum
end

return BertFeedForward
