-- bench/train_step.lua: one training configuration in one process, the trainer side of
-- bench/vs_pytorch.sh (its PyTorch twin is bench/torch_train_step.py; keep the two alike).
-- A BERT-shaped sequence classifier (random init, 2 labels, dropout 0.1) trains with AdamW
-- (lr 1e-5) and cross entropy on random token ids; warm-up steps (optimizer state appears,
-- caches fill) precede the measured ones. One configuration per process, so that the
-- process's peak RSS (measured outside, by /usr/bin/time -v) belongs to that configuration.
--
--   ./trainer run bench/train_step.lua --config fp32-full --layers 6 --hidden 384 --heads 12 \
--       --intermediate 1536 --batch 32 --seq 128 --warmup 1 --steps 3
-- Configurations (--config):
--   fp32-full       every parameter trains, fp32
--   fp32-lora       LoRA r 8, alpha 16, no dropout, on query and value; all else frozen
--                   (the classifier too, as PEFT's LoraConfig without a task type does)
--   bf16-ckpt-lora  fp32-lora + bf16 activations + checkpointing of every layer (segments of
--                   one layer, as transformers' gradient_checkpointing_enable does)
-- Prints one line: "tokens_s=N step_s=N peak_allocated=N peak_reserved=N" (bytes).
-- Never a test: figures depend on the machine and its load.
local memory = require("trainer.core.memory")
local bert = require("trainer.models.bert")
local optim = require("trainer.train.optim")
local losses = require("trainer.losses")
local amp = require("trainer.train.amp")
local ops = require("trainer.core.ops")
local lora = require("trainer.train.lora")
local checkpoint = require("trainer.train.grad_checkpoint")

local configs = {
  ["fp32-full"] = { precision = "fp32" },
  ["fp32-lora"] = { precision = "fp32", lora = true },
  ["bf16-ckpt-lora"] = { precision = "bf16", lora = true, checkpoint = { every = 1 } },
}

-- ---------------------------------------------------------------- options
local opt = { layers = 6, hidden = 384, heads = 12, intermediate = 1536, vocab = 30522, seq = 128, batch = 32,
              warmup = 1, steps = 3 }
local config_name = "fp32-full"
do
  local i = 1
  while arg and arg[i] do
    local k, v = arg[i]:match("^%-%-([%w_]+)=?(.*)$")
    if not k then error("bench/train_step.lua: unexpected argument " .. arg[i] .. " (flags are --name value)", 0) end
    if v == "" then i = i + 1; v = arg[i] end
    if k == "config" then config_name = tostring(v)
    elseif opt[k] ~= nil and tonumber(v) then opt[k] = math.floor(tonumber(v))
    else error(("bench/train_step.lua: unknown flag --%s or bad value %s"):format(k, tostring(v)), 0) end
    i = i + 1
  end
end
local spec = configs[config_name]
if not spec then
  error("bench/train_step.lua: --config must be fp32-full, fp32-lora or bf16-ckpt-lora, got " .. config_name, 0)
end

local now = require("trainer.train.run").now   -- CLOCK_MONOTONIC, in seconds

-- ---------------------------------------------------------------- data: one fixed random batch
local random_batch = dofile(require("trainer.native").root() .. "/bench/random_batch.lua")
local data = random_batch.new(opt.batch, opt.seq, opt.vocab, 42, 1000, 101, 102)
local labels = data.labels
local batch = { input_ids = data.input_ids, attention_mask = data.attention_mask }

-- ---------------------------------------------------------------- model and step
local cfg = bert.config({ hidden_size = opt.hidden, num_hidden_layers = opt.layers, num_attention_heads = opt.heads,
  intermediate_size = opt.intermediate, vocab_size = opt.vocab, max_position_embeddings = math.max(512, opt.seq),
  hidden_dropout_prob = 0.1, attention_probs_dropout_prob = 0.1 }, "bench")
local model = bert.SequenceClassifier.new(bert.BertModel.new(cfg, { seed = 1 }), 2, { seed = 1 })
model:train()
if spec.lora then lora.apply(model, { r = 8, alpha = 16, dropout = 0, targets = { "query", "value" } }) end
amp.prepare(model, spec.precision)
if spec.checkpoint then checkpoint.apply(model, spec.checkpoint) end
local opt_ = optim.new(model, { name = "adamw", lr = 1e-5 })
local scaler = amp.new_scaler(spec.precision)
local loss = losses.new({ name = "cross_entropy" })

local function step(n)
  model.rng.step = n
  opt_:zero_grad()
  local logits = model:forward(batch)
  loss:forward({ logits }, labels)
  local g = loss:backward()[1]
  ops.scale_(g, scaler.scale)
  model:backward(g)
  g:free(); logits:free()
  local found = scaler:unscale(model)
  if not found then opt_:step() end
  scaler:update(found)
end

for n = 1, opt.warmup do step(n) end
memory.reset_peak()
local t0 = now()
for n = 1, opt.steps do step(opt.warmup + n) end
local dt = (now() - t0) / opt.steps
local st = memory.stats()
io.write(("tokens_s=%.1f step_s=%.3f peak_allocated=%d peak_reserved=%d\n"):format(opt.batch * opt.seq / dt, dt,
  st.peak_allocated, st.peak_reserved))
opt_:free(); loss:free(); model:free()
batch.input_ids:free(); batch.attention_mask:free()
