#!/usr/bin/env python3
"""Writes tiny random MPNet folders made by transformers, and their parity goldens (reference side;
never run by tests).

  tests/data/tiny_mpnet/       MPNetModel (2 layers, hidden 32, 4 heads, intermediate 64, GELU, the
                               relative-position bias of 32 buckets) saved as a sentence-transformers
                               folder (no "mpnet." prefix, with its pooler, mean pooling), and the
                               MPNetTokenizer of a tiny WordPiece vocabulary (<s> 0, <pad> 1, </s> 2;
                               tokenizer.json: WordPiece + RobertaProcessing).
  tests/data/tiny_mpnet_cls/   MPNetForSequenceClassification (MPNetClassificationHead), 3 labels.
  tests/data/golden_tiny_mpnet.safetensors      input_ids, attention_mask, loss_weight, last_hidden_state,
                               embedding (mean pooling), loss = sum(embedding * loss_weight), grad.<name> of
                               every parameter (encoder.relative_attention_bias.weight included)
  tests/data/golden_tiny_mpnet_cls.safetensors  input_ids, attention_mask, labels, logits, loss (mean
                               cross-entropy), grad.<name> of every parameter
The texts are long enough (38 tokens) that relative positions reach the logarithmic buckets. The
script also checks the bucketing of kernels/cpu/attn_bucket.h (double precision) against transformers'
relative_position_bucket (float32) for every relative position within 4096.

Every parameter is random (gains around 1, biases non-zero). Models run in eval mode (no dropout),
eager attention, float32.

Usage: /work/venv/bin/python tests/ref/make_tiny_mpnet.py
"""
import math
import os
import sys

import torch
from transformers import MPNetConfig, MPNetForSequenceClassification, MPNetModel, MPNetTokenizer
from transformers.models.mpnet.modeling_mpnet import MPNetEncoder

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.dont_write_bytecode = True   # no __pycache__ left in tests/ref
import make_tiny_bert as tb  # noqa: E402  (the tiny WordPiece vocabulary)
from tiny_golden import DATA, INIT_STD, NLI_LABELS, cls_golden, embed_loss, golden, random_folder, report, save, \
    sentence_transformers_files  # noqa: E402

TEXTS = [
    "The cat sat on the mat.",
    "Katten sitter på mattan och hunden är inte där!",
    "A dog, 2 birds and a cat were playing in the house today, and the very good bird sat on that bad mat with "
    "the dog.",
    "Hej!",
]
PAIRS = [
    ("The cat sat on the mat.", "A cat is sitting."),
    ("Jag har en hund och en katt.", "Det är inte en katt!"),
    ("This was very good today, the bird and the dog sat on the mat with a cat.", "It was bad, walking with the dog?"),
]
LABELS = [0, 2, 1]


def vocab():
    return ["<s>", "<pad>", "</s>", "<unk>"] + tb.build_vocab() + ["<mask>"]


def bucket_c(rel, nbuckets=32, max_distance=128):
    """kernels/cpu/attn_bucket.h's tr_attn_rel_bucket, bidirectional (double precision)."""
    n, nb = -rel, nbuckets // 2
    ret = nb if n < 0 else 0
    n = abs(n)
    exact = nb // 2
    if n < exact:
        return ret + n
    v = math.log(n / exact) / math.log(max_distance / exact) * (nb - exact)
    large = exact + int(v) if v < nb else nb - 1
    return ret + min(large, nb - 1)


def check_buckets():
    rel = torch.arange(-4096, 4097)
    theirs = MPNetEncoder.relative_position_bucket(rel).tolist()
    ours = [bucket_c(r) for r in rel.tolist()]
    bad = [(r, a, b) for r, a, b in zip(rel.tolist(), ours, theirs) if a != b]
    assert not bad, bad[:10]
    print(f"buckets: attn_bucket.h = transformers for every relative position in [-4096, 4096]")


def config(v, **extra):
    return MPNetConfig(vocab_size=len(v), hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                       intermediate_size=64, max_position_embeddings=80, hidden_dropout_prob=0.1,
                       attention_probs_dropout_prob=0.1, initializer_range=INIT_STD, layer_norm_eps=1e-5,
                       relative_attention_num_buckets=32, pad_token_id=1, bos_token_id=0, eos_token_id=2, **extra)


def tokenizer_files(out, v):
    tok = MPNetTokenizer(vocab={w: i for i, w in enumerate(v)}, unk_token="[UNK]", model_max_length=78)
    tok.save_pretrained(out)
    with open(os.path.join(out, "vocab.txt"), "w", encoding="utf-8") as f:
        f.write("\n".join(v) + "\n")


def make_embedder(v):
    out = os.path.join(DATA, "tiny_mpnet")
    random_folder(out, lambda: MPNetModel(config(v, architectures=["MPNetModel"])), 17)
    tokenizer_files(out, v)
    sentence_transformers_files(out, 32, 78)

    tok = MPNetTokenizer.from_pretrained(out)
    enc = tok(TEXTS, padding="longest", return_tensors="pt")
    assert "token_type_ids" not in enc
    assert enc["input_ids"].shape[1] >= 30, enc["input_ids"].shape
    lw = torch.randn(len(TEXTS), 32, generator=torch.Generator().manual_seed(42))
    m = MPNetModel.from_pretrained(out, attn_implementation="eager", dtype=torch.float32).eval()
    t, ref = golden(m, embed_loss, {"input_ids": enc["input_ids"], "attention_mask": enc["attention_mask"],
                                    "loss_weight": lw}, enc, lw)
    report(t, ref)
    save(os.path.join(DATA, "golden_tiny_mpnet.safetensors"), t)
    with open(os.path.join(DATA, "golden_tiny_mpnet_texts.txt"), "w", encoding="utf-8") as f:
        f.write("\n".join(TEXTS) + "\n")


def make_classifier(v):
    out = os.path.join(DATA, "tiny_mpnet_cls")
    random_folder(out, lambda: MPNetForSequenceClassification(config(
        v, architectures=["MPNetForSequenceClassification"], **NLI_LABELS)), 7)
    tokenizer_files(out, v)
    cls_golden(out, MPNetForSequenceClassification, MPNetTokenizer.from_pretrained(out), PAIRS, LABELS,
               os.path.join(DATA, "golden_tiny_mpnet_cls.safetensors"))


def main():
    check_buckets()
    v = vocab()
    make_embedder(v)
    make_classifier(v)


if __name__ == "__main__":
    main()
