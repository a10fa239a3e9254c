-- trainer.losses.teacher: the teacher model of a distillation loss (loss.teacher, a model
-- folder with its tokenizer): it embeds each batch's texts without gradients (eval mode: no
-- dropout, nothing saved for a backward; its weights frozen, so no gradient buffers) and
-- gives the loss its labels:
--   mse, gist: per row, the teacher's (gist: the guide's) embedding of each text column;
--   margin_mse: per row, the teacher's dot-product scores [q.p, q.n_1, ..., q.n_n].
-- On a GPU the teacher's weights and activations are bf16 (half the memory, the student's
-- precision does not matter to it); on the CPU f32. Its weights are tagged "weights", so the
-- memory ledger counts them there, and trainer.plan adds them (plan.teacher_bytes).
local T = require("trainer.core.tensor")
local host = require("trainer.losses.host")

local M = {}

local Teacher = {}
Teacher.__index = Teacher

function M.new(dir, kind, opts)
  opts = opts or {}
  local device = opts.device or "cpu"
  local half = device ~= "cpu"
  local model = require("trainer.models").load_model(dir, { device = device, task = "embedding",
    dtype = half and "bf16" or nil, activation_dtype = half and "bf16" or nil })
  model:eval()
  model:set_trainable(false)
  local tok = require("trainer.core.tokenizer").load(dir)
  return setmetatable({ model = model, tokenizer = tok, kind = kind, device = device, dir = dir }, Teacher)
end

-- The teacher's embeddings of texts as Lua rows.
function Teacher:embed(texts, max_length)
  return T.scope(function()
    local enc = self.tokenizer:batch(texts, { max_length = math.min(max_length or self.model.max_length,
      self.model.max_length), truncation = true, padding = "longest", device = self.device })
    local out = self.model:forward(enc)
    local rows = host.rows(out)
    self.model:clear_saved()
    return rows
  end)
end

-- The labels of a batch given as text columns (cols[k][i]).
function Teacher:labels(cols, max_length)
  local embs = {}
  for k, col in ipairs(cols) do embs[k] = self:embed(col, max_length) end
  local B, labels = #cols[1], {}
  for i = 1, B do
    if self.kind ~= "margin_mse" then
      local per = {}
      for k = 1, #cols do per[k] = embs[k][i] end
      labels[i] = per
    else
      local q, s = embs[1][i], {}
      for k = 2, #cols do
        local d, e = 0, embs[k][i]
        for c = 1, #q do d = d + q[c] * e[c] end
        s[k - 1] = d
      end
      labels[i] = s
    end
  end
  return labels
end

function Teacher:free()
  self.model:free()
end

return M
