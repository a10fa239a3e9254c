-- trainer.core.lazy: the __index of a table whose fields are modules loaded on first use (the
-- `trainer` module, trainer.nn), so that loading the table loads none of them: `trainer
-- check` never makes a context or touches a GPU.
--   setmetatable(t, { __index = require("trainer.core.lazy").index(files) })
-- files: field name -> module name. The first read of a field requires its module and stores
-- it in t; a name files does not hold reads as nil.
local M = {}

function M.index(files)
  return function(t, k)
    local name = files[k]
    if not name then return nil end
    local mod = require(name)
    rawset(t, k, mod)
    return mod
  end
end

return M
