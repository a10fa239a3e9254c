# bench/torch_train_step.py: one training configuration in one process, the PyTorch side of
# bench/vs_pytorch.sh (its trainer twin is bench/train_step.lua; keep the two alike).
# transformers' AutoModelForSequenceClassification of one model family (--family: bert,
# distilbert, mpnet, modernbert; the config fields and LoRA targets of bench/families.json, as
# bench/train_step.lua reads them; random init, 2 labels), AdamW
# (lr 1e-5), cross entropy, one fixed batch of random token ids; warm-up steps precede the
# measured ones. Needs torch, transformers and peft (bench/vs_pytorch.sh --setup), never the
# build or the tests.
#
#   python bench/torch_train_step.py --config fp32-full --family bert --layers 6 --hidden 384 \
#       --heads 12 --intermediate 1536 --batch 32 --seq 128 --warmup 1 --steps 3
# Configurations as in bench/train_step.lua:
#   fp32-full       every parameter trains, fp32
#   fp32-lora       peft LoraConfig(r=8, lora_alpha=16, lora_dropout=0, target_modules= the
#                   family's lora_targets), no task type: only the adapters train
#   bf16-ckpt-lora  fp32-lora + torch.autocast("cpu", bfloat16) + gradient_checkpointing_enable
#                   (every layer; by hand where transformers has none, MPNet)
#   bf16-lora       fp32-lora + torch.autocast("cpu", bfloat16), no checkpointing
# Prints one line: "tokens_s=N step_s=N threads=N checkpointing=every-layer|by-hand|none|unsupported".
import argparse
import json
import os
import time

import torch
from transformers import AutoConfig, AutoModelForSequenceClassification

p = argparse.ArgumentParser()
p.add_argument("--config", default="fp32-full", choices=["fp32-full", "fp32-lora", "bf16-ckpt-lora", "bf16-lora"])
p.add_argument("--family", default="bert")
for name, default in [("layers", 6), ("hidden", 384), ("heads", 12), ("intermediate", 1536),
                      ("seq", 128), ("batch", 32), ("warmup", 1), ("steps", 3)]:
    p.add_argument("--" + name, type=int, default=default)
p.add_argument("--no-hand-checkpointing", dest="hand_checkpointing", action="store_false")
a = p.parse_args()


def checkpoint_layers_by_hand(m):
    """Every layer of m's encoder (base_model.encoder.layer) recomputed in the backward:
    torch.utils.checkpoint around its forward, without reentrancy and with the RNG state kept
    (the dropout masks of the recompute are the forward's)."""
    import torch.utils.checkpoint as cp

    for layer in m.base_model.encoder.layer:
        def forward(*args, _forward=layer.forward, **kwargs):
            return cp.checkpoint(_forward, *args, use_reentrant=False, **kwargs)
        layer.forward = forward

# The same thread count as the trainer side: OMP_NUM_THREADS when set, else every core.
torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS") or os.cpu_count()))
torch.manual_seed(1)
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "families.json")) as f:
    families = json.load(f)
if a.family not in families or a.family.startswith("_"):
    raise SystemExit(f"bench: --family {a.family} is not in bench/families.json")
fam = families[a.family]
fields = dict(fam["config"], vocab_size=fam["vocab_size"], num_labels=2)
for flag, field in fam["shape"].items():
    fields[field] = max(512, a.seq) if flag == "positions" else getattr(a, flag)
cfg = AutoConfig.for_model(fam["model_type"], **fields)
model = AutoModelForSequenceClassification.from_config(cfg)
lora = a.config != "fp32-full"
bf16 = a.config in ("bf16-ckpt-lora", "bf16-lora")
checkpointing = "every-layer" if a.config == "bf16-ckpt-lora" else "none"
if checkpointing != "none":
    # before get_peft_model, as peft's docs do it; use_reentrant=False needs no input grads.
    # A family whose transformers model has no checkpointing (MPNet) gets it by hand, as its
    # users would write it: each encoder layer's forward under torch.utils.checkpoint (the
    # printed line says "by-hand"); --no-hand-checkpointing trains it without (every activation
    # kept, "unsupported").
    try:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    except ValueError:
        checkpointing = "unsupported"
        if a.hand_checkpointing:
            checkpoint_layers_by_hand(model)
            checkpointing = "by-hand"
if lora:
    from peft import LoraConfig, get_peft_model
    model = get_peft_model(model, LoraConfig(r=8, lora_alpha=16, lora_dropout=0.0, target_modules=fam["lora_targets"]))
model.train()
opt = torch.optim.AdamW([q for q in model.parameters() if q.requires_grad], lr=1e-5)

g = torch.Generator().manual_seed(42)
ids = torch.randint(1000, fam["vocab_size"], (a.batch, a.seq), generator=g)
ids[:, 0], ids[:, -1] = 101, 102
mask = torch.ones(a.batch, a.seq, dtype=torch.long)
labels = torch.randint(0, 2, (a.batch,), generator=g)


def step():
    opt.zero_grad(set_to_none=True)
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        logits = model(input_ids=ids, attention_mask=mask).logits
    loss = torch.nn.functional.cross_entropy(logits.float(), labels)
    loss.backward()
    opt.step()


for _ in range(a.warmup):
    step()
t0 = time.perf_counter()
for _ in range(a.steps):
    step()
dt = (time.perf_counter() - t0) / a.steps
print(f"tokens_s={a.batch * a.seq / dt:.1f} step_s={dt:.3f} threads={torch.get_num_threads()} checkpointing={checkpointing}")
