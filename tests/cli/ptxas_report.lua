-- tests/cli/ptxas_report.lua — reads the resource reports that the Makefile's nvcc rule keeps
-- beside each CUDA object (build/rel/kernels/cuda/NAME.res: `nvcc --resource-usage`'s stderr,
-- ptxas's lines for every kernel and every target). `dofile` it; it returns
--   read(path) -> entries or nil, why
-- one entry per kernel and target, in the report's order:
--   { mangled, target = "sm_75", regs, smem (static shared bytes), stack, spill_stores,
--     spill_loads, barriers }
-- A kernel whose block of lines is incomplete (no "Used N registers" line) is an error, not a
-- kernel with 0 registers: a report that ptxas printed differently must fail the check, never
-- pass it.
local M = {}

-- ptxas prints, per kernel and target:
--   ptxas info    : Compiling entry function '_Z15tanh_bwd_kernelPvi' for 'sm_75'
--   ptxas info    : Function properties for _Z15tanh_bwd_kernelPvi
--       0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
--   ptxas info    : Used 14 registers, used 1 barriers, 128 bytes smem, 408 bytes cmem[0]
-- "Function properties" blocks of non-inlined device functions come between an entry's lines
-- too; only the entry's own block counts for it.
function M.read(path)
  local f, err = io.open(path, "r")
  if not f then return nil, err end
  local entries, cur, props = {}, nil, nil
  local function close()
    if cur and not cur.regs then
      return ("%s: no \"Used N registers\" line for %s (%s)"):format(path, cur.mangled, cur.target)
    end
    cur = nil
  end
  local n = 0
  for line in f:lines() do
    n = n + 1
    local name, target = line:match("^ptxas info%s*: Compiling entry function '([^']+)' for '([%w_]+)'")
    if name then
      local bad = close()
      if bad then f:close(); return nil, bad end
      cur = { mangled = name, target = target, smem = 0, barriers = 0 }
      entries[#entries + 1] = cur
      props = nil
    elseif line:match("^ptxas info%s*: Function properties for ") then
      props = line:match("^ptxas info%s*: Function properties for (%S+)")
    elseif line:match("bytes stack frame") then
      local stack, st, ld = line:match("^%s*(%d+) bytes stack frame, (%d+) bytes spill stores, (%d+) bytes spill loads")
      if not stack then f:close(); return nil, ("%s:%d: unreadable line: %s"):format(path, n, line) end
      if cur and props == cur.mangled then
        cur.stack, cur.spill_stores, cur.spill_loads = tonumber(stack), tonumber(st), tonumber(ld)
      end
    elseif line:match("^ptxas info%s*: Used %d+ registers") then
      if not cur then f:close(); return nil, ("%s:%d: registers outside an entry function"):format(path, n) end
      cur.regs = tonumber(line:match("Used (%d+) registers"))
      cur.barriers = tonumber(line:match("used (%d+) barriers") or 0)
      cur.smem = tonumber(line:match("(%d+) bytes smem") or 0)
      if not cur.spill_stores then
        f:close()
        return nil, ("%s:%d: no spill line for %s (%s)"):format(path, n, cur.mangled, cur.target)
      end
      cur = nil
    end
  end
  f:close()
  local bad = close()
  if bad then return nil, bad end
  return entries
end

-- The demangled names (c++filt -p: no parameter list, template arguments kept) of a set of
-- mangled names, as a table mangled -> name; nil, why when c++filt fails.
function M.demangle(mangled_names, tmpdir)
  local list = tmpdir .. "/mangled.txt"
  local f = assert(io.open(list, "w"))
  for _, m in ipairs(mangled_names) do f:write(m, "\n") end
  f:close()
  local p = io.popen("c++filt -p <'" .. list .. "' 2>&1")
  local out = {}
  for line in p:lines() do out[#out + 1] = line end
  p:close()
  if #out ~= #mangled_names then
    return nil, ("c++filt gave %d names for %d: %s"):format(#out, #mangled_names, out[1] or "(nothing)")
  end
  local names = {}
  for i, m in ipairs(mangled_names) do names[m] = out[i] end
  return names
end

-- A demangled kernel's name as written at its definition: no return type, namespace,
-- template arguments or parameters ("void ns::attn_tc_fwd_kernel<__half, 64>" ->
-- "attn_tc_fwd_kernel").
function M.base_name(demangled)
  local s = demangled:gsub("%b<>", ""):gsub("%b()", "")
  return s:match("([%w_]+)%s*$")
end

return M
