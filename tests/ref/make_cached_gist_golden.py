"""Golden values for cached GISTEmbed in tests/lua/test_cached_gist.lua: sentence-transformers'
own CachedGISTEmbedLoss (GradCache, mini-batches of 2 texts) and GISTEmbedLoss on the
committed tiny BERT (tests/data/tiny_bert, dropout off), guided by a second copy of the same
folder: the loss value of each and the gradients of a few parameters after the cached loss's
backward. Writes tests/data/cached_gist_golden.json.

    /work/venv-losses/bin/python tests/ref/make_cached_gist_golden.py
"""
import json
import os
import warnings

import torch

from sentence_transformers import SentenceTransformer
from sentence_transformers.sentence_transformer import losses as L

warnings.filterwarnings("ignore")
torch.set_num_threads(1)
HERE = os.path.dirname(__file__)
MODEL = os.path.join(HERE, "..", "data", "tiny_bert")
OUT = os.path.join(HERE, "..", "data", "cached_gist_golden.json")

anchors = ["The cat sat on the mat.", "A dog and a cat.", "Hej!", "The house is big today.",
           "Birds were playing.", "The dog sat in the house."]
positives = ["A cat was on the mat.", "Two birds and a dog.", "Hej hej!", "A big house.",
             "The birds played today.", "A dog in a house."]
PARAMS = ["embeddings.LayerNorm.weight", "encoder.layer.0.attention.self.query.weight",
          "encoder.layer.1.output.dense.bias", "encoder.layer.1.output.LayerNorm.bias"]
CASES = [("absolute", 0.0, 0.05), ("relative", 0.05, 0.1)]


def features(model, texts):
    return model.tokenize(texts)


def run(cached, strategy, margin, temperature):
    model = SentenceTransformer(MODEL, device="cpu")
    guide = SentenceTransformer(MODEL, device="cpu")
    model.eval()
    guide.eval()
    kw = dict(margin_strategy=strategy, margin=margin, temperature=temperature)
    if cached:
        loss = L.CachedGISTEmbedLoss(model, guide, mini_batch_size=2, **kw)
    else:
        loss = L.GISTEmbedLoss(model, guide, **kw)
    feats = [features(model, anchors), features(model, positives)]
    value = loss(feats, None)
    value.backward()
    named = dict(model[0].auto_model.named_parameters())
    grads = {p: named[p].grad.reshape(-1).tolist() for p in PARAMS}
    return value.item(), grads


out = {"anchors": anchors, "positives": positives, "cases": []}
for strategy, margin, temperature in CASES:
    v_cached, grads = run(True, strategy, margin, temperature)
    v_plain, grads_plain = run(False, strategy, margin, temperature)
    worst = max(max(abs(a - b) for a, b in zip(grads[p], grads_plain[p])) / max(abs(b) for b in grads_plain[p])
                for p in PARAMS)
    assert abs(v_cached - v_plain) <= 1e-5 * abs(v_plain) and worst <= 1e-5, (v_cached, v_plain, worst)
    out["cases"].append({"margin_strategy": strategy, "margin": margin, "temperature": temperature,
                         "loss_cached": v_cached, "loss_plain": v_plain,
                         "grads": {p: [float("%.9g" % x) for x in g] for p, g in grads.items()}})
with open(OUT, "w") as f:
    json.dump(out, f, indent=None, separators=(",", ":"))
    f.write("\n")
print("wrote", OUT)
