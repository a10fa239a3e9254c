-- bench/fit_times.lua — one recipe's optimizer step, measured and as `trainer plan` predicts it
-- (trainer.plan.time), for each change given: bench/fit_times.sh drives it.
--   trainer run bench/fit_times.lua RECIPE STEPS 'label|k=v k=v' ...
-- Prints "label measured predicted" a line (PREDICT_ONLY=1: "label - predicted", nothing run): measured is the median of STEPS steps after a
-- first one (which packs weights and grows the allocator's pools), in this process's CPU time
-- over the threads the products run on (trainer.plan.time.cpu_threads): the step's time on an
-- idle machine, which a shared machine's wall clock does not show.
local ffi = require("ffi")
local C = require("trainer.core.ffi")
local time = require("trainer.plan.time")
local plan = require("trainer.plan")

local ts = ffi.new("struct tr_sys_timespec")
local threads = time.cpu_threads()
local function cpu()
  C.clock_gettime(2, ts)   -- CLOCK_PROCESS_CPUTIME_ID
  return (tonumber(ts.tv_sec) + tonumber(ts.tv_nsec) * 1e-9) / threads
end

local path, steps = arg[1], tonumber(arg[2]) or 3
for i = 3, #arg do
  local label, args = arg[i]:match("^([^|]*)|(.*)$")
  local ov = {}
  for w in args:gmatch("%S+") do ov[#ov + 1] = w end
  ov[#ov + 1] = "steps=" .. (steps + 2)
  ov[#ov + 1] = "out=" .. os.tmpname() .. ".d"
  local r = require("trainer.recipe").load(path, ov)
  local p = plan.estimate(r.recipe)
  local predicted = time.predict(p, time.rates(p)).seconds
  if os.getenv("PREDICT_ONLY") == "1" then
    print(("%s - %.4f"):format(label, predicted))
    goto continue
  end
  local t = require("trainer.train.run").build(r, { quiet = true })
  t.progress = require("trainer.train.progress").new({ quiet = true })
  t:train_step()
  local times = {}
  for k = 1, steps do
    local c0 = cpu()
    t:train_step()
    times[k] = cpu() - c0
  end
  table.sort(times)
  t:free()
  print(("%s %.4f %.4f"):format(label, times[math.floor((#times + 1) / 2)], predicted))
  io.stdout:flush()
  ::continue::
end
