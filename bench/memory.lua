-- bench/memory.lua: what each memory technique costs and saves, measured.
-- A BERT-shaped sequence classifier (random init, transformers' init) trains
-- with AdamW on random token ids under each configuration:
--   fp32 baseline; + accumulation (4 x batch/4); + checkpointing ("auto" segments);
--   + bf16; + LoRA (r 8 on query and value); all combined.
-- For each: peak bytes per tag, peak allocated and reserved, step time and tokens/s, and
-- each figure as a ratio to the baseline. A step = all its micro-batches + the optimizer
-- step; one warm-up step (optimizer state appears) precedes the measured ones, and the
-- peaks are reset after it, so they are the steady state of training.
--
--   ./trainer run bench/memory.lua                      # BERT-base, batch 16, seq 256
--   ./trainer run bench/memory.lua --layers 4 --seq 128 --batch 16 --steps 1
-- Flags: --layers --hidden --heads --intermediate --vocab --seq --batch --steps
--        --accumulate (4) --only WORD[,WORD] (configs whose name contains a word, e.g.
--        bf16,lora; the baseline always runs: the ratios need it)
-- Never a test: figures depend on the machine and its load.
local memory = require("trainer.core.memory")
local bert = require("trainer.models.bert")
local optim = require("trainer.train.optim")
local losses = require("trainer.losses")
local amp = require("trainer.train.amp")
local ops = require("trainer.core.ops")

-- ---------------------------------------------------------------- options
local opt = { layers = 12, hidden = 768, heads = 12, intermediate = 3072, vocab = 30522, seq = 256, batch = 16,
              steps = 1, accumulate = 4 }
local only
do
  local i = 1
  while arg and arg[i] do
    local k, v = arg[i]:match("^%-%-([%w_]+)=?(.*)$")
    if not k then error("bench/memory.lua: unexpected argument " .. arg[i] .. " (flags are --name value)", 0) end
    if v == "" then i = i + 1; v = arg[i] end
    if k == "only" then only = {}
      for name in tostring(v):gmatch("[^,]+") do only[#only + 1] = name:lower() end
    elseif opt[k] ~= nil and tonumber(v) then opt[k] = math.floor(tonumber(v))
    else error(("bench/memory.lua: unknown flag --%s or bad value %s"):format(k, tostring(v)), 0) end
    i = i + 1
  end
end
if opt.batch % opt.accumulate ~= 0 then error("bench/memory.lua: --batch must be a multiple of --accumulate", 0) end

local lora = require("trainer.train.lora")
local checkpoint = require("trainer.train.grad_checkpoint")

local configs = {
  { name = "fp32 baseline" },
  { name = "+ accumulation", accumulate = opt.accumulate },
  { name = "+ checkpointing", checkpoint = "auto" },
  { name = "+ bf16", precision = "bf16" },
  { name = "+ LoRA r8 q,v", lora = { r = 8, alpha = 16, targets = { "query", "value" } } },
  { name = "all combined", accumulate = opt.accumulate, checkpoint = "auto",
    precision = "bf16", lora = { r = 8, alpha = 16, targets = { "query", "value" } } },
}

-- ---------------------------------------------------------------- wall clock
local now = require("trainer.train.run").now -- the monotonic clock (trainer.core.ffi's system block)

-- ---------------------------------------------------------------- data
local random_batch = dofile(require("trainer.native").root() .. "/bench/random_batch.lua")

-- [CLS] and [SEP] ids as BERT's vocabulary has them, ordinary tokens above the specials;
-- small vocabularies (shrunken shapes) use their own low ids instead.
local function bench_batch(seed)
  local big = opt.vocab > 2000
  return random_batch.new(opt.batch, opt.seq, opt.vocab, seed, big and 1000 or 3, big and 101 or 1, big and 102 or 2)
end

-- ---------------------------------------------------------------- one configuration
local function run(cfg_spec, batch)
  local cfg = bert.config({ hidden_size = opt.hidden, num_hidden_layers = opt.layers, num_attention_heads = opt.heads,
    intermediate_size = opt.intermediate, vocab_size = opt.vocab, max_position_embeddings = math.max(512, opt.seq),
    hidden_dropout_prob = 0.1, attention_probs_dropout_prob = 0.1 }, "bench")
  local model = bert.SequenceClassifier.new(bert.BertModel.new(cfg, { seed = 1 }), 2, { seed = 1 })
  model:train()
  if cfg_spec.lora then lora.apply(model, cfg_spec.lora) end
  local precision = cfg_spec.precision or "fp32"
  amp.prepare(model, precision)
  if cfg_spec.checkpoint then checkpoint.apply(model, cfg_spec.checkpoint) end
  local opt_ = optim.new(model, { name = "adamw", lr = 1e-5 })
  local k = cfg_spec.accumulate or 1
  opt_:transient_packs(k)   -- as a run does (trainer.train.build): CPU weight packs per product
  opt_:make_state()         -- the optimizer state before the first forward, as a run does
  local scaler = amp.new_scaler(precision)
  local loss = losses.new({ name = "cross_entropy" })
  local per = math.floor(opt.batch / k)
  local function step(n)
    model.rng.step = n
    opt_:zero_grad({ free = true })   -- as a run does (trainer.train.train_step): the backward makes them
    for i = 0, k - 1 do
      local mb = { input_ids = batch.input_ids:narrow(i * per, per), attention_mask = batch.attention_mask:narrow(i * per, per) }
      local labels = {}
      for j = 1, per do labels[j] = batch.labels[i * per + j] end
      local logits = model:forward(mb)
      loss:forward({ logits }, labels)
      local g = loss:backward()[1]
      ops.scale_(g, scaler.scale / k)
      model:backward(g)
      g:free(); logits:free(); mb.input_ids:free(); mb.attention_mask:free()
    end
    local found = scaler:unscale(model)
    if not found then opt_:step() end
    scaler:update(found)
  end
  step(0)
  memory.reset_peak()
  local t0 = now()
  for n = 1, opt.steps do step(n) end
  local dt = (now() - t0) / opt.steps
  local s = memory.stats()
  local r = { step_s = dt, tokens_s = opt.batch * opt.seq / dt, peak_allocated = s.peak_allocated,
              peak_reserved = s.peak_reserved }
  for tag, v in pairs(s.peak_by_tag) do r[tag] = v end
  opt_:free(); loss:free(); model:free()
  memory.empty_cache()
  return r
end

-- ---------------------------------------------------------------- table
local cols = { { "weights", "weights" }, { "grads", "grads" }, { "optimizer", "optim" }, { "activations", "activ" },
               { "workspace", "work" }, { "peak_allocated", "peak alloc" }, { "peak_reserved", "peak resv" },
               { "step_s", "step s" }, { "tokens_s", "tok/s" } }

local function fmt(key, v)
  if key == "step_s" then return ("%.2f"):format(v) end
  if key == "tokens_s" then return ("%.0f"):format(v) end
  return ("%.1fM"):format(v / 1048576)
end

print(("bench/memory: BERT shape layers %d hidden %d heads %d intermediate %d vocab %d; batch %d seq %d; "
  .. "AdamW; %d measured step(s); device cpu"):format(opt.layers, opt.hidden, opt.heads, opt.intermediate, opt.vocab,
  opt.batch, opt.seq, opt.steps))
print("cells: value (ratio to the fp32 baseline); bytes in MiB (M = 2^20)")
local head = ("%-18s"):format("config")
for _, c in ipairs(cols) do head = head .. ("%17s"):format(c[2]) end
print(head)
print(("-"):rep(#head))
local batch = bench_batch(42)
local base
for _, c in ipairs(configs) do
  local wanted = c.name == "fp32 baseline" or not only
  for _, w in ipairs(only or {}) do wanted = wanted or c.name:lower():find(w, 1, true) ~= nil end
  if wanted then
    local line = ("%-18s"):format(c.name)
    do
      local r = run(c, batch)
      base = base or r
      for _, col in ipairs(cols) do
        local key = col[1]
        local ratio = (base[key] and base[key] > 0) and ("(%.2f)"):format(r[key] / base[key]) or "(-)"
        line = line .. ("%17s"):format(fmt(key, r[key]) .. " " .. ratio)
      end
      print(line)
      io.stdout:flush()
    end
  end
end
batch.input_ids:free(); batch.attention_mask:free()
