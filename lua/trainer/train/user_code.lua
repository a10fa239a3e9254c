-- trainer.train.user_code: calling a recipe's own functions (hooks.on_step/on_eval/on_save, loop,
-- eval.fn). An error raised by the recipe's code is the recipe's, not a bug in trainer: it
-- becomes a user error (exit 1) that names the recipe file and line, the function trainer
-- was calling, and the recipe's frames of the traceback. An error raised inside trainer's
-- own code (lua/trainer/) stays an internal error with its full traceback, and a
-- trainer.errors user error passes through unchanged.
--
--   user_code.call("hooks.on_step", fn, t, m)   -> fn's results
local errors = require("trainer.core.errors")
local native = require("trainer.native")

local M = {}

-- Whether a chunk source ("@path") is trainer's own Lua code rather than a recipe's.
local function is_trainer_source(source)
  local root = native.root()
  if type(source) ~= "string" or source:sub(1, 1) ~= "@" then return true end
  local path = source:sub(2)
  return path:sub(1, #root + 12) == root .. "/lua/trainer" or path:match("^lua/trainer/") ~= nil
end
M.is_trainer_source = is_trainer_source

-- The frames of the stack, from `level` outwards, that belong to recipe code.
local function recipe_frames(level)
  local frames = {}
  while true do
    local info = debug.getinfo(level, "Sln")
    if not info then break end
    if info.what ~= "C" and not is_trainer_source(info.source) and info.currentline > 0 then
      frames[#frames + 1] = ("%s:%d"):format(info.source:sub(2), info.currentline)
    end
    level = level + 1
  end
  return frames
end

local function pack(...) return { n = select("#", ...), ... } end

function M.call(what, fn, ...)
  local args = pack(...)
  local ok, result = xpcall(function() return pack(fn(unpack(args, 1, args.n))) end, function(e)
    if errors.is_user_error(e) then return e end
    -- the first Lua frame above the handler is the one that raised the error
    local level = 2
    local info = debug.getinfo(level, "Sl")
    while info and info.what == "C" do
      level = level + 1
      info = debug.getinfo(level, "Sl")
    end
    if not info or is_trainer_source(info.source) then return debug.traceback(tostring(e), 2) end
    local msg = type(e) == "string" and e or tostring(e)
    -- the full path (short_src is cut at 60 characters)
    local where = ("%s:%d"):format(info.source:sub(2), info.currentline)
    if msg:sub(1, #info.short_src) == info.short_src then msg = msg:sub(#info.short_src + 1):gsub("^:%d+: ", "") end
    msg = where .. ": " .. msg
    local frames = recipe_frames(level)
    return setmetatable({ recipe_error = true, msg = msg, where = where, frames = frames }, { __tostring =
      function(x) return x.msg end })
  end)
  if ok then return unpack(result, 1, result.n) end
  if type(result) == "table" and result.recipe_error then
    errors.user("%s\n  The recipe's %s raised this error at %s: it is the recipe's code, not trainer's; fix it "
      .. "there (the recipe's frames, innermost first: %s).", result.msg, what, result.where,
      table.concat(result.frames, " <- "))
  end
  error(result, 0)
end

return M
