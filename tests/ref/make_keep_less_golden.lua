-- tests/ref/make_keep_less_golden.lua — writes tests/data/keep_less_golden.json: the loss,
-- LoRA gradient digests and activation bytes of tests/lua/keep_less_case.lua, as the runtime
-- computed them BEFORE the modules kept less (run once on commit d601cd5):
--   ./trainer run tests/ref/make_keep_less_golden.lua
-- test_keep_less.lua holds the new code to the same losses and gradients (1e-6) with fewer
-- activation bytes.
local native = require("trainer.native")
local case = dofile(native.root() .. "/tests/lua/keep_less_case.lua")
local json = require("trainer.core.json")
assert(case.present(), case.dir .. " is absent (make fetch-models)")
local out = { every_layer = case.run({ every = 1 }), plain = case.run(false) }
local f = assert(io.open(native.root() .. "/tests/data/keep_less_golden.json", "w"))
assert(f:write(json.encode(out, 1), "\n"))
assert(f:close())
print(("saved: checkpointed %d, plain %d; peak: checkpointed %d, plain %d"):format(out.every_layer.saved,
  out.plain.saved, out.every_layer.peak, out.plain.peak))
