-- tests/ref/make_step_reads_golden.lua — writes tests/data/step_reads_golden.json: the
-- metrics.jsonl objects (without tokens_per_s) of tests/lua/step_reads_case.lua as the run
-- wrote them BEFORE the loss and grad norm were read once per logged step (issue 12 item 3;
-- run once on commit d3e90b4):
--   ./trainer run tests/ref/make_step_reads_golden.lua
local native = require("trainer.native")
local json = require("trainer.core.json")
local case = dofile(native.root() .. "/tests/lua/step_reads_case.lua")
local rows = case.run(1)
local f = assert(io.open(native.root() .. "/tests/data/step_reads_golden.json", "w"))
assert(f:write(json.encode(rows, 1), "\n"))
assert(f:close())
print(("%d rows, final loss %.6f"):format(#rows, rows[#rows].loss))
