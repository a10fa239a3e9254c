-- tests/cudacpu/train_run.lua — `trainer RECIPE [key=value ...]` with the fp16 loss scaler's
-- test options, which no recipe key sets (trainer.train.run's opts.scaler):
--   ./trainer run tests/cudacpu/train_run.lua --init-scale N --growth-interval N RECIPE [key=value ...]
--   ./trainer run tests/cudacpu/train_run.lua --init-scale N --growth-interval N --resume RUN_DIR [key=value ...]
-- The same path as the commands `trainer RECIPE` and `trainer resume RUN_DIR` (recipe.load or
-- trainer.train.resume.load, then trainer.train.loop.train, quiet); exits with its status. A
-- resume needs the options again: the checkpoint holds the scaler's state (scale, growth
-- tracker), not its test options. An initial scale that overflows the fp16 gradients is how the scripts force the
-- skipped steps and halvings that must agree between the devices.
local scaler, rest, i, resume = {}, {}, 1, false
while arg[i] do
  local k = arg[i]:match("^%-%-([%w-]+)$")
  if k == "init-scale" then scaler.init_scale = tonumber(arg[i + 1]) i = i + 2
  elseif k == "growth-interval" then scaler.growth_interval = tonumber(arg[i + 1]) i = i + 2
  elseif k == "resume" then resume = true i = i + 1
  elseif k then error("train_run.lua: unknown flag --" .. k, 0)
  else rest[#rest + 1] = arg[i] i = i + 1 end
end
local path = table.remove(rest, 1)
if not path then error("usage: trainer run tests/cudacpu/train_run.lua [--init-scale N] RECIPE [key=value ...]", 0) end
local r = resume and require("trainer.train.resume").load(path, rest) or require("trainer.recipe").load(path, rest)
os.exit(require("trainer.train.loop").train(r, { quiet = true, scaler = scaler }))
