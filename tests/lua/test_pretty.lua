-- The two printers: deterministic literals and the REPL display.
local pretty = require("trainer.cli.pretty")
local suggest = require("trainer.recipe.suggest")

return {
  { "literal_sorted_and_loadable", function()
    local v = { b = 1, a = { 3, 2, 1 }, ["with space"] = "x\ny", c = { d = true, e = 2.5e-5 } }
    local s = pretty.literal(v)
    assert(s == pretty.literal(v))
    assert(s:find("a = { 3, 2, 1 }", 1, true), s)
    assert(s:find("[\"with space\"] = \"x\\ny\"", 1, true), s)
    local back = loadstring("return " .. s)()
    assert(back.c.e == 2.5e-5 and back["with space"] == "x\ny" and back.a[3] == 1)
    assert(s:find("a =") < s:find("b =") and s:find("b =") < s:find("c ="))
  end },
  { "numbers_round_trip", function()
    for _, x in ipairs({ 0.1, 1 / 3, 2e-5, 1e300, -7, 123456789012 }) do
      assert(tonumber(pretty.number(x)) == x, pretty.number(x))
    end
    assert(pretty.number(2e-5) == "2e-05")
  end },
  { "functions_named_by_source", function()
    local f = loadstring("return function() end", "@recipes/x.lua")()
    assert(pretty.literal({ f = f }):find("<function recipes/x.lua:1>", 1, true))
  end },
  { "show_survives_cycles_and_depth", function()
    local t = { a = 1 }
    t.self = t
    assert(pretty.show(t):find("<cycle>", 1, true))
    local deep = { a = { b = { c = { d = { e = 1 } } } } }
    assert(pretty.show(deep):find("{...}", 1, true))
    local many = {}
    for i = 1, 100 do many[i] = i end
    assert(pretty.show(many):find("(60 more)", 1, true))
  end },
  { "show_uses_tostring", function()
    local obj = setmetatable({}, { __tostring = function() return "tensor(...)" end })
    assert(pretty.show({ obj }) == "{ tensor(...) }")
  end },
  { "suggest_edit_distance", function()
    assert(suggest.distance("lorra", "lora") == 1)
    assert(suggest.distance("optmi", "optim") == 1)   -- transposition
    assert(suggest.closest("lorra", { "lora", "loss", "log" }) == "lora")
    assert(suggest.closest("zzzzzz", { "lora", "loss" }) == nil)
  end },
}
