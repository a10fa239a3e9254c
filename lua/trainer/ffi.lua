-- trainer.ffi: the one place C and Lua meet. Reads core/trainer.h, follows its #include
-- lines, drops every other '#' line, and feeds the result to ffi.cdef; returns the C
-- namespace (the runtime is linked into the binary with its symbols exported).
local ffi = require("ffi")
local native = require("trainer.native")

local function header_text()
  local root = native.root()
  local out, seen = {}, {}
  local function include(name)
    if seen[name] then return end
    seen[name] = true
    local path = root .. "/core/" .. name
    local f = io.open(path, "r")
    if not f then error(("trainer: cannot read %s: the installation is incomplete (reinstall with make install)"):format(path), 0) end
    for line in f:lines() do
      local inc = line:match('^%s*#%s*include%s*"([^"]+)"')
      if inc then include(inc)
      elseif not line:match("^%s*#") then out[#out + 1] = line end
    end
    f:close()
  end
  include("trainer.h")
  return table.concat(out, "\n")
end

ffi.cdef(header_text())

return ffi.C
