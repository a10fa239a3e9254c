"""Golden values for adaptive_layer in tests/lua/test_adaptive_layer.lua: sentence-transformers'
own AdaptiveLayerLoss (every earlier layer each step: n_layers_per_step = -1, so the draw does
not matter) around MultipleNegativesRankingLoss and CoSENTLoss on the committed tiny BERT
(tests/data/tiny_bert, 2 layers: hidden states 0 and 1 besides the last; dropout off): the loss
value and the gradients of a few parameters. Writes tests/data/adaptive_layer_golden.json.

    /work/venv-losses/bin/python tests/ref/make_adaptive_layer_golden.py
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
OUT = os.path.join(HERE, "..", "data", "adaptive_layer_golden.json")

anchors = ["The cat sat on the mat.", "A dog and a cat.", "Hej!", "The house is big today.",
           "Birds were playing.", "The dog sat in the house."]
positives = ["A cat was on the mat.", "Two birds and a dog.", "Hej hej!", "A big house.",
             "The birds played today.", "A dog in a house."]
scores = [0.9, 0.2, 0.7, 0.4, 0.6, 0.1]
PARAMS = ["embeddings.LayerNorm.weight", "encoder.layer.0.attention.self.query.weight",
          "encoder.layer.1.output.dense.bias", "encoder.layer.1.output.LayerNorm.bias"]
CASES = [
    {"inner": "mnrl", "n_layers_per_step": -1},
    {"inner": "mnrl", "n_layers_per_step": -1, "last_layer_weight": 0.5, "prior_layers_weight": 2.0,
     "kl_div_weight": 0.7, "kl_temperature": 0.5},
    {"inner": "cosent", "n_layers_per_step": -1, "kl_temperature": 0.0},
]


def run(case):
    model = SentenceTransformer(MODEL, device="cpu")
    model.eval()
    inner = L.MultipleNegativesRankingLoss(model) if case["inner"] == "mnrl" else L.CoSENTLoss(model)
    kw = {k: v for k, v in case.items() if k != "inner"}
    loss = L.AdaptiveLayerLoss(model, inner, **kw)
    feats = [model.tokenize(anchors), model.tokenize(positives)]
    labels = torch.tensor(scores) if case["inner"] == "cosent" else None
    value = loss(feats, labels)
    value.backward()
    named = dict(model[0].auto_model.named_parameters())
    return value.item(), {p: [float("%.9g" % x) for x in named[p].grad.reshape(-1).tolist()] for p in PARAMS}


out = {"anchors": anchors, "positives": positives, "scores": scores, "cases": []}
for case in CASES:
    v, grads = run(case)
    out["cases"].append({"spec": case, "loss": v, "grads": grads})
    print(case, v)
with open(OUT, "w") as f:
    json.dump(out, f, indent=None, separators=(",", ":"))
    f.write("\n")
print("wrote", OUT)
