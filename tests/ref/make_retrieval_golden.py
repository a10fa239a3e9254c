"""Goldens of the retrieval evaluators (tests/lua/test_retrieval.lua) from sentence-transformers itself.

Writes, from fixed word lists and a seeded random.Random (no downloads; the model is tests/data/tiny_bert):
  tests/data/ir_tiny/{corpus.jsonl, queries.jsonl, qrels/test.tsv}   a BEIR-layout folder
  tests/data/triplets_tiny.jsonl        anchor, positive, negative
  tests/data/pairs_binary_tiny.jsonl    sentence1, sentence2, label (0/1)
  tests/data/retrieval_golden.json      sentence-transformers' metrics of tiny_bert on them:
      ir: InformationRetrievalEvaluator (score functions cosine and dot, ST's default k lists, name "tiny")
      triplet: TripletEvaluator (similarity_fn_names cosine and dot)
      binary: BinaryClassificationEvaluator (similarity_fn_names cosine and dot)
      embeddings: {text: embedding} of every text, as SentenceTransformer.encode gives them (float32
      values written as JSON numbers), so that the metric code is also checked on ST's own embeddings.
Run: /work/venv/bin/python tests/ref/make_retrieval_golden.py   (see tests/ref/README.md for the versions)
"""
import json
import os
import sys

# BinaryClassificationEvaluator embeds the set of its sentences: the set's order (hence the
# batches, hence the last float32 bits) follows the string hash, so the hash is fixed.
if os.environ.get("PYTHONHASHSEED") != "0":
    os.environ["PYTHONHASHSEED"] = "0"
    os.execv(sys.executable, [sys.executable] + sys.argv)

import sentence_transformers
import torch
from sentence_transformers import SentenceTransformer
from sentence_transformers.evaluation import (
    BinaryClassificationEvaluator,
    InformationRetrievalEvaluator,
    TripletEvaluator,
)
from sentence_transformers.util import cos_sim, dot_score

sys.dont_write_bytecode = True   # no __pycache__ left in tests/ref
from tiny_golden import word_sentences  # noqa: E402  (this folder is on sys.path)

torch.set_num_threads(1)
ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
DATA = os.path.join(ROOT, "tests", "data")
rng, sentence = word_sentences(39)


def write_jsonl(path, rows):
    with open(path, "w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n")


# ---- a BEIR folder: 60 documents (ids d00..d59, some with a title), 14 queries, 1-3 relevant each
corpus = []
for i in range(60):
    title = sentence(1, 3) if i % 3 == 0 else ""
    corpus.append({"_id": f"d{i:02d}", "title": title, "text": sentence(3, 12)})
rng.shuffle(corpus)   # the file order is not the id order: ties must break by id, not position
queries = [{"_id": f"q{i}", "text": sentence(2, 6)} for i in range(14)]
qrels = []
for q in queries[:12]:   # q12, q13 have no relevant document: ST leaves them out
    for d in rng.sample(corpus, rng.randint(1, 3)):
        qrels.append((q["_id"], d["_id"], 1))
        if rng.random() < 0.7:   # most relevant documents share the query's words, so that ranks vary
            words = q["text"].split() + sentence(2, 5).split()
            rng.shuffle(words)
            d["text"] = " ".join(words)
qrels.append((queries[12]["_id"], corpus[0]["_id"], 0))   # score 0: not relevant
os.makedirs(os.path.join(DATA, "ir_tiny", "qrels"), exist_ok=True)
write_jsonl(os.path.join(DATA, "ir_tiny", "corpus.jsonl"), corpus)
write_jsonl(os.path.join(DATA, "ir_tiny", "queries.jsonl"), queries)
with open(os.path.join(DATA, "ir_tiny", "qrels", "test.tsv"), "w") as f:
    f.write("query-id\tcorpus-id\tscore\n")
    for q, d, s in qrels:
        f.write(f"{q}\t{d}\t{s}\n")

triplets = [{"anchor": sentence(2, 8), "positive": sentence(2, 8), "negative": sentence(2, 8)} for _ in range(40)]
write_jsonl(os.path.join(DATA, "triplets_tiny.jsonl"), triplets)
pairs = [{"sentence1": sentence(2, 8), "sentence2": sentence(2, 8), "label": rng.randint(0, 1)} for _ in range(50)]
write_jsonl(os.path.join(DATA, "pairs_binary_tiny.jsonl"), pairs)

# ---- sentence-transformers on them
model = SentenceTransformer(os.path.join(DATA, "tiny_bert"), device="cpu")
doc_text = {d["_id"]: (d["title"] + " " + d["text"]) if d["title"].strip() else d["text"] for d in corpus}
relevant = {}
for q, d, s in qrels:
    if s > 0:
        relevant.setdefault(q, set()).add(d)
ir = InformationRetrievalEvaluator(
    queries={q["_id"]: q["text"] for q in queries}, corpus=doc_text, relevant_docs=relevant, name="tiny",
    score_functions={"cosine": cos_sim, "dot": dot_score}, batch_size=8, write_csv=False)
ir_metrics = ir(model)

tri = TripletEvaluator([t["anchor"] for t in triplets], [t["positive"] for t in triplets],
                       [t["negative"] for t in triplets], name="tiny", similarity_fn_names=["cosine", "dot"],
                       batch_size=8, write_csv=False)
tri_metrics = tri(model)
binary = BinaryClassificationEvaluator([p["sentence1"] for p in pairs], [p["sentence2"] for p in pairs],
                                       [p["label"] for p in pairs], name="tiny",
                                       similarity_fn_names=["cosine", "dot"], batch_size=8, write_csv=False)
bin_metrics = binary(model)

texts = sorted(set(doc_text.values()) | {q["text"] for q in queries}
               | {t[k] for t in triplets for k in ("anchor", "positive", "negative")}
               | {p[k] for p in pairs for k in ("sentence1", "sentence2")})
emb = model.encode(texts, batch_size=8, convert_to_numpy=True)
golden = {
    "versions": {"sentence_transformers": sentence_transformers.__version__, "torch": torch.__version__},
    "ir": {k: float(v) for k, v in ir_metrics.items()},
    "triplet": {k: float(v) for k, v in tri_metrics.items()},
    "binary": {k: float(v) for k, v in bin_metrics.items()},
    "embeddings": {t: [float(x) for x in e] for t, e in zip(texts, emb)},
}
with open(os.path.join(DATA, "retrieval_golden.json"), "w") as f:
    json.dump(golden, f, sort_keys=True)
    f.write("\n")
print("ir", json.dumps(golden["ir"], indent=1))
print("triplet", golden["triplet"])
print("binary", golden["binary"])
