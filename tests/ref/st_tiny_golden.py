"""What the loss goldens run through sentence-transformers on the committed tiny BERT share
(make_adaptive_layer_golden.py, make_cached_gist_golden.py; reference side, never run by tests): the texts
they embed, the parameters whose gradients they keep, the model (tests/data/tiny_bert, dropout off) and the
JSON file they write. Importing it pins torch to one thread and silences warnings (one_thread_quiet).
"""
import json
import os

from sentence_transformers import SentenceTransformer

from tiny_golden import DATA, one_thread_quiet

one_thread_quiet()
MODEL = os.path.join(DATA, "tiny_bert")

ANCHORS = ["The cat sat on the mat.", "A dog and a cat.", "Hej!", "The house is big today.",
           "Birds were playing.", "The dog sat in the house."]
POSITIVES = ["A cat was on the mat.", "Two birds and a dog.", "Hej hej!", "A big house.",
             "The birds played today.", "A dog in a house."]
PARAMS = ["embeddings.LayerNorm.weight", "encoder.layer.0.attention.self.query.weight",
          "encoder.layer.1.output.dense.bias", "encoder.layer.1.output.LayerNorm.bias"]


def tiny_bert():
    """A fresh tests/data/tiny_bert SentenceTransformer in eval mode."""
    model = SentenceTransformer(MODEL, device="cpu")
    model.eval()
    return model


def param_grads(model):
    """The gradient of each of PARAMS after a backward, flattened to a list."""
    named = dict(model[0].auto_model.named_parameters())
    return {p: named[p].grad.reshape(-1).tolist() for p in PARAMS}


def short(values):
    """values rounded to 9 significant digits (float32's, kept short in the JSON)."""
    return [float("%.9g" % x) for x in values]


def write(name, out):
    """out as one line of compact JSON in tests/data/name."""
    path = os.path.join(DATA, name)
    with open(path, "w") as f:
        json.dump(out, f, indent=None, separators=(",", ":"))
        f.write("\n")
    print("wrote", path)
