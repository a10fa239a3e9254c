-- trainer.core.fs: whether a path names something, written once for every module.
--
--   fs.exists(path)  a file or a folder is there
--   fs.is_dir(path)  a folder is there
local M = {}

function M.is_dir(path)
  return require("trainer.core.sys").is_dir(path)
end

function M.exists(path)
  local f = io.open(path, "rb")
  if f then f:close() return true end
  return M.is_dir(path)
end

return M
