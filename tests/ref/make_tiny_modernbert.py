#!/usr/bin/env python3
"""Writes the tiny random ModernBERT folders and their goldens (reference side; never run by tests).

  tests/data/tiny_modernbert/      ModernBertModel (2 layers, hidden 32, 4 heads of 8, intermediate 48;
                                   layer 0 global, layer 1 local with local_attention 8, i.e. keys
                                   within 4 positions) as a sentence-transformers folder (mean pooling),
                                   with tests/data/tok_modernbert's byte-level BPE tokenizer.
  tests/data/tiny_modernbert_cls/  ModernBertForSequenceClassification of the same shape, 3 labels,
                                   classifier_pooling "mean", its own weights.
  tests/data/golden_tiny_modernbert.safetensors
      ids, mask, the tokenizer's ids; for the local window (key "w8.") and with the window covering every
      key (local_attention 4096, key "wall."): last_hidden_state, mean-pooled embedding,
      loss = sum(embedding * loss_weight) and grad.<name> of every parameter;
      cls.logits, cls.loss (mean cross-entropy against cls.labels), cls.grad.<name> (window 8).

Invariants: float32 on the CPU, eval() with autograd on, attn_implementation="eager"; every parameter
random (norm gains 1 + N(0, 0.1), matrices N(0, 0.2)), the padding row of tok_embeddings zero. The
texts are longer than the window, so the local layer differs from a global one. Each golden is also
computed in float64 and the float32-vs-float64 error printed.

Usage: /work/venv-modern/bin/python tests/ref/make_tiny_modernbert.py   (transformers 5.24, torch 2.15)
"""
import copy
import json
import os
import shutil
import sys

import tokenizers
import torch
import torch.nn.functional as F
from safetensors.torch import save_file
from transformers import (AutoTokenizer, ModernBertConfig, ModernBertForSequenceClassification,
                          ModernBertModel)

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.dont_write_bytecode = True   # no __pycache__ left in tests/ref
from tiny_golden import INIT_STD, fresh_dir, randomize, write_json  # noqa: E402
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
DATA = os.path.join(ROOT, "tests", "data")
TOK = os.path.join(DATA, "tok_modernbert")

SEED_BASE, SEED_CLS, SEED_LW = 2468, 1357, 44

TEXTS = [
    "The cat sat on the mat, and the dog slept by the door all day long.",
    "Katten sitter på mattan och hunden är inte där!",
    "A dog, 2 birds and a cat were playing in the house today.",
    "Hej!",
]
CLS_TEXTS = ["The cat sat on the mat.", "A dog, 2 birds and a cat were playing in the house today, happily.",
             "Hej då!"]
CLS_LABELS = [0, 2, 1]


def vocab_size():
    d = json.load(open(os.path.join(TOK, "tokenizer.json"), encoding="utf-8"))
    n = max(max(d["model"]["vocab"].values()), max(t["id"] for t in d["added_tokens"])) + 1
    return (n + 7) // 8 * 8


def ids_of(name):
    d = json.load(open(os.path.join(TOK, "tokenizer.json"), encoding="utf-8"))
    return next(t["id"] for t in d["added_tokens"] if t["content"] == name)


def make_config(**extra):
    return ModernBertConfig(
        vocab_size=vocab_size(), hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
        intermediate_size=48, max_position_embeddings=128, global_attn_every_n_layers=2, local_attention=8,
        global_rope_theta=160000.0, local_rope_theta=10000.0, norm_eps=1e-5, hidden_activation="gelu",
        pad_token_id=ids_of("[PAD]"), cls_token_id=ids_of("[CLS]"), sep_token_id=ids_of("[SEP]"),
        bos_token_id=ids_of("[CLS]"), eos_token_id=ids_of("[SEP]"), initializer_range=INIT_STD, **extra)


def copy_tokenizer(out):
    for f in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(TOK, f), os.path.join(out, f))


def make_base(out):
    fresh_dir(out)
    torch.manual_seed(SEED_BASE)
    model = ModernBertModel(make_config(architectures=["ModernBertModel"]))
    randomize(model, SEED_BASE)
    model.save_pretrained(out, safe_serialization=True)
    copy_tokenizer(out)
    write_json(os.path.join(out, "modules.json"), [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
    ])
    write_json(os.path.join(out, "1_Pooling", "config.json"), {
        "word_embedding_dimension": 32, "pooling_mode_cls_token": False, "pooling_mode_mean_tokens": True,
        "pooling_mode_max_tokens": False, "pooling_mode_mean_sqrt_len_tokens": False})
    write_json(os.path.join(out, "sentence_bert_config.json"), {"max_seq_length": 128, "do_lower_case": False})


def make_cls(out):
    fresh_dir(out)
    torch.manual_seed(SEED_CLS)
    labels = ["entailment", "neutral", "contradiction"]
    model = ModernBertForSequenceClassification(make_config(
        architectures=["ModernBertForSequenceClassification"], num_labels=3, classifier_pooling="mean",
        id2label={i: l for i, l in enumerate(labels)}, label2id={l: i for i, l in enumerate(labels)}))
    randomize(model, SEED_CLS)
    model.save_pretrained(out, safe_serialization=True)
    copy_tokenizer(out)


def mean_pool(last, mask):
    m = mask.unsqueeze(-1).to(last.dtype)
    return (last * m).sum(1) / torch.clamp(m.sum(1), min=1e-9)


def grads(model):
    return {n: (p.grad if p.grad is not None else torch.zeros_like(p)).detach().to(torch.float32).contiguous()
            for n, p in model.named_parameters()}


def put_grads(t, prefix, gs, ids):
    """grad.<name> of every parameter; the token embeddings' only at the rows the batch uses (the others
    are zero), as grad_rows.<name> with the row ids in <prefix>grad_ids."""
    rows = torch.unique(ids)
    for n, g in gs.items():
        if n.endswith("tok_embeddings.weight"):
            other = torch.ones(g.shape[0], dtype=torch.bool)
            other[rows] = False
            assert (g[other] == 0).all()
            t[prefix + "grad_rows." + n] = g[rows].contiguous()
            t[prefix + "grad_ids"] = rows.to(torch.int64)
        else:
            t[prefix + "grad." + n] = g


def err(a, b):
    return (a.double() - b.double()).abs().max().item()


def embedding_golden(folder, enc, lw, local_attention, prefix, t):
    model = ModernBertModel.from_pretrained(folder, attn_implementation="eager", dtype=torch.float32,
                                            local_attention=local_attention).eval()
    model64 = copy.deepcopy(model).double()
    res = {}
    for m, dt in ((model, torch.float32), (model64, torch.float64)):
        last = m(input_ids=enc["input_ids"], attention_mask=enc["attention_mask"]).last_hidden_state
        emb = mean_pool(last, enc["attention_mask"])
        loss = (emb * lw.to(dt)).sum()
        loss.backward()
        res[dt] = (last.detach(), emb.detach(), loss.detach().reshape(1))
    last, emb, loss = res[torch.float32]
    print(f"  {prefix} f32-vs-f64: hidden {err(last, res[torch.float64][0]):.3g} emb {err(emb, res[torch.float64][1]):.3g}")
    t[prefix + "embedding"], t[prefix + "loss"] = emb, loss.float()
    if prefix == "w8.":
        t[prefix + "last_hidden_state"] = last
    put_grads(t, prefix, grads(model), enc["input_ids"])
    return emb


def check_tokenizer(folder, enc, texts):
    raw = tokenizers.Tokenizer.from_file(os.path.join(folder, "tokenizer.json"))
    raw.no_padding()
    for i, text in enumerate(texts):
        n = int(enc["attention_mask"][i].sum())
        assert raw.encode(text).ids == enc["input_ids"][i][:n].tolist(), text


def main():
    base, cls = os.path.join(DATA, "tiny_modernbert"), os.path.join(DATA, "tiny_modernbert_cls")
    make_base(base)
    make_cls(cls)
    tok = AutoTokenizer.from_pretrained(base)
    enc = tok(TEXTS, padding="longest", return_tensors="pt")
    check_tokenizer(base, enc, TEXTS)
    print("lengths", enc["attention_mask"].sum(1).tolist())
    lw = torch.randn(len(TEXTS), 32, generator=torch.Generator().manual_seed(SEED_LW))
    t = {"input_ids": enc["input_ids"], "attention_mask": enc["attention_mask"], "loss_weight": lw}
    emb8 = embedding_golden(base, enc, lw, 8, "w8.", t)
    emball = embedding_golden(base, enc, lw, 4096, "wall.", t)
    print("  window changes the embedding by", err(emb8, emball))
    # sentence-transformers' own Pooling, when installed, gives the same embedding
    try:
        from sentence_transformers import SentenceTransformer
        st = SentenceTransformer(base, device="cpu", model_kwargs={"attn_implementation": "eager"})
        e = st.encode(TEXTS, convert_to_tensor=True)
        print("  sentence-transformers vs golden:", err(e, emb8))
    except ImportError:
        print("  (sentence-transformers not installed: its check skipped)")

    tokc = AutoTokenizer.from_pretrained(cls)
    encc = tokc(CLS_TEXTS, padding="longest", return_tensors="pt")
    check_tokenizer(cls, encc, CLS_TEXTS)
    labels = torch.tensor(CLS_LABELS, dtype=torch.int64)
    model = ModernBertForSequenceClassification.from_pretrained(cls, attn_implementation="eager",
                                                                dtype=torch.float32).eval()
    model64 = copy.deepcopy(model).double()
    out = model(input_ids=encc["input_ids"], attention_mask=encc["attention_mask"], labels=labels)
    out.loss.backward()
    out64 = model64(input_ids=encc["input_ids"], attention_mask=encc["attention_mask"], labels=labels)
    out64.loss.backward()
    print("  cls logits f32-vs-f64", err(out.logits, out64.logits))
    t.update({"cls.input_ids": encc["input_ids"], "cls.attention_mask": encc["attention_mask"],
              "cls.labels": labels, "cls.logits": out.logits.detach(), "cls.loss": out.loss.detach().reshape(1)})
    put_grads(t, "cls.", grads(model), encc["input_ids"])
    t = {k: v.detach().contiguous() for k, v in t.items()}
    path = os.path.join(DATA, "golden_tiny_modernbert.safetensors")
    save_file(t, path, metadata={"format": "pt"})
    for d, _, fs in os.walk(DATA):
        for f in fs:
            if "modernbert" in os.path.join(d, f):
                os.chmod(os.path.join(d, f), 0o644)
    with open(os.path.join(DATA, "golden_tiny_modernbert_texts.txt"), "w", encoding="utf-8") as f:
        f.write("".join(x + "\n" for x in TEXTS))
    with open(os.path.join(DATA, "golden_tiny_modernbert_cls_texts.txt"), "w", encoding="utf-8") as f:
        f.write("".join(x + "\n" for x in CLS_TEXTS))
    print(f"wrote {os.path.relpath(path, ROOT)}: {os.path.getsize(path)} bytes")


if __name__ == "__main__":
    main()
