-- trainer.train.schedule: learning-rate schedules with transformers' get_scheduler semantics.
--
--   local s = schedule.new({ name = "linear", warmup_ratio = 0.1 }, base_lr, total_steps)
--   s:lr(k)        -- the lr of optimizer step k (0-based: k steps done), base_lr * factor(k)
--   s.warmup_steps -- warmup_steps when > 0, else ceil(warmup_ratio * total_steps)
--
-- LambdaLR semantics: step 0 uses factor(0), which is 0 during a warm-up. Every formula is
-- transformers.optimization's, including its edges: linear stays at 0 after total_steps,
-- cosine (num_cycles 0.5) rises again after total_steps as transformers' does, polynomial
-- holds lr_end after total_steps. "constant" with a warm-up is transformers'
-- constant_with_warmup (without one they agree).
local errors = require("trainer.core.errors")

local M = {}

local Schedule = {}
Schedule.__index = Schedule

local function warmup(cfg, i) return i / math.max(1, cfg) end

local factors = {}

function factors.constant(s, i)
  if i < s.warmup_steps then return warmup(s.warmup_steps, i) end
  return 1.0
end

function factors.linear(s, i)
  local W, N = s.warmup_steps, s.total_steps
  if i < W then return warmup(W, i) end
  return math.max(0.0, (N - i) / math.max(1, N - W))
end

function factors.cosine(s, i)
  local W, N = s.warmup_steps, s.total_steps
  if i < W then return warmup(W, i) end
  local progress = (i - W) / math.max(1, N - W)
  return math.max(0, 0.5 * (1.0 + math.cos(math.pi * s.num_cycles * 2.0 * progress)))
end

function factors.polynomial(s, i)
  local W, N = s.warmup_steps, s.total_steps
  local lr_init, lr_end = s.base_lr, s.lr_end
  if i < W then return warmup(W, i) end
  if i > N then return lr_end / lr_init end
  local pct_remaining = 1 - (i - W) / (N - W)
  return ((lr_init - lr_end) * pct_remaining ^ s.power + lr_end) / lr_init
end

M.names = { "constant", "linear", "cosine", "polynomial" }

-- transformers' get_warmup_steps.
function M.warmup_steps(cfg, total_steps)
  if cfg.warmup_steps and cfg.warmup_steps > 0 then return cfg.warmup_steps end
  return math.ceil(total_steps * (cfg.warmup_ratio or 0))
end

-- cfg: the recipe's schedule table (name, warmup_steps | warmup_ratio, power, lr_end,
-- num_cycles), resolved by the recipe schema (trainer.recipe.keys: its checks and defaults);
-- base_lr: the optimizer's lr; total_steps: optimizer steps of the run.
function M.new(cfg, base_lr, total_steps)
  cfg = require("trainer.recipe.keys").resolve("schedule", cfg or {})
  local name = cfg.name
  if type(base_lr) ~= "number" or base_lr <= 0 then
    errors.user("schedule: the base learning rate must be a number > 0 (optim.lr), got %s", tostring(base_lr))
  end
  if type(total_steps) ~= "number" or total_steps < 1 or total_steps ~= math.floor(total_steps) then
    errors.user("schedule: total_steps must be a positive integer (the run's optimizer steps), got %s",
      tostring(total_steps))
  end
  local s = setmetatable({
    name = name, base_lr = base_lr, total_steps = total_steps,
    warmup_steps = M.warmup_steps(cfg, total_steps),
    power = cfg.power, lr_end = cfg.lr_end, num_cycles = cfg.num_cycles,
  }, Schedule)
  if name == "polynomial" then
    if s.lr_end > base_lr then
      errors.user("schedule.lr_end (%g) must not exceed optim.lr (%g): the polynomial decays from lr to lr_end",
        s.lr_end, base_lr)
    end
    if s.total_steps <= s.warmup_steps then
      errors.user("schedule: polynomial decay needs more steps (%d) than warm-up steps (%d)", s.total_steps,
        s.warmup_steps)
    end
  end
  return s
end

-- The multiplier of the base lr at step k (0-based).
function Schedule:factor(k) return factors[self.name](self, k) end

function Schedule:lr(k) return self.base_lr * factors[self.name](self, k) end

return M
