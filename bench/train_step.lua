-- bench/train_step.lua: one training configuration in one process, the trainer side of
-- bench/vs_pytorch.sh (its PyTorch twin is bench/torch_train_step.py; keep the two alike).
-- A sequence classifier of one model family (--family: bert, distilbert, mpnet, modernbert;
-- random init, 2 labels, dropout 0.1) trains with AdamW
-- (lr 1e-5) and cross entropy on random token ids; warm-up steps (optimizer state appears,
-- caches fill) precede the measured ones. One configuration per process, so that the
-- process's peak RSS (measured outside, by /usr/bin/time -v) belongs to that configuration.
--
--   ./trainer run bench/train_step.lua --config fp32-full --family bert --layers 6 --hidden 384 \
--       --heads 12 --intermediate 1536 --batch 32 --seq 128 --warmup 1 --steps 3
-- A family's config fields, vocabulary and LoRA targets come from bench/families.json.
-- Configurations (--config):
--   fp32-full       every parameter trains, fp32
--   fp32-lora       LoRA r 8, alpha 16, no dropout, on the attention's query and value
--                   (PEFT's names of the family, bench/families.json); all else frozen
--                   (the classifier too, as PEFT's LoraConfig without a task type does)
--   bf16-lora       fp32-lora + bf16 activations, no checkpointing (like for like with a family
--                   whose transformers model cannot checkpoint: MPNet)
--   bf16-ckpt-lora  fp32-lora + bf16 activations + checkpointing of every layer (segments of
--                   one layer, as transformers' gradient_checkpointing_enable does)
-- Prints one line: "tokens_s=N step_s=N peak_allocated=N peak_reserved=N" (bytes).
-- Never a test: figures depend on the machine and its load.
local memory = require("trainer.core.memory")
local registry = require("trainer.models.registry")
local shapes = dofile(require("trainer.native").root() .. "/bench/family_shapes.lua")
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
  ["bf16-lora"] = { precision = "bf16", lora = true },
}

-- ---------------------------------------------------------------- options
local opt = { layers = 6, hidden = 384, heads = 12, intermediate = 1536, seq = 128, batch = 32,
              warmup = 1, steps = 3 }
local config_name, family_name = "fp32-full", "bert"
do
  local i = 1
  while arg and arg[i] do
    local k, v = arg[i]:match("^%-%-([%w_]+)=?(.*)$")
    if not k then error("bench/train_step.lua: unexpected argument " .. arg[i] .. " (flags are --name value)", 0) end
    if v == "" then i = i + 1; v = arg[i] end
    if k == "config" then config_name = tostring(v)
    elseif k == "family" then family_name = tostring(v)
    elseif opt[k] ~= nil and tonumber(v) then opt[k] = math.floor(tonumber(v))
    else error(("bench/train_step.lua: unknown flag --%s or bad value %s"):format(k, tostring(v)), 0) end
    i = i + 1
  end
end
local spec = configs[config_name]
if not spec then
  error("bench/train_step.lua: --config must be fp32-full, fp32-lora, bf16-ckpt-lora or bf16-lora, got " .. config_name, 0)
end

local now = require("trainer.train.run").now   -- CLOCK_MONOTONIC, in seconds

-- ---------------------------------------------------------------- data: one fixed random batch
local random_batch = dofile(require("trainer.native").root() .. "/bench/random_batch.lua")
local data = random_batch.new(opt.batch, opt.seq, shapes.vocab_size(family_name), 42, 1000, 101, 102)
local labels = data.labels
local batch = { input_ids = data.input_ids, attention_mask = data.attention_mask }

-- ---------------------------------------------------------------- model and step
local raw = shapes.config(family_name, opt)
local cfg, family = registry.config(raw, "bench/train_step.lua --family " .. family_name)
local model = family.build("classification", { config = cfg, num_labels = 2, seed = 1 })
model:train()
if spec.lora then lora.apply(model, { r = 8, alpha = 16, dropout = 0, targets = shapes.lora_targets(family_name) }) end
amp.prepare(model, spec.precision)
if spec.checkpoint then checkpoint.apply(model, spec.checkpoint) end
local opt_ = optim.new(model, { name = "adamw", lr = 1e-5 })
opt_:transient_packs()   -- as a run without accumulation does (trainer.train.build)
opt_:make_state()        -- as a run does (trainer.train.build)
local scaler = amp.new_scaler(spec.precision)
local loss = losses.new({ name = "cross_entropy" })

local function step(n)
  model.rng.step = n
  opt_:zero_grad({ free = true })   -- as a run does (trainer.train.train_step)
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
