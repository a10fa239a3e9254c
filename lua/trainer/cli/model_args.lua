-- trainer.cli.model_args: what the model commands (encode, tokenize, classify) share:
-- parsing "MODEL_DIR FILE [--flag value ...]" and reading the input lines of FILE ("-"
-- is standard input). Errors are user errors that name the argument or the file.
local errors = require("trainer.core.errors")
local cli_flags = require("trainer.cli.flags")

local M = {}

-- args: the command's argv (args[1] is the command); flags: { name = "value" | "bool" }.
-- Returns positional arguments (a list) and flags (name -> value).
function M.parse(args, flags, usage)
  local pos, out = {}, {}
  local function unknown(name) errors.user("unknown option --%s\nusage: %s", name, usage) end
  local i = 2
  while i <= #args do
    if args[i]:sub(1, 2) == "--" then
      local name, value
      name, value, i = cli_flags.take(args, i, flags, unknown, "usage: " .. usage)
      out[name] = value
    else
      pos[#pos + 1] = args[i]
      i = i + 1
    end
  end
  return pos, out
end

-- A positive integer flag value (or the default).
function M.int(flags, name, default)
  local v = flags[name]
  if v == nil then return default end
  local n = tonumber(v)
  if not n or n < 1 or n ~= math.floor(n) then
    errors.user("--%s must be a positive integer, got %q", name, tostring(v))
  end
  return n
end

-- The lines of path ("-": stdin), without line ends; a missing file, or a line that is
-- not UTF-8, is a user error naming the file and the line.
function M.read_lines(path)
  local f, err
  if path == "-" then f = io.stdin else f, err = io.open(path, "rb") end
  if not f then errors.user("%s: cannot read the input file (%s)", path, tostring(err)) end
  local utf8 = require("trainer.core.utf8")
  local lines = {}
  for line in f:lines() do
    line = line:gsub("\r$", "")
    local bad = utf8.invalid_at(line)
    if bad then
      if f ~= io.stdin then f:close() end
      errors.user("%s: line %d is not valid UTF-8 (%s); save the file as UTF-8 (e.g. iconv -f latin1 -t utf-8)",
        path == "-" and "standard input" or path, #lines + 1, utf8.where(line, bad))
    end
    lines[#lines + 1] = line
  end
  if f ~= io.stdin then f:close() end
  return lines
end

-- ---------------------------------------------------------------- model and adapter folders
local exists = require("trainer.core.fs").exists

-- The labels of the classification head an adapter in dir saves (modules_to_save: its
-- classifier's bias, e.g. one for a cross-encoder's), or nil when it saves none; the base
-- folder's config may say otherwise (a new head was trained on an embedding model).
function M.adapter_num_labels(dir)
  local lora = require("trainer.train.lora")
  dir = dir:gsub("/+$", "")
  if not exists(dir .. "/" .. lora.weights_file) then return nil end
  local r = require("trainer.core.safetensors").load(dir .. "/" .. lora.weights_file)
  local n
  for _, name in ipairs(r:names()) do
    if name:match("classifier%.bias$") or name:match("classifier%.out_proj%.bias$") then n = r:info(name).shape[1] end
  end
  r:close()
  return n
end

-- Applies the PEFT LoRA adapter in dir (ours or peft's save_pretrained) to model, unmerged,
-- and puts the model back in eval mode. command: "encode" or "classify", for messages.
function M.apply_adapter(model, dir, command)
  local lora = require("trainer.train.lora")
  dir = dir:gsub("/+$", "")
  local cfg = require("trainer.models").adapter_config(dir)
  if not cfg then
    if exists(dir .. "/config.json") then
      errors.user("%s: --adapter takes a PEFT LoRA adapter folder (%s and %s), and this is a model folder; give it "
        .. "as the model instead", dir, lora.config_file, lora.weights_file)
    end
    errors.user("%s/%s: missing; --adapter takes a PEFT LoRA adapter folder (%s and %s, as peft's save_pretrained "
      .. "or a trainer run's checkpoint writes them)", dir, lora.config_file, lora.config_file, lora.weights_file)
  end
  if command == "encode" and cfg.task_type == "SEQ_CLS" then
    errors.user("%s: a sequence-classification adapter (task_type SEQ_CLS); use it with `trainer classify`", dir)
  end
  lora.load(model, dir)
  model:eval()
  return model
end

-- What `encode` and `classify` share: their flags parsed, the model folder checked (an
-- adapter given in its place is named), the input lines read, the model loaded for `task`
-- with --adapter applied, and its tokenizer. Returns flags, lines, model, tokenizer and the
-- --batch size (32 when it is not given).
-- extra: more flags of this command ({ name = "value" | "bool" }).
function M.load_for(command, task, args, usage, extra)
  local known = { adapter = "value", batch = "value", ["max-length"] = "value", device = "value" }
  for k, v in pairs(extra or {}) do known[k] = v end
  local pos, flags = M.parse(args, known, usage)
  if #pos ~= 2 then errors.user("%s needs a model folder and an input file\nusage: %s", command, usage) end
  require("trainer.models").check_folder(pos[1], { tokenizer = true,
    adapter_example = ("trainer %s BASE %s --adapter ADAPTER"):format(command, pos[2]) })
  local lines = M.read_lines(pos[2])
  -- a prediction from a random head is never what the user wanted: a head must come from
  -- the folder or from the adapter (PEFT's modules_to_save)
  if task == "classification" then
    local has_head = require("trainer.models").has_head(pos[1])
    local acfg = flags.adapter and require("trainer.models").adapter_config(flags.adapter:gsub("/+$", "")) or {}
    for _, m in ipairs(type(acfg.modules_to_save) == "table" and acfg.modules_to_save or {}) do
      if m == "classifier" then has_head = true end
    end
    if not has_head then
      errors.user("%s: this folder has no classification head; train one with recipes/nli_classifier.lua "
        .. "(model.from=%s) and classify with the checkpoint it saves (runs/nli_classifier/checkpoint-STEP). Its "
        .. "weights hold no classifier.weight%s, and a prediction from a random head means nothing.", pos[1], pos[1],
        flags.adapter and ", nor does the adapter's modules_to_save name the classifier" or "")
    end
  end
  local model = require("trainer.models").load_model(pos[1], { task = task, device = flags.device,
    max_length = M.int(flags, "max-length", nil), num_labels = flags.adapter and M.adapter_num_labels(flags.adapter) })
  if flags.adapter then M.apply_adapter(model, flags.adapter, command) end
  local tok = require("trainer.core.tokenizer").load(pos[1])
  flags._positional = pos
  return flags, lines, model, tok, M.int(flags, "batch", 32)
end

-- "%.9g" numbers joined as a JSON array (floats keep float32 precision).
function M.float_array(values)
  local parts = {}
  for i, v in ipairs(values) do
    if v ~= v or v == math.huge or v == -math.huge then parts[i] = "null" else parts[i] = ("%.9g"):format(v) end
  end
  return "[" .. table.concat(parts, ",") .. "]"
end

function M.int_array(values)
  local parts = {}
  for i, v in ipairs(values) do parts[i] = ("%d"):format(v) end
  return "[" .. table.concat(parts, ",") .. "]"
end

return M
