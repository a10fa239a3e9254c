-- tests/cli/check_ptxas_resources.lua — the launch resources of every CUDA kernel, checked
-- without a GPU from ptxas's reports (run by test_ptxas_resources.sh through `trainer run`):
--   check_ptxas_resources.lua RES_DIR ALLOWANCE TMPDIR "sm_75 sm_80 ..." kernels/cuda/*.cu
-- For each built target and kernel, a launch that a GPU would refuse or that got slower:
--   - registers: the block's registers (per warp, registers a thread rounded up to a multiple
--     of 8, times 32; times its warps) within the 65536 a block may hold on every target from
--     sm_75, for the largest block the kernel can be launched with (cuda_launch_sites.lua;
--     over-asking fails the launch with cudaErrorLaunchOutOfResources);
--   - static shared memory within 48 KiB, and no dynamic shared memory at all (above 48 KiB it
--     needs cudaFuncSetAttribute; the emulator refuses any);
--   - spills (ptxas's spill stores and loads) equal to the allowance file's, a line per
--     spilling kernel and target: a new or bigger spill fails, and so does a smaller one, until
--     the line is lowered (so the allowance never keeps room for a regression).
-- PTXAS_SPILLS_UPDATE=1 rewrites the allowance's lines of the built targets from the reports.
-- Prints PASS/FAIL lines and the figures of each target; exits 1 when any check failed.
local here = debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or "tests/cli"
local report = dofile(here .. "/ptxas_report.lua")
local sites = dofile(here .. "/cuda_launch_sites.lua")

local REGS_PER_BLOCK = 65536
local SMEM_STATIC_MAX = 48 * 1024

local res_dir, allowance_path, tmpdir, target_list = arg[1], arg[2], arg[3], arg[4]
local cu_files = {}
for i = 5, #arg do cu_files[#cu_files + 1] = arg[i] end
local targets = {}
for t in target_list:gmatch("%S+") do targets[#targets + 1] = t end

local failed = 0
local function check(name, problems)
  if #problems == 0 then
    print("PASS " .. name)
  else
    failed = failed + 1
    print("FAIL " .. name .. ": " .. table.concat(problems, "; "))
  end
end

-- Registers a block of `threads` holds: each warp takes a thread's registers rounded up to the
-- allocation unit (256 registers a warp, 8 a thread) on every target from sm_75.
local function block_registers(regs, threads)
  local per_warp = math.ceil(regs * 32 / 256) * 256
  return math.ceil(threads / 32) * per_warp
end

-- ------------------------------------------------------------ the reports

local entries, unreadable = {}, {}
for _, cu in ipairs(cu_files) do
  local stem = cu:match("([^/]+)%.cu$")
  local got, why = report.read(res_dir .. "/" .. stem .. ".res")
  if not got then
    unreadable[#unreadable + 1] = why .. " (the Makefile's nvcc rule writes it: make " .. res_dir .. "/" .. stem .. ".res)"
  else
    for _, e in ipairs(got) do
      e.file = cu
      entries[#entries + 1] = e
    end
  end
end
check("ptxas_reports_readable", unreadable)

local mangled, seen = {}, {}
for _, e in ipairs(entries) do
  if not seen[e.mangled] then seen[e.mangled] = true; mangled[#mangled + 1] = e.mangled end
end
local names, why = report.demangle(mangled, tmpdir)
if not names then
  check("ptxas_names_demangled", { why })
  os.exit(1)
end
for _, e in ipairs(entries) do
  e.name = names[e.mangled]
  e.base = report.base_name(e.name)
end

-- every report covers every built target
local coverage = {}
do
  local by_file = {}
  for _, e in ipairs(entries) do
    by_file[e.file] = by_file[e.file] or {}
    by_file[e.file][e.target] = true
  end
  for file, have in pairs(by_file) do
    for _, t in ipairs(targets) do
      if not have[t] then coverage[#coverage + 1] = ("%s has no %s code in its report"):format(file, t) end
    end
    for t in pairs(have) do
      local built = false
      for _, b in ipairs(targets) do built = built or b == t end
      if not built then coverage[#coverage + 1] = ("%s has %s code, not a target of this build"):format(file, t) end
    end
  end
  if next(by_file) == nil then coverage[#coverage + 1] = "no kernel in any report" end
end
table.sort(coverage)
check("ptxas_reports_cover_targets", coverage)

-- ------------------------------------------------------------ the sources

local scan = sites.scan(cu_files)
check("cuda_no_dynamic_shared_memory", scan.dynamic_shared)
local unbounded = {}
for _, p in ipairs(scan.problems) do unbounded[#unbounded + 1] = p end

local bounds, over = {}, {}
for name, k in pairs(scan.kernels) do
  bounds[name] = { sites.bound(k) }
  for _, s in ipairs(k.sites) do
    if s.threads and ((k.lb and s.threads > k.lb) or s.threads > sites.MAX_THREADS or s.threads < 1) then
      over[#over + 1] = ("%s:%d: %s launched with %d threads%s"):format(s.file, s.line, name, s.threads,
        k.lb and (" above its __launch_bounds__(%s)"):format(k.lb_text) or "")
    end
  end
end
local unknown = {}
for _, e in ipairs(entries) do
  if not scan.kernels[e.base] and not unknown[e.base] then
    unknown[e.base] = true
    unbounded[#unbounded + 1] = ("%s: ptxas compiled %s, which the check finds no __global__ definition of"):format(e.file, e.base)
  end
end
table.sort(unbounded)
check("cuda_launches_bounded", unbounded)
table.sort(over)
check("cuda_launch_blocks_valid", over)

-- ------------------------------------------------------------ the allowance

local allowed, other_lines = {}, {}
do
  local f = io.open(allowance_path, "r")
  local n = 0
  for line in f and f:lines() or function() end do
    n = n + 1
    local t, st, ld, name = line:match("^(sm_%d+)%s+(%d+)%s+(%d+)%s+(.-)%s*$")
    if t then
      allowed[t] = allowed[t] or {}
      allowed[t][name] = { stores = tonumber(st), loads = tonumber(ld), line = n }
    end
    other_lines[#other_lines + 1] = { target = t, text = line }
  end
  if f then f:close() end
end

-- ------------------------------------------------------------ per target

local spills_now = {}
for _, t in ipairs(targets) do
  local regs_bad, smem_bad, spill_bad = {}, {}, {}
  local worst_regs, worst_smem, spilling = nil, nil, {}
  local now = {}
  for _, e in ipairs(entries) do
    if e.target == t then
      local b = bounds[e.base]
      if b then
        local threads, reason = b[1], b[2]
        local used = block_registers(e.regs, threads)
        if used > REGS_PER_BLOCK then
          regs_bad[#regs_bad + 1] = ("%s: %d registers x %d threads (%s) = %d of %d"):format(e.name, e.regs, threads, reason,
            used, REGS_PER_BLOCK)
        end
        if not worst_regs or used > worst_regs.used then
          worst_regs = { used = used, e = e, threads = threads, reason = reason }
        end
      end
      if e.smem > SMEM_STATIC_MAX then
        smem_bad[#smem_bad + 1] = ("%s: %d bytes of static shared memory, above %d"):format(e.name, e.smem, SMEM_STATIC_MAX)
      end
      if not worst_smem or e.smem > worst_smem.smem then worst_smem = e end
      if e.spill_stores > 0 or e.spill_loads > 0 then
        local prev = now[e.name]
        now[e.name] = { stores = math.max(e.spill_stores, prev and prev.stores or 0),
                        loads = math.max(e.spill_loads, prev and prev.loads or 0) }
      end
    end
  end
  spills_now[t] = now
  local allow = allowed[t] or {}
  for name, s in pairs(now) do
    local a = allow[name]
    spilling[#spilling + 1] = ("%s %d/%d"):format(name, s.stores, s.loads)
    if not a then
      spill_bad[#spill_bad + 1] = ("%s spills %d bytes stored, %d loaded: a new spill (%s has no line for it)"):format(
        name, s.stores, s.loads, allowance_path)
    elseif s.stores > a.stores or s.loads > a.loads then
      spill_bad[#spill_bad + 1] = ("%s spills %d/%d bytes (stores/loads), more than the %d/%d allowed"):format(
        name, s.stores, s.loads, a.stores, a.loads)
    elseif s.stores < a.stores or s.loads < a.loads then
      spill_bad[#spill_bad + 1] = ("%s spills %d/%d bytes, less than the %d/%d allowed: lower %s:%d to '%s %d %d %s'"):format(
        name, s.stores, s.loads, a.stores, a.loads, allowance_path, a.line, t, s.stores, s.loads, name)
    end
  end
  for name, a in pairs(allow) do
    if not now[name] then
      spill_bad[#spill_bad + 1] = ("%s no longer spills: remove %s:%d"):format(name, allowance_path, a.line)
    end
  end
  table.sort(regs_bad); table.sort(smem_bad); table.sort(spill_bad); table.sort(spilling)
  check("ptxas_registers_fit_block_" .. t, regs_bad)
  check("ptxas_static_shared_memory_" .. t, smem_bad)
  if os.getenv("PTXAS_SPILLS_UPDATE") ~= "1" then check("ptxas_spills_within_allowance_" .. t, spill_bad) end
  if worst_regs then
    local w = worst_regs
    print(("  %s: most registers x block: %s, %d registers x %d threads = %d of %d (%s)"):format(t, w.e.name, w.e.regs,
      w.threads, w.used, REGS_PER_BLOCK, w.reason))
  end
  if worst_smem then
    print(("  %s: most static shared memory: %s, %d bytes of %d"):format(t, worst_smem.name, worst_smem.smem, SMEM_STATIC_MAX))
  end
  print(("  %s: spills (stored/loaded bytes): %s"):format(t, #spilling > 0 and table.concat(spilling, ", ") or "none"))
end

-- ------------------------------------------------------------ rewriting the allowance

if os.getenv("PTXAS_SPILLS_UPDATE") == "1" then
  local built = {}
  for _, t in ipairs(targets) do built[t] = true end
  local out = {}
  for _, l in ipairs(other_lines) do
    if not (l.target and built[l.target]) then out[#out + 1] = l.text end
  end
  for _, t in ipairs(targets) do
    local spilling = {}
    for name in pairs(spills_now[t]) do spilling[#spilling + 1] = name end
    table.sort(spilling)
    for _, name in ipairs(spilling) do
      local s = spills_now[t][name]
      out[#out + 1] = ("%-6s %5d %5d  %s"):format(t, s.stores, s.loads, name)
    end
  end
  local f = assert(io.open(allowance_path, "w"))
  f:write(table.concat(out, "\n"), "\n")
  f:close()
  print("  rewrote " .. allowance_path .. " for " .. table.concat(targets, " "))
end

os.exit(failed == 0 and 0 or 1)
