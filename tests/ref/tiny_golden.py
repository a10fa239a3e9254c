"""What the golden generators of tests/ref share (reference side; never run by tests): the random weights
every tiny folder gets (make_tiny_*.py) and the folder they are saved in, the tiny BERT goldens' texts,
pairs and labels, and the parity goldens' pieces: each parameter's gradient, the f32 run against its
float64 copy, the safetensors file written with a report, mean pooling, the embedder's and the
classifier's loss and the classifier golden, the sentence-transformers files of an embedding folder; the
retrieval and mining goldens' random texts; for the loss goldens (make_loss_golden.py,
make_pair_loss_golden.py) the stand-in model they feed fixed embeddings through, the source of those
embeddings, a loss's value and gradients, how they run and the JSON file.
"""
import json
import os
import random
import shutil

import torch
from safetensors.torch import save_file

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
DATA = os.path.join(ROOT, "tests", "data")
INIT_STD = 0.2  # ~1/sqrt(hidden): attention is neither uniform nor one-hot, errors show up

# The tiny BERT goldens' inputs (make_golden.py writes them beside its goldens; make_tiny_families.py runs
# the other families' folders on the same ones): four texts, three sentence pairs and their labels.
TINY_TEXTS = [
    "The cat sat on the mat.",
    "Katten sitter på mattan och hunden är inte där!",
    "A dog, 2 birds and a cat were playing in the house today.",
    "Hej!",
]
CLS_PAIRS = [
    ("The cat sat on the mat.", "A cat is sitting."),
    ("Jag har en hund och en katt.", "Det är inte en katt!"),
    ("This was very good today.", "It was bad, walking with the dog?"),
]
CLS_LABELS = [0, 2, 1]
# The words of the retrieval and mining goldens' random texts (make_retrieval_golden.py, make_mine_golden.py)
WORDS = ("the cat dog sat on mat and is was not it in of to good bad house play walk bird today very this that "
         "with och ar en ett katt hund pa inte jag det bra hus har sitter idag hej").split()
# The tiny classifiers' labels, as their config.json names them (id2label, label2id)
LABEL_NAMES = ["entailment", "neutral", "contradiction"]
NLI_LABELS = dict(num_labels=3, id2label=dict(enumerate(LABEL_NAMES)), label2id={n: i for i, n in enumerate(LABEL_NAMES)})


def randomize(model, seed, skip=()):
    """Every parameter random: matrices N(0, INIT_STD), biases N(0, 0.1), norm gains 1 + N(0, 0.1), a
    relative-position bias table N(0, 1) (a bias of the scores' own scale). The [PAD] row of the token
    embeddings stays zero (padding_idx). Parameters whose names end with one of `skip` keep their values and
    draw no noise."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if any(name.endswith(s) for s in skip):
                continue
            noise = torch.randn(p.shape, generator=g, dtype=torch.float32)
            if "LayerNorm.weight" in name or "norm.weight" in name:
                p.copy_(1.0 + 0.1 * noise)
            elif name.endswith(".bias"):
                p.copy_(0.1 * noise)
            elif name.endswith("relative_attention_bias.weight"):
                p.copy_(noise)
            else:
                p.copy_(INIT_STD * noise)
            if name.endswith("word_embeddings.weight") or name.endswith("tok_embeddings.weight"):
                p[model.config.pad_token_id].zero_()


def word_sentences(seed):
    """rng, a random.Random(seed), and sentence(lo, hi): lo to hi WORDS drawn from it (one stream: the same
    seed and calls give the same texts)."""
    rng = random.Random(seed)

    def sentence(lo, hi):
        return " ".join(rng.choice(WORDS) for _ in range(rng.randint(lo, hi)))
    return rng, sentence


def fresh_dir(path):
    if os.path.isdir(path):
        shutil.rmtree(path)
    os.makedirs(path)


def random_folder(out, make, seed, skip=()):
    """A fresh folder out holding the model make() builds, its weights random (randomize with seed and skip;
    the global torch seed set to seed before it is built), saved as safetensors; returns the model."""
    fresh_dir(out)
    torch.manual_seed(seed)
    model = make()
    randomize(model, seed, skip)
    model.save_pretrained(out, safe_serialization=True)
    return model


def write_json(path, obj):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(obj, f, indent=2, ensure_ascii=False)
        f.write("\n")


def sentence_transformers_files(out, dim, max_seq_length):
    """modules.json (Transformer, then Pooling), 1_Pooling/config.json (mean) and sentence_bert_config.json."""
    write_json(os.path.join(out, "modules.json"), [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
    ])
    write_json(os.path.join(out, "1_Pooling", "config.json"), {
        "word_embedding_dimension": dim, "pooling_mode_cls_token": False, "pooling_mode_mean_tokens": True,
        "pooling_mode_max_tokens": False, "pooling_mode_mean_sqrt_len_tokens": False})
    write_json(os.path.join(out, "sentence_bert_config.json"), {"max_seq_length": max_seq_length,
                                                                "do_lower_case": False})


def grads(model):
    return {"grad." + n: (p.grad if p.grad is not None else torch.zeros_like(p)).detach().float().contiguous()
            for n, p in model.named_parameters()}


def rel_err(a, b):
    a, b = a.double(), b.double()
    d = b.norm().item()
    return (a - b).norm().item() / d if d > 0 else (a - b).norm().item()


def save(path, tensors):
    tensors = {k: v.detach().contiguous() for k, v in tensors.items()}
    save_file(tensors, path, metadata={"format": "pt"})
    print(f"wrote {os.path.relpath(path, ROOT)}: {os.path.getsize(path)} bytes")


def report(t, ref):
    """One line a tensor of t: its shape, its largest magnitude and its error against the float64 run ref."""
    for k, v in t.items():
        line = f"  {k:60s} {str(list(v.shape)):12s}"
        if v.is_floating_point():
            line += f" max|x| {v.abs().max().item():.4g}"
            if k in ref:
                line += f"  f32-vs-f64 rel {rel_err(v, ref[k]):.3g}"
        print(line)


def mean_pool(last, mask):
    m = mask.unsqueeze(-1).to(last.dtype)
    return (last * m).sum(1) / torch.clamp(m.sum(1), min=1e-9)


def embed_loss(model, enc, lw):
    """The embedder's golden: loss = sum(mean-pooled embedding * lw), back-propagated."""
    last = model(input_ids=enc["input_ids"], attention_mask=enc["attention_mask"]).last_hidden_state
    emb = mean_pool(last, enc["attention_mask"])
    loss = (emb * lw).sum()
    loss.backward()
    return {"last_hidden_state": last.detach(), "embedding": emb.detach(), "loss": loss.detach().reshape(1)}


def cls_loss(model, enc, labels):
    """The classifier's golden: the logits and the mean cross-entropy of labels, back-propagated."""
    out = model(input_ids=enc["input_ids"], attention_mask=enc["attention_mask"], labels=labels)
    out.loss.backward()
    return {"logits": out.logits.detach(), "loss": out.loss.detach().reshape(1)}


def golden(model, run, inputs, *args):
    """run(model, *args) on the f32 model and on its float64 copy: the golden tensors (inputs, the f32 run's
    outputs and gradients) and the reference they are reported against."""
    import copy
    m64 = copy.deepcopy(model).double()
    args64 = [a.double() if torch.is_tensor(a) and a.is_floating_point() else a for a in args]
    res, res64 = run(model, *args), run(m64, *args64)
    return dict(inputs, **res, **grads(model)), dict(res64, **grads(m64))


def cls_golden(folder, model_cls, tok, pairs, labels, path):
    """The classifier golden of folder, written to path: tok's encoding of the sentence pairs, model_cls from
    the folder (eager attention, float32, eval), cls_loss on labels, against its float64 copy (reported)."""
    a, b = [p[0] for p in pairs], [p[1] for p in pairs]
    enc = tok(a, b, padding="longest", return_tensors="pt")
    labels = torch.tensor(labels, dtype=torch.int64)
    m = model_cls.from_pretrained(folder, attn_implementation="eager", dtype=torch.float32).eval()
    t, ref = golden(m, cls_loss, {"input_ids": enc["input_ids"], "attention_mask": enc["attention_mask"],
                                  "labels": labels}, enc, labels)
    report(t, ref)
    save(path, t)


class FixedModel(torch.nn.Module):
    """A stand-in SentenceTransformer: features {"emb": tensor} -> {"sentence_embedding": tensor}."""

    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, features):
        return {"sentence_embedding": features["emb"]}

    def get_embedding_dimension(self):
        return self.dim

    def _get_untruncated_embedding_dimension(self):
        return self.dim

    @property
    def device(self):
        return torch.device("cpu")


def float32_source(seed):
    """f32(shape, scale=1.0): float32 normal values times scale, drawn in turn from one numpy generator
    seeded with seed (the loss goldens' fixed embeddings)."""
    import numpy as np
    rng = np.random.default_rng(seed)

    def f32(shape, scale=1.0):
        return (rng.standard_normal(shape) * scale).astype(np.float32)
    return f32


def fixed_loss(loss_fn, embs, labels, params=(), dtype=torch.float64):
    """loss_fn on the stand-in model's features of the embeddings embs (leaves of dtype): the loss value and
    its gradients with respect to each embedding (zeros where it takes none) and to each of params."""
    leaves = [torch.tensor(e, dtype=dtype, requires_grad=True) for e in embs]
    loss = loss_fn([{"emb": t} for t in leaves], labels)
    wrt = leaves + list(params)
    grads = torch.autograd.grad(loss, wrt, allow_unused=True)
    return float(loss), [torch.zeros_like(t) if g is None else g for g, t in zip(grads, wrt)]


def one_thread_quiet():
    """torch on one thread (the same reduction order, hence the same bits, on every machine) and Python's
    warnings silenced: how the loss goldens run."""
    import warnings
    warnings.filterwarnings("ignore")
    torch.set_num_threads(1)


def write_loss_golden(name, obj):
    """obj as one line of JSON in tests/data/name, with its size."""
    path = os.path.join(DATA, name)
    with open(path, "w") as f:
        json.dump(obj, f, indent=None)
        f.write("\n")
    print("wrote", os.path.relpath(path, ROOT), os.path.getsize(path), "bytes")
