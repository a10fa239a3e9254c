-- Unit tests of trainer.recipe.sandbox: which files are trusted, what a recipe's functions
-- may reach during training, and the static list of denied uses `trainer check` prints.
-- (tests/cli/test_recipe_sandbox.sh runs the same rules end to end.)
local lib = dofile(require("trainer.native").root() .. "/tests/lua/testlib.lua")
local sandbox = require("trainer.recipe.sandbox")
local recipe = require("trainer.recipe")
local errors = require("trainer.core.errors")
local native = require("trainer.native")

local minimal = 'model = { arch = "bert", config = "tiny", init = "random" }'

-- The hooks of a recipe chain: child c.lua (named directly) extends p.lua whose on_step
-- returns what fn_body returns.
local function chain(fn_body, opts)
  local d = lib.tmpdir()
  lib.write(d .. "/p.lua", "return { hooks = { on_step = function(t) " .. fn_body .. " end } }")
  lib.write(d .. "/c.lua", 'return { extends = "p.lua", ' .. minimal .. ' }')
  return recipe.load(d .. "/c.lua", nil, opts), d
end

local function refused(fn, needle)
  local ok, e = pcall(fn)
  assert(not ok, "expected a refusal")
  assert(errors.is_user_error(e), tostring(e))
  assert(e.msg:find(needle, 1, true), e.msg)
end

return {
  { "scan_finds_denied_uses_not_comments_or_strings", function()
    local uses = sandbox.scan([[
-- os.execute("in a comment")
local s = "os.execute in a string"
local x = [==[ io.popen ]==]
return { hooks = { on_step = function(t)
  os.execute("ls")       -- line 5
  local f = io.open("x", "w")
  local y = t.os.execute  -- a field, not the library
  local ffi = require("ffi")
  debug.traceback()
  os.getenv("HOME")
end } }
]])
    local got = {}
    for _, u in ipairs(uses) do got[#got + 1] = u.what .. "@" .. u.line end
    assert(table.concat(got, " ") == 'os.execute@5 io.open@6 require("ffi")@8 debug@9', table.concat(got, " "))
  end },
  { "trust_rules", function()
    local root = native.root()
    assert(sandbox.trust_of(root .. "/recipes/minilm_sts_lora.lua", {}) == true)
    local d = lib.tmpdir()
    lib.write(d .. "/x.lua", "return {}")
    assert(sandbox.trust_of(d .. "/x.lua", {}) == false)
    assert(sandbox.trust_of(d .. "/x.lua", { direct = d .. "/x.lua" }) == true)
    assert(sandbox.trust_of(d .. "/x.lua", { all = true }) == true)
    local ok, why = sandbox.trust_of(d .. "/x.lua", { via = "TRAINER_RECIPE_PATH" })
    assert(not ok and why:find("TRAINER_RECIPE_PATH", 1, true), why)
  end },
  { "untrusted_hook_gets_trainer_api_only", function()
    local r, d = chain('return trainer.version, os.getenv("HOME")')
    assert(d)
    local v = r.recipe.hooks.on_step({})
    assert(v == require("trainer").version)
    r, d = chain('local ok = os.execute("true") return ok')
    refused(function() r.recipe.hooks.on_step({}) end, d .. "/p.lua:1: os.execute is refused: ")
    -- a tail call leaves no frame of the recipe: the line is the one that names the function
    r, d = chain('return os.execute("true")')
    refused(function() r.recipe.hooks.on_step({}) end, d .. "/p.lua:1: os.execute is refused: ")
    r = chain('local f = io.open("/etc/hostname") return f')
    refused(function() r.recipe.hooks.on_step({}) end, "p.lua:1: io.open is refused: ")
    r = chain('local m = require("trainer.core.ffi") return m')
    refused(function() r.recipe.hooks.on_step({}) end, 'require("trainer.core.ffi") is refused')
    r = chain('return require("trainer.core.json").encode({ 1 })')
    assert(r.recipe.hooks.on_step({}) == "[1]")
  end },
  { "trusted_hook_gets_the_rest", function()
    local r = chain('return io.open("/dev/null", "w") ~= nil, debug.traceback ~= nil, require("ffi") ~= nil',
      { trust = true })
    local a, b, c = r.recipe.hooks.on_step({})
    assert(a and b and c)
  end },
  { "recipe_reads_files_only_when_trusted", function()
    local d = lib.tmpdir()
    lib.write(d .. "/labels.txt", "a\nb\n")
    lib.write(d .. "/p.lua", 'local n = 0 for _ in io.lines("' .. d .. '/labels.txt") do n = n + 1 end return { batch = { size = n } }')
    lib.write(d .. "/c.lua", 'return { extends = "p.lua", ' .. minimal .. ' }')
    refused(function() recipe.load(d .. "/c.lua") end, "p.lua:1: io.lines is refused while a recipe is being read")
    assert(recipe.load(d .. "/c.lua", nil, { trust = true }).recipe.batch.size == 2)
  end },
  { "reading_state_restored_after_errors", function()
    local d = lib.tmpdir()
    lib.write(d .. "/r.lua", "while true do end")
    pcall(recipe.load, d .. "/r.lua")
    assert(not sandbox.reading())
    assert(debug.gethook() == nil)
    assert(getmetatable("").__index == string)
    assert(("ab"):rep(3) == "ababab")
  end },
}
