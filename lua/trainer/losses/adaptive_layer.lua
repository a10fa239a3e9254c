-- trainer.losses.adaptive_layer: AdaptiveLayerLoss (sentence-transformers 6.x) around an
-- inner embedding loss (loss.inner): the inner loss on the final layer's embeddings, plus the
-- inner loss on the pooled output of earlier layers (hidden state 0 is the embeddings'
-- output, k the output of encoder layer k; candidates 0 .. L-1), each with a KL term pulling
-- its embedding distribution towards the final layer's:
--   loss = last_layer_weight * inner(final)
--        + sum over the sampled layers k of inner(layer k) * prior_layers_weight / n
--        + sum over the sampled layers k of kl_temperature * kl_div_weight
--          * KL(softmax(final / T) || softmax(layer_k / T))   (over the embedding dimension,
--            batchmean over every text of every column; the final side is a constant)
-- n_layers_per_step layers are drawn per step (-1 or >= L: all of them), from the model's
-- dropout key (seed, step), so a resumed run draws the same ones.
-- The step (trainer.train.step) runs the model once in full and once per sampled layer with
-- the encoder cut after that layer: dropout masks are keyed by layer and position, so each
-- cut run reproduces the hidden state of the full run, and each run's backward adds its
-- gradients to the parameters' (nothing of one run is alive during the next).
local host = require("trainer.losses.host")
local base = require("trainer.losses.base")

local M = {}

local Adaptive = base.class()

local OWN = { "inner", "n_layers_per_step", "last_layer_weight", "prior_layers_weight", "kl_div_weight",
              "kl_temperature" }

function M.new(spec, opts, make_inner)
  local inner_spec = {}
  for k, v in pairs(spec) do inner_spec[k] = v end
  for _, k in ipairs(OWN) do inner_spec[k] = nil end
  inner_spec.name = spec.inner
  local loss = make_inner(inner_spec, opts)
  return setmetatable({ kind = "adaptive_layer", adaptive = true, loss = loss, teacher = loss.teacher,
    n_layers_per_step = spec.n_layers_per_step, last_layer_weight = spec.last_layer_weight,
    prior_layers_weight = spec.prior_layers_weight, kl_div_weight = spec.kl_div_weight,
    kl_temperature = spec.kl_temperature }, Adaptive)
end

-- The hidden states (0 .. L-1) this step adds, in increasing order: all of them, or
-- n_layers_per_step drawn without replacement from a generator seeded by (seed, step).
function Adaptive:layers(L, seed, step)
  local all = {}
  for k = 0, L - 1 do all[#all + 1] = k end
  local n = self.n_layers_per_step
  if n < 0 or n >= L then return all end
  -- a small LCG over (seed, step): the draw depends on nothing else
  local state = ((seed or 0) * 1000003 + (step or 0) * 7919 + 12345) % 2147483647
  local function rand(m)
    state = (state * 48271) % 2147483647
    return state % m
  end
  for i = 1, n do
    local j = i + rand(#all - i + 1)
    all[i], all[j] = all[j], all[i]
  end
  local out = {}
  for i = 1, n do out[i] = all[i] end
  table.sort(out)
  return out
end

local function softmax(row, T)
  local m = -math.huge
  for c = 1, #row do if row[c] / T > m then m = row[c] / T end end
  local s, p = 0, {}
  for c = 1, #row do p[c] = math.exp(row[c] / T - m); s = s + p[c] end
  local logs = math.log(s)
  local logp = {}
  for c = 1, #row do p[c] = p[c] / s; logp[c] = row[c] / T - m - logs end
  return p, logp
end

-- The final layer's distributions (a constant of the KL terms) from its embeddings' rows.
function Adaptive:target(rows)
  local T = self.kl_temperature
  local out = {}
  for i, r in ipairs(rows) do
    local p, logp = softmax(r, T)
    out[i] = { p = p, logp = logp }
  end
  return out
end

-- The KL term of one layer's embeddings' rows against the target: its value (weighted) and
-- its gradient rows (weighted).
function Adaptive:kl(rows, target)
  local T, w = self.kl_temperature, self.kl_div_weight
  local N, C = #rows, #rows[1]
  local g, sum = host.zeros(N, C), 0
  for i = 1, N do
    local q, logq = softmax(rows[i], T)
    local p, logp = target[i].p, target[i].logp
    local gi = g[i]
    for c = 1, C do
      if p[c] > 0 then sum = sum + p[c] * (logp[c] - logq[c]) end
      -- d/d e of T * w * KL / N: w * (q - p) / N
      gi[c] = w * (q[c] - p[c]) / N
    end
  end
  return sum / N * T * w, g
end

-- The inner loss's parameters (SoftmaxLoss' classifier would have some), its state.
function Adaptive:parameters() return self.loss:parameters() end

function Adaptive:free() self.loss:free() end

function Adaptive:release() self.loss:release() end

return M
