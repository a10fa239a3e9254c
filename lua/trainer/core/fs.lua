-- trainer.core.fs: whether a path names something, and a whole file's text, written once for
-- every module.
--
--   fs.exists(path)     a file or a folder is there
--   fs.is_dir(path)     a folder is there
--   fs.read(path)       the file's bytes; nil, io.open's message ("PATH: why") where it cannot
--                       be opened (a folder opens, and reads as nil)
--   fs.must_read(path)  the file's bytes, or raises the user error "PATH: cannot read (why)"
local errors = require("trainer.core.errors")

local M = {}

function M.is_dir(path)
  return require("trainer.core.sys").is_dir(path)
end

function M.exists(path)
  local f = io.open(path, "rb")
  if f then f:close() return true end
  return M.is_dir(path)
end

function M.read(path)
  local f, err = io.open(path, "rb")
  if not f then return nil, err end
  local text = f:read("*a")
  f:close()
  return text
end

function M.must_read(path)
  local text, err = M.read(path)
  if err then errors.user("%s: cannot read (%s)", path, err) end
  return text
end

return M
