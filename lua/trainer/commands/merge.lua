-- `trainer merge MODEL_DIR ADAPTER_DIR OUT_DIR`: a PEFT LoRA adapter folded into its base
-- model (W += scale * B A), written as a Hugging Face folder: every file of MODEL_DIR but the
-- weights, copied, and model.safetensors with the merged weights. OUT_DIR is built under a
-- temporary name and renamed into place at the end: it never exists half-written.
local usage = "trainer merge MODEL_DIR ADAPTER_DIR OUT_DIR   fold a LoRA adapter into its model, as a new HF folder"

local function sh_quote(s) return "'" .. tostring(s):gsub("'", "'\\''") .. "'" end

local function exists(path)
  local f = io.open(path, "rb")
  if f then f:close() return true end
  return false
end

local M = { usage = usage }

-- Merges adapter_dir into the model of model_dir and writes out_dir; returns out_dir.
function M.merge(model_dir, adapter_dir, out_dir, opts)
  opts = opts or {}
  local errors = require("trainer.errors")
  local json = require("trainer.json")
  local models = require("trainer.models")
  local lora = require("trainer.lora")
  model_dir = model_dir:gsub("/+$", "")
  out_dir = out_dir:gsub("/+$", "")
  models.check_folder(model_dir, false)
  if exists(out_dir .. "/.") or exists(out_dir) then
    errors.user("%s: already exists; merge writes a new folder (remove it or pick another OUT_DIR)", out_dir)
  end
  local cfg_path = adapter_dir .. "/" .. lora.config_file
  if not exists(cfg_path) then
    errors.user("%s: missing (ADAPTER_DIR must be a PEFT adapter folder with %s and %s)", cfg_path, lora.config_file,
      lora.weights_file)
  end
  local acfg = json.read(cfg_path)
  local task = nil
  if type(acfg) == "table" and acfg.task_type == "SEQ_CLS" then task = "classification" end
  local model = models.load_model(model_dir, { task = task, on_warning = opts.on_warning })
  local ok, err = pcall(function()
    lora.load(model, adapter_dir)
    lora.merge(model)
    local tmp = out_dir .. ".tmp-merge"
    os.execute("rm -rf " .. sh_quote(tmp))
    local rc = os.execute(("mkdir -p %s && cp -R %s/. %s"):format(sh_quote(tmp), sh_quote(model_dir), sh_quote(tmp)))
    if not (rc == 0 or rc == true) then errors.user("%s: cannot copy %s into it", tmp, model_dir) end
    -- the base weights (single file or shards) are replaced by one merged file
    local idx = tmp .. "/model.safetensors.index.json"
    if exists(idx) then
      local index = json.read(idx)
      local shards = {}
      for _, file in pairs(type(index) == "table" and index.weight_map or {}) do shards[file] = true end
      for file in pairs(shards) do os.remove(tmp .. "/" .. file) end
      os.remove(idx)
    end
    require("trainer.safetensors").save(tmp .. "/model.safetensors", models.bert.state_list(model), { format = "pt" })
    local rok, rerr = os.rename(tmp, out_dir)
    if not rok then errors.user("%s: cannot rename %s into place (%s)", out_dir, tmp, tostring(rerr)) end
  end)
  model:free()
  if not ok then
    os.execute("rm -rf " .. sh_quote(out_dir .. ".tmp-merge"))
    error(err, 0)
  end
  return out_dir
end

function M.run(args)
  local cl = require("trainer.command_line")
  local errors = require("trainer.errors")
  local pos = cl.parse(args, {}, usage)
  if #pos ~= 3 then errors.user("merge needs a model folder, an adapter folder and an output folder\nusage: %s", usage) end
  local out = M.merge(pos[1], pos[2], pos[3])
  io.stderr:write(("merged %s into %s: %s\n"):format(pos[2], pos[1], out))
  return 0
end

return M
