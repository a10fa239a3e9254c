-- trainer.recipe.version: semantic versions and the `requires` pin of a recipe.
--
-- A version is MAJOR[.MINOR[.PATCH]][-PRERELEASE][+BUILD]; a missing part is 0, so a pin
-- ">= 0.4" means ">= 0.4.0" and "= 0.4" means exactly 0.4.0. Order is semantic
-- versioning's (semver.org, item 11): numbers part by part, a pre-release before its
-- release (1.0.0-rc.1 < 1.0.0), pre-release identifiers compared numerically when both are
-- numbers, else as text; build metadata is ignored.
-- A pin is one or more comparisons joined by commas, each OP VERSION with OP one of >=, >,
-- <=, <, =: ">= 0.4, < 0.6". A version satisfies the pin when it satisfies every part.
local M = {}

-- ---------------------------------------------------------------- versions
-- Parses a version text; returns { major, minor, patch, pre = { ids } } or nil, why.
function M.parse(text)
  if type(text) ~= "string" then return nil, "a version is a string such as \"0.4\" or \"1.2.3\"" end
  local core, pre = text:match("^(%d[%d%.]*)%-([%w%.%-]+)$")
  if not core then core = text:match("^(%d[%d%.]*)$") end
  if not core then
    core, pre = text:match("^(%d[%d%.]*)%-([%w%.%-]+)%+[%w%.%-]+$")
    core = core or text:match("^(%d[%d%.]*)%+[%w%.%-]+$")
  end
  if not core or core:match("%.%.") or core:match("%.$") then
    return nil, ("%q is not a version: write MAJOR[.MINOR[.PATCH]], e.g. \"0.4\" or \"1.2.3\""):format(text)
  end
  local nums = {}
  for n in core:gmatch("%d+") do nums[#nums + 1] = tonumber(n) end
  if #nums > 3 then
    return nil, ("%q has more than three numbers: a version is MAJOR.MINOR.PATCH"):format(text)
  end
  local v = { nums[1], nums[2] or 0, nums[3] or 0 }
  if pre then
    v.pre = {}
    for id in pre:gmatch("[^%.]+") do v.pre[#v.pre + 1] = tonumber(id) or id end
  end
  return v
end

-- -1, 0 or 1 as version a is before, the same as or after version b (parsed).
function M.compare(a, b)
  for i = 1, 3 do
    if a[i] ~= b[i] then return a[i] < b[i] and -1 or 1 end
  end
  if not a.pre and not b.pre then return 0 end
  if not a.pre then return 1 end
  if not b.pre then return -1 end
  for i = 1, math.max(#a.pre, #b.pre) do
    local x, y = a.pre[i], b.pre[i]
    if x == nil then return -1 end
    if y == nil then return 1 end
    if x ~= y then
      local nx, ny = type(x) == "number", type(y) == "number"
      if nx and ny then return x < y and -1 or 1 end
      if nx ~= ny then return nx and -1 or 1 end   -- numeric identifiers sort first
      return x < y and -1 or 1
    end
  end
  return 0
end

-- ---------------------------------------------------------------- pins
local tests = {
  [">="] = function(c) return c >= 0 end,
  [">"] = function(c) return c > 0 end,
  ["<="] = function(c) return c <= 0 end,
  ["<"] = function(c) return c < 0 end,
  ["="] = function(c) return c == 0 end,
}

-- Parses a pin; returns a list of { op, version, text } or nil, why.
function M.parse_pin(text)
  if type(text) ~= "string" then
    return nil, "expected a version range such as \">= 0.4\" or \">= 0.4, < 0.6\""
  end
  local parts = {}
  for part in (text .. ","):gmatch("([^,]*),") do
    local op, v = part:match("^%s*([<>=]=?)%s*(%S+)%s*$")
    if not op or not tests[op] then
      return nil, ("%q is not a version range: each comma-separated part is one of >=, >, <=, <, = and a version, "
        .. "e.g. \">= 0.4\" or \">= 0.4, < 0.6\""):format(text)
    end
    local parsed, why = M.parse(v)
    if not parsed then return nil, ("in %q: %s"):format(text, why) end
    parts[#parts + 1] = { op = op, version = parsed, text = v }
  end
  return parts
end

-- Whether version text `have` satisfies pin text `pin`; nil, why when either is malformed.
function M.satisfies(have, pin)
  local parts, why = M.parse_pin(pin)
  if not parts then return nil, why end
  local v, vwhy = M.parse(have)
  if not v then return nil, vwhy end
  for _, p in ipairs(parts) do
    if not tests[p.op](M.compare(v, p.version)) then return false end
  end
  return true
end

-- The running binary's version (what `trainer --version` prints).
function M.current()
  return require("trainer.core.sys").version()
end

return M
