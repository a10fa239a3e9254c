-- Unit tests of what sharing recipes rests on: version order and pins
-- (trainer.recipe.version), the key diff of two resolved recipes (trainer.recipe.diff),
-- and the search folders and listing of trainer.recipe.path. The command line around
-- them is tested in tests/cli/test_recipe_path.sh.
local lib = dofile(require("trainer.native").root() .. "/tests/lua/testlib.lua")
local version = require("trainer.recipe.version")
local diff = require("trainer.recipe.diff")
local rpath = require("trainer.recipe.path")

local function v(s) return assert(version.parse(s)) end

return {
  { "version_order_is_semantic", function()
    local ordered = { "0.3.9", "0.4", "0.4.1", "0.10.0", "1.0.0-alpha", "1.0.0-alpha.1", "1.0.0-alpha.beta",
                      "1.0.0-beta.2", "1.0.0-beta.11", "1.0.0-rc.1", "1.0.0", "1.0.0+build.5" }
    for i = 1, #ordered - 2 do
      assert(version.compare(v(ordered[i]), v(ordered[i + 1])) == -1, ordered[i] .. " < " .. ordered[i + 1])
      assert(version.compare(v(ordered[i + 1]), v(ordered[i])) == 1, ordered[i + 1] .. " > " .. ordered[i])
    end
    assert(version.compare(v("1.0.0"), v("1.0.0+build.5")) == 0, "build metadata is ignored")
    assert(version.compare(v("0.4"), v("0.4.0")) == 0, "a missing part is 0")
  end },
  { "version_malformed", function()
    for _, s in ipairs({ "", "x", "0.4.x", "v0.4", "0..4", "0.4.", "1.2.3.4", "-1" }) do
      local ok, why = version.parse(s)
      assert(ok == nil and why, s)
    end
  end },
  { "pins_each_operator", function()
    local cases = {
      { "0.4.0", ">= 0.4", true }, { "0.3.9", ">= 0.4", false }, { "0.4.0", "> 0.4", false },
      { "0.4.1", "> 0.4", true }, { "0.4.0", "<= 0.4", true }, { "0.4.1", "<= 0.4", false },
      { "0.3.9", "< 0.4", true }, { "0.4.0", "< 0.4", false }, { "0.4.0", "= 0.4", true },
      { "0.4.1", "= 0.4", false }, { "0.5.2", ">=0.4,<0.6", true }, { "0.6.0", ">= 0.4, < 0.6", false },
      { "0.3.0", ">= 0.4, < 0.6", false }, { "0.4.0-rc.1", ">= 0.4", false },
    }
    for _, c in ipairs(cases) do
      local got = version.satisfies(c[1], c[2])
      assert(got == c[3], ("%s against %q: got %s"):format(c[1], c[2], tostring(got)))
    end
  end },
  { "pins_malformed", function()
    for _, p in ipairs({ "0.4", "~> 0.4", "== 0.4", ">= 0.4,", ", >= 0.4", ">= ", "=> 0.4", ">= 0.4.x" }) do
      local ok, why = version.parse_pin(p)
      assert(ok == nil and type(why) == "string" and why:find(("%q"):format(p), 1, true), p .. ": " .. tostring(why))
    end
    assert(version.parse_pin(4) == nil)
  end },
  { "diff_names_innermost_keys", function()
    local a = { optim = { lr = 2e-5, name = "adamw" }, batch = { size = 16 }, lora = { targets = { "query" } },
                name = "a", seed = 1 }
    local b = { optim = { lr = 1e-4, name = "adamw" }, batch = { size = 16, accumulate = 2 },
                lora = { targets = { "query", "value" } }, name = "a" }
    local lines = diff.lines(a, b)
    local want = { "batch.accumulate: unset -> 2", "lora.targets: { \"query\" } -> { \"query\", \"value\" }",
                   "optim.lr: 2e-05 -> 0.0001", "seed: 1 -> unset" }
    assert(#lines == #want, table.concat(lines, "\n"))
    for i = 1, #want do assert(lines[i] == want[i], lines[i]) end
  end },
  { "diff_table_against_value_and_functions", function()
    local f = function() end
    local g = function() end
    local lines = diff.lines({ lora = false, hooks = { on_step = f } }, { lora = { r = 8, alpha = 16 }, hooks = { on_step = f } })
    assert(#lines == 1 and lines[1] == "lora: false -> { alpha = 16, r = 8 }", table.concat(lines, "\n"))
    local by_place = diff.lines({ hooks = { on_step = f } }, { hooks = { on_step = g } })
    assert(#by_place == 1 and by_place[1]:match("^hooks%.on_step: <function .*> %-> <function .*>$"), by_place[1])
    assert(#diff.lines({ a = { 1, 2 } }, { a = { 1, 2 } }) == 0)
  end },
  { "path_lists_and_shadows", function()
    local a, b = lib.tmpdir(), lib.tmpdir()
    lib.write(a .. "/t.lua", "-- team a's t\nreturn {}")
    assert(require("trainer.core.sys").mkdir_p(b .. "/sub"))
    lib.write(b .. "/t.lua", "#!/usr/bin/env trainer\n\n-- t.lua — team b's t\nreturn {}")
    lib.write(b .. "/sub/u.lua", "return {}")
    lib.write(b .. "/.hidden.lua", "return {}")
    local list = rpath.list({ { dir = a, from = "A" }, { dir = b, from = "B" } })
    local names = {}
    for _, e in ipairs(list) do names[#names + 1] = e.name .. "@" .. e.folder.from end
    assert(table.concat(names, " ") == "t.lua@A sub/u.lua@B t.lua@B", table.concat(names, " "))
    assert(list[1].about == "team a's t" and not list[1].shadowed_by)
    assert(list[3].about == "team b's t" and list[3].shadowed_by.dir == a, list[3].about)
    assert(list[2].about == "")
  end },
}
