"""Goldens of hard-negative mining (tests/lua/test_mine.lua) from sentence-transformers' mine_hard_negatives.

Writes tests/data/mine_golden.json: the (anchor, positive) rows (from fixed word lists and a seeded
random.Random; some anchors repeat with a second positive), an extra corpus, and for each option set
the rows mine_hard_negatives gives with tests/data/tiny_bert (output_scores=True, sampling "top").
Run: /work/venv-retrieval/bin/python tests/ref/make_mine_golden.py   (needs `datasets`; versions in tests/ref/README.md)
"""
import json
import os
import sys

import sentence_transformers
import torch
from datasets import Dataset
from sentence_transformers import SentenceTransformer
from sentence_transformers.util import mine_hard_negatives

sys.dont_write_bytecode = True   # no __pycache__ left in tests/ref
from tiny_golden import word_sentences  # noqa: E402  (this folder is on sys.path)

torch.set_num_threads(1)
ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
DATA = os.path.join(ROOT, "tests", "data")
_, sentence = word_sentences(41)


rows = []
for i in range(40):
    a = sentence(3, 8)
    rows.append({"query": a, "answer": sentence(3, 10)})
    if i % 7 == 0:
        rows.append({"query": a, "answer": sentence(3, 10)})
corpus = [sentence(3, 12) for _ in range(30)]

OPTIONS = [
    {"num_negatives": 3},
    {"num_negatives": 2, "range_min": 2, "range_max": 12},
    {"num_negatives": 4, "absolute_margin": 0.02},
    {"num_negatives": 3, "relative_margin": 0.05, "max_score": 0.9},
    {"num_negatives": 2, "min_score": 0.5, "range_max": 20},
    {"num_negatives": 3, "output_format": "n-tuple"},
    {"num_negatives": 3, "corpus": True, "relative_margin": 0.02},
    {"num_negatives": 2, "output_format": "n-tuple", "corpus": True, "range_min": 1, "absolute_margin": 0.0},
]

model = SentenceTransformer(os.path.join(DATA, "tiny_bert"), device="cpu")
ds = Dataset.from_list(rows)
cases = []
for opt in OPTIONS:
    kw = dict(opt)
    if kw.pop("corpus", False):
        kw["corpus"] = corpus
    kw.setdefault("output_format", "triplet")
    out = mine_hard_negatives(ds, model, output_scores=True, batch_size=8, verbose=False, **kw)
    case = {"options": opt, "rows": [dict(r) for r in out]}
    cases.append(case)

with open(os.path.join(DATA, "mine_golden.json"), "w") as f:
    json.dump({"sentence_transformers": sentence_transformers.__version__, "rows": rows, "corpus": corpus,
               "cases": cases}, f, indent=0, sort_keys=True)
    f.write("\n")
