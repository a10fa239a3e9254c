# bench/gpu/torch_side.py: the PyTorch side of bench/gpu/run.sh (its trainer twin is
# bench/gpu/trainer_side.lua; keep the two alike). Needs torch, transformers and peft (on the
# H200 machines; never a build or test dependency).
#
#   python bench/gpu/torch_side.py --train DIR --config NAME --rows 16|48 --device cuda \
#       --warmup 2 --steps 3 [--dropout 0.1] [--losses]
# Loads the weights trainer_side.lua --write put in DIR (transformers.BertModel, no pooler)
# and its batch (DIR/batch.safetensors), and trains as the trainer side does: mean pooling,
# MNRL (scale 20) over 16 rows = 8 (anchor, positive) pairs or 48 rows = 16 (anchor, positive,
# negative) triplets, AdamW lr 1e-5, dropout 0.1 (--dropout 0: no masks, so that the two
# sides' losses can be compared number for number). Configurations:
#   fp32-full       every parameter trains, fp32 (TF32 off: PyTorch's default for matmuls)
#   bf16-full       torch.autocast(bfloat16), fp32 weights (trainer's bf16: half activations,
#                   fp32 masters)
#   bf16-ckpt       bf16-full + gradient_checkpointing_enable (every layer, use_reentrant=False)
#   bf16-ckpt-lora  bf16-ckpt + peft LoraConfig(r=8, lora_alpha=16, lora_dropout=0.1,
#                   target_modules=["query", "value"]): the flagship; the frozen base in bf16
#                   (trainer stores frozen weights once in half)
#   fp32-lora       fp32 + the same LoRA
# Prints one line: tokens_s step_s peak_allocated peak_reserved (torch.cuda.max_memory_*; not
# on the CPU) and, with --losses, every step's loss. The loss is read once, after the last
# step. Run on the CPU (--device cpu, weights from run.sh --tiny) with transformers 5.24,
# peft 0.21 and torch 2.15: every configuration trains, and with --dropout 0 its fp32 losses
# are the trainer side's to 1e-6 relative (the same weights, batch and optimizer).
import argparse
import time

import torch
from safetensors.torch import load_file
from transformers import BertModel

p = argparse.ArgumentParser()
p.add_argument("--train", required=True)
p.add_argument("--config", default="bf16-ckpt-lora",
               choices=["fp32-full", "fp32-lora", "bf16-full", "bf16-ckpt", "bf16-ckpt-lora"])
p.add_argument("--rows", type=int, default=16)
p.add_argument("--device", default="cuda")
p.add_argument("--warmup", type=int, default=2)
p.add_argument("--steps", type=int, default=3)
p.add_argument("--dropout", type=float, default=0.1)
p.add_argument("--losses", action="store_true")
a = p.parse_args()

dev = torch.device(a.device)
cuda = dev.type == "cuda"
bf16 = a.config.startswith("bf16")
ckpt = "ckpt" in a.config
use_lora = a.config.endswith("lora")
torch.manual_seed(1)
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False

model = BertModel.from_pretrained(a.train, add_pooling_layer=False, hidden_dropout_prob=a.dropout,
                                  attention_probs_dropout_prob=a.dropout)
if ckpt:
    # transformers 5 renamed it (the old name warns, and goes in v6); older ones have only the old
    if hasattr(model, "activation_checkpointing_enable"):
        model.activation_checkpointing_enable(activation_checkpointing_kwargs={"use_reentrant": False})
    else:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
if use_lora:
    from peft import LoraConfig, get_peft_model
    if bf16:
        model = model.to(torch.bfloat16)   # the frozen base in half; the adapters go back to fp32 below
    model = get_peft_model(model, LoraConfig(r=8, lora_alpha=16, lora_dropout=0.1, target_modules=["query", "value"]))
    for n, q in model.named_parameters():
        if q.requires_grad:
            q.data = q.data.float()
model = model.to(dev)
model.train()
opt = torch.optim.AdamW([q for q in model.parameters() if q.requires_grad], lr=1e-5)

ids = load_file(a.train + "/batch.safetensors")["input_ids"][: a.rows].long().to(dev)
mask = torch.ones_like(ids)
ncols = 3 if a.rows % 3 == 0 else 2
B = a.rows // ncols
targets = torch.arange(B, device=dev)


def mnrl(emb):
    anchors, cand = emb[:B], emb[B:]
    scores = torch.nn.functional.normalize(anchors, dim=-1) @ torch.nn.functional.normalize(cand, dim=-1).T
    return torch.nn.functional.cross_entropy(scores * 20.0, targets)


values = []


def step():
    opt.zero_grad(set_to_none=True)
    with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=bf16):
        h = model(input_ids=ids, attention_mask=mask).last_hidden_state
    m = mask.unsqueeze(-1).float()
    emb = (h.float() * m).sum(1) / m.sum(1)
    loss = mnrl(emb)
    loss.backward()
    opt.step()
    values.append(loss.detach())


def sync():
    if cuda:
        torch.cuda.synchronize()


for _ in range(a.warmup):
    step()
sync()
if cuda:
    torch.cuda.reset_peak_memory_stats()
t0 = time.perf_counter()
for _ in range(a.steps):
    step()
losses = [float(v) for v in values]   # the one read: waits for the device
sync()
dt = (time.perf_counter() - t0) / max(a.steps, 1)
seq = ids.shape[1]
line = "tokens_s=%.1f step_s=%.4f" % (a.rows * seq / dt, dt)
if cuda:   # on the CPU torch keeps no such figures: the table shows "-"
    line += " peak_allocated=%d peak_reserved=%d" % (torch.cuda.max_memory_allocated(), torch.cuda.max_memory_reserved())
if a.losses:
    line += " losses=" + ",".join("%.9g" % v for v in losses)
print(line, flush=True)
