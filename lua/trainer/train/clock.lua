-- trainer.train.clock: seconds on the monotonic clock, for tokens/s, ETA and a run's wall time
-- (trainer.train.run.now is this function). It never goes back, whatever the wall clock does.
local C = require("trainer.core.ffi") -- declares clock_gettime (its system block)
local CLOCK_MONOTONIC = require("trainer.native").clock_monotonic_id()
local ts = require("ffi").new("struct tr_sys_timespec")

local M = {}

-- Seconds on the monotonic clock, for tokens/s and ETA.
function M.now()
  if C.clock_gettime(CLOCK_MONOTONIC, ts) ~= 0 then error("trainer.run.now: clock_gettime(CLOCK_MONOTONIC) failed", 0) end
  return tonumber(ts.tv_sec) + tonumber(ts.tv_nsec) * 1e-9
end

return M
