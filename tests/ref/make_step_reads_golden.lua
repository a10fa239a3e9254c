-- tests/ref/make_step_reads_golden.lua — writes tests/data/step_reads_golden.json: the
-- metrics.jsonl objects (without tokens_per_s) of tests/lua/step_reads_case.lua as the run
-- wrote them BEFORE the loss and grad norm were read once per logged step
-- (run once on commit d3e90b4):
--   ./trainer run tests/ref/make_step_reads_golden.lua
-- With --memory-only it refreshes just the mem_* fields from this build and keeps every
-- other value of the file (the encoder skips padding rows, trainer.nn.packing, so
-- the activations' peak fell while losses and grad norms stayed within the test's 1e-5).
local native = require("trainer.native")
local json = require("trainer.core.json")
local case = dofile(native.root() .. "/tests/lua/step_reads_case.lua")
local path = native.root() .. "/tests/data/step_reads_golden.json"
local rows = case.run(1)
if arg and arg[1] == "--memory-only" then
  local old = json.read(path)
  assert(#old == #rows, ("the golden has %d rows, this run %d"):format(#old, #rows))
  for i, row in ipairs(old) do
    for k, v in pairs(rows[i]) do if k:match("^mem_") then row[k] = v end end
  end
  rows = old
end
local tmp = path .. ".tmp"
local f = assert(io.open(tmp, "w"))
assert(f:write(json.encode(rows, 1), "\n"))
assert(f:close())
assert(os.rename(tmp, path))
print(("%d rows, final loss %.6f"):format(#rows, rows[#rows].loss))
