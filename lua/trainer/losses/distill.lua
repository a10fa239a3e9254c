-- trainer.losses.distill: sentence-transformers' distillation losses, the teacher's side
-- given as labels (a precomputed data column, or a teacher model: trainer.losses.teacher,
-- loss.teacher, fills them per batch). Computed on the host in double (trainer.losses.host).
--   mse (MSELoss): student embeddings s_k of every text column k against teacher embeddings
--     t_k: loss = mean over columns of mean((s_k - t_k)^2). A row's label is one vector (the
--     same teacher embedding for every column) or one vector per column.
--   margin_mse (MarginMSELoss): columns (query, positive, negative_1..n); the student's
--     margins m_k = q.p - q.n_k (dot products) against the teacher's: loss = mean over rows
--     and negatives of (m_k - l_k)^2. A row's label is the teacher margins (a number with one
--     negative, or n numbers), or the teacher scores [q.p, q.n_1, ..., q.n_n] (n + 1 numbers).
local host = require("trainer.losses.host")
local errors = require("trainer.core.errors")

local M = {}

local function is_vector(v)
  if type(v) ~= "table" or #v == 0 then return false end
  for _, x in ipairs(v) do if type(x) ~= "number" then return false end end
  return true
end

-- The teacher vector of column k of row i (errors name the row).
local function teacher_row(kind, label, i, k, ncols, C)
  local t
  if is_vector(label) then
    t = label
  elseif type(label) == "table" and #label == ncols and is_vector(label[k]) then
    t = label[k]
  else
    errors.user("%s: label %d must be the teacher's embedding (a list of %d numbers) or one per text column (%d lists)",
      kind, i, C, ncols)
  end
  if #t ~= C then
    errors.user("%s: label %d: the teacher embedding has %d numbers, the student's has %d (they must match)", kind,
      i, #t, C)
  end
  return t
end

local function mse(self, rows, labels)
  local ncols, B, C = #rows, #rows[1], #rows[1][1]
  if type(labels) ~= "table" or #labels ~= B then
    errors.user("mse: expects %d labels (the teacher's embeddings, one per row), got %s", B,
      type(labels) == "table" and tostring(#labels) or type(labels))
  end
  local grads, loss = {}, 0
  local g = 2 / (B * C * ncols)
  for k = 1, ncols do
    local s, gk, sum = rows[k], host.zeros(B, C), 0
    for i = 1, B do
      local t = teacher_row("mse", labels[i], i, k, ncols, C)
      local si, gi = s[i], gk[i]
      for c = 1, C do
        local d = si[c] - t[c]
        sum = sum + d * d
        gi[c] = g * d
      end
    end
    loss = loss + sum / (B * C)
    grads[k] = gk
  end
  return loss / ncols, grads
end

local dot = host.dot

local function margin_mse(self, rows, labels)
  local q, p = rows[1], rows[2]
  local nneg, B, C = #rows - 2, #q, #q[1]
  if type(labels) ~= "table" or #labels ~= B then
    errors.user("margin_mse: expects %d labels (the teacher's margins, one entry per row), got %s", B,
      type(labels) == "table" and tostring(#labels) or type(labels))
  end
  local grads = {}
  for k = 1, #rows do grads[k] = host.zeros(B, C) end
  local N, loss = B * nneg, 0
  for i = 1, B do
    local l = labels[i]
    local margins
    if type(l) == "number" and nneg == 1 then
      margins = { l }
    elseif is_vector(l) and #l == nneg then
      margins = l
    elseif is_vector(l) and #l == nneg + 1 then
      margins = {}
      for k = 1, nneg do margins[k] = l[1] - l[k + 1] end
    else
      errors.user("margin_mse: label %d must be the teacher's %d margin(s) (positive score minus each negative's) "
        .. "or its %d scores (positive, then negatives)", i, nneg, nneg + 1)
    end
    local sp = dot(q[i], p[i])
    for k = 1, nneg do
      local n = rows[k + 2][i]
      local d = sp - dot(q[i], n) - margins[k]
      loss = loss + d * d
      -- d / d m = 2 d / N; m = q.p - q.n
      local g = 2 * d / N
      local gq, gp, gn = grads[1][i], grads[2][i], grads[k + 2][i]
      for c = 1, C do
        gq[c] = gq[c] + g * (p[i][c] - n[c])
        gp[c] = gp[c] + g * q[i][c]
        gn[c] = gn[c] - g * q[i][c]
      end
    end
  end
  return loss / N, grads
end

local classes = {}

function M.new(spec, opts)
  local name = spec.name
  local cls = classes[name]
  if not cls then
    if name == "mse" then
      cls = host.class(1, nil, false)
      cls.compute = mse
    else
      cls = host.class(3, nil, false)
      cls.compute = margin_mse
    end
    classes[name] = cls
  end
  local loss = setmetatable({ kind = name }, cls)
  if spec.teacher then loss.teacher = require("trainer.losses.teacher").new(spec.teacher, name, opts) end
  return loss
end

M.is_vector = is_vector
return M
