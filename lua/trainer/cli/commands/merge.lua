-- `trainer merge MODEL_DIR ADAPTER_DIR OUT_DIR`: a PEFT LoRA adapter folded into its base
-- model (W += scale * B A), written as a Hugging Face folder: every file of MODEL_DIR but the
-- weights and the model card, copied, model.safetensors with the merged weights, and a
-- README.md card that says what was merged (base, adapter, r, alpha, targets) above the
-- base's own card. MODEL_DIR is only read. OUT_DIR is built under a temporary name and
-- renamed into place at the end: it never exists half-written.
local usage = "trainer merge MODEL_DIR ADAPTER_DIR OUT_DIR   fold a LoRA adapter into its model, as a new HF folder"

local exists = require("trainer.core.fs").exists

local M = { usage = usage }

-- The front matter (YAML between "---" lines) and the body of a model card's text.
local function split_card(text)
  local front, body = text:match("^%-%-%-\r?\n(.-\n)%-%-%-[ \t]*\r?\n(.*)$")
  if front then return front, body end
  return "", text
end

-- README.md of the merged folder: Hugging Face card metadata (base_model, and the base's
-- license, language and library_name, which still apply), what was merged, then the
-- base's card.
function M.model_card(model_dir, adapter_dir, out_dir, spec, merged_names, base_card)
  local front, body = split_card(base_card or "")
  local meta = { "---", "base_model: " .. model_dir }
  for _, key in ipairs({ "license", "language", "library_name", "pipeline_tag" }) do
    local line = front:match("\n(" .. key .. ":[^\n]*)") or front:match("^(" .. key .. ":[^\n]*)")
    if line and not line:match(":%s*$") then meta[#meta + 1] = line end
  end
  meta[#meta + 1] = "tags:\n- lora\n- merged"
  meta[#meta + 1] = "---"
  local scale = spec.rslora and spec.alpha / math.sqrt(spec.r) or spec.alpha / spec.r
  local targets = {}
  for i, t in ipairs(spec.targets) do targets[i] = "`" .. t .. "`" end
  local saved = {}
  for i, t in ipairs(spec.modules_to_save or {}) do saved[i] = "`" .. t .. "`" end
  local pretty = require("trainer.cli.pretty")
  local lines = {
    table.concat(meta, "\n"), "",
    "# " .. (out_dir:match("([^/]+)$") or out_dir), "",
    ("`%s` with the LoRA adapter `%s` merged into its weights by `trainer merge`: each targeted Linear "
      .. "weight W became W + %s x B A, so this folder loads as a plain Hugging Face model, without the "
      .. "adapter or PEFT. The base folder was not changed."):format(model_dir, adapter_dir,
      spec.rslora and "(alpha / sqrt(r))" or "(alpha / r)"),
    "",
    "| | |", "|---|---|",
    ("| base model | `%s` |"):format(model_dir),
    ("| adapter | `%s` |"):format(adapter_dir),
    ("| r | %d |"):format(spec.r),
    ("| lora_alpha | %s (scale %s%s) |"):format(pretty.number(spec.alpha), pretty.number(scale),
      spec.rslora and ", rslora" or ""),
    ("| target modules | %s (%d Linear layers) |"):format(table.concat(targets, ", "), #merged_names),
    ("| modules_to_save | %s |"):format(#saved > 0 and table.concat(saved, ", ") or "none"),
    ("| bias | %s |"):format(spec.bias),
    "",
  }
  if body:match("%S") then
    lines[#lines + 1] = "## The base model's card"
    lines[#lines + 1] = ""
    lines[#lines + 1] = body
  end
  return table.concat(lines, "\n"):gsub("\n*$", "\n")
end

local read_file = require("trainer.core.fs").read

-- Checked, fsync'ed and renamed into place (outputs.write_atomic): Lua's f:write under the
-- JIT can report success for a write whose flush failed.
local function write_file(path, text) require("trainer.train.outputs").write_atomic(path, text) end

-- Merges adapter_dir into the model of model_dir and writes out_dir; returns out_dir.
function M.merge(model_dir, adapter_dir, out_dir, opts)
  opts = opts or {}
  local errors = require("trainer.core.errors")
  local json = require("trainer.core.json")
  local models = require("trainer.models")
  local lora = require("trainer.train.lora")
  model_dir = model_dir:gsub("/+$", "")
  out_dir = out_dir:gsub("/+$", "")
  models.check_folder(model_dir, { adapter_example = "trainer merge BASE ADAPTER " .. out_dir, adapter_how = "after it" })
  if exists(out_dir) then
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
  -- a head the adapter saves may be sized otherwise than the base's config says (a new head)
  local num_labels = task and require("trainer.cli.model_args").adapter_num_labels(adapter_dir)
  local model = models.load_model(model_dir, { task = task, on_warning = opts.on_warning, num_labels = num_labels })
  local ok, err = pcall(function()
    lora.load(model, adapter_dir)
    local spec = model.lora.spec
    local merged_names = lora.merge(model)
    local tmp = out_dir .. ".tmp-merge"
    local sys = require("trainer.core.sys")
    local dok, derr = sys.remove_tree(tmp)
    if not dok then errors.user("%s: cannot remove the leftover of an earlier merge (%s)", tmp, derr) end
    local cok, cerr = sys.copy_tree(model_dir, tmp)
    if not cok then errors.user("%s: cannot copy %s into it (%s)", tmp, model_dir, cerr) end
    -- the base weights (single file or shards) are replaced by one merged file
    local idx = tmp .. "/model.safetensors.index.json"
    if exists(idx) then
      local index = json.read(idx)
      local shards = {}
      for _, file in pairs(type(index) == "table" and index.weight_map or {}) do shards[file] = true end
      for file in pairs(shards) do os.remove(tmp .. "/" .. file) end
      os.remove(idx)
    end
    require("trainer.core.safetensors").save(tmp .. "/model.safetensors", models.state_list(model), { format = "pt" })
    if num_labels == 1 then
      -- a cross-encoder's adapter: the merged folder is one CrossEncoder loads
      local rerank = require("trainer.train.rerank")
      write_file(tmp .. "/config.json", rerank.cross_encoder_config(json.read(model_dir .. "/config.json"), model.labels))
      for f in pairs(rerank.EMBEDDING_FILES) do os.remove(tmp .. "/" .. f) end
      os.remove(tmp .. "/1_Pooling")
    end
    write_file(tmp .. "/README.md", M.model_card(model_dir, adapter_dir:gsub("/+$", ""), out_dir, spec, merged_names,
      (read_file(model_dir .. "/README.md"))))
    local rok, rerr = os.rename(tmp, out_dir)
    if not rok then errors.user("%s: cannot rename %s into place (%s)", out_dir, tmp, tostring(rerr)) end
  end)
  model:free()
  if not ok then
    require("trainer.core.sys").remove_tree(out_dir .. ".tmp-merge") -- best effort: the first error is the one to report
    error(err, 0)
  end
  return out_dir
end

function M.run(args)
  local cl = require("trainer.cli.model_args")
  local errors = require("trainer.core.errors")
  local pos = cl.parse(args, {}, usage)
  if #pos ~= 3 then errors.user("merge needs a model folder, an adapter folder and an output folder\nusage: %s", usage) end
  local out = M.merge(pos[1], pos[2], pos[3])
  io.stderr:write(("wrote merged model %s (base %s + adapter %s)\n"):format(out, pos[1], pos[2]))
  return 0
end

return M
