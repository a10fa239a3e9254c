-- tests/cli/check_outputs.lua — compares a model command's output with a golden file
-- (run by test_models.sh through `trainer run`):
--   embeddings OUT GOLDEN KEY   every line's JSON array vs row i of KEY: cosine >= 0.99999,
--                               max abs error <= 1e-4
--   ids OUT GOLDEN              every line's ids vs the unpadded row i of input_ids
--   labels OUT GOLDEN LABELS... every line's "label" is the argmax of the golden logits row
--   same OUT OTHER TOL          two outputs of a model command: the same lines, every number
--                               (embedding values, probabilities) within TOL absolute
-- Prints "ok" and returns 0, or raises with the first difference.
local json = require("trainer.core.json")
local st = require("trainer.core.safetensors")
local mode, out_path, golden = arg[1], arg[2], arg[3]

local lines = {}
for line in io.lines(out_path) do lines[#lines + 1] = line end
local g = mode ~= "same" and st.load(golden) or nil

local function rows(name)
  local t = g:tensor(name)
  local r = t:tolist()
  t:free()
  return r
end

if mode == "embeddings" then
  local ref = rows(arg[4])
  assert(#lines == #ref, ("%d lines, %d golden rows"):format(#lines, #ref))
  for i, line in ipairs(lines) do
    local v, w = json.decode(line), ref[i]
    assert(#v == #w, ("line %d: %d values, %d expected"):format(i, #v, #w))
    local dot, na, nb, max = 0, 0, 0, 0
    for k = 1, #w do
      dot = dot + v[k] * w[k]; na = na + v[k] ^ 2; nb = nb + w[k] ^ 2
      max = math.max(max, math.abs(v[k] - w[k]))
    end
    local cos = dot / math.sqrt(na * nb)
    assert(cos >= 0.99999 and max <= 1e-4, ("line %d: cosine %.9f, max abs %g"):format(i, cos, max))
  end
elseif mode == "ids" then
  local ids, mask = rows("input_ids"), rows("attention_mask")
  assert(#lines == #ids, ("%d lines, %d golden rows"):format(#lines, #ids))
  for i, line in ipairs(lines) do
    local v, want = json.decode(line), {}
    for k = 1, #ids[i] do if mask[i][k] ~= 0 then want[#want + 1] = ids[i][k] end end
    assert(table.concat(v, ",") == table.concat(want, ","),
      ("line %d: %s, expected %s"):format(i, table.concat(v, ","), table.concat(want, ",")))
  end
elseif mode == "labels" then
  local logits = rows("logits")
  local labels = { select(4, unpack(arg)) }
  assert(#lines == #logits, ("%d lines, %d golden rows"):format(#lines, #logits))
  for i, line in ipairs(lines) do
    local best = 1
    for k = 2, #logits[i] do if logits[i][k] > logits[i][best] then best = k end end
    local obj = json.decode(line)
    assert(obj.label == labels[best], ("line %d: %s, expected %s"):format(i, tostring(obj.label), labels[best]))
    local s = 0
    for _, p in pairs(obj.probabilities) do s = s + p end
    assert(math.abs(s - 1) < 1e-5, "probabilities sum to 1")
  end
elseif mode == "same" then
  local other, tol, worst = {}, tonumber(arg[4]), 0
  for line in io.lines(golden) do other[#other + 1] = line end
  assert(#lines == #other and #lines > 0, ("%d lines, %d in %s"):format(#lines, #other, golden))
  local function walk(a, b, where)
    if type(a) == "number" then
      assert(type(b) == "number", where .. ": not a number in both")
      worst = math.max(worst, math.abs(a - b))
      assert(math.abs(a - b) <= tol, ("%s: %.9g vs %.9g"):format(where, a, b))
    elseif type(a) == "table" then
      assert(type(b) == "table", where .. ": not a table in both")
      for k, v in pairs(a) do walk(v, b[k], where .. "." .. tostring(k)) end
      for k in pairs(b) do assert(a[k] ~= nil, where .. "." .. tostring(k) .. ": missing") end
    else
      assert(a == b, ("%s: %s vs %s"):format(where, tostring(a), tostring(b)))
    end
  end
  for i, line in ipairs(lines) do walk(json.decode(line), json.decode(other[i]), "line " .. i) end
  print(("max abs difference %.3g"):format(worst))
else
  error("mode must be embeddings, ids, labels or same")
end
if g then g:close() end
print("ok")
return 0
