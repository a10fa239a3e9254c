-- trainer.models.bert.attention (BertAttention): BERT's attention block, post-LN:
--   y = LayerNorm(x + Dropout(Dense(Attention(Q x, K x, V x, mask))))
-- (the last three in one fused op over the Dropout and LayerNorm children: nn.dropout_add_norm)
-- Children carry the Hugging Face names relative to the layer's "attention":
-- self.query, self.key, self.value, output.dense, output.LayerNorm. q/k/v are the
-- [B, T, H*D] Linear outputs viewed (free reshape) as [B, T, H, D] for ops.attention,
-- which never materialises T x T probabilities; the backward gets its row log-sum-exp and,
-- on CUDA, its output (kept, or remade with the dense's input where a trained dense would
-- keep that: drop_output).
-- Dropout sites (trainer.rng_sites.dropout): attention_probs and attention_output, in this layer.
-- forward(x, mask): mask [B, T] i32 (nonzero = keep) or nil; a view of it is kept. Or x is
-- the packed real rows [N, C] and mask their packing (trainer.nn.packing): the linears and
-- the output block run on the N rows; q, k, v are scattered to [B, T, C] (padding rows 0)
-- for the attention op and its output gathered back, the same numbers as the padded path;
-- a forward without gradients or attention dropout over prefix masks runs
-- ops.attention_packed on the packed rows instead (the same bits, no copies).
-- A relative-position bias (MPNet's): `rel` = { weight = the table parameter [num_buckets, H],
-- shared by the layers (the encoder owns it), max_distance }, added to every head's scores
-- inside ops.attention, its gradient accumulated by ops.attention_backward; the packed
-- inference path takes no bias, so such a model keeps the padded layout for the attention op.
local Module = require("trainer.nn.module")
local T = require("trainer.core.tensor")
local sites = require("trainer.core.rng_sites")
local Linear = require("trainer.nn.linear")
local LayerNorm = require("trainer.nn.layernorm")
local Dropout = require("trainer.nn.dropout")
local add_norm = require("trainer.nn.dropout_add_norm")
local ops = require("trainer.core.ops")
local packing = require("trainer.nn.packing")

local BertAttention = Module:extend("BertAttention")

-- The Linear children: { name, in, out, field } in construction order (and so parameter
-- order). trainer.plan reads the same list through BertLayer.linears. cfg.names (a family whose
-- layers compute BERT's math under other weight names: DistilBERT's q_lin, ...) renames
-- children by field: names.query, names.key, names.value, names.dense, names.norm,
-- names.dropout.
function BertAttention.linears(cfg)
  local C, n = cfg.hidden_size, cfg.names or {}
  return { { n.query or "self.query", C, C, "query" }, { n.key or "self.key", C, C, "key" },
           { n.value or "self.value", C, C, "value" }, { n.dense or "output.dense", C, C, "dense" } }
end

-- cfg: hidden_size, num_attention_heads, attention_probs_dropout_prob, hidden_dropout_prob,
-- layer_norm_eps, device; rng: the model's shared rng table; layer: this layer's id; rel: the
-- relative-position bias (above) or nil.
function BertAttention.new(cfg, rng, layer, rel)
  local self = BertAttention:create()
  local C, o = cfg.hidden_size, { device = cfg.device }
  self.heads = cfg.num_attention_heads
  self.head_dim = C / self.heads
  self.attn_p = cfg.attention_probs_dropout_prob or 0
  self.rng, self.layer, self.rel = rng, layer, rel
  for _, l in ipairs(BertAttention.linears(cfg)) do self:add_module(l[1], Linear.new(l[2], l[3], o), l[4]) end
  local n = cfg.names or {}
  self:add_module(n.norm or "output.LayerNorm", LayerNorm.new(C, { eps = cfg.layer_norm_eps, device = cfg.device }), "norm")
  self:add_module(n.dropout or "output.dropout", Dropout.new(cfg.hidden_dropout_prob, rng, layer,
    sites.dropout.attention_output), "dropout")
  return self
end

-- The key of the attention probabilities' dropout mask of a layer at (seed, step), or nil
-- without dropout (p = 0).
local function probs_key(p, seed, step, layer)
  if p > 0 then return ops.rng_key({ seed = seed, step = step, layer = layer, op = sites.dropout.attention_probs }) end
  return nil
end

-- The options of ops.attention for this layer (an attention module with attn_p, rng, layer
-- and rel: ModernBERT's too).
function BertAttention:attn_opts()
  local p = self.training and self.attn_p or 0
  local key = probs_key(p, self.rng.seed, self.rng.step, self.layer)
  local rel = self.rel
  if not rel then return { dropout = p, key = key } end
  return { dropout = p, key = key, rel_bias = rel.weight.value, max_distance = rel.max_distance, bidirectional = true }
end

-- Keeps what ops.attention_backward reads of a forward of ops.attention(q4, k4, v4, mask,
-- aopts) that gave out and lse: the inputs, the log-sum-exp, the output on a device whose
-- backward reads it for its row terms (dout . out; CUDA; the CPU's takes them from the
-- probabilities and keeps nothing more), the mask, and the dropout, window and query rows.
function BertAttention:keep_attention(q4, k4, v4, lse, out, mask, aopts)
  self.saved.q, self.saved.k, self.saved.v = T.keep(q4, k4, v4)
  self.saved.lse = T.keep(lse)
  if out:device() ~= "cpu" then self:keep("out", out) end
  self.saved.attn = { dropout = aopts.dropout, window = aopts.window, query_rows = aopts.query_rows,
    seed = self.rng.seed, step = self.rng.step }
  if mask then self:keep("mask", mask) end
end

-- The options of the kept forward's ops.attention (and of its backward).
local function kept_opts(self)
  local a, rel = self.saved.attn, self.rel
  return { dropout = a.dropout, key = probs_key(a.dropout, a.seed, a.step, self.layer), window = a.window,
           query_rows = a.query_rows, rel_bias = rel and rel.weight.value, max_distance = rel and rel.max_distance,
           bidirectional = true }
end

-- ops.attention_backward of the kept forward for the gradient da4 of its output: dq4, dk4, dv4
-- (and the relative-position table's gradient accumulated). out: the forward's output remade
-- (give_remade_output), read on a device instead of the kept one.
function BertAttention:attention_backward(da4, out)
  local s, rel = self.saved, self.rel
  local o = kept_opts(self)
  o.out, o.drel_bias = out or s.out, rel and Module.grad_of(rel.weight)
  return ops.attention_backward(da4, s.q, s.k, s.v, s.lse, s.mask, o)
end

-- The heads' output is the output dense's input ([B, T, H*D], or its rows), which a trainable
-- dense keeps for its weight gradient. drop_output frees that copy after the forward (and the
-- kept output it is a view of on a device) and says whether there was one; give_remade_output
-- then runs the attention op again on the kept q, k, v in the backward: the same inputs, mask,
-- dropout key, window and query rows give the forward's bits, for one attention forward (about
-- 1 % of a full fine-tune's step), where a layer would keep N x C more.
function BertAttention:drop_output(dense)
  if not Linear.drop_input(dense) then return false end
  if self.saved.out then
    self.saved.out:free()
    self.saved.out = nil
  end
  self.saved.remake_out = true
  return true
end

-- In the backward, before dense's: the output remade and handed to dense as its input was in
-- the forward (in x's row layout: the packed rows under pk, else [B, T, H*D]; then rows'
-- picks). Returns the output [B, T, H, D] (new: attention_backward's `out`, freed after it),
-- or nil when drop_output dropped none.
function BertAttention:give_remade_output(dense, rows, pk)
  local s = self.saved
  if not s.remake_out then return nil end
  s.remake_out = nil
  local out, lse = ops.attention(s.q, s.k, s.v, s.mask, kept_opts(self))
  lse:free()
  T.scope(function()
    local os = out:shape()
    local a = pk and pk:gather(out) or out:reshape({ os[1], os[2], os[3] * os[4] })
    Linear.give_input(dense, rows and rows:gather(a) or a)
  end)
  return out
end

local function heads_view(t, H, D)
  local s = t:shape()
  return t:reshape({ s[1], s[2], H, D })
end

-- The attention heads' output in x's row layout (the packed rows when pk); run in a scope,
-- so that each temporary dies where its step ends: the packed projections at the scatter,
-- q, k, v and the log-sum-exp (without gradients) before the gather. rows (a row pick): only
-- each sequence's first query is computed (the op's query_rows), the other rows of the
-- output are 0 and never read.
local function attend(self, x, mask, pk, rows)
  local H, D = self.heads, self.head_dim
  local aopts = self:attn_opts()
  if rows then aopts.query_rows = 1 end
  local function project() return self.query:forward(x, pk), self.key:forward(x, pk), self.value:forward(x, pk) end
  if pk and pk.prefix and not self.grad_enabled and aopts.dropout == 0 and not aopts.rel_bias then
    -- no backward to save for: attention on the packed rows, no scatter and gather (the
    -- padded op's bits for prefix masks, so a replay with gradients matches)
    local N = pk.N
    local q, k, v = project()
    local a3 = ops.attention_packed(q:reshape({ N, H, D }), k:reshape({ N, H, D }), v:reshape({ N, H, D }), pk.lengths)
    return a3:reshape(x:shape())
  end
  local a4 = T.scope(function()
    local q4, k4, v4 = T.scope(function()
      local q, k, v = project()
      if pk then q, k, v = pk:scatter(q), pk:scatter(k), pk:scatter(v) end   -- the padded layout the op reads
      return heads_view(q, H, D), heads_view(k, H, D), heads_view(v, H, D)
    end)
    local a4, lse = ops.attention(q4, k4, v4, mask, aopts)
    if self.grad_enabled then
      -- the output, where kept, is a view, so when the trainable dense keeps its input the two
      -- share one tensor; with packing, the padded layout the op wrote (dense reads its gather)
      self:keep_attention(q4, k4, v4, lse, a4, mask, aopts)
      self.saved.pk = pk
    end
    return a4
  end)
  if pk then return pk:gather(a4) end
  return a4:reshape(x:shape())
end

-- rows (trainer.nn.row_pick, the encoder's last layer under a head that reads the first
-- rows only): the output block runs on the picked rows of x, and the result is [B, C].
function BertAttention:forward(x, mask, rows)
  local pk = packing.is(mask) and mask or nil
  if pk then mask = pk.mask end
  if self.grad_enabled then self.saved.rows, self.saved.x_shape = rows, rows and x:shape() end
  return T.scope(function()
    local o = T.scope(function()
      local a = T.scope(attend, self, x, mask, pk, rows)
      if rows then a = rows:gather(a) end
      -- the rows' layout for a LoRA dropout's masks (the padded layout's, as q, k, v's)
      local o = self.dense:forward(a, rows or pk)
      if self.grad_enabled then self:drop_output(self.dense) end
      return o
    end)
    -- norm(x + dropout(o)), fused
    return add_norm.forward(self.dropout, self.norm, o, rows and rows:gather(x) or x, rows or pk)
  end)
end

-- want_dx = false: no gradient of x is owed. The projections still back-propagate into their
-- own trainable parameters (LoRA's q, v) but skip their input products, a projection with
-- nothing trainable (LoRA's frozen key) is skipped whole, and nil is returned.
function BertAttention:backward(dy, want_dx)
  self:saved_tensor("q")   -- raises unless a forward with gradients kept what this reads
  local pk, rows, xs = self.saved.pk, self.saved.rows, self.saved.x_shape
  local dod, dsum = add_norm.backward(self.dropout, self.norm, dy)   -- dsum: also the residual's gradient
  local out = self:give_remade_output(self.dense, rows, pk)
  local da = self.dense:backward(dod)
  dod:free()
  if rows then
    -- the picked rows' gradients in x's layout, the other rows 0: what the full layer's
    -- output block gives them when nothing reads their output
    local dar, dsr = da, dsum
    da, dsum = rows:scatter(dar, xs), rows:scatter(dsr, xs)
    dar:free()
    dsr:free()
  end
  if pk then
    local das = pk:scatter(da)
    da:free()
    da = das
  end
  local da4 = heads_view(da, self.heads, self.head_dim)
  da:free()
  local dq4, dk4, dv4 = self:attention_backward(da4, out)
  da4:free()
  if out then out:free() end
  self:release()
  xs = dsum:shape()
  local dx = dsum
  local skip_dx = want_dx == false
  if skip_dx then dsum:free(); dx = nil end
  for _, pair in ipairs({ { self.query, dq4 }, { self.key, dk4 }, { self.value, dv4 } }) do
    if skip_dx and not pair[1]:any_trainable() then
      pair[2]:free()
      pair[1]:release()
    else
      -- the projection's input gradient has x's layout (packed or not), as dsum has: it adds
      -- into dx in the projection's product
      local d3 = pk and pk:gather(pair[2]) or pair[2]:reshape(xs)
      pair[2]:free()
      pair[1]:backward(d3, not skip_dx, nil, dx)
      d3:free()
    end
  end
  return dx
end

return BertAttention
