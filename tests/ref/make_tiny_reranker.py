#!/usr/bin/env python3
"""Writes a tiny random BERT cross-encoder (reranker) made by transformers and saved by
sentence-transformers' CrossEncoder, and the goldens of its scores, losses and reranking metrics
(reference side; never run by tests).

  tests/data/tiny_reranker/          BertForSequenceClassification, num_labels 1 (the tiny BERT config and
                                     WordPiece vocabulary of make_tiny_bert.py), saved by CrossEncoder.save
                                     (activation Sigmoid in config.json's sentence_transformers).
  tests/data/golden_tiny_reranker.json
    pairs, logits, scores          CrossEncoder.predict (sigmoid of the logit) of fixed pairs
    bce                            BinaryCrossEntropyLoss on pairs with labels (1, 0, graded 0.3): loss and the
                                   gradient of the classifier, one attention weight and the word embeddings
    bce_pos_weight                 the same with pos_weight 3
    listwise                       MultipleNegativesRankingLoss over each query's positive and two hard
                                   negatives, no in-batch negatives, activation_fn None, scale 1 (its
                                   calculate_loss on the pairs' logits): loss and the same gradients
    rank                           CrossEncoder.rank(query, documents)
    rerank                         CrossEncoderRerankingEvaluator(samples, at_k 10) metrics (map, mrr@10, ndcg@10)

The model runs in eval mode (no dropout), eager attention, float32, one thread.

The other way, trainer -> sentence-transformers (needs a built ./trainer; writes nothing): the cross-encoders
`./trainer tests/cli/cross_encoder_stsb.lua` trains (a new head on tests/data/tiny_bert and on tiny_distilbert,
tiny_reranker further trained, and a LoRA adapter merged by `trainer merge`) must load in CrossEncoder, whose predict must equal `trainer classify` within 1e-5.

Usage: /work/venv-rerank/bin/python tests/ref/make_tiny_reranker.py [--check-trainer]
"""
import json
import os
import subprocess
import sys
import tempfile

import torch
from transformers import BertForSequenceClassification

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.dont_write_bytecode = True   # no __pycache__ left in tests/ref
import make_tiny_bert as tb  # noqa: E402
import make_tiny_families as fam  # noqa: E402

from sentence_transformers.cross_encoder import CrossEncoder  # noqa: E402
from sentence_transformers.cross_encoder.evaluation import CrossEncoderRerankingEvaluator  # noqa: E402
from sentence_transformers.cross_encoder.losses import (BinaryCrossEntropyLoss,  # noqa: E402
                                                        MultipleNegativesRankingLoss)

ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
DATA = os.path.join(ROOT, "tests", "data")
OUT = os.path.join(DATA, "tiny_reranker")

PAIRS = [
    ["what is the cat doing?", "The cat sat on the mat."],
    ["what is the cat doing?", "A dog and a bird in the house."],
    ["hej", "Hej! Katten sitter på mattan."],
    ["is this good?", "This was very good today, not bad."],
]
BCE_LABELS = [1.0, 0.0, 0.3, 1.0]
QUERIES = ["what is the cat doing?", "is the dog good?", "hej katt"]
POSITIVES = ["The cat sat on the mat.", "The dog is very good.", "Hej! Katten sitter."]
NEGATIVES = [["A bird in the house.", "This was bad."],
             ["The cat is not on the mat.", "Jag har en hund."],
             ["Det är inte en hund!", "A dog, 2 birds and a cat."]]
SAMPLES = [
    {"query": "what is the cat doing?", "positive": ["The cat sat on the mat."],
     "documents": ["A bird in the house.", "The cat sat on the mat.", "This was bad.", "The dog is very good."]},
    {"query": "is the dog good?", "positive": ["The dog is very good.", "A good dog."],
     "documents": ["The dog is very good.", "The cat is not on the mat.", "Jag har en hund.", "A good dog.",
                   "Hej!"]},
    {"query": "hej katt", "positive": ["Hej! Katten sitter."],
     "documents": ["Det är inte en hund!", "A dog, 2 birds and a cat.", "Hej! Katten sitter."]},
    {"query": "nothing relevant", "positive": ["Not among them."], "documents": ["The cat.", "The dog."]},
]
GRAD_NAMES = ["classifier.weight", "classifier.bias", "bert.encoder.layer.1.attention.self.query.weight",
              "bert.embeddings.word_embeddings.weight"]


def flat(t):
    return [float(x) for x in t.detach().double().reshape(-1).tolist()]


def grads(model):
    named = dict(model.named_parameters())
    return {n: flat(named[n].grad) for n in GRAD_NAMES}


def main():
    torch.set_num_threads(1)
    tb.fresh_dir(OUT)
    vocab = tb.build_vocab()
    cfg = tb.make_config(vocab)
    cfg.num_labels = 1
    torch.manual_seed(11)
    hf = BertForSequenceClassification(cfg)
    fam.randomize(hf, 11)
    tmp = OUT + ".hf"
    tb.fresh_dir(tmp)
    hf.save_pretrained(tmp, safe_serialization=True)
    fam.tokenizer_files(tmp, vocab, "BertTokenizer")
    ce = CrossEncoder(tmp, model_kwargs={"attn_implementation": "eager", "dtype": torch.float32})
    ce.save(OUT)
    os.remove(os.path.join(OUT, "README.md"))   # the model card: versions and dates, nothing the tests read
    for f in os.listdir(tmp):
        os.remove(os.path.join(tmp, f))
    os.rmdir(tmp)

    ce = CrossEncoder(OUT, model_kwargs={"attn_implementation": "eager", "dtype": torch.float32})
    ce.eval()
    hf_model = ce[0].auto_model if hasattr(ce, "__getitem__") else ce.model
    gold = {"pairs": PAIRS}
    with torch.no_grad():
        logits = ce.predict(PAIRS, activation_fn=torch.nn.Identity(), convert_to_tensor=True)
        scores = ce.predict(PAIRS, convert_to_tensor=True)
    gold["logits"], gold["scores"] = flat(logits), flat(scores)

    loss_fn = BinaryCrossEntropyLoss(ce)
    ce.zero_grad()
    loss = loss_fn([[p[0] for p in PAIRS], [p[1] for p in PAIRS]], torch.tensor(BCE_LABELS))
    loss.backward()
    gold["bce"] = {"labels": BCE_LABELS, "loss": loss.item(), "grads": grads(hf_model)}
    loss_fn = BinaryCrossEntropyLoss(ce, pos_weight=torch.tensor(3.0))
    ce.zero_grad()
    loss = loss_fn([[p[0] for p in PAIRS], [p[1] for p in PAIRS]], torch.tensor(BCE_LABELS))
    loss.backward()
    gold["bce_pos_weight"] = {"pos_weight": 3.0, "loss": loss.item(), "grads": grads(hf_model)}

    mnrl = MultipleNegativesRankingLoss(ce, num_negatives=None, scale=1, activation_fn=None)
    ce.zero_grad()
    B = len(QUERIES)
    scores_list = [mnrl.call_model_with_columns(QUERIES, POSITIVES)]
    for c in range(len(NEGATIVES[0])):
        scores_list.append(mnrl.call_model_with_columns(QUERIES, [n[c] for n in NEGATIVES]))
    loss = mnrl.calculate_loss(scores_list, B)
    loss.backward()
    gold["listwise"] = {"queries": QUERIES, "positives": POSITIVES, "negatives": NEGATIVES, "loss": loss.item(),
                        "grads": grads(hf_model)}
    ce.zero_grad()

    docs = SAMPLES[1]["documents"]
    gold["rank"] = {"query": SAMPLES[1]["query"], "documents": docs,
                    "ranking": [{"corpus_id": int(r["corpus_id"]), "score": float(r["score"])}
                                for r in ce.rank(SAMPLES[1]["query"], docs)]}
    ev = CrossEncoderRerankingEvaluator(SAMPLES, at_k=10, write_csv=False)
    gold["rerank"] = {"samples": SAMPLES, "metrics": {k: float(v) for k, v in ev(ce).items()}}
    path = os.path.join(DATA, "golden_tiny_reranker.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(gold, f, indent=1, ensure_ascii=False)
        f.write("\n")
    print("wrote", os.path.relpath(path, ROOT), {k: gold[k]["loss"] for k in ("bce", "listwise")},
          gold["rerank"]["metrics"])


def check_trainer():
    trainer = os.path.join(ROOT, "trainer")
    pairs = PAIRS + [[q, p] for q, p in zip(QUERIES, POSITIVES)]
    with tempfile.TemporaryDirectory() as tmp:
        tsv = os.path.join(tmp, "pairs.tsv")
        with open(tsv, "w", encoding="utf-8") as f:
            f.writelines(f"{a}\t{b}\n" for a, b in pairs)
        for name, extra in (("new_head", []), ("from_crossencoder", ["model.from=tests/data/tiny_reranker"]),
                            ("distilbert", ["model.from=tests/data/tiny_distilbert"]),
                            ("lora_merged", ['lora={r=4,alpha=8,modules_to_save={"classifier"}}'])):
            out = os.path.join(tmp, name)
            subprocess.run([trainer, "tests/cli/cross_encoder_stsb.lua", f"out={out}"] + extra, cwd=ROOT, check=True)
            ckpt = os.path.join(out, "checkpoint-4")
            if name == "lora_merged":
                merged = os.path.join(tmp, "merged")
                subprocess.run([trainer, "merge", "tests/data/tiny_bert", ckpt, merged], cwd=ROOT, check=True)
                ckpt = merged
            got = subprocess.run([trainer, "classify", ckpt, tsv], cwd=ROOT, check=True, capture_output=True,
                                 text=True).stdout.splitlines()
            ours = [json.loads(line)["score"] for line in got]
            ce = CrossEncoder(ckpt, model_kwargs={"attn_implementation": "eager", "dtype": torch.float32})
            ce.eval()
            assert ce.num_labels == 1 and isinstance(ce.activation_fn, torch.nn.Sigmoid), (ce.num_labels, ce.activation_fn)
            ref = [float(x) for x in ce.predict(pairs)]
            worst = max(abs(a - b) for a, b in zip(ours, ref))
            print(f"{name}: CrossEncoder loads the checkpoint; predict vs trainer classify max |diff| {worst:.3g}")
            assert worst <= 1e-5, (ours, ref)


if __name__ == "__main__":
    if "--check-trainer" in sys.argv:
        check_trainer()
    else:
        main()
