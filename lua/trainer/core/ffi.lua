-- trainer.core.ffi: the one place C and Lua meet. Reads core/trainer.h, follows its #include
-- lines, drops every other '#' line, and feeds the result to ffi.cdef; returns the C
-- namespace (the runtime is linked into the binary with its symbols exported).
local ffi = require("ffi")
local native = require("trainer.native")

-- core/ and its folders by concern (docs/ARCHITECTURE.md), searched in this order.
local header_dirs = { "", "base/", "mem/", "ctx/", "tensor/", "cpu_device/", "io/", "tokenizer/", "ops/", "cuda_device/", "binding/", "dist/", "sys/" }

local function header_text()
  local root = native.root()
  local out, seen = {}, {}
  local function include(name)
    if seen[name] then return end
    seen[name] = true
    -- Headers are included by bare name and live in core/ or one of its folders (the C
    -- build puts each folder on the include path the same way).
    local path, f
    for _, dir in ipairs(header_dirs) do
      path = root .. "/core/" .. dir .. name
      f = io.open(path, "r")
      if f then break end
    end
    path = f and path or (root .. "/core/" .. name)
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

-- The second block: zlib's few functions the Lua layer calls directly (linked into the
-- binary), declared here once so that no other module needs a private ffi.cdef:
-- trainer_state files are gzip streams (trainer.outputs writes and copies them,
-- trainer.train.trainer_state reads them). The system calls are the runtime's own
-- (core/sys/sys.h, through trainer.core.sys).
ffi.cdef([[
typedef struct gzFile_s *gzFile;
gzFile gzopen(const char *path, const char *mode);
int gzwrite(gzFile file, const void *buf, unsigned len);
int gzread(gzFile file, void *buf, unsigned len);
int gzclose(gzFile file);
]])

return ffi.C
