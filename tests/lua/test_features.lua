-- The feature-matrix ops through trainer.ops (copy_cols_, narrow_cols, cat_cols, abs_diff):
-- values on small known cases and errors naming the op. (The kernels are checked in
-- tests/c/test_features.c; these prove the binding.)
local T = require("trainer.core.tensor")
local ops = require("trainer.core.ops")
local errors = require("trainer.core.errors")

return {
  { "cat_narrow_accumulate", function()
    local u = T.from_table({ { 1, 2 }, { 3, 4 } })
    local v = T.from_table({ { 5 }, { 6 } }, { dtype = "bf16" })
    local cat = ops.cat_cols({ u, v }, { dtype = "f32" })
    local c = cat:tolist()
    assert(#c[1] == 3 and c[1][3] == 5 and c[2][1] == 3 and c[2][3] == 6, table.concat(c[2], ","))
    local mid = ops.narrow_cols(cat, 1, 2):tolist()
    assert(mid[1][1] == 2 and mid[1][2] == 5 and mid[2][2] == 6)
    ops.copy_cols_(cat, 0, u, 1, 1, true)   -- cat[:, 0] += u[:, 1]
    c = cat:tolist()
    assert(c[1][1] == 3 and c[2][1] == 7 and c[1][2] == 2, table.concat(c[1], ","))
    local ok, e = pcall(ops.narrow_cols, cat, 2, 2)
    assert(not ok and errors.is_user_error(e) and errors.message(e):find("do not fit", 1, true), tostring(e))
    u:free() v:free() cat:free()
  end },
  { "abs_diff_and_backward", function()
    local a, b = T.from_table({ 1, -2, 3 }), T.from_table({ 2, -2, 1 })
    local d = ops.abs_diff(a, b):tolist()
    assert(d[1] == 1 and d[2] == 0 and d[3] == 2)
    local da, db = ops.abs_diff_backward(T.from_table({ 10, 10, 10 }), a, b)
    local x, y = da:tolist(), db:tolist()
    assert(x[1] == -10 and x[2] == 0 and x[3] == 10 and y[1] == 10 and y[3] == -10)
    a:free() b:free() da:free() db:free()
  end },
}
