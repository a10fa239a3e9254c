-- tests/cudacpu/train_compare.lua — two runs' metrics.jsonl, step by step, within tolerances:
--   ./trainer run tests/cudacpu/train_compare.lua RUN_A RUN_B FIELD:TOL[,FIELD:TOL...]
-- e.g. loss:1e-5,grad_norm:1e-5,skipped:0. TOL is relative (|a - b| / |b|, b the second run:
-- the reference); 0 means the same value (bitwise for numbers: metrics.jsonl writes the
-- shortest decimal that reads back exactly, so equal text is equal bits). Both runs must have
-- the same steps in the same order, and a field absent from one row must be absent from the
-- other. Prints one line (the worst difference per field and where; for an exact field, the
-- first step that differs)
-- and exits 0 when every field of every step is within its tolerance, 1 otherwise.
local outputs = require("trainer.train.outputs")

local a_dir, b_dir, spec = arg[1], arg[2], arg[3]
if not (a_dir and b_dir and spec) then
  io.write("usage: trainer run tests/cudacpu/train_compare.lua RUN_A RUN_B FIELD:TOL[,...]\n")
  os.exit(1)
end
local fields = {}
for f, tol in spec:gmatch("([%w_]+):([^,]+)") do fields[#fields + 1] = { name = f, tol = assert(tonumber(tol), tol) } end

local function verdict(ok, text) io.write(text, "\n") os.exit(ok and 0 or 1) end

local okA, a = pcall(outputs.read_metrics, a_dir)
local okB, b = pcall(outputs.read_metrics, b_dir)
if not okA then verdict(false, "cannot read " .. a_dir .. "/metrics.jsonl: " .. tostring(a)) end
if not okB then verdict(false, "cannot read " .. b_dir .. "/metrics.jsonl: " .. tostring(b)) end
if #a == 0 or #a ~= #b then verdict(false, ("%d steps against %d"):format(#a, #b)) end

local parts = {}
for _, f in ipairs(fields) do
  local worst, at = 0, nil
  for i = 1, #a do
    local x, y = a[i][f.name], b[i][f.name]
    if a[i].step ~= b[i].step then verdict(false, ("row %d is step %s against %s"):format(i, a[i].step, b[i].step)) end
    if (x == nil) ~= (y == nil) or type(x) ~= type(y) then
      verdict(false, ("step %d: %s is %s against %s"):format(a[i].step, f.name, tostring(x), tostring(y)))
    end
    if type(x) == "number" and x ~= y then
      local r = math.abs(x - y) / math.max(math.abs(y), 1e-30)
      if r > worst and not (f.tol == 0 and at) then worst, at = r, i end   -- exact: the first difference
    elseif x ~= y then
      verdict(false, ("step %d: %s is %s against %s"):format(a[i].step, f.name, tostring(x), tostring(y)))
    end
  end
  if worst > f.tol or (f.tol == 0 and at) then
    verdict(false, ("%s at step %d: %.17g against %.17g (relative %.3g, tolerance %g)"):format(f.name, a[at].step,
      a[at][f.name], b[at][f.name], worst, f.tol))
  end
  parts[#parts + 1] = at and ("%s worst %.3g at step %d"):format(f.name, worst, a[at].step) or (f.name .. " identical")
end
verdict(true, ("%d steps: %s"):format(#a, table.concat(parts, ", ")))
