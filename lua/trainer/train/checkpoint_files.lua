-- trainer.train.checkpoint_files: a run's checkpoint-STEP folders: writing one (t:save(): the
-- model's weights or the LoRA adapter in Hugging Face / PEFT format, the model folder's own
-- files, the loss's weights, trainer_state) and restoring a run from one (load_checkpoint, at
-- the end of the build when the recipe resumes).
-- Invariant: a folder named checkpoint-STEP is whole. It is built in checkpoint-STEP.tmp/,
-- every file fsync'ed as it is written, then renamed into place; a failure removes the .tmp
-- folder, and a full disk is an error naming the file and the free space
-- (trainer.train.outputs).
local T = require("trainer.core.tensor")
local json = require("trainer.core.json")
local errors = require("trainer.core.errors")
local memory = require("trainer.core.memory")
local outputs = require("trainer.train.outputs")
local fs = require("trainer.core.fs")
local rerank = require("trainer.train.rerank")

local Run = {}   -- methods of the run (trainer.train.run gathers them)

local MODEL_FILES = { "config.json", "tokenizer.json", "vocab.txt", "tokenizer_config.json", "special_tokens_map.json",
  "modules.json", "sentence_bert_config.json", "config_sentence_transformers.json", "1_Pooling/config.json",
  "sentencepiece.bpe.model" }

-- A safetensors write error of the C writer ("PATH: writing failed: `call`: strerror (...)"
-- or "PATH: cannot create PATH.tmp: strerror; ...") re-raised as trainer.outputs'
-- write_failed, which names the free space; any other error is re-raised as it is.
local function raise_write_error(err)
  local msg = errors.message(err)
  local path, why = msg:match("^(.-): writing failed: `[^`]*`: ([^(]-) %(")
  if not path then path, why = msg:match("^(.-): cannot create [^:]*: ([^;]*);") end
  if path then outputs.write_failed(path, why) end
  error(err, 0)
end

-- safetensors.save into a checkpoint (the C writer fsyncs and leaves no PATH.tmp behind).
local function save_tensors(path, list, meta)
  local inj = outputs.injected(path)
  if inj then outputs.write_failed(path, inj) end
  local ok, err = pcall(require("trainer.core.safetensors").save, path, list, meta)
  if not ok then raise_write_error(err) end
end

-- Writes checkpoint-STEP/ (atomically), prunes to the last save.keep. Returns the folder.
-- Built in checkpoint-STEP.tmp/: every file is fsync'ed as it is written, then the folder
-- (and 1_Pooling/) before the rename, then out/ after it, so that a checkpoint that has
-- its final name is whole and survives a crash. A failure removes the .tmp folder.
function Run:save()
  self:read_scalars()   -- a checkpoint's steps are checked (finite) and its last_loss known
  local dir = ("%s/checkpoint-%d"):format(self.out, self.step)
  if not self:writes_outputs() then self.last_checkpoint, self.saved_step = dir, self.step return dir end   -- rank 0 writes it
  outputs.build_folder(dir, "the checkpoint", function(tmp)
    outputs.mkdir(tmp)
    self:write_checkpoint(tmp)
  end)
  self.last_checkpoint, self.saved_step = dir, self.step
  if self.recipe.save.keep then outputs.prune(self.out, self.recipe.save.keep, self:protected_checkpoint()) end
  if self.progress then self.progress:saved(self, dir) end
  if self.hooks.on_save then self:call_hook("on_save", dir) end
  return dir
end

-- config_sentence_transformers.json with the prompts a checkpoint's model knows (the model
-- folder's and data.prompts', trainer.models.prompts.to_save), the folder's other fields kept.
function Run:write_prompts(tmp, src)
  local P = require("trainer.models.prompts")
  local spec = self.recipe.data and self.recipe.data.prompts
  if self.train_ds and self.train_ds.multi then
    -- several datasets: every dataset's per-column prompts, under their column names
    local merged
    for _, p in ipairs(self.train_ds.parts) do
      if type(p.ds.prompts_spec) == "table" then
        merged = merged or {}
        for k, v in pairs(p.ds.prompts_spec) do merged[k] = v end
      end
    end
    spec = merged or spec
  end
  local saved = spec ~= nil and P.to_save(self.model, spec)
  if not saved then return end
  local path = tmp .. "/config_sentence_transformers.json"
  local cfg = src and fs.exists(src .. "/config_sentence_transformers.json")
    and json.read(src .. "/config_sentence_transformers.json") or {}
  cfg.prompts = saved
  if cfg.default_prompt_name == nil then cfg.default_prompt_name = self.model.default_prompt_name end
  outputs.write_atomic(path, json.encode(cfg, 2) .. "\n")
end

-- The files of one checkpoint, written into the folder tmp.
function Run:write_checkpoint(tmp)
  self:sync_scaler()   -- the scaler's and the optimizer's numbers as of this step
  local recipe = self.recipe
  local optim = require("trainer.train.optim")
  local synced = { tmp }
  if recipe.lora then
    local lora = require("trainer.train.lora")
    local ok, err = pcall(lora.save, self.model, tmp, recipe.lora, recipe.model.from or recipe.model.tokenizer)
    if not ok then raise_write_error(err) end
  else
    save_tensors(tmp .. "/model.safetensors", require("trainer.models").state_list(self.model), { format = "pt" })
    local src = recipe.model.from or recipe.model.tokenizer
    local ce = self.model.cross_encoder
    if ce then
      local path = src and (src .. "/config.json")
      local raw = path and fs.exists(path) and json.read(path) or self.model.config
      outputs.write_atomic(tmp .. "/config.json", rerank.cross_encoder_config(raw, self.model.labels))
    end
    for _, f in ipairs(MODEL_FILES) do
      if src and fs.exists(src .. "/" .. f) and not (ce and (rerank.EMBEDDING_FILES[f] or f == "config.json")) then
        if f:find("/") then
          local sub = tmp .. "/" .. f:match("^(.*)/")
          outputs.mkdir(sub)
          synced[#synced + 1] = sub
        end
        outputs.copy_file(src .. "/" .. f, tmp .. "/" .. f)
      end
    end
    self:write_prompts(tmp, src)
  end
  local loss_params = {}
  for name, p in self.loss:parameters() do loss_params[#loss_params + 1] = { name, p.value } end
  for _, dname in ipairs(require("trainer.train.multi_data").names(self.losses or {})) do
    for name, p in self.losses[dname]:parameters() do loss_params[#loss_params + 1] = { dname .. "." .. name, p.value } end
  end
  if #loss_params > 0 then save_tensors(tmp .. "/loss.safetensors", loss_params) end
  local tensors, ometa = optim.flatten(self.optimizer:state())
  -- the run's peaks and wall time so far, so that a resumed run's summary covers every part
  self:merge_peaks(memory.stats(self.device))
  local meta = {
    peaks = self.peaks, wall_time = self:wall_time(),
    step = self.step, micro = self.micro, epoch = self.epoch, tokens = self.tokens, train_time = self.train_time,
    data = self.loader:state(), scaler = self.scaler:state(), rng = { seed = self.model.rng.seed, step = self.micro },
    optimizer = ometa, total_steps = self.total_steps, last_loss = self.last_loss,
    first_eval = self.first_eval, last_eval = self.last_eval, best = self.best, patience_used = self.patience_used,
    dist = self.dist and self.dist:checkpoint_meta(self.loader:state()) or nil,
  }
  local list = {}
  for k, v in pairs(tensors) do list[#list + 1] = { k, v } end
  table.sort(list, function(a, b) return a[1] < b[1] end)
  local raw = tmp .. "/trainer_state.safetensors"
  if #list == 0 then
    -- safetensors needs a tensor: a 1-element marker keeps the format uniform
    T.scope(function() save_tensors(raw, { { "marker", T.zeros({ 1 }) } }, { trainer_state = json.encode(meta) }) end)
  else
    save_tensors(raw, list, { trainer_state = json.encode(meta) })
  end
  outputs.gzip_file(raw, tmp .. "/trainer_state")
  os.remove(raw)
  for i = #synced, 1, -1 do outputs.sync(synced[i]) end
end

function Run:load_checkpoint(dir)
  local st = require("trainer.core.safetensors")
  local optim = require("trainer.train.optim")
  local recipe = self.recipe
  if recipe.lora then
    require("trainer.train.lora").load(self.model, dir)
  else
    local r = st.load(dir .. "/model.safetensors")
    require("trainer.models").load_weights(self.model, r, { on_warning = function() end })
    r:close()
  end
  if fs.exists(dir .. "/loss.safetensors") then
    local r = st.load(dir .. "/loss.safetensors")
    local runtime = require("trainer.core.runtime")
    local all = {}
    for name, p in self.loss:parameters() do all[#all + 1] = { name, p } end
    for dname, l in pairs(self.losses or {}) do
      for name, p in l:parameters() do all[#all + 1] = { dname .. "." .. name, p } end
    end
    for _, np in ipairs(all) do
      local name, p = np[1], np[2]
      T.scope(function()
        local t = r:tensor(name, { dtype = p.value:dtype(), device = self.device })
        runtime.check(require("trainer.core.ffi").tr_tensor_copy(runtime.ctx, p.value:ptr(), t:ptr()),
          "resume: " .. dir .. "/loss.safetensors")
      end)
    end
    r:close()
  end
  -- bounded, typed and checked against the model before any of it is used
  -- (the state's tensors are copied into the optimizer's and freed with the scope)
  local meta = T.scope(function()
    local meta, tensors = require("trainer.train.trainer_state").read(dir, { optimizer = self.optimizer,
      batches_per_epoch = self.batches_per_epoch, device = self.device, scratch = self.out,
      rank = self.dist and self.dist.rank, world = self.dist and self.dist.size or 1 })
    self.optimizer:load_state(optim.unflatten(tensors, meta.optimizer))
    return meta
  end)
  self.step, self.micro, self.epoch = meta.step, meta.micro, meta.epoch or 0
  self.tokens, self.train_time = meta.tokens or 0, meta.train_time or 0
  self.wall_before = meta.wall_time or 0
  if meta.peaks then self:merge_peaks(meta.peaks) end
  self.last_loss, self.first_eval, self.last_eval = meta.last_loss, meta.first_eval, meta.last_eval
  self.best, self.patience_used = meta.best, meta.patience_used
  self.model.rng.step = meta.rng.step
  if self.scaler.load_state and meta.scaler and next(meta.scaler) then self.scaler:load_state(meta.scaler) end
  self.loader:restore(meta.data)
  self.resumed_from = dir
  self.last_checkpoint = dir
end

return Run
