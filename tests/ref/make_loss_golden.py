"""Golden values for tests/lua/test_losses.lua and tests/lua/test_metrics.lua.

Runs sentence-transformers' own loss classes (6.2.0: MultipleNegativesRankingLoss,
MultipleNegativesSymmetricRankingLoss, CoSENTLoss, CosineSimilarityLoss, SoftmaxLoss,
MatryoshkaLoss) on fixed embeddings, fed through a stand-in model whose forward returns the
embedding stored in the features dict, and torch.nn.functional.cross_entropy for the
classification head. Inputs are float32 values (so the f32 tests see them exactly); the
reference runs in float64 so the golden values carry no float32 rounding of their own.
Writes tests/data/loss_golden.json: for each case the inputs, the loss and the gradient
with respect to every embedding input (and the classifier for softmax); plus
scipy.stats.spearmanr / pearsonr on fixed score lists (with ties) for the metrics.

    /tmp/refvenv/bin/python tests/ref/make_loss_golden.py
"""
import os
import sys

import numpy as np
import scipy.stats
import torch
import torch.nn.functional as F

from sentence_transformers.sentence_transformer import losses as L

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.dont_write_bytecode = True   # no __pycache__ left in tests/ref
from tiny_golden import FixedModel, fixed_loss, float32_source, one_thread_quiet, write_loss_golden  # noqa: E402

one_thread_quiet()
B, C = 6, 12


f32 = float32_source(1234)


def f32_error(loss_fn, embs, labels, params, value, grads):
    """The same computation in float32 against float64, relative to each tensor's largest
    |value|: the inputs must be well-conditioned enough that float32 can meet the tests'
    1e-5 (a saturated softmax, where p - 1 cancels, cannot)."""
    if params:
        return 0.0
    v32, g32 = fixed_loss(loss_fn, embs, labels, dtype=torch.float32)
    err = abs(v32 - value) / max(abs(value), 1.0)
    for a, b in zip(g32, grads):
        err = max(err, float((a.double() - b).abs().max() / b.abs().max()))
    return err


def case(name, spec, embs, labels, loss_fn, extra=None):
    dtype = torch.float64 if labels is not None and isinstance(labels[0], float) else torch.long
    lab = None if labels is None else torch.tensor(labels, dtype=dtype)
    params = [] if extra is None else extra["params"]
    value, grads = fixed_loss(loss_fn, embs, lab, params)
    err = f32_error(loss_fn, embs, lab, params, value, grads)
    assert err < 2e-6, f"{name}: float32 error {err:.3g} relative to the largest value; use other inputs"
    grads = [g.tolist() for g in grads]
    out = {"name": name, "spec": spec, "inputs": [e.tolist() for e in embs], "labels": labels, "loss": value,
           "grads": grads[: len(embs)]}
    if extra is not None:
        out["params"] = extra["values"]
        out["param_grads"] = {k: g for k, g in zip(extra["names"], grads[len(embs):])}
    print(f"{name:28s} loss {value:.9g}  float32 error {err:.2g}")
    return out


model = FixedModel(C)
cases = []
a, p, n1, n2 = f32((B, C)), f32((B, C)), f32((B, C)), f32((B, C))
# make positives correlated with their anchors, as a trained model would
p = (a + 4.0 * p).astype(np.float32)

mnrl = L.MultipleNegativesRankingLoss(model, scale=20.0)
cases.append(case("mnrl_pairs", {"name": "mnrl", "scale": 20}, [a, p], None, mnrl))
cases.append(case("mnrl_hard_negatives", {"name": "mnrl", "scale": 20}, [a, p, n1, n2], None, mnrl))
mnrl7 = L.MultipleNegativesRankingLoss(model, scale=7.5)
cases.append(case("mnrl_scale_7_5", {"name": "mnrl", "scale": 7.5}, [a, p, n1], None, mnrl7))
sym = L.MultipleNegativesSymmetricRankingLoss(model, scale=20.0)
cases.append(case("mnrl_symmetric", {"name": "mnrl", "scale": 20, "symmetric": True}, [a, p], None, sym))
cases.append(case("mnrl_symmetric_negatives", {"name": "mnrl", "scale": 20, "symmetric": True}, [a, p, n1], None, sym))

scores = [4.5, 1.0, 3.0, 1.0, 5.0, 3.0]   # ties on purpose: tied pairs add no term
cosent = L.CoSENTLoss(model, scale=20.0)
cases.append(case("cosent", {"name": "cosent", "scale": 20}, [a, p], scores, cosent))
cases.append(case("cosent_unrelated", {"name": "cosent", "scale": 20}, [a, n1], scores, cosent))

cosine = L.CosineSimilarityLoss(model)
unit = [s / 5.0 for s in scores]
# CosineSimilarityLoss expects scores in [0, 1]; trainer's score_scale = 5 divides 0-5 scores
c = case("cosine_score_scale_5", {"name": "cosine", "score_scale": 5}, [a, p], unit, cosine)
c["labels"] = scores
cases.append(c)
cases.append(case("cosine", {"name": "cosine"}, [a, n1], unit, cosine))

torch.manual_seed(7)
K = 3
soft = L.SoftmaxLoss(model, embedding_dimension=C, num_labels=K).double()
nli = [0, 2, 1, 1, 0, 2]
w = soft.classifier.weight
b = soft.classifier.bias
cases.append(case("softmax", {"name": "softmax", "num_labels": K}, [a, p], nli, soft,
                  {"params": [w, b], "names": ["classifier.weight", "classifier.bias"],
                   "values": {"classifier.weight": w.tolist(), "classifier.bias": b.tolist()}}))

logits = f32((B, 5), 2.0)
cls_labels = [4, 0, 2, 2, 1, 3]
ce = lambda feats, labels: F.cross_entropy(feats[0]["emb"], labels)
cases.append(case("cross_entropy", {"name": "cross_entropy"}, [logits], cls_labels, ce))
ce_ls = lambda feats, labels: F.cross_entropy(feats[0]["emb"], labels, label_smoothing=0.1)
cases.append(case("cross_entropy_smoothing", {"name": "cross_entropy", "label_smoothing": 0.1}, [logits],
                  cls_labels, ce_ls))

mat = L.MatryoshkaLoss(model, L.MultipleNegativesRankingLoss(model, scale=20.0), [4, 12, 8], [0.25, 1, 0.5])
cases.append(case("matryoshka_mnrl", {"name": "matryoshka", "inner": "mnrl", "scale": 20, "dims": [4, 12, 8],
                                      "weights": [0.25, 1, 0.5]}, [a, p, n1], None, mat))
mat2 = L.MatryoshkaLoss(model, L.CoSENTLoss(model, scale=20.0), [12, 6])
cases.append(case("matryoshka_cosent", {"name": "matryoshka", "inner": "cosent", "scale": 20, "dims": [12, 6]},
                  [a, p], scores, mat2))

# metrics: scipy on fixed lists with ties (spearman uses average ranks)
gold = [0.0, 1.5, 1.5, 3.0, 4.2, 5.0, 2.5, 2.5, 2.5, 0.5]
pred = [0.1, 0.3, 0.35, 0.7, 0.72, 0.9, 0.3, 0.5, 0.6, 0.2]
metrics = {
    "gold": gold, "pred": pred,
    "spearman": float(scipy.stats.spearmanr(gold, pred).statistic),
    "pearson": float(scipy.stats.pearsonr(gold, pred).statistic),
}
print("spearman", metrics["spearman"], "pearson", metrics["pearson"])

write_loss_golden("loss_golden.json", {"generator": "tests/ref/make_loss_golden.py", "cases": cases, "metrics": metrics})
