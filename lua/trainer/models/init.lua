-- trainer.models: Hugging Face model folders in, trainer.nn models out.
--
--   local model = trainer.load_model("models/all-MiniLM-L6-v2", { task = "embedding" })
--   model.task       "embedding" | "classification"
--   model.max_length the folder's max_seq_length (sentence_bert_config.json) or the positions
--   model.labels     { [0] = "entailment", ... } for classification
--   model.dir, model.config, model.warnings
--
-- A folder holds config.json, model.safetensors (or model.safetensors.index.json + its
-- shards) and a tokenizer (tokenizer.json or vocab.txt); a sentence-transformers folder
-- adds modules.json (its Pooling module's config.json gives the pooling mode, a Normalize
-- module L2-normalises), sentence_bert_config.json (max_seq_length). Models come back in
-- eval mode, like transformers' from_pretrained; call model:train() to train.
-- The family that builds a folder's model is config.json's model_type's
-- (trainer.models.registry); everything here goes through the family interface.
local json = require("trainer.core.json")
local errors = require("trainer.core.errors")
local registry = require("trainer.models.registry")
local T = require("trainer.core.tensor")

local M = {}

M.valid_folder = "a model folder holds config.json, model.safetensors (or model.safetensors.index.json " ..
  "with its shards) and tokenizer.json or vocab.txt"

local fs = require("trainer.core.fs")
local exists = fs.exists

-- The adapter_config.json in dir as a table ({} when it does not parse), or nil.
function M.adapter_config(dir)
  local path = dir .. "/" .. require("trainer.train.lora").config_file
  if not exists(path) then return nil end
  local ok, cfg = pcall(json.read, path)
  return ok and type(cfg) == "table" and cfg or {}
end

-- Errors unless dir is a model folder, naming the first thing missing. opts (all optional):
--   tokenizer        the folder must hold a tokenizer too (tokenizer.json or vocab.txt)
--   key              the recipe key that named dir (model.from), said before the folder
--   download         how to fetch a folder that is not there (a command line)
--   adapter_example  the command that takes dir as an adapter, BASE and ADAPTER its
--                    placeholders: a LoRA adapter given in a model's place is named as one,
--                    with that command (BASE: the adapter's base_model_name_or_path)
--   adapter_how      where the adapter goes instead (default "with --adapter")
function M.check_folder(dir, opts)
  opts = opts or {}
  local at = opts.key and (opts.key .. ": ") or ""
  if type(dir) ~= "string" then errors.user("%sa model is a folder path, not %s (%s)", at, type(dir), M.valid_folder) end
  if not fs.is_dir(dir) then
    if opts.download then
      errors.user("%s%s: no such model folder. Download it with:\n  %s\nor point %s at a folder (%s)", at, dir,
        opts.download, opts.key or "it", M.valid_folder)
    end
    errors.user("%s%s: no such model folder (%s)", at, dir, M.valid_folder)
  end
  if not exists(dir .. "/config.json") then
    local cfg = opts.adapter_example and M.adapter_config(dir)
    if cfg then
      local base = type(cfg.base_model_name_or_path) == "string" and cfg.base_model_name_or_path or nil
      -- functions as replacements: a path may hold '%'
      local cmd = opts.adapter_example:gsub("BASE", function() return base or "BASE_MODEL_DIR" end)
        :gsub("ADAPTER", function() return dir end)
      errors.user("%s is a LoRA adapter (it holds adapter_config.json), not a model folder: give the base model it "
        .. "was trained on%s as the model, and the adapter %s:\n  %s", dir,
        base and (" (%s, its base_model_name_or_path)"):format(base) or "", opts.adapter_how or "with --adapter", cmd)
    end
    errors.user("%s%s/config.json: missing (%s)", at, dir, M.valid_folder)
  end
  if not exists(dir .. "/model.safetensors") and not exists(dir .. "/model.safetensors.index.json") then
    errors.user("%s%s/model.safetensors: missing, and no model.safetensors.index.json either (%s)", at, dir,
      M.valid_folder)
  end
  if opts.tokenizer and not exists(dir .. "/tokenizer.json") and not exists(dir .. "/vocab.txt") then
    errors.user("%s%s/tokenizer.json: missing, and no vocab.txt either (%s)", at, dir, M.valid_folder)
  end
end

-- ---------------------------------------------------------------- sentence-transformers
local pooling_keys = {
  { "pooling_mode_cls_token", "cls" }, { "pooling_mode_max_tokens", "max" },
  { "pooling_mode_mean_sqrt_len_tokens", "mean_sqrt_len" }, { "pooling_mode_mean_tokens", "mean" },
}

-- A Pooling module's config.json (path p) into out: its one mode, include_prompt.
local function read_pooling(p, out)
  local pc = json.read(p)
  local modes = {}
  for _, k in ipairs(pooling_keys) do if pc[k[1]] == true then modes[#modes + 1] = k[2] end end
  if pc.pooling_mode and type(pc.pooling_mode) == "string" then modes = { pc.pooling_mode } end
  if #modes > 1 then
    errors.user("%s: several pooling modes at once (%s) are not supported; pick one with opts.pooling", p,
      table.concat(modes, ", "))
  end
  if #modes == 1 then out.pooling = modes[1] end
  if pc.include_prompt == false then out.include_prompt = false end
end

-- config_sentence_transformers.json's table c (from path cst) into out: prompts,
-- default_prompt_name.
local function read_prompts(c, cst, out)
  if type(c.prompts) == "table" then
    for k, v in pairs(c.prompts) do
      if type(k) ~= "string" or type(v) ~= "string" then
        errors.user("%s: prompts must map names to texts ({\"query\": \"query: \"})", cst)
      end
      out.prompts[k] = v
    end
  end
  if type(c.default_prompt_name) == "string" then
    if out.prompts[c.default_prompt_name] == nil then
      errors.user("%s: default_prompt_name %q is not one of its prompts", cst, c.default_prompt_name)
    end
    out.default_prompt_name = c.default_prompt_name
  end
end

-- { pooling = mode, normalize = bool, max_seq_length = n or nil, sentence_transformers = bool,
--   include_prompt = bool (the Pooling config's, default true), prompts = { name = text },
--   default_prompt_name = name or nil (config_sentence_transformers.json's) }
function M.read_sentence_config(dir)
  local out = { pooling = "mean", normalize = false, sentence_transformers = false, include_prompt = true, prompts = {} }
  local modules_path = dir .. "/modules.json"
  if exists(modules_path) then
    out.sentence_transformers = true
    local mods = json.read(modules_path)
    if type(mods) ~= "table" then errors.user("%s: must be a JSON list of modules", modules_path) end
    for _, m in ipairs(mods) do
      local ty = type(m) == "table" and tostring(m.type) or ""
      if ty:match("Pooling$") then
        local p = dir .. "/" .. (m.path or "") .. "/config.json"
        if exists(p) then read_pooling(p, out) end
      elseif ty:match("Normalize$") then
        out.normalize = true
      end
    end
  end
  local cst = dir .. "/config_sentence_transformers.json"
  if exists(cst) then
    local c = json.read(cst)
    if type(c) == "table" then read_prompts(c, cst, out) end
  end
  local sb = dir .. "/sentence_bert_config.json"
  if exists(sb) then
    local c = json.read(sb)
    if type(c) == "table" and type(c.max_seq_length) == "number" then out.max_seq_length = c.max_seq_length end
  end
  return out
end

local function is_classifier(raw)
  if type(raw.architectures) == "table" then
    for _, a in ipairs(raw.architectures) do
      if type(a) == "string" and a:match("ForSequenceClassification$") then return true end
    end
  end
  return false
end

-- Labels as a 0-based table from id2label (or "LABEL_k" names for num_labels).
local function labels_of(raw)
  local labels, n = {}, 0
  if type(raw.id2label) == "table" then
    for k, v in pairs(raw.id2label) do
      local i = tonumber(k)
      if i then labels[i] = tostring(v); n = math.max(n, i + 1) end
    end
  end
  if n == 0 then
    n = tonumber(raw.num_labels) or 2
    for i = 0, n - 1 do labels[i] = "LABEL_" .. i end
  end
  return labels, n
end

-- ---------------------------------------------------------------- configs and families
-- The checked config of a recipe's model table and the family that builds it: config.json of
-- model.from (nil when the file is missing: the folder checks name it), model.config as a
-- table, or a preset (nil for an unknown one: the run's build names it). model.arch chooses
-- the family where the config names no model_type, and must agree where it does.
function M.config_of(m)
  if m.from then
    local path = m.from .. "/config.json"
    if not exists(path) then return nil end
    return registry.config(json.read(path), path, m.arch)
  end
  if type(m.config) == "table" then return registry.config(m.config, "model.config", m.arch) end
  local preset = require("trainer.models.presets")[m.config or ""]
  if preset then return registry.config(preset, ("model.config = %q"):format(m.config), m.arch) end
  return nil
end

-- The family of a model built by one; a user error naming `what` for any other module.
local function family_needed(model, what)
  local family = registry.of_model(model)
  if not family then
    errors.user("%s: not a model built from a model family (trainer.load_model or a recipe's model)", what)
  end
  return family
end

-- All parameters under their Hugging Face names, in order, for safetensors.save.
function M.state_list(model) return family_needed(model, "state_list").state_list(model) end

-- Copies the weights of a safetensors file, folder or reader into model by name (its
-- family's load_weights: prefix-tolerant, missing weights an error, the rest warnings).
function M.load_weights(model, source, opts)
  return family_needed(model, "load_weights").load_weights(model, source, opts)
end

-- Whether the model folder dir holds a trained classification head (its family's names).
function M.has_head(dir, arch)
  local path = dir .. "/config.json"
  local _, family = registry.config(json.read(path), path, arch)
  local reader = require("trainer.core.safetensors").load(dir)
  local ok, has = pcall(family.has_head, reader)
  reader:close()
  if not ok then error(has, 0) end
  return has
end

-- ---------------------------------------------------------------- load_model
-- opts: device, dtype (weights, default f32), activation_dtype (e.g. "bf16"), task ("embedding" | "classification"; default
-- from architectures), pooling (override), normalize (override), max_length, seed,
-- num_labels (classification: a new head of this size when it differs from config.json),
-- arch (a recipe's model.arch: the folder's model_type must be of its family),
-- on_warning(msg) (default: print to stderr).
function M.load_model(dir, opts)
  opts = opts or {}
  dir = type(dir) == "string" and dir:gsub("/+$", "") or dir
  M.check_folder(dir)
  local cfg_path = dir .. "/config.json"
  local raw = json.read(cfg_path)
  local cfg, family = registry.config(raw, cfg_path, opts.arch)
  local task = opts.task or (is_classifier(raw) and "classification" or "embedding")
  if task ~= "embedding" and task ~= "classification" then
    errors.user("load_model: task %q is unknown (embedding or classification)", tostring(task))
  end
  local st = require("trainer.core.safetensors")
  local reader = st.load(dir)
  local warnings = {}
  local on_warning = opts.on_warning or function(w) io.stderr:write("warning: ", w, "\n") end
  local load_opts = { on_warning = function(w) warnings[#warnings + 1] = w end }
  local ok, model = pcall(function()
    local build_opts = { config = cfg, device = opts.device, seed = opts.seed, init = "none",
      activation_dtype = opts.activation_dtype }
    local model
    if task == "classification" then
      local labels, n = labels_of(raw)
      if opts.num_labels and opts.num_labels ~= n then
        labels, n = labels_of({ num_labels = opts.num_labels })
      end
      -- random init first: a base checkpoint without a head still loads (the head and the
      -- parts of it the family starts anew are newly initialised, as transformers does, with
      -- a warning)
      build_opts.init, build_opts.num_labels = nil, n
      model = family.build("classification", build_opts)
      model.labels, model.num_labels = labels, n
      load_opts.optional = family.is_head_param
    else
      local sc = M.read_sentence_config(dir)
      build_opts.weights = reader
      build_opts.pooling = opts.pooling or sc.pooling
      build_opts.normalize = opts.normalize == nil and sc.normalize or opts.normalize
      model = family.build("embedding", build_opts)
      model.max_length = sc.max_seq_length
      model.prompts, model.default_prompt_name, model.include_prompt = sc.prompts, sc.default_prompt_name,
        sc.include_prompt
    end
    if opts.dtype and opts.dtype ~= "f32" then
      for _, p in model:parameters() do
        if build_opts.init == "none" then
          -- not initialised (load_weights fills them): reallocate rather than hold two copies
          local shape, device = p.value:shape(), p.value:device()
          p.value:free()
          p.value = T.keep(T.empty(shape, { dtype = opts.dtype, device = device, tag = "weights" }))
        else
          local t = p.value:to({ dtype = opts.dtype, tag = "weights" })
          p.value:free()
          p.value = T.keep(t)
        end
      end
    end
    family.load_weights(model, reader, load_opts)
    return model
  end)
  reader:close()
  if not ok then error(model, 0) end
  for _, w in ipairs(warnings) do on_warning(w) end
  model.task, model.dir, model.config, model.warnings = task, dir, cfg, warnings
  local limit = family.max_positions(cfg)
  model.max_length = math.min(opts.max_length or model.max_length or limit, limit)
  model:eval()
  return model
end

-- ---------------------------------------------------------------- tiny folders
-- The vocabulary of tiny folders: specials, punctuation, letters, a few words, ## pieces.
M.tiny_vocab = { "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", ".", ",", "!", "?", "'", "-" }
for c in ("abcdefghijklmnopqrstuvwxyz"):gmatch(".") do M.tiny_vocab[#M.tiny_vocab + 1] = c end
for _, w in ipairs({ "the", "cat", "dog", "sat", "on", "mat", "and", "is", "a", "not", "good", "bad",
  "house", "bird", "very", "this", "that", "with", "och", "katt", "hund", "bra", "hej" }) do
  if w ~= "a" then M.tiny_vocab[#M.tiny_vocab + 1] = w end
end
for _, s in ipairs({ "ed", "ing", "er", "en", "ar", "ly" }) do M.tiny_vocab[#M.tiny_vocab + 1] = "##" .. s end
for c in ("abcdefghijklmnopqrstuvwxyz"):gmatch(".") do M.tiny_vocab[#M.tiny_vocab + 1] = "##" .. c end

-- One checked write each (temp file, fsync, rename): a full disk is an error naming the
-- file, never a silently short config.json.
local function write_file(path, text) require("trainer.train.outputs").write_atomic(path, text) end

local function tokenizer_json(vocab)
  local v = {}
  for i, tok in ipairs(vocab) do v[tok] = i - 1 end
  local added = {}
  for i = 1, 5 do
    added[i] = { id = i - 1, content = vocab[i], single_word = false, lstrip = false, rstrip = false,
      normalized = false, special = true }
  end
  local function special(id, ty) return { SpecialToken = { id = id, type_id = ty } } end
  local function seq(id, ty) return { Sequence = { id = id, type_id = ty } } end
  return {
    version = "1.0", truncation = json.null, padding = json.null, added_tokens = added,
    normalizer = { type = "BertNormalizer", clean_text = true, handle_chinese_chars = true,
      strip_accents = json.null, lowercase = true },
    pre_tokenizer = { type = "BertPreTokenizer" },
    post_processor = { type = "TemplateProcessing",
      single = { special("[CLS]", 0), seq("A", 0), special("[SEP]", 0) },
      pair = { special("[CLS]", 0), seq("A", 0), special("[SEP]", 0), seq("B", 1), special("[SEP]", 1) },
      special_tokens = { ["[CLS]"] = { id = "[CLS]", ids = { 2 }, tokens = { "[CLS]" } },
        ["[SEP]"] = { id = "[SEP]", ids = { 3 }, tokens = { "[SEP]" } } } },
    decoder = { type = "WordPiece", prefix = "##", cleanup = true },
    model = { type = "WordPiece", unk_token = "[UNK]", continuing_subword_prefix = "##",
      max_input_chars_per_word = 100, vocab = v },
  }
end

-- Writes a tiny random BERT folder into dir (created if needed): 2 layers, hidden 32, 4
-- heads, intermediate 64, 64 positions, the tiny vocabulary; config.json,
-- model.safetensors, vocab.txt, tokenizer.json, tokenizer_config.json and, for
-- task "embedding" (default), modules.json + 1_Pooling/config.json (opts.pooling, default
-- mean) + sentence_bert_config.json; for task "classification", 3 labels.
-- opts: seed (default 0), task, pooling, normalize. Returns dir.
function M.tiny_folder(dir, opts)
  opts = opts or {}
  local task = opts.task or "embedding"
  local mok, merr = require("trainer.core.sys").mkdir_p(dir .. "/1_Pooling")
  if not mok then errors.user("%s: cannot create the folder (%s)", dir, merr) end
  local raw = {
    architectures = { task == "classification" and "BertForSequenceClassification" or "BertModel" },
    model_type = "bert", hidden_size = 32, num_hidden_layers = 2, num_attention_heads = 4,
    intermediate_size = 64, hidden_act = "gelu", layer_norm_eps = 1e-12, vocab_size = #M.tiny_vocab,
    max_position_embeddings = 64, type_vocab_size = 2, pad_token_id = 0, hidden_dropout_prob = 0.1,
    attention_probs_dropout_prob = 0.1, initializer_range = 0.2, position_embedding_type = "absolute",
  }
  if task == "classification" then
    raw.id2label = { ["0"] = "entailment", ["1"] = "neutral", ["2"] = "contradiction" }
    raw.label2id = { entailment = 0, neutral = 1, contradiction = 2 }
  end
  write_file(dir .. "/config.json", json.encode(raw, 2) .. "\n")
  local cfg, family = registry.config(raw, dir .. "/config.json")
  local seed = opts.seed or 0
  -- an embedding folder keeps the pooler, as a BertModel saved by transformers does
  local model = family.build(task, { config = cfg, seed = seed, num_labels = 3, pooler = true })
  require("trainer.core.safetensors").save(dir .. "/model.safetensors", family.state_list(model))
  model:free()
  write_file(dir .. "/vocab.txt", table.concat(M.tiny_vocab, "\n") .. "\n")
  write_file(dir .. "/tokenizer.json", json.encode(tokenizer_json(M.tiny_vocab), 2) .. "\n")
  write_file(dir .. "/tokenizer_config.json", json.encode({ do_lower_case = true, model_max_length = 64,
    unk_token = "[UNK]", sep_token = "[SEP]", pad_token = "[PAD]", cls_token = "[CLS]", mask_token = "[MASK]",
    tokenizer_class = "BertTokenizer" }, 2) .. "\n")
  if task == "embedding" then
    local mods = {
      { idx = 0, name = "0", path = "", type = "sentence_transformers.models.Transformer" },
      { idx = 1, name = "1", path = "1_Pooling", type = "sentence_transformers.models.Pooling" },
    }
    if opts.normalize then
      mods[3] = { idx = 2, name = "2", path = "2_Normalize", type = "sentence_transformers.models.Normalize" }
    end
    write_file(dir .. "/modules.json", json.encode(mods, 2) .. "\n")
    local mode = opts.pooling or "mean"
    write_file(dir .. "/1_Pooling/config.json", json.encode({ word_embedding_dimension = 32,
      pooling_mode_cls_token = mode == "cls", pooling_mode_mean_tokens = mode == "mean",
      pooling_mode_max_tokens = mode == "max", pooling_mode_mean_sqrt_len_tokens = mode == "mean_sqrt_len" }, 2) .. "\n")
    write_file(dir .. "/sentence_bert_config.json", json.encode({ max_seq_length = 64, do_lower_case = false }, 2) .. "\n")
  end
  return dir
end

-- The BERT family module, where scripts and tests have long found it (trainer.models.bert).
M.bert = require("trainer.models.bert")

return M
