-- JSON through jansson: round trips, null, errors that name the source.
local json = require("trainer.json")
local errors = require("trainer.errors")

return {
  { "decode_types", function()
    local v = json.decode('{"a": [1, 2.5, "x", true, false, null], "b": {"c": -3}}')
    assert(v.a[1] == 1 and v.a[2] == 2.5 and v.a[3] == "x" and v.a[4] == true and v.a[5] == false)
    assert(v.a[6] == json.null and v.b.c == -3)
  end },
  { "encode_sorted_and_round_trip", function()
    local s = json.encode({ b = 1, a = { 1, 2, 3 }, c = { d = "é" }, e = 0.1 })
    assert(s == '{"a":[1,2,3],"b":1,"c":{"d":"é"},"e":0.10000000000000001}', s)
    local back = json.decode(s)
    assert(back.e == 0.1 and back.c.d == "é")
  end },
  { "decode_error_names_source", function()
    local ok, e = pcall(json.decode, '{"a": [1, }', "config.json")
    assert(not ok and errors.is_user_error(e))
    assert(e.msg:find("config.json: invalid JSON at line 1", 1, true), e.msg)
  end },
  { "encode_refuses_nan_and_functions", function()
    assert(not pcall(json.encode, { x = 0 / 0 }))
    assert(not pcall(json.encode, { f = print }))
    local t = {}
    t.self = t
    assert(not pcall(json.encode, t))
  end },
}
