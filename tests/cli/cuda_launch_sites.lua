-- tests/cli/cuda_launch_sites.lua — the largest block each kernel of kernels/cuda/ can be
-- launched with, read from the sources, for the register check of
-- check_ptxas_resources.lua. `dofile` it; it returns
--   scan(files) -> { kernels = { [name] = kernel }, sites = { site... }, problems = { text... },
--                    dynamic_shared = { text... } }
--   bound(kernel) -> threads, why
-- A kernel is { name, file, line, lb (its __launch_bounds__ value, or nil), lb_text, sites };
-- a site is { name, file, line, block (text), threads (its value, or nil) }.
--
-- The bound is sound, never a guess: a block size that is not a constant this file can
-- evaluate (a variable, a call such as tr_cuda_row_threads) counts as 1024, the largest block
-- CUDA launches on any target; __launch_bounds__(N) caps it at N (a larger launch fails).
-- Constants are integer literals, enumerators, object-like #defines and `const`/`constexpr`
-- integers of the file and the headers it includes; a name that the launching file also
-- declares without const (a local `int threads`, a parameter) is not a constant. A block
-- written std::min(x, CAP) counts as CAP: a cap the check can read without following a
-- variable through the code.
-- problems: what the check cannot bound: a launch of a name that is no kernel of these files,
-- launches other than <<<>>> (cudaLaunchKernel and friends), a __launch_bounds__ it cannot
-- evaluate. dynamic_shared: each use of dynamic shared memory (a third launch argument other
-- than 0, `extern __shared__`), which the project has none of.
local M = {}

M.MAX_THREADS = 1024

-- ------------------------------------------------------------ source text

-- The text with comments, string and character literals blanked (newlines kept, so that
-- positions keep their line numbers).
local function strip(src)
  local out, i, n = {}, 1, #src
  local function blank(s) return (s:gsub("[^\n]", " ")) end
  while i <= n do
    local c, d = src:sub(i, i), src:sub(i, i + 1)
    local j
    if d == "/*" then
      j = (src:find("*/", i + 2, true) or n - 1) + 1
    elseif d == "//" then
      j = (src:find("\n", i, true) or n + 1) - 1
    elseif c == '"' or c == "'" then
      j = i + 1
      while j <= n and src:sub(j, j) ~= c do
        if src:sub(j, j) == "\\" then j = j + 1 end
        j = j + 1
      end
    end
    if j then
      out[#out + 1] = blank(src:sub(i, j)); i = j + 1
    else
      local k = src:find("[/\"']", i + 1) or n + 1
      out[#out + 1] = src:sub(i, k - 1); i = k
    end
  end
  return table.concat(out)
end

local function line_of(text, pos)
  local _, nl = text:sub(1, pos):gsub("\n", "")
  return nl + 1
end

local read = require("trainer.core.fs").read

-- Splits s at commas outside (), [] and {}.
local function split_args(s)
  local args, depth, start = {}, 0, 1
  for i = 1, #s do
    local c = s:sub(i, i)
    if c == "(" or c == "[" or c == "{" then depth = depth + 1
    elseif c == ")" or c == "]" or c == "}" then depth = depth - 1
    elseif c == "," and depth == 0 then
      args[#args + 1] = s:sub(start, i - 1); start = i + 1
    end
  end
  args[#args + 1] = s:sub(start)
  for k, a in ipairs(args) do args[k] = a:match("^%s*(.-)%s*$") end
  return args
end

-- ------------------------------------------------------------ constants

local TYPE_WORDS = "int unsigned long short int32_t int64_t uint32_t uint64_t size_t auto dim3"

-- Adds the constants of one source's text (comments already blanked) to env. With poison, a
-- name the text also declares as a variable (a local or a parameter) is no constant
-- (env.poisoned[name]); the launching file is read so, its headers are not.
local function collect_constants(text, env, poison)
  local function add(name, expr)
    env.exprs[name] = env.exprs[name] or {}
    table.insert(env.exprs[name], expr)
  end
  for name, value in text:gmatch("\n%s*#%s*define%s+([%a_][%w_]*)([^\n]*)") do
    if value:sub(1, 1) ~= "(" then add(name, value) end
  end
  for body in text:gmatch("%f[%w_]enum[%s%w_:]*(%b{})") do
    local prev = -1
    for _, item in ipairs(split_args(body:sub(2, -2))) do
      local name, value = item:match("^([%a_][%w_]*)%s*=%s*(.+)$")
      if not name then name = item:match("^([%a_][%w_]*)$") end
      if name then
        local expr = value or tostring(prev + 1)
        add(name, expr)
        prev = M.eval(expr, env) or prev + 1
      end
    end
  end
  for word in TYPE_WORDS:gmatch("%S+") do
    local pattern = "()%f[%w_]" .. word .. "%s+([%a_][%w_]*)%s*([=;,)])()"
    for at, name, after, past in text:gmatch(pattern) do
      local before = text:sub(math.max(1, at - 200), at - 1):match("[^;{}()]*$")
      local is_const = before:match("%f[%w_]const%f[^%w_]") or before:match("%f[%w_]constexpr%f[^%w_]")
      if is_const and after == "=" then
        local init = text:match("^%s*([^;]+);", past)
        if init then add(name, init) end
      elseif not is_const and poison then
        env.poisoned[name] = true
      end
    end
  end
end

-- The value of an integer constant expression (literals, constants of env, + - * / % << >>,
-- parentheses, unary minus), or nil when it is anything else.
function M.eval(expr, env, seen)
  -- std::min(a, b, ...) is at most each argument: the least of those that are constants
  local inner = expr:match("^%s*std::min%s*<[%w_%s]*>%s*(%b())%s*$") or expr:match("^%s*std::min%s*(%b())%s*$")
  if inner then
    local least
    for _, a in ipairs(split_args(inner:sub(2, -2))) do
      local v = M.eval(a, env, seen)
      if v and (not least or v < least) then least = v end
    end
    return least
  end
  local toks = {}
  local s = expr:gsub("^%s+", "")
  while #s > 0 do
    local t = s:match("^0[xX]%x+") or s:match("^%d+") or s:match("^[%a_][%w_]*") or s:match("^<<") or s:match("^>>")
      or s:match("^[-+*/%%()]")
    if not t then return nil end
    s = s:sub(#t + 1)
    if t:match("^%d") or t:match("^0[xX]") then
      s = s:gsub("^[uUlL]+", "")
    end
    toks[#toks + 1] = t
    s = s:gsub("^%s+", "")
  end
  seen = seen or {}
  local pos = 1
  local expr_p
  local function atom()
    local t = toks[pos]
    pos = pos + 1
    if t == nil then return nil end
    if t == "(" then
      local v = expr_p()
      if toks[pos] ~= ")" then return nil end
      pos = pos + 1
      return v
    elseif t == "-" then
      local v = atom()
      return v and -v
    elseif t:match("^0[xX]") then
      return tonumber(t:sub(3), 16)
    elseif t:match("^%d") then
      return tonumber(t)
    elseif t:match("^[%a_]") then
      if toks[pos] == "(" or seen[t] or env.poisoned[t] or not env.exprs[t] then return nil end
      seen[t] = true
      local best
      for _, e in ipairs(env.exprs[t]) do
        local v = M.eval(e, env, seen)
        if v == nil then seen[t] = nil; return nil end
        best = best and math.max(best, v) or v
      end
      seen[t] = nil
      return best
    end
    return nil
  end
  -- the binary operators by precedence, tightest first; each level is left-associative
  local levels = {
    { ["*"] = function(a, b) return a * b end,
      ["/"] = function(a, b) return b ~= 0 and math.floor(a / b) or nil end,
      ["%"] = function(a, b) return b ~= 0 and a % b or nil end },
    { ["+"] = function(a, b) return a + b end, ["-"] = function(a, b) return a - b end },
    { ["<<"] = function(a, b) return a * 2 ^ b end, [">>"] = function(a, b) return math.floor(a / 2 ^ b) end },
  }
  local function level(i)
    if i == 0 then return atom() end
    local v = level(i - 1)
    while v and levels[i][toks[pos]] do
      local op = levels[i][toks[pos]]
      pos = pos + 1
      local w = level(i - 1)
      v = w and op(v, w)
    end
    return v
  end
  function expr_p() return level(#levels) end
  local v = expr_p()
  if pos ~= #toks + 1 then return nil end
  return v
end

-- ------------------------------------------------------------ kernels and launches

-- The __global__ functions of text: name, line, and the __launch_bounds__ text.
local function find_kernels(text, file, kernels, env, problems)
  local pos = 1
  while true do
    local at, after = text:find("%f[%w_]__global__%f[^%w_]", pos)
    if not at then break end
    pos = after + 1
    local p, lb_text = pos, nil
    while true do
      local s, e, word = text:find("^%s*([%a_][%w_]*)", p)
      if not s then break end
      if word == "__launch_bounds__" then
        local args = text:match("^%s*(%b())", e + 1)
        if not args then break end
        lb_text = split_args(args:sub(2, -2))[1]
        p = e + 1 + #text:match("^%s*", e + 1) + #args
      elseif text:find("^%s*%(", e + 1) then
        local k = kernels[word]
        if k and k.file ~= file then
          table.insert(problems, ("%s:%d: kernel %s is also defined in %s: the check matches kernels by name"):format(
            file, line_of(text, at), word, k.file))
        end
        local lb = lb_text and M.eval(lb_text, env)
        if lb_text and not lb then
          table.insert(problems, ("%s:%d: __launch_bounds__(%s) of %s is not a constant the check can evaluate"):format(
            file, line_of(text, at), lb_text, word))
        end
        kernels[word] = k or { name = word, file = file, line = line_of(text, at), lb = lb, lb_text = lb_text, sites = {} }
        break
      else
        p = e + 1
      end
    end
  end
end

local function find_launches(text, file, env, sites, dynamic_shared)
  local pos = 1
  while true do
    local at = text:find("<<<", pos, true)
    if not at then break end
    local close = text:find(">>>", at + 3, true)
    if not close then break end
    pos = close + 3
    local before = text:sub(1, at - 1):gsub("%s+$", "")
    while before:sub(-1) == ">" do -- template arguments: back to their "<"
      local depth, i = 0, #before
      repeat
        local c = before:sub(i, i)
        if c == ">" then depth = depth + 1 elseif c == "<" then depth = depth - 1 end
        i = i - 1
      until depth == 0 or i < 1
      before = before:sub(1, i):gsub("%s+$", "")
    end
    local name = before:match("([%a_][%w_]*)$")
    local args = split_args(text:sub(at + 3, close - 1))
    local line = line_of(text, at)
    local site = { name = name, file = file, line = line, block = args[2] }
    local dims = args[2] and args[2]:match("^dim3%s*%((.*)%)$")
    if dims then -- dim3(x, y, z): the product
      local n = 1
      for _, a in ipairs(split_args(dims)) do
        local v = M.eval(a, env)
        n = v and n and n * v or nil
      end
      site.threads = n
    elseif args[2] then
      site.threads = M.eval(args[2], env)
    end
    if args[3] and M.eval(args[3], env) ~= 0 then
      table.insert(dynamic_shared, ("%s:%d: %s is launched with dynamic shared memory (%s): the check assumes none"
        .. " (above 48 KiB it needs cudaFuncSetAttribute, and the emulator refuses any)"):format(file, line, name, args[3]))
    end
    sites[#sites + 1] = site
  end
end

function M.scan(files)
  local result = { kernels = {}, sites = {}, problems = {}, dynamic_shared = {} }
  local texts = {}
  for _, file in ipairs(files) do
    local src = read(file)
    if not src then
      table.insert(result.problems, file .. ": cannot be read")
    else
      -- the file's constants and those of the headers it includes (recursively)
      local env, seen = { exprs = {}, poisoned = {} }, {}
      local function add(path, raw)
        if seen[path] then return end
        seen[path] = true
        local text = strip(raw)
        collect_constants("\n" .. text, env, path == file)
        local dir = path:match("^(.*)/[^/]*$") or "."
        for inc in raw:gmatch('#%s*include%s*"([^"]+)"') do
          for _, d in ipairs({ dir, "kernels" }) do
            local p = d .. "/" .. inc
            local r = read(p)
            if r then add(p, r); break end
          end
        end
      end
      add(file, src)
      texts[file] = { text = strip(src), env = env }
      local text = texts[file].text
      find_kernels(text, file, result.kernels, env, result.problems)
      for _, api in ipairs({ "cudaLaunchKernel", "cudaLaunchKernelEx", "cudaLaunchCooperativeKernel", "cuLaunchKernel" }) do
        local at = text:find("%f[%w_]" .. api .. "%f[^%w_]")
        if at then
          table.insert(result.problems, ("%s:%d: %s: the check bounds only <<<>>> launches"):format(file, line_of(text, at), api))
        end
      end
      local at = text:find("extern%s+__shared__")
      if at then
        table.insert(result.dynamic_shared, ("%s:%d: extern __shared__ (dynamic shared memory): the check assumes none"):format(
          file, line_of(text, at)))
      end
    end
  end
  for _, file in ipairs(files) do
    if texts[file] then find_launches(texts[file].text, file, texts[file].env, result.sites, result.dynamic_shared) end
  end
  for _, site in ipairs(result.sites) do
    local k = site.name and result.kernels[site.name]
    if k then
      table.insert(k.sites, site)
    else
      table.insert(result.problems, ("%s:%d: a launch of %s, which is no __global__ function of kernels/cuda:"
        .. " the check cannot bound its block"):format(site.file, site.line, tostring(site.name)))
    end
  end
  return result
end

-- The largest block k can be launched with, and why (for the report).
function M.bound(k)
  local most, why = nil, nil
  for _, s in ipairs(k.sites) do
    local t = s.threads or M.MAX_THREADS
    if not most or t > most then
      most = t
      why = s.threads and ("launched with %s at %s:%d"):format(s.block, s.file, s.line)
        or ("%s at %s:%d is not a constant: CUDA's largest block"):format(s.block or "?", s.file, s.line)
    end
  end
  if not most then most, why = M.MAX_THREADS, "no launch found: CUDA's largest block" end
  if k.lb and k.lb < most then most, why = k.lb, ("__launch_bounds__(%s)"):format(k.lb_text) end
  return most, why
end

return M
