-- A token id outside the embedding's rows stops a CPU run at once with the user error that
-- names the id, its position and the fix (tests/lua/bad_ids_case.lua; the emulated CUDA run of
-- the same recipe, whose ids are checked on the device, is in tests/cudacpu/host_syncs.lua).
local native = require("trainer.native")
local lib = dofile(native.root() .. "/tests/lua/testlib.lua")
local case = dofile(native.root() .. "/tests/lua/bad_ids_case.lua")

return {
  { "bad_id_stops_a_cpu_run", function() case.check(case.run("cpu", lib)) end },
}
