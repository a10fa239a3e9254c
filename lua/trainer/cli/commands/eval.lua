-- `trainer eval RECIPE.lua [key=value ...] [--checkpoint DIR] [--adapter DIR] [--out FILE]`:
-- evaluation only. The recipe's model (model.from, or model.config), or a checkpoint folder
-- (a run's checkpoint-N or best/: its weights replace the model's; a LoRA checkpoint is applied
-- to the recipe's model as an adapter), or the model plus a PEFT LoRA adapter (--adapter),
-- through the recipe's evaluation (data.eval, eval.sets, eval.fn) exactly as a run evaluates:
-- one JSON object on stdout, { eval = the metrics (named as in summary.json's eval), model,
-- adapter, checkpoint, recipe, the data read }, also written to FILE (default: the recipe's
-- out folder's eval.json). The way to measure a base model before
-- training it. Nothing is trained; no optimizer or training data is built.
local usage = "trainer eval RECIPE.lua [key=value ...] [--checkpoint DIR] [--adapter DIR] [--out FILE] [--quiet]   "
  .. "evaluate a model only (metrics JSON)"

local exists = require("trainer.core.fs").exists

local function run(args)
  local errors = require("trainer.core.errors")
  local cl = require("trainer.cli.model_args")
  local pos, flags = cl.parse(args, { checkpoint = "value", adapter = "value", out = "value", quiet = "bool" }, usage)
  local path = pos[1]
  if not path then errors.user("eval needs a recipe: %s", usage) end
  local overrides = {}
  for i = 2, #pos do overrides[#overrides + 1] = pos[i] end
  local r = require("trainer.recipe").load(path, overrides)
  local recipe = r.recipe
  local quiet = flags.quiet or recipe.log.quiet
  if not quiet then for _, w in ipairs(r.warnings) do io.stderr:write("warning: ", w, "\n") end end

  -- a checkpoint: a model folder replaces model.from; an adapter folder goes on the model
  local adapter = flags.adapter
  local ck = flags.checkpoint and flags.checkpoint:gsub("/+$", "")
  if ck then
    if exists(ck .. "/" .. require("trainer.train.lora").config_file) then
      if adapter then errors.user("--checkpoint %s holds a LoRA adapter; give it or --adapter, not both", ck) end
      adapter = ck
    else
      require("trainer.models").check_folder(ck, { adapter_example = "trainer eval " .. path .. " --adapter ADAPTER" })
      recipe.model.from = ck
    end
  end

  local build = require("trainer.train.build")
  local runtime = require("trainer.core.runtime")
  local device = runtime.device_name(runtime.parse_device(recipe.device))
  build.check_model_folder(recipe.model)
  local d = recipe.data or {}
  if d.eval and not exists(d.eval) then errors.user("data.eval: %s: no such file", d.eval) end
  -- the evaluation data first: a bad file stops before the model is loaded
  local rows, data_summary
  local eval_ds = require("trainer.train.data").eval(recipe)
  if eval_ds then
    rows = {}
    for row in eval_ds:iter() do rows[#rows + 1] = row end
    data_summary = eval_ds:summary()
    eval_ds:close()
  end
  local eval_sets = require("trainer.train.eval_sets")
  local sets = eval_sets.load(recipe)
  if not rows and not sets and not recipe.eval.fn then
    errors.user("%s: nothing to evaluate: set data.eval, eval.sets or eval.fn", path)
  end

  local model, tok_dir = build.build_model(recipe, device)
  local tokenizer = require("trainer.core.tokenizer").load(tok_dir)
  local ctx = setmetatable({ recipe = recipe, model = model, tokenizer = tokenizer, device = device,
    eval_rows = rows, eval_sets = sets }, { __index = require("trainer.train.run_evaluate") })
  local ok, err = pcall(function()
    if adapter then cl.apply_adapter(model, adapter, "eval") end
    local family = require("trainer.models.registry").of_model(model)
    local positions = family.max_positions(model.config)
    local want = recipe.model.max_length
    ctx.max_length = want and math.min(want, positions) or model.max_length
    ctx.scores = ctx:eval_scores() or {}
  end)
  model:free()
  tokenizer:free()
  if not ok then error(err, 0) end

  local json = require("trainer.core.json")
  local out = flags.out or (recipe.out .. "/eval.json")
  local outputs = require("trainer.train.outputs")
  local dir = out:match("^(.*)/[^/]*$")
  if dir and dir ~= "" then outputs.mkdir(dir) end
  local record = { eval = ctx.scores, model = recipe.model.from or "model.config", adapter = adapter,
    checkpoint = ck, recipe = r.path, eval_data = data_summary, eval_sets = sets and eval_sets.summaries(sets) or nil }
  local text = json.encode(record, 2) .. "\n"
  io.write(text)
  outputs.write_atomic(out, text)
  if not quiet then io.stderr:write(("trainer: evaluated %s%s; wrote %s\n"):format(record.model,
    adapter and (" with the adapter " .. adapter) or "", out)) end
  return 0
end

return { usage = usage, run = run }
