-- trainer.train.progress: what a run prints while it trains, on stderr.
--   on a terminal: one live bar redrawn in place (step/total, loss, lr, tokens/s, memory
--     allocated and peak, ETA); evaluations and checkpoints print as lines above it;
--   otherwise (a pipe, a log file): one line every log.every steps, and at the last step;
--   quiet: nothing but errors.
local sys = require("trainer.core.sys")

local M = {}

local P = {}
P.__index = P

-- opts: every (log.every), quiet, tty (default: whether stderr is a terminal), out (a file).
function M.new(opts)
  opts = opts or {}
  local tty = opts.tty
  if tty == nil then tty = sys.isatty(2) end
  return setmetatable({ every = opts.every or 10, quiet = opts.quiet, tty = tty, out = opts.out or io.stderr,
                        drawn = false }, P)
end

function M.bytes(n)
  n = n or 0
  local units = { "B", "KiB", "MiB", "GiB", "TiB" }
  local i = 1
  while n >= 1024 and i < #units do n, i = n / 1024, i + 1 end
  return i == 1 and ("%d B"):format(n) or ("%.1f %s"):format(n, units[i])
end

local function duration(s)
  if not s or s ~= s or s == math.huge then return "?" end
  s = math.floor(s + 0.5)
  if s >= 3600 then return ("%dh%02dm"):format(math.floor(s / 3600), math.floor((s % 3600) / 60)) end
  return ("%dm%02ds"):format(math.floor(s / 60), s % 60)
end
M.duration = duration

-- The text of one progress line for metrics m of run t.
function M.line(t, m)
  local rate = t.train_time > 0 and t.step / t.train_time or 0
  local eta = rate > 0 and (t.total_steps - t.step) / rate or nil
  -- on a device the loss is read once per logged step: between them the bar shows the last read
  local loss = m.loss or t.last_loss
  return ("step %d/%d  loss %s  lr %.3g  %.0f tok/s  mem %s (peak %s)  ETA %s%s"):format(
    m.step, t.total_steps, loss and ("%.4f"):format(loss) or "-", m.lr, m.tokens_per_s, M.bytes(m.mem_allocated), M.bytes(m.mem_peak),
    duration(eta), m.skipped and "  (skipped: inf/nan gradients)" or "")
end

local function bar(t, width)
  local frac = t.total_steps > 0 and math.min(1, t.step / t.total_steps) or 0
  local n = math.floor(frac * width + 0.5)
  return "[" .. ("#"):rep(n) .. ("."):rep(width - n) .. "]"
end

function P:clear()
  if self.tty and self.drawn then self.out:write("\r\27[K") self.drawn = false end
end

function P:update(t, m)
  if self.quiet then return end
  if self.tty then
    self.out:write("\r\27[K", bar(t, 20), " ", M.line(t, m))
    self.out:flush()
    self.drawn = true
  elseif m.step % self.every == 0 or m.step == t.total_steps or m.step == 1 then
    self.out:write(M.line(t, m), "\n")
    self.out:flush()
  end
end

function P:message(text)
  if self.quiet then return end
  self:clear()
  self.out:write(text, "\n")
  self.out:flush()
end

function P:eval(t, scores)
  local keys = {}
  for k in pairs(scores) do keys[#keys + 1] = k end
  -- eval.primary first (the metric that decides), then the rest by name
  local primary = t.recipe and t.recipe.eval and t.recipe.eval.primary
  table.sort(keys, function(a, b)
    if (a == primary) ~= (b == primary) then return a == primary end
    return a < b
  end)
  local parts = {}
  for _, k in ipairs(keys) do parts[#parts + 1] = ("%s %.4f"):format(k, scores[k]) end
  self:message(("eval at step %d: %s"):format(t.step, table.concat(parts, "  ")))
end

function P:saved(t, dir)
  self:message(("saved %s"):format(dir))
end

function P:finish()
  if self.tty and self.drawn then self.out:write("\n") self.drawn = false end
end

return M
