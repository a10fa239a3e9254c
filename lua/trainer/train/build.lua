-- trainer.train.build: a run built from a resolved recipe (trainer.train.run.build), in the
-- order the run's contract fixes: the cheap checks first (the resume target, the model
-- folder, the data files, the config and the memory plan, the job under mpirun, the card's
-- precision), then the data, the model (its family's, trainer.models), the tokenizer, LoRA,
-- mixed precision, gradient checkpointing, the loss, the optimizer, the schedule and the
-- scaler; last, a resume restores the checkpoint's state (trainer.train.checkpoint_files).
-- Nothing is allocated before the checks pass: a run that cannot fit stops before its model.
local errors = require("trainer.core.errors")
local memory = require("trainer.core.memory")
local outputs = require("trainer.train.outputs")
local sys = require("trainer.core.sys")

local M = {}

-- ---------------------------------------------------------------- checks
local function download_hint(m)
  local hub = m.hub or "ORG/NAME"
  return ("huggingface-cli download %s --local-dir %s"):format(hub, m.from)
end

-- A missing model folder is the most common first error: it names the download command.
function M.check_model_folder(m)
  if m.from then
    require("trainer.models").check_folder(m.from, { key = "model.from", download = download_hint(m),
      tokenizer = m.tokenizer == nil })
  end
end

-- Missing data files fail before any work, with the recipe's data.hint when it has one.
function M.check_data_files(d)
  if not d then return end
  local files = { { "train", d.train }, { "eval", d.eval } }
  if type(d.train) == "table" then   -- several datasets by name
    files = { { "eval", d.eval } }
    for _, name in ipairs(require("trainer.train.multi_data").names(d.train)) do
      files[#files + 1] = { "train." .. name .. ".file", d.train[name].file }
    end
  end
  for _, kp in ipairs(files) do
    local key, path = kp[1], kp[2]
    if path then
      local f = io.open(path, "rb")
      if f then f:close() else
        errors.user("data.%s: %s: no such file. %s", key, path,
          d.hint and ("To get it: " .. d.hint .. ".")
            or "Give a .jsonl, .tsv or .csv file (optionally .gz) with the columns the recipe names.")
      end
    end
  end
end

-- ---------------------------------------------------------------- model
-- The recipe's model (its family's build, or trainer.models.load_model for a folder) and the
-- folder its tokenizer comes from.
local function build_model(recipe, device)
  local models = require("trainer.models")
  local m = recipe.model
  -- a cross-encoder is a sequence classifier with one label (its logit is the pair's score)
  local task, num_labels = m.task, m.num_labels
  if task == "cross_encoder" then
    if num_labels and num_labels ~= 1 then
      errors.user("model.num_labels = %d: a cross-encoder scores a pair with one logit; remove model.num_labels "
        .. "or use model.task = \"classification\"", num_labels)
    end
    task, num_labels = "classification", 1
  end
  local opts = { device = device, seed = recipe.seed, task = task, pooling = m.pooling,
                 normalize = m.normalize, max_length = m.max_length, arch = m.arch }
  local model, tok_dir
  if m.from then
    M.check_model_folder(m)
    tok_dir = m.tokenizer or m.from
    if task == "classification" and not models.has_head(m.from, m.arch) then
      -- a new classification head on a pretrained encoder (transformers' behaviour): the head
      -- is new, and so is what the family starts anew with it; every other weight must be in
      -- the folder
      local n = num_labels or (m.labels and #m.labels) or 3
      opts.num_labels, opts.on_warning = n, function() end
      model = models.load_model(m.from, opts)
      model.labels = {}
      for i = 0, n - 1 do model.labels[i] = (m.labels and m.labels[i + 1]) or ("LABEL_" .. i) end
    else
      opts.num_labels = m.task == "cross_encoder" and 1 or nil
      model = models.load_model(m.from, opts)
    end
  else
    local cfg, family = models.config_of(m)
    if not cfg then
      errors.user("model.config = %q: not a preset (tiny, bert-base, bert-large, minilm-l6, minilm-l12) or a "
        .. "table of config fields; use model.from for pretrained models", tostring(m.config))
    end

    if not m.tokenizer then errors.user("model.tokenizer: a model built from model.config needs a tokenizer folder") end
    tok_dir = m.tokenizer
    model = family.build(task == "classification" and "classification" or "embedding", { config = cfg,
      device = device, seed = recipe.seed, num_labels = num_labels, pooler = false, pooling = m.pooling,
      normalize = m.normalize })
    local limit = family.max_positions(cfg)
    model.max_length = math.min(m.max_length or limit, limit)
  end
  model.cross_encoder = m.task == "cross_encoder" or nil
  -- model.dropout overrides every dropout probability of the config (the family's set_dropout)
  if m.dropout then
    local family = require("trainer.models.registry").of_model(model)
    family.set_dropout(model, m.dropout)
  end
  return model, tok_dir
end

M.build_model = build_model   -- (also `trainer eval`'s)

-- ---------------------------------------------------------------- the run
-- The run of resolved (trainer.recipe.load's result): an object of class Run
-- (trainer.train.run, whose methods the rest of the build calls).
function M.run(resolved, opts, Run)
  opts = opts or {}
  local recipe = resolved.recipe
  local self = setmetatable({ recipe = recipe, source = resolved.path, out = recipe.out, opts = opts,
    step = 0, micro = 0, tokens = 0, train_time = 0, epoch = 0, hooks = recipe.hooks or {},
    last_loss = nil, last_eval = nil, first_eval = nil, evals = {}, last_checkpoint = nil,
    stop_signal = nil, pending = nil, held = {}, unread = {}, started = sys.now(), wall_before = 0 }, Run)
  local runtime = require("trainer.core.runtime")
  self.device = runtime.device_name(runtime.parse_device(recipe.device))
  if recipe.memory then
    if recipe.memory.limit then memory.set_limit(recipe.memory.limit) end
    if recipe.memory.max_split_size then memory.set_max_split_size(recipe.memory.max_split_size) end
  end

  -- batch.size = "auto" / memory.fit = true: the configuration the memory plan fits in the
  -- budget, written into the recipe before anything reads it (trainer.plan.fit); a resume
  -- keeps the run's own choice
  local fit = require("trainer.plan.fit")
  if fit.wanted(recipe) then M.check_model_folder(recipe.model) end   -- its own message, before the plan's
  self.fit = fit.apply(resolved, self.device, { quiet = opts.quiet })

  -- resume: find the checkpoint first, so a bad path fails before any work
  -- and a folder that holds another run's outputs is refused before anything is written
  if recipe.resume then
    local resume = require("trainer.train.resume")
    self.resume_dir = resume.find_checkpoint(recipe)
    resume.check_target(resolved, self.resume_dir)
  end

  M.check_model_folder(recipe.model)
  M.check_data_files(recipe.data)
  -- config.json typed and ranged, and the memory plan against memory.limit or the device,
  -- before anything is allocated: a run that cannot fit stops now (exit 2), with the ledger
  self.plan = require("trainer.plan.check").check(recipe, self.device, resolved.path)
  -- under mpirun: this rank's membership of the job (trainer.dist), one GPU per rank; after
  -- the checks above, so that a recipe's mistake ends every rank plainly, before MPI starts
  self.dist = require("trainer.dist").setup(recipe)
  if self.dist then self.device = self.dist:device(self.device, recipe.device) end
  self:check_best()   -- save.best / early_stopping: eval.primary, one process
  -- a precision the card does not compute in (bf16 before Ampere) stops here, before the model
  require("trainer.core.card").check_precision(self.device, recipe.precision, resolved.path)
  -- data before the model, as it is cheap to fail: a malformed line ends the run before model loading
  local data = require("trainer.train.data")
  self.train_ds, self.loader = data.train(recipe, { world = self.dist and self.dist.size })
  -- data.prompts names text columns: checked before the model loads
  if self.train_ds.multi then
    if self.dist then errors.user("data.train: several datasets under mpirun are not supported yet; train on one") end
    for _, p in ipairs(self.train_ds.parts) do self:column_prompts(p.name) end
  else
    self:column_prompts()
  end
  local eval_ds = data.eval(recipe)
  if eval_ds then
    self.eval_rows = {}
    for row in eval_ds:iter() do self.eval_rows[#self.eval_rows + 1] = row end
    self.eval_summary = eval_ds:summary()
    eval_ds:close()
  end
  self.eval_sets = require("trainer.train.eval_sets").load(recipe)   -- eval.sets' files, checked now

  local model, tok_dir = build_model(recipe, self.device)
  self.model = model
  self.tokenizer = require("trainer.core.tokenizer").load(tok_dir)
  -- a longer model.max_length than the model has positions for is cut to them, and said once
  local family = require("trainer.models.registry").of_model(model)
  local positions = family.max_positions(model.config)
  local want = recipe.model.max_length
  if want and want > positions and not (opts.quiet or recipe.log.quiet) and (not self.dist or self.dist.rank == 0) then
    io.stderr:write(("warning: model.max_length = %s is above the model's max_position_embeddings (%d, in %s); "
      .. "texts are cut at %d tokens. Set model.max_length to at most %d to silence this.\n"):format(
      require("trainer.cli.pretty").number(want), positions,
      recipe.model.from and (recipe.model.from .. "/config.json") or "model.config", positions, positions))
  end
  self.max_length = want and math.min(want, positions) or model.max_length

  if recipe.lora then self.lora_names = require("trainer.train.lora").apply(model, recipe.lora) end
  if recipe.precision ~= "fp32" then require("trainer.train.amp").prepare(model, recipe.precision) end
  -- "auto": the segmentation the plan found of least peak memory for this shape
  if recipe.checkpoint then
    require("trainer.train.grad_checkpoint").apply(model, recipe.checkpoint, self.plan and self.plan.checkpoint_sizes)
  end

  local losses = require("trainer.losses")
  local lspec = {}
  for k, v in pairs(recipe.loss) do lspec[k] = v end
  self.deferred = opts.lazy_scalars or self.device ~= "cpu"
  if self.device ~= "cpu" or opts.batch_feed then self.feed = require("trainer.train.batch_feed").new(self.device) end
  self.loss = losses.new(lspec, { dim = model.config.hidden_size, device = self.device, seed = recipe.seed,
    deferred = self.deferred, cross_encoder = model.cross_encoder })
  if model.cross_encoder and lspec.name ~= "bce" and lspec.name ~= "cross_entropy" then
    errors.user("loss.name = %q: a cross-encoder trains with \"bce\" (scored pairs) or \"cross_entropy\" (each "
      .. "query's positive and negatives)", lspec.name)
  end

  -- parameters: the model's and the loss's own (SoftmaxLoss' classifier), as (name, param)
  self.params = {}
  for name, p in model:parameters() do self.params[#self.params + 1] = { name, p } end
  for name, p in self.loss:parameters() do self.params[#self.params + 1] = { "loss." .. name, p } end
  -- several datasets: each dataset's own loss (data.train.NAME.loss), its parameters as "NAME.<param>"
  self.losses = {}
  if self.train_ds.multi then
    for _, part in ipairs(self.train_ds.parts) do
      if part.ds.loss_spec then
        local l = losses.new(part.ds.loss_spec, { dim = model.config.hidden_size, device = self.device, seed = recipe.seed,
          deferred = self.deferred })
        self.losses[part.name] = l
        for name, p in l:parameters() do self.params[#self.params + 1] = { "loss." .. part.name .. "." .. name, p } end
      end
    end
  end
  local function iter()
    local i = 0
    return function()
      i = i + 1
      local e = self.params[i]
      if e then return e[1], e[2] end
    end
  end
  self.param_iter = iter
  -- DDP's start: the collective chosen, rank 0's weights on every rank
  if self.dist then
    self.dist:choose_backend()
    self.dist:broadcast_params(self.params)
  end
  self.optimizer = require("trainer.train.optim").new(iter(), recipe.optim)
  local acc = recipe.batch.accumulate
  -- oneDNN packs made per product and freed as it returns: a frozen weight's always, a trained
  -- weight's without accumulation (the optimizer writes it after its one forward and one
  -- backward); kept, they would sit beside the activations at their peak (Optimizer:transient_packs)
  if self.device == "cpu" then self.optimizer:transient_packs(acc) end
  -- the optimizer state before the first forward: made at the first step, it would split the
  -- blocks the activations had just freed (a resume replaces it with the checkpoint's)
  self.optimizer:make_state()

  local per_epoch = self.loader:batches_per_epoch()
  self.batches_per_epoch = per_epoch
  self.steps_per_epoch = math.max(1, math.ceil(per_epoch / acc))
  self.total_steps = recipe.steps or math.max(1, math.ceil(recipe.epochs * self.steps_per_epoch))
  self.schedule = require("trainer.train.schedule").new(recipe.schedule, recipe.optim.lr, self.total_steps)
  -- opts.scaler (tests): the fp16 scaler's init_scale, growth_interval, ... (amp.new_scaler)
  self.scaler = require("trainer.train.amp").new_scaler(recipe.precision, nil, opts.scaler)
  self.model.rng = self.model.rng or { seed = recipe.seed, step = 0 }

  if self.resume_dir then
    outputs.mkdir(self.out)
    self:load_checkpoint(self.resume_dir)
  end
  return self
end

return M
