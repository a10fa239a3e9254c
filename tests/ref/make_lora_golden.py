#!/usr/bin/env python3
"""PEFT LoRA references for tests/lua/test_lora.lua (reference side; never run by tests).

  tests/data/lora_golden.safetensors   two PEFT LoRA set-ups on tests/data/tiny_bert, on the inputs and
                                       loss_weight of golden_tiny_bert.safetensors (loss = sum(mean-pooled
                                       embedding * loss_weight), model.eval() with autograd, eager attention):
      a.*  r 4, lora_alpha 8, target_modules [query, value], bias none
      b.*  r 2, lora_alpha 4, use_rslora, target_modules [attention.output.dense, intermediate.dense], bias all
    <s>.set.<name>   the lora_A / lora_B values set before the forward (A and B both non-zero, fixed seeds)
    <s>.embedding    the mean-pooled output;  <s>.loss
    <s>.grad.<name>  the gradient of every trainable parameter (lora_A, lora_B; set-up b also every bias;
                     a bias without a gradient, the pooler's, is written as zeros)
    Names are trainer's parameter names: PEFT's keys without "base_model.model.", ".default" and
    ".base_layer" (PEFT's name for the wrapped Linear; its saved adapters keep it: <module>.base_layer.bias).
  tests/data/tiny_lora_adapter/        set-up a as PEFT's save_pretrained writes it (adapter_config.json,
                                       adapter_model.safetensors): the test loads it and must give a.embedding.

Format compatibility the other way (trainer -> PEFT): the script runs
  ./trainer run tests/ref/lora_save_ours.lua OUT
which applies set-up b with trainer, sets b.set.* and saves with trainer.lora.save; PEFT's
PeftModel.from_pretrained must load OUT and give b.embedding within 1e-5, and OUT's keys must be exactly
the keys PEFT's own save_pretrained writes for set-up b. The script asserts both and prints the result.

Usage: /tmp/refvenv/bin/python tests/ref/make_lora_golden.py   (needs peft; after `make`)
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

import peft
import torch
from peft import LoraConfig, PeftModel, get_peft_model
from safetensors import safe_open
from safetensors.torch import load_file, save_file
from transformers import BertModel

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
DATA = os.path.join(ROOT, "tests", "data")
TINY = os.path.join(DATA, "tiny_bert")

SETUPS = {
    "a": dict(r=4, lora_alpha=8, target_modules=["query", "value"], bias="none", use_rslora=False, seed=11),
    "b": dict(r=2, lora_alpha=4, target_modules=["attention.output.dense", "intermediate.dense"], bias="all",
              use_rslora=True, seed=12),
}


def our_name(key):
    key = key.replace("base_model.model.", "", 1)
    return key.replace(".default", "").replace(".base_layer", "")


def mean_pool(last, mask):
    m = mask.unsqueeze(-1).to(last.dtype)
    return (last * m).sum(1) / torch.clamp(m.sum(1), min=1e-9)


def base_model():
    return BertModel.from_pretrained(TINY, attn_implementation="eager", dtype=torch.float32).eval()


def peft_model(s):
    cfg = LoraConfig(r=s["r"], lora_alpha=s["lora_alpha"], target_modules=s["target_modules"], lora_dropout=0.0,
                     bias=s["bias"], use_rslora=s["use_rslora"], task_type="FEATURE_EXTRACTION")
    return get_peft_model(base_model(), cfg).eval()


def set_lora(model, seed):
    """Fixed non-zero A and B (B is zeros at init, which would hide its role in the forward)."""
    g = torch.Generator().manual_seed(seed)
    values = {}
    with torch.no_grad():
        for key, p in model.named_parameters():
            if "lora_A" in key or "lora_B" in key:
                p.copy_(torch.randn(p.shape, generator=g) * 0.2)
                values[our_name(key)] = p.detach().clone()
    return values


def forward(model, inp, lw):
    out = model(input_ids=inp["input_ids"], attention_mask=inp["attention_mask"],
                token_type_ids=inp["token_type_ids"])
    emb = mean_pool(out.last_hidden_state, inp["attention_mask"])
    loss = (emb * lw).sum()
    return emb, loss


def main():
    torch.set_num_threads(1)
    g = load_file(os.path.join(DATA, "golden_tiny_bert.safetensors"))
    inp = {k: g[k] for k in ("input_ids", "attention_mask", "token_type_ids")}
    lw = g["loss_weight"]
    out = {}
    for tag, s in SETUPS.items():
        model = peft_model(s)
        values = set_lora(model, s["seed"])
        emb, loss = forward(model, inp, lw)
        loss.backward()
        for k, v in values.items():
            out[f"{tag}.set.{k}"] = v
        out[f"{tag}.embedding"] = emb.detach()
        out[f"{tag}.loss"] = loss.detach().reshape(1)
        n = 0
        for key, p in model.named_parameters():
            if p.requires_grad:
                grad = p.grad if p.grad is not None else torch.zeros_like(p)
                out[f"{tag}.grad.{our_name(key)}"] = grad.detach().clone()
                n += 1
        print(f"set-up {tag}: {n} trainable tensors, loss {loss.item():.6f}")
        if tag == "a":
            dest = os.path.join(DATA, "tiny_lora_adapter")
            shutil.rmtree(dest, ignore_errors=True)
            model.save_pretrained(dest)
            cfg = json.load(open(os.path.join(dest, "adapter_config.json")))
            cfg["base_model_name_or_path"] = "tests/data/tiny_bert"   # not the absolute path of this machine
            with open(os.path.join(dest, "adapter_config.json"), "w") as f:
                json.dump(cfg, f, indent=2, sort_keys=True)
                f.write("\n")
            print("wrote", os.path.relpath(dest, ROOT), sorted(os.listdir(dest)))
        if tag == "b":
            peft_keys_dir = tempfile.mkdtemp()
            model.save_pretrained(peft_keys_dir)
            with safe_open(os.path.join(peft_keys_dir, "adapter_model.safetensors"), "pt") as f:
                peft_keys = sorted(f.keys())
            shutil.rmtree(peft_keys_dir)
    out = {k: v.contiguous() for k, v in out.items()}
    path = os.path.join(DATA, "lora_golden.safetensors")
    save_file(out, path, metadata={"format": "pt"})
    print(f"wrote {os.path.relpath(path, ROOT)}: {os.path.getsize(path)} bytes, {len(out)} tensors")

    # trainer -> PEFT: our saved adapter loads in PEFT and gives the same output.
    ours = tempfile.mkdtemp()
    subprocess.run([os.path.join(ROOT, "trainer"), "run", os.path.join(HERE, "lora_save_ours.lua"), ours],
                   check=True, cwd=ROOT)
    with safe_open(os.path.join(ours, "adapter_model.safetensors"), "pt") as f:
        our_keys = sorted(f.keys())
    assert our_keys == peft_keys, ("key sets differ", set(our_keys) ^ set(peft_keys))
    loaded = PeftModel.from_pretrained(base_model(), ours).eval()
    with torch.no_grad():
        emb, _ = forward(loaded, inp, lw)
    err = (emb - out["b.embedding"]).abs().max().item()
    assert err <= 1e-5, err
    print(f"trainer-saved adapter: {len(our_keys)} keys = PEFT's own; PeftModel.from_pretrained output "
          f"max |diff| {err:.3g} vs PEFT set-up b (peft {peft.__version__})")
    shutil.rmtree(ours)


if __name__ == "__main__":
    sys.exit(main())
