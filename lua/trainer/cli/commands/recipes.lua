-- `trainer recipes`: every .lua file on the recipe path (TRAINER_RECIPE_PATH, then the
-- built-in recipes/; trainer.recipe.path), in search order, one a line:
--   NAME  FOLDER (WHERE FROM)  first comment line
-- NAME is what `trainer NAME`, `extends` and `require` find it by. A name that an earlier
-- folder also holds is shadowed (those find the earlier file) and says by which folder.
-- Modules that recipes require live on the same path and are listed too.
local usage = "trainer recipes                           the recipes on TRAINER_RECIPE_PATH and recipes/"

return {
  usage = usage,
  run = function(args)
    local errors = require("trainer.core.errors")
    local sys = require("trainer.core.sys")
    local rpath = require("trainer.recipe.path")
    if args[2] ~= nil then errors.user("recipes takes no arguments, got %q\nusage: %s", args[2], usage) end
    for _, f in ipairs(rpath.folders()) do
      if f.from == rpath.variable and not sys.is_dir(f.dir) then
        io.stderr:write(("warning: %s: %s: no such folder\n"):format(rpath.variable, f.dir))
      end
    end
    local list = rpath.list()
    local rows, width = {}, { 0, 0 }
    for i, e in ipairs(list) do
      local about = e.about
      if e.shadowed_by then about = ("(shadowed by %s) %s"):format(e.shadowed_by.dir, about) end
      rows[i] = { e.name, ("%s (%s)"):format(e.folder.dir, e.folder.from), about }
      for c = 1, 2 do width[c] = math.max(width[c], #rows[i][c]) end
    end
    for _, r in ipairs(rows) do
      io.write((("%-" .. width[1] .. "s  %-" .. width[2] .. "s  %s"):format(r[1], r[2], r[3]):gsub("%s+$", "")), "\n")
    end
    if #rows == 0 then
      io.stderr:write(("%s\n"):format(rpath.not_found(rpath.folders(), ".lua file")))
    end
    return 0
  end,
}
