-- bench/gpu/trainer_side.lua: the trainer side of bench/gpu/run.sh (its PyTorch twin is
-- bench/gpu/torch_side.py; keep the two alike), and the weights both sides load.
--
--   ./trainer run bench/gpu/trainer_side.lua --write DIR --shape large|tiny|minilm
--       writes DIR/config.json, DIR/model.safetensors (a random BERT, transformers' init and
--       Hugging Face names: transformers.BertModel.from_pretrained(DIR) loads it) and
--       DIR/batch.safetensors (input_ids [48, seq] i32: one fixed batch of random token ids,
--       [CLS] ... [SEP], no padding) - written once, read by both sides;
--   ./trainer run bench/gpu/trainer_side.lua --train DIR --config NAME --rows 16|48 \
--       --device cuda --warmup 2 --steps 3 [--seq 512] [--dropout 0.1] [--losses]
--       trains a sentence encoder (mean pooling) on the first `rows` sequences with MNRL
--       (scale 20): 16 rows = 8 (anchor, positive) pairs, 48 rows = 16 (anchor, positive,
--       negative) triplets, as the flagship recipe's batch; AdamW lr 1e-5, dropout 0.1
--       (--dropout 0: no random masks, so that both sides' losses can be compared number
--       for number: the two draw different masks).
-- Configurations: fp32-full, bf16-full, bf16-ckpt (checkpointing of every layer, as
-- transformers' gradient_checkpointing_enable), bf16-ckpt-lora (LoRA r 8, alpha 16, dropout
-- 0.1 on query and value: the flagship), fp32-lora.
-- Prints one line: tokens_s step_s peak_allocated peak_reserved plan_total (what `trainer
-- plan` predicts for the same shape) peak_<tag>... and, with --losses, every step's loss.
-- The loss is read once, after the last step (the timer stops there): no step waits for the
-- device. Never a test: figures depend on the machine.
local T = require("trainer.core.tensor")
local json = require("trainer.core.json")
local memory = require("trainer.core.memory")
local st = require("trainer.core.safetensors")
local bert = require("trainer.models.bert")
local optim = require("trainer.train.optim")
local losses = require("trainer.losses")
local base = require("trainer.losses.base")
local amp = require("trainer.train.amp")
local lora = require("trainer.train.lora")
local checkpoint = require("trainer.train.grad_checkpoint")
local deferred = require("trainer.train.deferred")
local now = require("trainer.train.run").now

local shapes = {
  -- alexandrainst/scandi-nli-large's shape (BERT-large, vocabulary 50,000)
  large = { hidden_size = 1024, num_hidden_layers = 24, num_attention_heads = 16, intermediate_size = 4096,
            vocab_size = 50000, max_position_embeddings = 512 },
  minilm = { hidden_size = 384, num_hidden_layers = 6, num_attention_heads = 12, intermediate_size = 1536,
             vocab_size = 30522, max_position_embeddings = 512 },
  tiny = { hidden_size = 64, num_hidden_layers = 2, num_attention_heads = 4, intermediate_size = 128,
           vocab_size = 1000, max_position_embeddings = 64 },
}
local configs = {
  ["fp32-full"] = { precision = "fp32" },
  ["fp32-lora"] = { precision = "fp32", lora = true },
  ["bf16-full"] = { precision = "bf16" },
  ["bf16-ckpt"] = { precision = "bf16", checkpoint = true },
  ["bf16-ckpt-lora"] = { precision = "bf16", checkpoint = true, lora = true },
}
local LORA = { r = 8, alpha = 16, dropout = 0.1, targets = { "query", "value" } }

local function fail(fmt, ...) error(("bench/gpu/trainer_side.lua: " .. fmt):format(...), 0) end

-- ---------------------------------------------------------------- options
local opt = { warmup = 2, steps = 3, rows = 16, device = "cuda", config = "bf16-ckpt-lora", seq = nil, seed = 1,
  dropout = 0.1 }
do
  local i = 1
  while arg and arg[i] do
    local k = arg[i]:match("^%-%-([%w_]+)$")
    if not k then fail("unexpected argument %s (flags are --name value)", arg[i]) end
    if k == "losses" then opt.losses = true; i = i + 1
    else
      local v = arg[i + 1]
      if v == nil then fail("--%s needs a value", k) end
      opt[k] = tonumber(v) or v
      i = i + 2
    end
  end
end

-- ---------------------------------------------------------------- --write
local function write(dir, shape_name)
  local shape = shapes[shape_name]
  if not shape then fail("--shape must be large, minilm or tiny, got %s", tostring(shape_name)) end
  assert(require("trainer.core.sys").mkdir_p(dir))
  local raw = { model_type = "bert", architectures = { "BertModel" }, hidden_act = "gelu", layer_norm_eps = 1e-12,
    type_vocab_size = 2, pad_token_id = 0, hidden_dropout_prob = 0.1, attention_probs_dropout_prob = 0.1,
    initializer_range = 0.02, position_embedding_type = "absolute" }
  for k, v in pairs(shape) do raw[k] = v end
  local cfg = bert.config(raw, "bench shape " .. shape_name)
  local model = bert.BertModel.new(cfg, { seed = opt.seed, pooler = false })
  st.save(dir .. "/model.safetensors", bert.state_list(model), { format = "pt" })
  model:free()
  local f = assert(io.open(dir .. "/config.json", "w"))
  assert(f:write(json.encode(raw, 2), "\n"))
  assert(f:close())
  local seq = opt.seq or shape.max_position_embeddings
  local rows, V, ids, s = 48, shape.vocab_size, {}, 42
  local function rnd(k) s = (s * 1103515245 + 12345) % 2147483648 return s % k end
  for r = 0, rows - 1 do
    for t = 1, seq do ids[r * seq + t] = t == 1 and 101 % V or (t == seq and 102 % V or 5 + rnd(V - 5)) end
  end
  local flat = T.from_table(ids, { dtype = "i32" })
  local t = flat:reshape({ rows, seq })
  flat:free()
  st.save(dir .. "/batch.safetensors", { { "input_ids", t } })
  t:free()
  print(("wrote %s: %s shape (%d layers, hidden %d), batch 48 x %d"):format(dir, shape_name, shape.num_hidden_layers,
    shape.hidden_size, seq))
end

-- ---------------------------------------------------------------- --train
local function train(dir)
  local spec = configs[opt.config]
  if not spec then fail("--config: unknown %s", tostring(opt.config)) end
  local rows = opt.rows
  local ncols = rows % 3 == 0 and 3 or 2
  local B = math.floor(rows / ncols)
  local raw = json.read(dir .. "/config.json")
  if type(opt.dropout) ~= "number" or opt.dropout < 0 or opt.dropout >= 1 then
    fail("--dropout must be a number in [0, 1), got %s", tostring(opt.dropout))
  end
  raw.hidden_dropout_prob, raw.attention_probs_dropout_prob = opt.dropout, opt.dropout
  local cfg = bert.config(raw, dir .. "/config.json")
  local device = opt.device
  local enc = bert.BertModel.new(cfg, { device = device, init = "none", pooler = false, seed = opt.seed })
  local model = bert.SentenceEncoder.new(enc, { pooling = "mean" })
  bert.load_weights(model, dir .. "/model.safetensors", { on_warning = function() end })
  if spec.lora then lora.apply(model, LORA) end
  amp.prepare(model, spec.precision)
  if spec.checkpoint then checkpoint.apply(model, { every = 1 }) end
  local opt_ = optim.new(model, { name = "adamw", lr = 1e-5 })
  local loss = losses.new({ name = "mnrl", scale = 20 }, { deferred = true })
  local r = st.load(dir .. "/batch.safetensors")
  local all = r:tensor("input_ids", { tag = "activations" })
  r:close()
  local seq = all:shape()[2]
  local host_ids = all:narrow(0, rows)
  all:free()
  local ids = host_ids:to({ device = device })
  host_ids:free()
  local mask = T.ones({ rows, seq }, { dtype = "i32", device = device, tag = "activations" })
  local input = { input_ids = ids, attention_mask = mask }

  local values = {}
  local function step(n)
    model.rng.step = n
    opt_:zero_grad()
    local e = model:forward(input)
    local embs = {}
    for c = 1, ncols do embs[c] = e:narrow((c - 1) * B, B) end
    values[#values + 1] = loss:forward(embs)
    local grads = loss:backward()
    local d, new = base.cat_rows(grads)
    if new then for _, g in ipairs(grads) do g:free() end end
    for _, v in ipairs(embs) do v:free() end
    e:free()
    model:backward(d)
    d:free()
    opt_:step()
  end

  for n = 1, opt.warmup do step(n) end
  for i, v in ipairs(values) do values[i] = deferred.value(v) end   -- waits for the warm-up
  memory.reset_peak(device)
  local t0 = now()
  local first = #values + 1
  for n = 1, opt.steps do step(opt.warmup + n) end
  for i = first, #values do values[i] = deferred.value(values[i]) end   -- waits for the device
  local dt = (now() - t0) / math.max(opt.steps, 1)
  local s = memory.stats(device)

  -- what `trainer plan` predicts for this shape and configuration
  local recipe = { model = { arch = "bert", config = raw, max_length = seq }, batch = { size = B },
    data = { columns = ncols == 3 and { "a", "p", "n" } or { "a", "p" } }, loss = { name = "mnrl" },
    precision = spec.precision, checkpoint = spec.checkpoint and { every = 1 } or false,
    lora = spec.lora and LORA or false, optim = { name = "adamw" }, device = device }
  local ok, p = pcall(require("trainer.plan").estimate, recipe, { model_config = raw })
  local parts = { ("tokens_s=%.1f step_s=%.4f peak_allocated=%d peak_reserved=%d plan_total=%s"):format(
    rows * seq / dt, dt, s.peak_allocated, s.peak_reserved, ok and ("%d"):format(p.total_bytes) or "nan") }
  for _, tag in ipairs(memory.tags) do parts[#parts + 1] = ("peak_%s=%d"):format(tag, s.peak_by_tag[tag]) end
  if opt.losses then
    local l = {}
    for i, v in ipairs(values) do l[i] = ("%.9g"):format(v) end
    parts[#parts + 1] = "losses=" .. table.concat(l, ",")
  end
  io.write(table.concat(parts, " "), "\n")
  opt_:free(); loss:free(); model:free(); ids:free(); mask:free()
end

if opt.write then write(opt.write, opt.shape or "tiny")
elseif opt.train then train(opt.train)
else fail("give --write DIR --shape NAME or --train DIR --config NAME") end
