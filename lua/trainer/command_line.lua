-- trainer.command_line: what the model commands (encode, tokenize, classify) share:
-- parsing "MODEL_DIR FILE [--flag value ...]" and reading the input lines of FILE ("-"
-- is standard input). Errors are user errors that name the argument or the file.
local errors = require("trainer.errors")

local M = {}

-- args: the command's argv (args[1] is the command); flags: { name = "value" | "bool" }.
-- Returns positional arguments (a list) and flags (name -> value).
function M.parse(args, flags, usage)
  local pos, out = {}, {}
  local i = 2
  while i <= #args do
    local a = args[i]
    if a:sub(1, 2) == "--" then
      local name, value = a:match("^%-%-([%w%-]+)=(.*)$")
      name = name or a:sub(3)
      local kind = flags[name]
      if not kind then errors.user("unknown option --%s\nusage: %s", name, usage) end
      if kind == "value" and value == nil then
        i = i + 1
        value = args[i]
        if value == nil then errors.user("option --%s needs a value\nusage: %s", name, usage) end
      end
      out[name] = value or true
    else
      pos[#pos + 1] = a
    end
    i = i + 1
  end
  return pos, out
end

-- A positive integer flag value (or the default).
function M.int(flags, name, default)
  local v = flags[name]
  if v == nil then return default end
  local n = tonumber(v)
  if not n or n < 1 or n ~= math.floor(n) then
    errors.user("--%s must be a positive integer, got %q", name, tostring(v))
  end
  return n
end

-- The lines of path ("-": stdin), without line ends; a missing file, or a line that is
-- not UTF-8, is a user error naming the file and the line.
function M.read_lines(path)
  local f, err
  if path == "-" then f = io.stdin else f, err = io.open(path, "rb") end
  if not f then errors.user("%s: cannot read the input file (%s)", path, tostring(err)) end
  local utf8 = require("trainer.utf8")
  local lines = {}
  for line in f:lines() do
    line = line:gsub("\r$", "")
    local bad = utf8.invalid_at(line)
    if bad then
      if f ~= io.stdin then f:close() end
      errors.user("%s: line %d is not valid UTF-8 (%s); save the file as UTF-8 (e.g. iconv -f latin1 -t utf-8)",
        path == "-" and "standard input" or path, #lines + 1, utf8.where(line, bad))
    end
    lines[#lines + 1] = line
  end
  if f ~= io.stdin then f:close() end
  return lines
end

-- "%.9g" numbers joined as a JSON array (floats keep float32 precision).
function M.float_array(values)
  local parts = {}
  for i, v in ipairs(values) do
    if v ~= v or v == math.huge or v == -math.huge then parts[i] = "null" else parts[i] = ("%.9g"):format(v) end
  end
  return "[" .. table.concat(parts, ",") .. "]"
end

function M.int_array(values)
  local parts = {}
  for i, v in ipairs(values) do parts[i] = ("%d"):format(v) end
  return "[" .. table.concat(parts, ",") .. "]"
end

return M
