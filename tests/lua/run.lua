-- tests/lua/run.lua — runs every tests/lua/test_*.lua inside the trainer binary
-- (`./trainer run tests/lua/run.lua [pattern]`). A test file returns a list of
-- { name, fn } pairs or a table name -> fn; each fn raises to fail. Prints one
-- PASS/FAIL line per case and exits non-zero when any failed.
local native = require("trainer.native")
local root = native.root()
-- One write per line: stdout into tests/run.sh's log is otherwise fully buffered, and the
-- trainer processes some cases start write their stderr into the same file, which then
-- landed inside a buffered PASS line ("ASS test_recipe..." after the child's message), and
-- the runner's count lost that case.
io.stdout:setvbuf("line")
local pattern = arg and arg[1]

local function list_tests()
  local files = {}
  local p = io.popen('ls "' .. root .. '/tests/lua/" 2>/dev/null')
  for name in p:lines() do
    if name:match("^test_.*%.lua$") and (not pattern or name:find(pattern, 1, true)) then
      files[#files + 1] = name
    end
  end
  p:close()
  table.sort(files)
  return files
end

local failed = 0
for _, file in ipairs(list_tests()) do
  local suite = file:gsub("%.lua$", "")
  local ok, cases = pcall(dofile, root .. "/tests/lua/" .. file)
  if not ok then
    print(("FAIL %s: cannot load: %s"):format(suite, tostring(cases)))
    failed = failed + 1
  else
    local list = {}
    if cases[1] then
      list = cases
    else
      for name, fn in pairs(cases) do list[#list + 1] = { name, fn } end
      table.sort(list, function(a, b) return a[1] < b[1] end)
    end
    for _, case in ipairs(list) do
      local name, fn = suite .. "." .. case[1], case[2]
      local ok2, err = xpcall(fn, debug.traceback)
      if ok2 then
        print("PASS " .. name)
      else
        print(("FAIL %s: %s"):format(name, tostring(err):gsub("\n", "\n    ")))
        failed = failed + 1
      end
    end
  end
end
return failed == 0 and 0 or 1
