"""Goldens of prompts (tests/lua/test_prompts.lua, tests/cli/test_prompts.sh) from sentence-transformers itself.

The model is tests/data/tiny_bert with the two files this script's golden also carries (the tests write
them into a copy of tiny_bert, so no second copy of the weights is committed):
  config_sentence_transformers.json   prompts {"query": "query: ", "doc": "this is a "}, default_prompt_name "query"
  1_Pooling/config.json               tiny_bert's, with include_prompt true in one folder and false in the other
Writes tests/data/prompts_golden.json:
  texts, prompts, default_prompt_name, pooling (the Pooling config with include_prompt),
  prompt_length {prompt: n} (Transformer._get_prompt_length),
  cases: [{include_prompt, prompt_name | prompt | neither, embeddings}] as SentenceTransformer.encode gives them,
  ir: InformationRetrievalEvaluator's metrics on tests/data/ir_tiny with query_prompt_name "query" and
      corpus_prompt_name "doc", on the folder with include_prompt false.
Run: /work/venv-retrieval/bin/python tests/ref/make_prompts_golden.py   (see tests/ref/README.md for the versions)
"""
import json
import os
import shutil
import tempfile

import sentence_transformers
import torch
from sentence_transformers import SentenceTransformer
from sentence_transformers.evaluation import InformationRetrievalEvaluator

torch.set_num_threads(1)
ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
DATA = os.path.join(ROOT, "tests", "data")
PROMPTS = {"query": "query: ", "doc": "this is a "}
DEFAULT = "query"
TEXTS = ["the cat sat on the mat", "a dog", "hej jag har en katt och en hund idag", "it was not very good",
         "bird", "the house of the bird is very bad today"]


def folder(tmp, include_prompt):
    d = os.path.join(tmp, "include" if include_prompt else "exclude")
    shutil.copytree(os.path.join(DATA, "tiny_bert"), d)
    with open(os.path.join(d, "config_sentence_transformers.json"), "w") as f:
        json.dump({"prompts": PROMPTS, "default_prompt_name": DEFAULT}, f, indent=2)
    with open(os.path.join(d, "1_Pooling", "config.json")) as f:
        pooling = json.load(f)
    pooling["include_prompt"] = include_prompt
    with open(os.path.join(d, "1_Pooling", "config.json"), "w") as f:
        json.dump(pooling, f, indent=2)
    return d, pooling


def rows(e):
    return [[float(x) for x in r] for r in e.tolist()]


def read_jsonl(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def ir_metrics(model):
    """InformationRetrievalEvaluator on tests/data/ir_tiny with query_prompt_name "query" and
    corpus_prompt_name "doc" (the model leaves the prompts out of its pooling)."""
    folder = os.path.join(DATA, "ir_tiny")
    corpus = read_jsonl(os.path.join(folder, "corpus.jsonl"))
    queries = read_jsonl(os.path.join(folder, "queries.jsonl"))
    docs = {d["_id"]: (d["title"] + " " + d["text"]) if d.get("title", "").strip() else d["text"] for d in corpus}
    relevant = {}
    with open(os.path.join(folder, "qrels", "test.tsv")) as f:
        for i, line in enumerate(f):
            q, d, s = line.rstrip("\n").split("\t")
            if i == 0 and s == "score":
                continue
            if int(s) > 0:
                relevant.setdefault(q, set()).add(d)
    ir = InformationRetrievalEvaluator(queries={q["_id"]: q["text"] for q in queries}, corpus=docs,
                                       relevant_docs=relevant, name="tiny", batch_size=8, write_csv=False,
                                       query_prompt_name="query", corpus_prompt_name="doc")
    return {k: float(v) for k, v in ir(model).items()}


out = {"sentence_transformers": sentence_transformers.__version__, "texts": TEXTS, "prompts": PROMPTS,
       "default_prompt_name": DEFAULT, "cases": []}
with tempfile.TemporaryDirectory() as tmp:
    for include in (True, False):
        d, pooling = folder(tmp, include)
        out.setdefault("pooling", {})["include" if include else "exclude"] = pooling
        model = SentenceTransformer(d, device="cpu")
        # ST adds its default "query" / "document" names; ours are all there
        assert all(model.prompts[k] == v for k, v in PROMPTS.items()) and model.default_prompt_name == DEFAULT
        tr = model[0]
        out["prompt_length"] = {p: tr._get_prompt_length(p) for p in list(PROMPTS.values()) + ["hej: "]}
        for how in ({"prompt_name": "query"}, {"prompt_name": "doc"}, {"prompt": "hej: "}, {}):
            e = model.encode(TEXTS, batch_size=4, convert_to_numpy=True, **how)
            case = {"include_prompt": include, "embeddings": rows(e)}
            case.update(how)
            out["cases"].append(case)
        # no prompt at all: encode(prompt="") skips the default
        e = model.encode(TEXTS, batch_size=4, convert_to_numpy=True, prompt="")
        out["cases"].append({"include_prompt": include, "prompt": "", "embeddings": rows(e)})
        if not include:
            out["ir"] = ir_metrics(model)

with open(os.path.join(DATA, "prompts_golden.json"), "w") as f:
    json.dump(out, f, indent=1, sort_keys=True)
    f.write("\n")
