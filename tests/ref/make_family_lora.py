#!/usr/bin/env python3
"""Writes PEFT LoRA adapters on the tiny DistilBERT, MPNet and ModernBERT models and their goldens (reference side;
never run by tests), and checks that PEFT loads back what trainer.lora.save writes.

  tests/data/tiny_distilbert_lora/   a PEFT LoRA adapter on tiny_distilbert as save_pretrained writes it:
                                     r 4, lora_alpha 8, target_modules q_lin, v_lin (the DistilBERT
                                     family's peft_targets), A and B random.
  tests/data/tiny_mpnet_lora/        the same on tiny_mpnet:
                                     r 4, lora_alpha 8, target_modules q, k, v, o (every MPNet name
                                     the family accepts), A and B random.
  tests/data/tiny_modernbert_lora/   the same on tiny_modernbert: target_modules Wqkv, Wo, Wi.
  tests/data/golden_tiny_<family>_lora.safetensors
      embedding (mean-pooled, the inputs and loss_weight of golden_tiny_<family>.safetensors),
      loss = sum(embedding * loss_weight), grad.<name> of every lora_A / lora_B (trainer's names:
      PEFT's keys without base_model.model., .default and .base_layer).

The other way, trainer -> PEFT: `./trainer run tests/ref/lora_roundtrip_ours.lua MODEL IN OUT` loads
the adapter with trainer.lora.load and saves it with trainer.lora.save; PEFT must load that with the
same key set and give the same embedding within 1e-5. Needs ./trainer built.

Usage: /work/venv/bin/python tests/ref/make_family_lora.py   (torch 2.15, transformers 5.25, peft 0.21.2)
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

import torch
from peft import LoraConfig, PeftModel, get_peft_model
from safetensors import safe_open
from safetensors.torch import load_file
from transformers import DistilBertModel, ModernBertModel, MPNetModel

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.dont_write_bytecode = True   # no __pycache__ left in tests/ref
from tiny_golden import mean_pool, save  # noqa: E402

ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
DATA = os.path.join(ROOT, "tests", "data")

# (folder, transformers class, PEFT target_modules, seed of the adapter values)
FAMILIES = [
    ("tiny_distilbert", DistilBertModel, ["q_lin", "v_lin"], 13),
    ("tiny_mpnet", MPNetModel, ["q", "k", "v", "o"], 21),
    ("tiny_modernbert", ModernBertModel, ["Wqkv", "Wo", "Wi"], 22),
]


def our_name(key):
    return key.replace("base_model.model.", "", 1).replace(".default", "").replace(".base_layer", "")


def make_lora(folder, cls, targets, seed):
    base = os.path.join(DATA, folder)
    g = load_file(os.path.join(DATA, f"golden_{folder}.safetensors"))

    def model():
        return cls.from_pretrained(base, attn_implementation="eager", dtype=torch.float32).eval()

    def embed(m):
        last = m(input_ids=g["input_ids"], attention_mask=g["attention_mask"]).last_hidden_state
        return mean_pool(last, g["attention_mask"])

    cfg = LoraConfig(r=4, lora_alpha=8, lora_dropout=0.0, target_modules=targets,
                     task_type="FEATURE_EXTRACTION")
    pm = get_peft_model(model(), cfg).eval()
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for key, p in pm.named_parameters():
            if "lora_" in key:
                p.copy_(torch.randn(p.shape, generator=gen) * 0.2)
    emb = embed(pm)
    loss = (emb * g["loss_weight"]).sum()
    loss.backward()
    t = {"embedding": emb.detach(), "loss": loss.detach().reshape(1)}
    for key, p in pm.named_parameters():
        if p.requires_grad:
            t["grad." + our_name(key)] = p.grad.detach().clone()
    dest = os.path.join(DATA, f"{folder}_lora")
    shutil.rmtree(dest, ignore_errors=True)
    pm.save_pretrained(dest)
    os.remove(os.path.join(dest, "README.md"))   # PEFT's model card names this machine's path
    with open(os.path.join(dest, "adapter_config.json")) as f:
        c = json.load(f)
    c["base_model_name_or_path"] = f"tests/data/{folder}"
    c["target_modules"] = sorted(c["target_modules"])   # PEFT writes a set: in any order
    with open(os.path.join(dest, "adapter_config.json"), "w") as f:
        json.dump(c, f, indent=2, sort_keys=True)
        f.write("\n")
    save(os.path.join(DATA, f"golden_{folder}_lora.safetensors"), t)
    with safe_open(os.path.join(dest, "adapter_model.safetensors"), "pt") as f:
        peft_keys = sorted(f.keys())

    ours = tempfile.mkdtemp()
    subprocess.run([os.path.join(ROOT, "trainer"), "run", os.path.join(HERE, "lora_roundtrip_ours.lua"),
                    f"tests/data/{folder}", dest, ours], check=True, cwd=ROOT)
    with safe_open(os.path.join(ours, "adapter_model.safetensors"), "pt") as f:
        our_keys = sorted(f.keys())
    assert our_keys == peft_keys, ("key sets differ", set(our_keys) ^ set(peft_keys))
    loaded = PeftModel.from_pretrained(model(), ours).eval()
    with torch.no_grad():
        err = (embed(loaded) - t["embedding"]).abs().max().item()
    assert err <= 1e-5, err
    print(f"{folder}: {len(peft_keys)} adapter tensors; the trainer-saved adapter has PEFT's keys and PEFT's "
          f"output on it differs by at most {err:.3g}")
    shutil.rmtree(ours)


def main():
    torch.manual_seed(0)
    for fam in FAMILIES:
        make_lora(*fam)


if __name__ == "__main__":
    main()
