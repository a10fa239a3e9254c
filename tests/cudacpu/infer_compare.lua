-- tests/cudacpu/infer_compare.lua — the outputs of `trainer encode` or `trainer classify` on two
-- devices, line by line:
--   ./trainer run tests/cudacpu/infer_compare.lua encode|classify A_FILE B_FILE TOL
-- encode: each line a JSON array (an embedding); every element within TOL of the reference's
-- (B) relative to the row's largest magnitude (an embedding's small elements carry the sums'
-- absolute error, not a relative one). classify: each line {"label", "probabilities"}; the
-- same label and every probability within TOL absolute. The same number of lines, at least
-- one. Prints one line (the worst difference and its line, or the first violation); exits 0
-- when all agree, 1 otherwise.
local json = require("trainer.core.json")

local kind, a_path, b_path, tol = arg[1], arg[2], arg[3], tonumber(arg[4] or "")
local function verdict(ok, text) io.write(text, "\n") os.exit(ok and 0 or 1) end
if not (kind == "encode" or kind == "classify") or not tol then
  verdict(false, "usage: trainer run tests/cudacpu/infer_compare.lua encode|classify A_FILE B_FILE TOL")
end

local function lines(path)
  local f = io.open(path, "rb")
  if not f then verdict(false, "cannot read " .. path) end
  local out = {}
  for l in f:lines() do out[#out + 1] = json.decode(l) end
  f:close()
  return out
end
local a, b = lines(a_path), lines(b_path)
if #a == 0 or #a ~= #b then verdict(false, ("%d lines against %d"):format(#a, #b)) end

local worst, at = 0, 1
for i = 1, #a do
  local x, y = a[i], b[i]
  if kind == "encode" then
    if #x ~= #y or #x == 0 then verdict(false, ("line %d: %d values against %d"):format(i, #x, #y)) end
    local scale = 0
    for k = 1, #y do scale = math.max(scale, math.abs(y[k])) end
    for k = 1, #y do
      local d = math.abs(x[k] - y[k]) / math.max(scale, 1e-30)
      if d > worst then worst, at = d, i end
    end
  else
    if x.label ~= y.label then verdict(false, ("line %d: label %s against %s"):format(i, x.label, y.label)) end
    for name, p in pairs(y.probabilities) do
      local q = x.probabilities[name]
      if type(q) ~= "number" then verdict(false, ("line %d: no probability for %s"):format(i, name)) end
      if math.abs(q - p) > worst then worst, at = math.abs(q - p), i end
    end
  end
end
verdict(worst <= tol, ("%d lines: worst %s difference %.3g at line %d (tolerance %g)"):format(#a,
  kind == "encode" and "relative" or "absolute", worst, at, tol))
