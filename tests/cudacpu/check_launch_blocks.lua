-- tests/cudacpu/check_launch_blocks.lua — compares the largest block each kernel ran with on
-- the emulator (CUDACPU_LAUNCH_LOG's file: "THREADS NAME" lines, the name as written at the
-- launch) with the bound tests/cli/cuda_launch_sites.lua reads from the sources (run by
-- launch_blocks.sh through `trainer run`):  check_launch_blocks.lua BLOCKS kernels/cuda/*.cu
-- Prints PASS/FAIL lines, the kernels no launch reached, and those that ran with a smaller
-- block than their bound (a row kernel's block follows its row length, small in tests).
local here = debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or "tests/cudacpu"
local sites = dofile(here .. "/../cli/cuda_launch_sites.lua")

local files = {}
for i = 2, #arg do files[#files + 1] = arg[i] end
local scan = sites.scan(files)

local failed = 0
local function check(name, problems)
  if #problems == 0 then print("PASS " .. name)
  else failed = failed + 1; print("FAIL " .. name .. ": " .. table.concat(problems, "; ")) end
end

local ran, lines = {}, 0
for line in io.lines(arg[1]) do
  local threads, name = line:match("^(%d+) (.+)$")
  if threads then
    lines = lines + 1
    local base = name:gsub("%b<>", ""):match("^%s*([%w_]+)%s*$") or name
    ran[base] = math.max(ran[base] or 0, tonumber(threads))
  end
end
check("launch_blocks_logged", lines > 0 and {} or { arg[1] .. " holds no launch: was the program linked with an emulator"
  .. " that has CUDACPU_LAUNCH_LOG (make cudacpu)?" })

local unknown, over, smaller = {}, {}, {}
for name, threads in pairs(ran) do
  local k = scan.kernels[name]
  if not k then
    unknown[#unknown + 1] = ("%s ran, and the sources have no __global__ of that name"):format(name)
  else
    local bound, why = sites.bound(k)
    if threads > bound then
      over[#over + 1] = ("%s ran with %d threads, above its bound %d (%s)"):format(name, threads, bound, why)
    elseif threads < bound then
      smaller[#smaller + 1] = ("%s %d of %d"):format(name, threads, bound)
    end
  end
end
local never, nran = {}, 0
for name in pairs(scan.kernels) do
  if ran[name] then nran = nran + 1 else never[#never + 1] = name end
end
table.sort(unknown); table.sort(over); table.sort(never); table.sort(smaller)
check("launch_blocks_known_kernels", unknown)
check("launch_blocks_within_bounds", over)
print(("  %d of %d kernels ran; never launched here (bounded from the sources alone): %s"):format(nran, nran + #never,
  #never > 0 and table.concat(never, ", ") or "none"))
print("  ran with a smaller block than their bound: " .. (#smaller > 0 and table.concat(smaller, ", ") or "none"))
os.exit(failed == 0 and 0 or 1)
