-- trainer.core.utf8: is a Lua string valid UTF-8? Used where text enters trainer (input files
-- of the model commands, data files), so that a bad byte is reported against the file and
-- line it came from, not against the tokenizer that would trip on it later.
-- Valid means RFC 3629: shortest forms only, no surrogates (U+D800..U+DFFF), nothing
-- above U+10FFFF.
local M = {}

local byte = string.byte

-- nil when s is valid UTF-8, else the 1-based position of the first byte of the first
-- invalid sequence.
function M.invalid_at(s)
  if not s:find("[\128-\255]") then return nil end   -- ASCII: the common case, one scan in C
  local i, n = 1, #s
  while i <= n do
    local c = byte(s, i)
    local len, lo, hi   -- lo/hi: the range of the second byte
    lo, hi = 0x80, 0xBF
    if c < 0x80 then len = 1
    elseif c >= 0xC2 and c <= 0xDF then len = 2
    elseif c == 0xE0 then len, lo = 3, 0xA0
    elseif c >= 0xE1 and c <= 0xEC then len = 3
    elseif c == 0xED then len, hi = 3, 0x9F
    elseif c >= 0xEE and c <= 0xEF then len = 3
    elseif c == 0xF0 then len, lo = 4, 0x90
    elseif c >= 0xF1 and c <= 0xF3 then len = 4
    elseif c == 0xF4 then len, hi = 4, 0x8F
    else return i end
    if len > 1 then
      if i + len - 1 > n then return i end
      local c2 = byte(s, i + 1)
      if c2 < lo or c2 > hi then return i end
      for k = i + 2, i + len - 1 do
        local ck = byte(s, k)
        if ck < 0x80 or ck > 0xBF then return i end
      end
    end
    i = i + len
  end
  return nil
end

-- " (byte K, 0xFF)": where in a line or field the bad sequence starts, for messages.
function M.where(s, at)
  return ("byte %d, 0x%02X"):format(at, byte(s, at))
end

return M
