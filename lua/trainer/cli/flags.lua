-- trainer.cli.flags: one command-line option of the commands' argument lists.
local errors = require("trainer.core.errors")

local M = {}

-- The option at args[i] ("--name", "--name=value", or "--name value" for a flag of kind
-- "value"), against known (name -> "value" | "bool"). unknown(name) is called for a name
-- known lacks (it raises the command's user error); a "value" flag without its value is a
-- user error followed by the usage text. Returns the name, its value (true for a bool flag
-- given bare) and the index of the argument after it.
function M.take(args, i, known, unknown, usage)
  local name, value = args[i]:match("^%-%-([%w%-]+)=(.*)$")
  name = name or args[i]:sub(3)
  local kind = known[name]
  if not kind then unknown(name) end
  if kind == "value" and value == nil then
    i = i + 1
    value = args[i]
    if value == nil then errors.user("option --%s needs a value\n%s", name, usage) end
  end
  return name, value or true, i + 1
end

return M
