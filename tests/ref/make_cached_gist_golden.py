"""Golden values for cached GISTEmbed in tests/lua/test_cached_gist.lua: sentence-transformers'
own CachedGISTEmbedLoss (GradCache, mini-batches of 2 texts) and GISTEmbedLoss on the
committed tiny BERT (tests/data/tiny_bert, dropout off), guided by a second copy of the same
folder: the loss value of each and the gradients of a few parameters after the cached loss's
backward. Writes tests/data/cached_gist_golden.json.

    /work/venv-losses/bin/python tests/ref/make_cached_gist_golden.py
"""
import sys

from sentence_transformers.sentence_transformer import losses as L

sys.dont_write_bytecode = True   # no __pycache__ left in tests/ref
from st_tiny_golden import ANCHORS, PARAMS, POSITIVES, param_grads, short, tiny_bert, write  # noqa: E402

CASES = [("absolute", 0.0, 0.05), ("relative", 0.05, 0.1)]


def run(cached, strategy, margin, temperature):
    model, guide = tiny_bert(), tiny_bert()
    kw = dict(margin_strategy=strategy, margin=margin, temperature=temperature)
    if cached:
        loss = L.CachedGISTEmbedLoss(model, guide, mini_batch_size=2, **kw)
    else:
        loss = L.GISTEmbedLoss(model, guide, **kw)
    feats = [model.tokenize(ANCHORS), model.tokenize(POSITIVES)]
    value = loss(feats, None)
    value.backward()
    return value.item(), param_grads(model)


out = {"anchors": ANCHORS, "positives": POSITIVES, "cases": []}
for strategy, margin, temperature in CASES:
    v_cached, grads = run(True, strategy, margin, temperature)
    v_plain, grads_plain = run(False, strategy, margin, temperature)
    worst = max(max(abs(a - b) for a, b in zip(grads[p], grads_plain[p])) / max(abs(b) for b in grads_plain[p])
                for p in PARAMS)
    assert abs(v_cached - v_plain) <= 1e-5 * abs(v_plain) and worst <= 1e-5, (v_cached, v_plain, worst)
    out["cases"].append({"margin_strategy": strategy, "margin": margin, "temperature": temperature,
                         "loss_cached": v_cached, "loss_plain": v_plain,
                         "grads": {p: short(g) for p, g in grads.items()}})
write("cached_gist_golden.json", out)
