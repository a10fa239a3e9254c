-- trainer.train.lora: LoRA with PEFT's semantics, and PEFT's adapter format.
--
--   local lora = require("trainer.train.lora")
--   local names = lora.apply(model, { r = 8, alpha = 16, dropout = 0.1, targets = { "query", "value" } })
--   ... train: only the adapters (and the biases / modules_to_save asked for) are trainable ...
--   lora.save(model, "runs/x/adapter", nil, "models/all-MiniLM-L6-v2")
--   lora.load(other_model, "runs/x/adapter")    -- applies the adapter's config, then its weights
--   lora.merge(model)                           -- W += scale * B A; the Linears come back plain
--
-- Spec: the recipe's lora table (its keys, defaults and checks are trainer.recipe.keys'):
-- r, alpha, dropout, targets (module-name suffixes, like PEFT's target_modules: "query"
-- matches "...attention.self.query"; left out, PEFT's defaults for the model's family, its
-- peft_targets: "query", "value" for BERT, DistilBERT's "q_lin", "v_lin"), rslora (false: scale alpha / r; true: alpha / sqrt(r)),
-- bias ("none" | "all" | "lora_only"), modules_to_save (module-name suffixes trained fully
-- and saved with the adapter).
-- Invariants: every base parameter is frozen (no grad buffer, no optimizer state) except the
-- biases the bias mode names and the parameters of modules_to_save; the base weights are
-- never written before merge. Saved files: adapter_config.json and adapter_model.safetensors
-- with keys "base_model.model.<Hugging Face name>" (…lora_A.weight, …lora_B.weight, plus any
-- trainable bias or module_to_save parameter), as PEFT's save_pretrained writes them.
local C = require("trainer.core.ffi")
local T = require("trainer.core.tensor")
local runtime = require("trainer.core.runtime")
local ops = require("trainer.core.ops")
local json = require("trainer.core.json")
local errors = require("trainer.core.errors")
local LoraLinear = require("trainer.nn.lora")

local M = {}

M.prefix = "base_model.model."
M.config_file = "adapter_config.json"
M.weights_file = "adapter_model.safetensors"

-- ---------------------------------------------------------------- spec
-- The spec with the recipe key lora's checks and defaults (trainer.recipe.keys, the one place
-- they are written); where names the file it came from in errors (an adapter_config.json).
-- A single target may be given as a string; spec.seed (not a recipe key: the run seeds from
-- the recipe's seed) seeds the A matrices.
function M.normalize(spec, where)
  local seed = type(spec) == "table" and spec.seed or nil
  if type(spec) == "table" and (type(spec.targets) == "string" or seed ~= nil) then
    spec = require("trainer.recipe.schema").copy(spec)
    if type(spec.targets) == "string" then spec.targets = { spec.targets } end
    spec.seed = nil
  end
  if spec == false then
    errors.user("%slora = false has no adapter spec; give a table such as { r = 8, targets = { \"query\", \"value\" } }",
      where and (where .. ": ") or "")
  end
  local s = require("trainer.recipe.keys").resolve("lora", spec, where)
  s.seed = seed
  return s
end

-- ---------------------------------------------------------------- apply
-- Whether the module name matches a target suffix, PEFT's rule: the whole name or its
-- last dotted parts ("query" matches "...attention.self.query"). trainer.plan uses it too.
local function matches(name, suffix)
  return name == suffix or name:sub(-#suffix - 1) == "." .. suffix
end
M.matches = matches

-- The model's Linear names with layer numbers folded ("encoder.layer.N.attention.self.query").
local function linear_names(model)
  local seen, out = {}, {}
  for name, m in model:named_modules() do
    if m:type() == "Linear" or m:type() == "LoraLinear" then
      local short = name:gsub("%.%d+%.", ".N.")
      if not seen[short] then seen[short] = true; out[#out + 1] = short end
    end
  end
  return out
end

-- Whether the model already carries adapters.
function M.is_applied(model)
  for _, m in model:named_modules() do if m:type() == "LoraLinear" then return true end end
  return false
end

-- Freezes every parameter, wraps each Linear whose name ends with a target in a LoraLinear,
-- then unfreezes the biases of the bias mode and the modules_to_save. Returns the list of
-- adapted module names (model order). model.lora = { spec =, names = } records it.
-- spec false or nil (the recipe's `lora = false`): nothing changes, returns {}.
function M.apply(model, spec)
  if spec == false or spec == nil then return {} end
  local s = M.normalize(spec)
  if not s.targets then   -- the family's default target_modules, as PEFT's mapping gives them
    local family = require("trainer.models.registry").of_model(model)
    if not family then
      errors.user("lora.targets: this model was not built by a model family, so it has no default targets; give "
        .. "targets (module-name suffixes, e.g. { \"query\", \"value\" })")
    end
    s.targets = family.peft_targets
  end
  if M.is_applied(model) then
    errors.user("lora.apply: this model already has LoRA adapters; merge them first (lora.merge) or load a fresh model")
  end
  local found, picked = {}, {}
  for name, m, parent, child in model:named_modules() do
    if m:type() == "Linear" then
      for _, t in ipairs(s.targets) do
        if matches(name, t) then
          found[t] = true
          picked[#picked + 1] = { name, m, parent, child }
          break
        end
      end
    end
  end
  local family = require("trainer.models.registry").of_model(model)
  for _, t in ipairs(s.targets) do
    if not found[t] then
      errors.user("lora.targets: %q matches no Linear module of this model; its Linear modules are %s (a target " ..
        "matches every module whose name ends with it, e.g. \"query\" or \"attention.output.dense\"%s)", t,
        table.concat(linear_names(model), ", "), family and ("; PEFT's defaults for %s models are %s"):format(family.name,
        table.concat(family.peft_targets, ", ")) or "")
    end
  end
  local save_modules = {}
  for _, t in ipairs(s.modules_to_save or {}) do
    local any = false
    for name, m in model:named_modules() do
      if name ~= "" and matches(name, t) then any = true; save_modules[#save_modules + 1] = m end
    end
    if not any then
      errors.user("lora.modules_to_save: %q matches no module of this model (e.g. \"classifier\" on a classification " ..
        "model; names match by suffix like targets)", t)
    end
  end
  model:set_trainable(false)
  local seed = s.seed or (model.rng and model.rng.seed) or 0
  local rng = model.rng or { seed = seed, step = 0 }
  local names, wrapped = {}, {}
  for i, e in ipairs(picked) do
    local name, base, parent, child = e[1], e[2], e[3], e[4]
    local w = LoraLinear.new(base, s, i, rng, seed)
    w.training, w.grad_enabled = base.training, base.grad_enabled
    w.dropout.training, w.dropout.grad_enabled = base.training, base.grad_enabled
    parent:replace_module(child, w)
    names[i] = name
    wrapped[#wrapped + 1] = w
  end
  if s.bias == "all" then
    for name, p in model:parameters() do if name:match("bias$") then p.trainable = true end end
  elseif s.bias == "lora_only" then
    for _, w in ipairs(wrapped) do if w.base.bias then w.base.bias.trainable = true end end
  end
  for _, m in ipairs(save_modules) do m:set_trainable(true) end
  model.lora = { spec = s, names = names }
  return names
end

-- ---------------------------------------------------------------- save
local function mkdir_p(dir)
  local ok, err = require("trainer.core.sys").mkdir_p(dir)
  if not ok then errors.user("%s: cannot create the folder (%s; check the path and its permissions)", dir, err) end
end

-- Checked, fsync'ed, atomic (trainer.outputs): a full disk is an error naming the file.
local function write_atomic(path, text)
  require("trainer.train.outputs").write_atomic(path, text)
end

-- PEFT's task_type for the model: SEQ_CLS for classifiers, FEATURE_EXTRACTION otherwise.
local function task_type(model)
  if model.task == "classification" then return "SEQ_CLS" end
  return "FEATURE_EXTRACTION"
end

-- The adapter_config.json table for spec.
function M.peft_config(spec, base_model_name_or_path, task)
  return {
    peft_type = "LORA", task_type = task or json.null,
    r = spec.r, lora_alpha = spec.alpha, lora_dropout = spec.dropout,
    target_modules = spec.targets, bias = spec.bias, use_rslora = spec.rslora,
    modules_to_save = spec.modules_to_save or json.null,
    base_model_name_or_path = base_model_name_or_path or json.null,
    fan_in_fan_out = false, inference_mode = true, init_lora_weights = true, use_dora = false,
    layers_to_transform = json.null, layers_pattern = json.null, revision = json.null,
  }
end

-- The PEFT key of a parameter name: "base_model.model.<name>", with the base parameters of
-- an adapted module under "<module>.base_layer." as PEFT names the wrapped Linear.
function M.peft_key(model, name)
  local wrapped = {}
  for _, n in ipairs(model.lora and model.lora.names or {}) do wrapped[n] = true end
  local module, leaf = name:match("^(.*)%.([%w_]+)$")
  if module and wrapped[module] and (leaf == "weight" or leaf == "bias") then
    return M.prefix .. module .. ".base_layer." .. leaf
  end
  return M.prefix .. name
end

-- The adapter's tensors as an ordered { { key, tensor }, ... } list: every trainable
-- parameter under its PEFT key.
function M.state_list(model)
  local out = {}
  for name, p in model:parameters() do
    if p.trainable then out[#out + 1] = { M.peft_key(model, name), p.value } end
  end
  return out
end

-- Writes dir/adapter_config.json and dir/adapter_model.safetensors (each written to a
-- temporary name, then renamed: never half-written). spec defaults to the applied one.
function M.save(model, dir, spec, base_model_name_or_path)
  if not model.lora then errors.user("lora.save: the model has no LoRA adapters (call lora.apply or lora.load first)") end
  spec = spec and M.normalize(spec) or model.lora.spec
  if not spec.targets then spec.targets = model.lora.spec.targets end   -- the family's default, as applied
  mkdir_p(dir)
  local st = require("trainer.core.safetensors")
  local path = dir .. "/" .. M.weights_file
  T.scope(function()   -- the f32 host copies are freed once written
    local list = {}
    for _, e in ipairs(M.state_list(model)) do
      local t = e[2]
      if t:dtype() ~= "f32" or t:device() ~= "cpu" then t = t:to({ dtype = "f32", device = "cpu", tag = "workspace" }) end
      list[#list + 1] = { e[1], t }
    end
    st.save(path .. ".tmp", list, { format = "pt" })
  end)
  local rok, rerr = os.rename(path .. ".tmp", path)
  if not rok then os.remove(path .. ".tmp") errors.user("%s: cannot rename into place (%s)", path, tostring(rerr)) end
  write_atomic(dir .. "/" .. M.config_file,
    json.encode(M.peft_config(spec, base_model_name_or_path, task_type(model)), 2) .. "\n")
  return dir
end

-- ---------------------------------------------------------------- load
-- The spec of an adapter_config.json table (path names it in errors).
function M.spec_of_config(cfg, path)
  if type(cfg) ~= "table" or cfg.peft_type ~= "LORA" then
    errors.user("%s: not a LoRA adapter config (peft_type must be \"LORA\", got %s)", path,
      tostring(type(cfg) == "table" and cfg.peft_type or cfg))
  end
  if type(cfg.target_modules) == "string" then
    errors.user("%s: target_modules is the regular expression %q; trainer matches a list of module-name suffixes: " ..
      "write them as a list", path, cfg.target_modules)
  end
  if cfg.use_dora == true then errors.user("%s: DoRA adapters (use_dora = true) are not supported", path) end
  for _, k in ipairs({ "rank_pattern", "alpha_pattern" }) do
    if type(cfg[k]) == "table" and next(cfg[k]) ~= nil then
      errors.user("%s: %s (a rank or alpha per module) is not supported; one r and lora_alpha for all targets", path, k)
    end
  end
  if cfg.lora_bias == true then errors.user("%s: lora_bias = true (a bias on lora_B) is not supported", path) end
  if cfg.fan_in_fan_out == true then errors.user("%s: fan_in_fan_out = true (Conv1D layers) is not supported", path) end
  local function given(v) if v ~= json.null then return v end end
  return M.normalize({
    r = given(cfg.r), alpha = given(cfg.lora_alpha), dropout = given(cfg.lora_dropout), targets = given(cfg.target_modules),
    rslora = cfg.use_rslora == true, bias = given(cfg.bias), modules_to_save = given(cfg.modules_to_save),
  }, path)
end

local function copy_into(p, src)
  runtime.check(C.tr_tensor_copy(runtime.ctx, p.value:ptr(), src:ptr()), "lora.load")
end

-- Reads dir (a PEFT adapter folder): applies its config unless the model already has
-- adapters, then copies every tensor into the parameter of its name. A tensor naming no
-- parameter, a shape mismatch or a missing lora_A/lora_B is a user error naming the file.
-- Returns the adapted module names.
function M.load(model, dir)
  local cfg_path = dir .. "/" .. M.config_file
  local f = io.open(cfg_path, "rb")
  if not f then errors.user("%s: missing (a PEFT adapter folder holds %s and %s)", cfg_path, M.config_file, M.weights_file) end
  f:close()
  local spec = M.spec_of_config(json.read(cfg_path), cfg_path)
  if not model.lora then M.apply(model, spec) end
  local path = dir .. "/" .. M.weights_file
  local st = require("trainer.core.safetensors")
  local reader = st.load(path)
  local params = model:parameter_map()
  local loaded = {}
  local ok, err = pcall(function()
    for _, key in ipairs(reader:names()) do
      local name = key
      if name:sub(1, #M.prefix) == M.prefix then name = name:sub(#M.prefix + 1) end
      name = name:gsub("%.default%.", "."):gsub("%.base_layer%.", ".")
      local p = params[name]
      if not p then
        errors.user("%s: tensor %s names no parameter of this model (was the adapter trained on another " ..
          "architecture, or with other target_modules?)", path, key)
      end
      local info = reader:info(key)
      local want = p.value:shape()
      if table.concat(info.shape, ",") ~= table.concat(want, ",") then
        errors.user("%s: %s has shape [%s] but the model expects [%s] (r = %d in %s)", path, key,
          table.concat(info.shape, ", "), table.concat(want, ", "), spec.r, M.config_file)
      end
      T.scope(function() copy_into(p, reader:tensor(key, { dtype = "f32", tag = "workspace" })) end)
      loaded[name] = true
    end
    for _, n in ipairs(model.lora.names) do
      for _, ab in ipairs({ ".lora_A.weight", ".lora_B.weight" }) do
        if not loaded[n .. ab] then
          errors.user("%s: %s%s%s is missing (the adapter's config targets %s)", path, M.prefix, n, ab,
            table.concat(model.lora.spec.targets, ", "))
        end
      end
    end
  end)
  reader:close()
  if not ok then error(err, 0) end
  return model.lora.names
end

-- ---------------------------------------------------------------- merge
-- Folds every adapter into its base weight (W += scale * B A, in f32) and puts the plain
-- Linear back in its place; A, B and their grads are freed. Returns the merged names.
function M.merge(model)
  local list = {}
  for name, m, parent, child in model:named_modules() do
    if m:type() == "LoraLinear" then list[#list + 1] = { name, m, parent, child } end
  end
  local names = {}
  for i, e in ipairs(list) do
    local w, parent = e[2], e[3]
    local base = w.base
    local W = base.weight.value
    T.scope(function()   -- W += scale * B A, in f32
      local delta = w:delta()
      if W:dtype() == "f32" then
        ops.axpy_(W, delta, 1)
      else
        local w32 = W:to({ dtype = "f32", tag = "workspace" })
        ops.axpy_(w32, delta, 1)
        runtime.check(C.tr_tensor_copy(runtime.ctx, W:ptr(), w32:ptr()), "lora.merge")
      end
    end)
    w:release()
    w.dropout:release()
    for _, p in ipairs({ w.lora_A, w.lora_B }) do
      p.value:free()
      if p.grad then p.grad:free(); p.grad = nil end
    end
    parent:replace_module(e[4], base)
    names[i] = e[1]
  end
  model.lora = nil
  return names
end

M.LoraLinear = LoraLinear

return M
