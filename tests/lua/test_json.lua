-- JSON through jansson: round trips, null, errors that name the source.
local json = require("trainer.core.json")
local errors = require("trainer.core.errors")

return {
  { "decode_types", function()
    local v = json.decode('{"a": [1, 2.5, "x", true, false, null], "b": {"c": -3}}')
    assert(v.a[1] == 1 and v.a[2] == 2.5 and v.a[3] == "x" and v.a[4] == true and v.a[5] == false)
    assert(v.a[6] == json.null and v.b.c == -3)
  end },
  { "encode_sorted_and_round_trip", function()
    local s = json.encode({ b = 1, a = { 1, 2, 3 }, c = { d = "é" }, e = 0.1 })
    assert(s == '{"a":[1,2,3],"b":1,"c":{"d":"é"},"e":0.1}', s)
    local back = json.decode(s)
    assert(back.e == 0.1 and back.c.d == "é")
  end },
  { "reals_shortest_that_read_back", function()
    -- the shortest text that reads back: "lora_dropout": 0.1, not 0.10000000000000001
    local vals = { 0.1, 0.2, 1 / 3, 2e-5, 5e-4, 1.5e16, 1e300, -2.5e-300, 7.564012289047241, 0.30000000000000004,
                   123.456, 1e21, 1.7976931348623157e308, -0.1, 3.0000000000000004, 2 ^ 60, 1e-7 }
    local s = json.encode(vals)
    assert(s == "[0.1,0.2,0.3333333333333333,2e-5,0.0005,1.5e16,1e300,-2.5e-300,7.564012289047241,"
      .. "0.30000000000000004,123.456,1e21,1.7976931348623157e308,-0.1,3.0000000000000004,1.152921504606847e18,"
      .. "1e-7]", s)
    local back = json.decode(s)
    for i, v in ipairs(vals) do assert(back[i] == v, ("%d: %.17g read back as %.17g"):format(i, v, back[i])) end
    -- numbers inside strings are text, not reals
    local t = json.encode({ s = "0.10000000000000001 \"1.5\" \\", x = { 0.25, { y = 0.1 } } }, 2)
    assert(t:find('"s": "0.10000000000000001 \\"1.5\\" \\\\"', 1, true), t)
    assert(t:find("0.25,", 1, true) and t:find('"y": 0.1\n', 1, true), t)
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
