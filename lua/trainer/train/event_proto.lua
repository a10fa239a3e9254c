-- trainer.train.event_proto: TensorBoard's Event protocol buffers, encoded by hand, each in
-- its TFRecord frame (core/io/tfrecord.c) ready to append to an event file.
--
--   event_proto.file_version(wall_time)              Event{ file_version = "brain.Event:2" }
--   event_proto.scalars(wall_time, step, list)       Event{ summary = { value = list } },
--                                                    list: { { tag, number }, ... } as simple_value
--   event_proto.text(wall_time, step, tag, text)     Event{ summary = { value = { a text
--                                                    plugin tensor (DT_STRING, shape []) } } }
--   event_proto.session_start(wall_time, step)       Event{ session_log = { status = START } }
-- Each returns the framed record as a Lua string. Reading back (for a resume's cut-back):
--   event_proto.records(text)   -> list of { event = bytes, first = i, last = j }: the
--                                  whole records of an event file whose CRCs check, up to
--                                  the first that is cut off or damaged
--   event_proto.step_of(event)  -> the Event's step (0 when it has none)
--
-- Why no protobuf runtime: only these few messages are written, never read, and they use
-- two encodings, varints (field keys, lengths, step, enums) and length-delimited bytes
-- (strings and nested messages), plus a fixed 64-bit double (wall_time) and 32-bit float
-- (simple_value). That is a page of code; a runtime with its generated code would be a
-- build dependency for it. The field numbers are those of TensorBoard's
-- tensorboard/compat/proto/{event,summary,tensor,tensor_shape,types}.proto:
--   Event:           wall_time 1 (double), step 2 (int64), file_version 3 (string),
--                    summary 5 (Summary), session_log 7 (SessionLog)
--   Summary:         value 1 (repeated Value)
--   Summary.Value:   tag 1 (string), simple_value 2 (float), tensor 8 (TensorProto),
--                    metadata 9 (SummaryMetadata)
--   SummaryMetadata: plugin_data 1 (PluginData{ plugin_name 1 (string) })
--   TensorProto:     dtype 1 (enum, DT_STRING = 7), tensor_shape 2 (TensorShapeProto),
--                    string_val 8 (repeated bytes)
--   SessionLog:      status 1 (enum, START = 1)
-- Protocol buffers are little-endian; the float and double bytes are reversed on a
-- big-endian host.
local ffi = require("ffi")
local C = require("trainer.core.ffi")

local M = {}

M.FILE_VERSION = "brain.Event:2"

local WIRE_VARINT, WIRE_FIXED64, WIRE_BYTES, WIRE_FIXED32 = 0, 1, 2, 5
local DT_STRING, SESSION_START = 7, 1

local char, floor = string.char, math.floor

-- A non-negative integer below 2^53 as a base-128 varint, low group first.
local function varint(n)
  local out = {}
  repeat
    local low = n % 128
    n = floor(n / 128)
    out[#out + 1] = char(n > 0 and low + 128 or low)
  until n == 0
  return table.concat(out)
end

local function key(field, wire) return varint(field * 8 + wire) end

local function bytes_field(field, s) return key(field, WIRE_BYTES) .. varint(#s) .. s end
local function varint_field(field, n) return key(field, WIRE_VARINT) .. varint(n) end

local little = ffi.abi("le")
local fbuf, dbuf = ffi.new("float[1]"), ffi.new("double[1]")
local function le(s) return little and s or s:reverse() end

local function float_field(field, x)
  fbuf[0] = x
  return key(field, WIRE_FIXED32) .. le(ffi.string(fbuf, 4))
end

local function double_field(field, x)
  dbuf[0] = x
  return key(field, WIRE_FIXED64) .. le(ffi.string(dbuf, 8))
end

-- The TFRecord frame around one encoded message.
local frame_cap, frame_buf = 0, nil
local function frame(msg)
  local need = #msg + C.TR_TFRECORD_OVERHEAD
  if need > frame_cap then
    frame_cap = math.max(need, 2 * frame_cap, 4096)
    frame_buf = ffi.new("uint8_t[?]", frame_cap)
  end
  local n = C.tr_tfrecord_frame(frame_buf, msg, #msg)
  return ffi.string(frame_buf, n)
end

local function event(wall_time, step, body)
  if step < 0 or step ~= floor(step) then error("event_proto: step must be a non-negative integer, got " .. step, 2) end
  return frame(double_field(1, wall_time) .. varint_field(2, step) .. body)
end

function M.file_version(wall_time)
  return event(wall_time, 0, bytes_field(3, M.FILE_VERSION))
end

function M.scalars(wall_time, step, list)
  local values = {}
  for i, tv in ipairs(list) do
    values[i] = bytes_field(1, bytes_field(1, tv[1]) .. float_field(2, tv[2]))
  end
  return event(wall_time, step, bytes_field(5, table.concat(values)))
end

function M.text(wall_time, step, tag, text)
  local metadata = bytes_field(1, bytes_field(1, "text"))
  local tensor = varint_field(1, DT_STRING) .. bytes_field(2, "") .. bytes_field(8, text)
  local value = bytes_field(1, tag) .. bytes_field(9, metadata) .. bytes_field(8, tensor)
  return event(wall_time, step, bytes_field(5, bytes_field(1, value)))
end

function M.session_start(wall_time, step)
  return event(wall_time, step, bytes_field(7, varint_field(1, SESSION_START)))
end

-- ---------------------------------------------------------------- reading back
local function u32le(s, i)
  local a, b, c, d = s:byte(i, i + 3)
  return a + b * 2 ^ 8 + c * 2 ^ 16 + d * 2 ^ 24
end

local function masked_crc(s, i, n)
  return tonumber(C.tr_crc32c_mask(C.tr_crc32c(0, ffi.cast("const uint8_t *", s) + (i - 1), n)))
end

function M.records(text)
  local list, pos, size = {}, 1, #text
  while pos + 11 <= size do
    local n = 0
    for i = pos + 7, pos, -1 do n = n * 256 + text:byte(i) end
    if u32le(text, pos + 8) ~= masked_crc(text, pos, 8) or pos + 15 + n > size then break end
    if u32le(text, pos + 12 + n) ~= masked_crc(text, pos + 12, n) then break end
    list[#list + 1] = { event = text:sub(pos + 12, pos + 11 + n), first = pos, last = pos + 15 + n }
    pos = pos + 16 + n
  end
  return list
end

-- A varint at i of s: its value and the index after it (nil past the end).
local function read_varint(s, i)
  local v, mul = 0, 1
  while i <= #s do
    local b = s:byte(i)
    v, i, mul = v + (b % 128) * mul, i + 1, mul * 128
    if b < 128 then return v, i end
  end
  return nil
end

function M.step_of(msg)
  local i = 1
  while i <= #msg do
    local k, j = read_varint(msg, i)
    if not k then break end
    local field, wire = floor(k / 8), k % 8
    if wire == WIRE_VARINT then
      local v, after = read_varint(msg, j)
      if not v then break end
      if field == 2 then return v end
      i = after
    elseif wire == WIRE_FIXED64 then i = j + 8
    elseif wire == WIRE_FIXED32 then i = j + 4
    elseif wire == WIRE_BYTES then
      local n, after = read_varint(msg, j)
      if not n then break end
      i = after + n
    else break end
  end
  return 0
end

M.varint = varint   -- for tests

return M
