"""Golden values for the distance and distillation losses in tests/lua/test_losses.lua:
sentence-transformers' own ContrastiveLoss, OnlineContrastiveLoss, TripletLoss,
BatchHardTripletLoss, BatchSemiHardTripletLoss and BatchAllTripletLoss (each distance metric
trainer offers), MSELoss and MarginMSELoss (each label layout) on
fixed float32 embeddings, run in float64 through the stand-in model of make_loss_golden.py.
Writes tests/data/loss_golden_pairs.json in the same layout as loss_golden.json.

    /work/venv-losses/bin/python tests/ref/make_pair_loss_golden.py
"""
import os
import sys

import numpy as np
import torch
from torch import nn

from sentence_transformers.sentence_transformer import losses as L
from sentence_transformers.sentence_transformer.losses.batch_hard_triplet import BatchHardTripletLossDistanceFunction as BD
from sentence_transformers.sentence_transformer.losses.contrastive import SiameseDistanceMetric as SD
from sentence_transformers.sentence_transformer.losses.triplet import TripletDistanceMetric as TD

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.dont_write_bytecode = True   # no __pycache__ left in tests/ref
from tiny_golden import FixedModel, fixed_loss, float32_source, one_thread_quiet, write_loss_golden  # noqa: E402

one_thread_quiet()
B, C = 8, 12

f32 = float32_source(4321)


def case(name, spec, embs, labels, loss_fn):
    dtype = torch.float64 if labels is not None and isinstance(labels[0], (float, list)) else torch.long
    lab = None if labels is None else torch.tensor(labels, dtype=dtype)
    value, grads = fixed_loss(loss_fn, embs, lab)
    # float32 must reach the same selections and 1e-5 (relative to each tensor's largest value)
    v32, g32 = fixed_loss(loss_fn, embs, lab, dtype=torch.float32)
    err = abs(v32 - value) / max(abs(value), 1.0)
    for a, b in zip(g32, grads):
        err = max(err, float((a.double() - b).abs().max() / max(float(b.abs().max()), 1e-30)))
    assert err < 2e-6, f"{name}: float32 error {err:.3g}; use other inputs"
    assert any(float(g.abs().max()) > 0 for g in grads), f"{name}: all gradients zero; use other inputs"
    print(f"{name:36s} loss {value:.9g}  float32 error {err:.2g}")
    return {"name": name, "spec": spec, "inputs": [e.tolist() for e in embs], "labels": labels, "loss": value,
            "grads": [g.tolist() for g in grads]}


model = FixedModel(C)
cases = []
a, p, n = f32((B, C)), f32((B, C)), f32((B, C))
p = (a + 2.0 * p).astype(np.float32)
pair_labels = [1.0, 0.0, 1.0, 1.0, 0.0, 0.0, 1.0, 0.0]
b2 = np.where(np.array(pair_labels)[:, None] > 0, p, n).astype(np.float32)

for dist, sd, margin in (("cosine", SD.COSINE_DISTANCE, 0.5), ("euclidean", SD.EUCLIDEAN, 6.0),
                         ("manhattan", SD.MANHATTAN, 15.0)):
    spec = {"name": "contrastive"}
    if dist != "cosine":
        spec.update(distance=dist, margin=margin)
    cases.append(case(f"contrastive_{dist}", spec, [a, b2], pair_labels,
                      L.ContrastiveLoss(model, distance_metric=sd, margin=margin)))
    spec = dict(spec, name="online_contrastive")
    cases.append(case(f"online_contrastive_{dist}", spec, [a, b2], pair_labels,
                      L.OnlineContrastiveLoss(model, distance_metric=sd, margin=margin)))
cases.append(case("contrastive_cosine_margin_0_9", {"name": "contrastive", "margin": 0.9}, [a, b2], pair_labels,
                  L.ContrastiveLoss(model, margin=0.9)))

for dist, td, margin in (("euclidean", TD.EUCLIDEAN, 5.0), ("cosine", TD.COSINE, 0.5), ("manhattan", TD.MANHATTAN, 8.0)):
    spec = {"name": "triplet"}
    if dist != "euclidean":
        spec.update(distance=dist, margin=margin)
    cases.append(case(f"triplet_{dist}", spec, [a, p, n], None,
                      L.TripletLoss(model, distance_metric=td, triplet_margin=margin)))

classes = [0, 1, 2, 0, 1, 2, 0, 1, 3, 2]
E = f32((len(classes), C))
# rows of one class share a centre, so some triplets are satisfied and some are not
centres = f32((4, C), 0.9)
E = (E + centres[classes]).astype(np.float32)
for name, cls in (("batch_hard_triplet", L.BatchHardTripletLoss), ("batch_semi_hard_triplet", L.BatchSemiHardTripletLoss),
                  ("batch_all_triplet", L.BatchAllTripletLoss)):
    cases.append(case(name, {"name": name}, [E], classes, cls(model)))
    cases.append(case(name + "_margin_2", {"name": name, "margin": 2}, [E], classes, cls(model, margin=2.0)))
    cases.append(case(name + "_cosine", {"name": name, "distance": "cosine", "margin": 0.5}, [E], classes,
                      cls(model, distance_metric=BD.cosine_distance, margin=0.5)))

# MatryoshkaLoss around the distance losses (each size truncated and L2-normalised)
cases.append(case("matryoshka_batch_hard_triplet", {"name": "matryoshka", "inner": "batch_hard_triplet", "margin": 0.5,
                                                    "dims": [12, 6, 3], "weights": [1, 0.5, 0.25]}, [E], classes,
                  L.MatryoshkaLoss(model, L.BatchHardTripletLoss(model, margin=0.5), [12, 6, 3], [1, 0.5, 0.25])))
cases.append(case("matryoshka_contrastive_euclidean", {"name": "matryoshka", "inner": "contrastive",
                                                       "distance": "euclidean", "margin": 1.0, "dims": [12, 4]},
                  [a, b2], pair_labels,
                  L.MatryoshkaLoss(model, L.ContrastiveLoss(model, distance_metric=SD.EUCLIDEAN, margin=1.0), [12, 4])))
cases.append(case("matryoshka_triplet", {"name": "matryoshka", "inner": "triplet", "margin": 0.5, "dims": [8, 12]},
                  [a, p, n], None, L.MatryoshkaLoss(model, L.TripletLoss(model, triplet_margin=0.5), [8, 12])))

# AnglELoss: pairs with scores (an odd width pads), triplets with and without labels
scores = [4.5, 1.0, 3.0, 1.0, 5.0, 3.0, 2.0, 0.5]
cases.append(case("angle", {"name": "angle"}, [a, b2], scores, L.AnglELoss(model)))
cases.append(case("angle_odd_width_scale_7", {"name": "angle", "scale": 7}, [a[:, :11].copy(), b2[:, :11].copy()], scores,
                  L.AnglELoss(model, scale=7.0)))
cases.append(case("angle_triplets", {"name": "angle"}, [a, p, n], None, L.AnglELoss(model)))
cases.append(case("angle_triplets_labelled", {"name": "angle"}, [a, p, n], pair_labels, L.AnglELoss(model)))
cases.append(case("matryoshka_angle", {"name": "matryoshka", "inner": "angle", "dims": [12, 6]}, [a, b2], scores,
                  L.MatryoshkaLoss(model, L.AnglELoss(model), [12, 6])))

# distillation: teacher embeddings / scores as labels (float64 lists)
t1, t2 = f32((B, C)), f32((B, C))
one = [[float(x) for x in r] for r in t1]
per_col = [[[float(x) for x in t1[i]], [float(x) for x in t2[i]]] for i in range(B)]
cases.append(case("mse_one_teacher_vector", {"name": "mse"}, [a, p], one, L.MSELoss(model)))
cases.append(case("mse_per_column", {"name": "mse"}, [a, p], per_col, L.MSELoss(model)))
cases.append(case("mse_single_column", {"name": "mse"}, [a], one, L.MSELoss(model)))
n2 = f32((B, C))
margins1 = [float(x) for x in f32((B,), 3.0)]
cases.append(case("margin_mse", {"name": "margin_mse"}, [a, p, n], margins1, L.MarginMSELoss(model)))
margins2 = [[float(x) for x in r] for r in f32((B, 2), 3.0)]
cases.append(case("margin_mse_two_negatives", {"name": "margin_mse"}, [a, p, n, n2], margins2, L.MarginMSELoss(model)))
scores3 = [[float(x) for x in r] for r in f32((B, 3), 3.0)]
cases.append(case("margin_mse_teacher_scores", {"name": "margin_mse"}, [a, p, n, n2], scores3, L.MarginMSELoss(model)))

# GISTEmbedLoss: ST's forward with a stand-in guide that returns the guide embeddings stored in
# the features (built without __init__, which wants real tokenizers; must_retokenize False)


class FixedGuide(FixedModel):
    def forward(self, features):
        return {"sentence_embedding": features["guide"]}


def gist(cols, guides, **kw):
    g = L.GISTEmbedLoss.__new__(L.GISTEmbedLoss)
    nn.Module.__init__(g)
    g.model, g.guide = model, FixedGuide(C)
    g.temperature = kw.get("temperature", 0.01)
    g.similarity_fct = nn.CosineSimilarity(dim=-1)
    g.must_retokenize = False
    g.margin_strategy, g.margin = kw.get("margin_strategy", "absolute"), kw.get("margin", 0.0)
    g.contrast_anchors, g.contrast_positives = kw.get("contrast_anchors", True), kw.get("contrast_positives", True)
    g.gather_across_devices = False
    g.cross_entropy_loss = nn.CrossEntropyLoss()
    gt = [torch.tensor(x, dtype=torch.float64) for x in guides]

    def fn(feats, labels):
        return g([dict(f, guide=t) for f, t in zip(feats, gt)], labels)
    return fn


def guide_labels(guides):
    return [[[float(x) for x in gcol[i]] for gcol in guides] for i in range(B)]


# the guide: the inputs plus noise, so it agrees with them on most pairs but not all
ga = (a + 0.7 * f32((B, C))).astype(np.float32)
gp = (p + 0.7 * f32((B, C))).astype(np.float32)
gn = (n + 0.7 * f32((B, C))).astype(np.float32)
cases.append(case("gist", {"name": "gist", "temperature": 0.05}, [a, p], guide_labels([ga, gp]),
                  gist([a, p], [ga, gp], temperature=0.05)))
cases.append(case("gist_negatives_margin", {"name": "gist", "temperature": 0.05, "margin": 0.1},
                  [a, p, n], guide_labels([ga, gp, gn]), gist([a, p, n], [ga, gp, gn], temperature=0.05, margin=0.1)))
cases.append(case("gist_relative_no_contrast", {"name": "gist", "temperature": 0.1, "margin": 0.2,
                                                "margin_strategy": "relative", "contrast_anchors": False,
                                                "contrast_positives": False},
                  [a, p, n], guide_labels([ga, gp, gn]),
                  gist([a, p, n], [ga, gp, gn], temperature=0.1, margin=0.2, margin_strategy="relative",
                       contrast_anchors=False, contrast_positives=False)))

write_loss_golden("loss_golden_pairs.json", {"generator": "tests/ref/make_pair_loss_golden.py", "cases": cases})
