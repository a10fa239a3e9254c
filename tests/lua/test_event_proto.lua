-- trainer.train.event_proto: varints, and each Event message byte for byte against its
-- encoding worked out by hand from TensorBoard's .proto field numbers (the comment at the
-- top of event_proto.lua), inside a TFRecord frame whose CRCs are checked here.
-- tests/cli/test_tensorboard.sh reads whole runs back with TensorBoard itself.
local ffi = require("ffi")
local C = require("trainer.core.ffi")
local proto = require("trainer.train.event_proto")

local function hex(s) return (s:gsub(".", function(c) return ("%02x"):format(c:byte()) end)) end
local function u32le(s, i) return s:byte(i) + s:byte(i + 1) * 2 ^ 8 + s:byte(i + 2) * 2 ^ 16 + s:byte(i + 3) * 2 ^ 24 end

-- The Event inside one TFRecord, after checking the frame: length, both masked CRCs.
local function unframe(rec)
  local n = 0
  for i = 8, 1, -1 do n = n * 256 + rec:byte(i) end
  assert(#rec == n + 16, ("record of %d bytes, length field %d"):format(#rec, n))
  local data = rec:sub(13, 12 + n)
  local function masked(s) return tonumber(C.tr_crc32c_mask(C.tr_crc32c(0, s, #s))) end
  assert(u32le(rec, 9) == masked(rec:sub(1, 8)), "length CRC")
  assert(u32le(rec, 13 + n) == masked(data), "data CRC")
  return data
end

-- wall_time 0.5 (double 0x3FE0000000000000, little-endian) as field 1, fixed64
local WALL = "09" .. "000000000000e03f"

return {
  { "varints", function()
    local cases = { [0] = "00", [1] = "01", [127] = "7f", [128] = "8001", [300] = "ac02", [16384] = "808001",
      [2 ^ 40] = "8080808080" .. "20" }
    for n, want in pairs(cases) do
      assert(hex(proto.varint(n)) == want, ("varint(%d) = %s, expected %s"):format(n, hex(proto.varint(n)), want))
    end
  end },
  { "file_version", function()
    local ev = unframe(proto.file_version(0.5))
    -- step 0 (field 2), file_version (field 3, 13 bytes)
    assert(hex(ev) == WALL .. "1000" .. "1a0d" .. hex("brain.Event:2"), hex(ev))
  end },
  { "scalars", function()
    local ev = unframe(proto.scalars(0.5, 3, { { "a", 1.0 }, { "bc", -2.5 } }))
    -- Value{ tag 1 "a", simple_value 2 float 1.0 = 0x3F800000 } and { "bc", -2.5 = 0xC0200000 }
    local v1 = "0a0161" .. "150000803f"
    local v2 = "0a026263" .. "15000020c0"
    local summary = "0a08" .. v1 .. "0a09" .. v2
    assert(hex(ev) == WALL .. "1003" .. "2a15" .. summary, hex(ev))
  end },
  { "scalar_is_float32", function()
    local ev = unframe(proto.scalars(0.5, 1, { { "x", 0.1 } }))
    local f = ffi.new("float[1]")
    ffi.copy(f, ev:sub(-4), 4)
    assert(f[0] == ffi.new("float", 0.1), "0.1 as float32")
  end },
  { "text", function()
    local ev = unframe(proto.text(0.5, 0, "recipe", "hi"))
    -- Value{ tag 1, metadata 9 { plugin_data 1 { plugin_name 1 "text" } },
    --        tensor 8 { dtype 1 = DT_STRING 7, tensor_shape 2 = {} (a scalar), string_val 8 } }
    local value = "0a06" .. hex("recipe") .. "4a08" .. "0a06" .. "0a04" .. hex("text") .. "4208" .. "0807" .. "1200" .. "4202"
      .. hex("hi")
    assert(hex(ev) == WALL .. "1000" .. "2a1e" .. "0a1c" .. value, hex(ev))
  end },
  { "session_start", function()
    local ev = unframe(proto.session_start(0.5, 5))
    -- session_log is field 7 of Event; SessionLog{ status 1 = START 1 }
    assert(hex(ev) == WALL .. "1005" .. "3a02" .. "0801", hex(ev))
  end },
  { "records_and_steps", function()
    local text = proto.file_version(0.5) .. proto.scalars(0.5, 1, { { "a", 1 } }) .. proto.session_start(0.5, 2)
      .. proto.text(0.5, 300, "recipe", "x")
    local list = proto.records(text)
    assert(#list == 4, #list .. " records")
    local steps = {}
    for i, r in ipairs(list) do steps[i] = proto.step_of(r.event) end
    assert(table.concat(steps, ",") == "0,1,2,300", table.concat(steps, ","))
    assert(list[4].last == #text and list[2].first == list[1].last + 1, "record bounds")
    -- a torn last record, and a damaged byte, end the list before them
    assert(#proto.records(text:sub(1, -3)) == 3, "torn tail kept")
    local k = list[3].first + 13
    local bad = text:sub(1, k - 1) .. string.char((text:byte(k) + 1) % 256) .. text:sub(k + 1)
    assert(#proto.records(bad) == 2, "damaged record kept")
  end },
  { "bad_step", function()
    assert(not pcall(proto.scalars, 0.5, -1, {}), "a negative step is refused")
    assert(not pcall(proto.scalars, 0.5, 1.5, {}), "a fractional step is refused")
  end },
}
