-- trainer.cli.check_diff: `trainer check --diff A.lua B.lua [key=value ...]`.
-- Resolves both recipes (extends, defaults, and the same overrides applied to each) and
-- prints one line per key whose resolved value differs, `key: A-value -> B-value`
-- (trainer.recipe.diff), on stdout, sorted by key. Exit 0 whether or not they differ, so
-- that exit 1 keeps meaning a user error (a recipe that does not load or check); a script
-- tells "the same" by empty stdout. stderr gets a one-line summary.
local errors = require("trainer.core.errors")

local M = {}

M.usage = "trainer check --diff A.lua B.lua [key=value ...]"

-- The two recipe names and the overrides in args (args[1] is "check").
local function parse(args)
  local paths, overrides = {}, {}
  for i = 2, #args do
    local a = args[i]
    if a:sub(1, 2) == "--" then
      if a ~= "--diff" and a ~= "--trust" then errors.user("check --diff takes no option %s: %s", a, M.usage) end
    elseif #paths < 2 and not (a:find("=", 1, true) and not a:match("%.lua$")) then
      paths[#paths + 1] = a
    elseif a:find("=", 1, true) then
      overrides[#overrides + 1] = a
    else
      errors.user("check --diff: unexpected argument %q: after the two recipes come only key=value overrides, "
        .. "applied to both: %s", a, M.usage)
    end
  end
  if #paths < 2 then
    errors.user("check --diff needs two recipes: %s (e.g. trainer check --diff recipes/minilm_sts_lora.lua "
      .. "recipes/minilm_sweparaphrase_lora.lua)", M.usage)
  end
  return paths[1], paths[2], overrides
end

function M.run(args)
  local a, b, overrides = parse(args)
  local recipe = require("trainer.recipe")
  local ra, rb = recipe.load(a, overrides), recipe.load(b, overrides)
  local lines = require("trainer.recipe.diff").lines(ra.recipe, rb.recipe)
  for _, line in ipairs(lines) do io.write(line, "\n") end
  if #lines == 0 then
    io.stderr:write(("%s and %s resolve to the same recipe\n"):format(ra.path, rb.path))
  else
    io.stderr:write(("%s -> %s: %d key%s differ%s\n"):format(ra.path, rb.path, #lines, #lines == 1 and "" or "s",
      #lines == 1 and "s" or ""))
  end
  return 0
end

return M
