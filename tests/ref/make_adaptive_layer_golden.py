"""Golden values for adaptive_layer in tests/lua/test_adaptive_layer.lua: sentence-transformers'
own AdaptiveLayerLoss (every earlier layer each step: n_layers_per_step = -1, so the draw does
not matter) around MultipleNegativesRankingLoss and CoSENTLoss on the committed tiny BERT
(tests/data/tiny_bert, 2 layers: hidden states 0 and 1 besides the last; dropout off): the loss
value and the gradients of a few parameters. Writes tests/data/adaptive_layer_golden.json.

    /work/venv-losses/bin/python tests/ref/make_adaptive_layer_golden.py
"""
import sys

import torch

from sentence_transformers.sentence_transformer import losses as L

sys.dont_write_bytecode = True   # no __pycache__ left in tests/ref
from st_tiny_golden import ANCHORS, POSITIVES, param_grads, short, tiny_bert, write  # noqa: E402

scores = [0.9, 0.2, 0.7, 0.4, 0.6, 0.1]
CASES = [
    {"inner": "mnrl", "n_layers_per_step": -1},
    {"inner": "mnrl", "n_layers_per_step": -1, "last_layer_weight": 0.5, "prior_layers_weight": 2.0,
     "kl_div_weight": 0.7, "kl_temperature": 0.5},
    {"inner": "cosent", "n_layers_per_step": -1, "kl_temperature": 0.0},
]


def run(case):
    model = tiny_bert()
    inner = L.MultipleNegativesRankingLoss(model) if case["inner"] == "mnrl" else L.CoSENTLoss(model)
    kw = {k: v for k, v in case.items() if k != "inner"}
    loss = L.AdaptiveLayerLoss(model, inner, **kw)
    feats = [model.tokenize(ANCHORS), model.tokenize(POSITIVES)]
    labels = torch.tensor(scores) if case["inner"] == "cosent" else None
    value = loss(feats, labels)
    value.backward()
    return value.item(), {p: short(g) for p, g in param_grads(model).items()}


out = {"anchors": ANCHORS, "positives": POSITIVES, "scores": scores, "cases": []}
for case in CASES:
    v, grads = run(case)
    out["cases"].append({"spec": case, "loss": v, "grads": grads})
    print(case, v)
write("adaptive_layer_golden.json", out)
